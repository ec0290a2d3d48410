#!/usr/bin/env bash
# tmm against PyTorch on the CPU, side by side: `tmm bench train` on the
# default Vulkan device (lavapipe here) and the same model in PyTorch on the
# CPU (tools/torch_bench.py: tools/torch_ref.py's models with fast mixing),
# at the same shapes, batch and vocabulary, alternated round by round so
# that both see the same machine. Prints, per shape, each side's tokens/s
# over the rounds (min-max) and the ratio of the medians.
#   tools/torch_compare.sh [--rounds N] [--steps N] [--tmm PATH] [--python PATH] [--quick]
#     --rounds N   rounds of each side per shape (default 3)
#     --steps N    measured steps per run (default 10)
#     --quick      one round, 2 steps, the first shape at a quarter of the batch (a test that it runs)
# PyTorch needs OpenBLAS for a fair CPU figure (tools/setup.sh --test installs libopenblas0).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmm=$here/../build/tmm
py=/usr/bin/python3
rounds=3 steps=10 quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --tmm) tmm=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    --quick) quick=1; rounds=1; steps=2; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "torch_compare.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$tmm" ] || { echo "torch_compare.sh: no tmm at $tmm: build it, or give --tmm PATH" >&2; exit 2; }
"$py" -c 'import torch' 2> /dev/null || { echo "torch_compare.sh: $py cannot import torch (tools/setup.sh --test)" >&2; exit 2; }

# name | arch | d n layers heads batch (vocab 256, expansion 2: tmm bench train's default)
shapes=("TMM d 128, n 256|tmm|128 256 4 4 16"
        "transformer d 128, n 256|transformer|128 256 4 4 16"
        "TMM d 256, n 1024|tmm|256 1024 4 4 8")
[ "$quick" = 1 ] && shapes=("TMM d 128, n 256 (quick)|tmm|128 256 4 4 4")

tokens_of() { # the tokens/s of a JSON object (tmm) or of the last JSON line (torch_bench.py)
  "$py" -c '
import json, sys
text = sys.stdin.read().strip()
try:
    r = json.loads(text)
except ValueError:
    r = json.loads(text.splitlines()[-1])
if "error" in r:
    sys.exit("torch_compare.sh: " + str(r["error"]))
print(r["tokens_per_s"])'
}
stats() { # values...: "min-max" and the median
  "$py" -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print("%.0f-%.0f %.1f" % (min(v), max(v), statistics.median(v)))' "$@"
}

printf '| model (vocab 256, expansion 2) | tmm tokens/s | PyTorch CPU tokens/s | ratio |\n|---|---|---|---|\n'
for s in "${shapes[@]}"; do
  IFS='|' read -r name arch dims <<< "$s"
  read -r d n l h b <<< "$dims"
  t=() p=()
  for _ in $(seq "$rounds"); do
    t+=("$("$tmm" bench train --arch "$arch" --d-model "$d" --n-ctx "$n" --layers "$l" --heads "$h" --batch "$b" \
             --vocab 256 --steps "$steps" --json | tokens_of)")
    p+=("$("$py" "$here/torch_bench.py" --device cpu --archs "$arch" --d-model "$d" --n-ctx "$n" --layers "$l" \
             --heads "$h" --batch "$b" --vocab 256 --expansion 2 --steps "$steps" | tokens_of)")
  done
  read -r tr tm <<< "$(stats "${t[@]}")"
  read -r pr pm <<< "$(stats "${p[@]}")"
  printf '| %s, %s layers, %s heads, batch %s | %s | %s | %.2fx |\n' "$name" "$l" "$h" "$b" "$tr" "$pr" \
    "$("$py" -c "print($tm / $pm)")"
done
echo "(medians' ratio; $rounds round(s) of $steps measured steps, alternated; $("$tmm" devices 2> /dev/null | head -1))"
