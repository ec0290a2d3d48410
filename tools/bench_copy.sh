#!/usr/bin/env bash
# Measures the README's main job: the default `tmm train` (copy task) from a
# cold start, wall time to >= 99% held-out copy accuracy, and the frozen
# ablation (tiny-copy with frozen Toeplitz weights) on the same step budget.
#   tools/bench_copy.sh [build-dir]        (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
tmm="${1:-build}/tmm"
[ -x "$tmm" ] || { echo "bench_copy.sh: $tmm not found: build first (tools/run.sh)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

t0=$(date +%s.%N)
"$tmm" train --run-dir "$out/default" > "$out/default.log"
t1=$(date +%s.%N)
acc=$(grep -o '"copy_acc": [0-9.e-]*' "$out/default/metrics.jsonl" | tail -1 | cut -d' ' -f2)
steps=$(grep -o '"step": [0-9]*' "$out/default/metrics.jsonl" | tail -1 | cut -d' ' -f2)
printf 'default tmm train: held-out copy accuracy %s after %s steps, %.1f s wall (cold start)\n' \
  "$acc" "$steps" "$(awk "BEGIN{print $t1 - $t0}")"

t0=$(date +%s.%N)
"$tmm" train --preset tiny-copy --frozen --target-acc 0 --run-dir "$out/frozen" > "$out/frozen.log"
t1=$(date +%s.%N)
acc=$(grep -o '"copy_acc": [0-9.e-]*' "$out/frozen/metrics.jsonl" | tail -1 | cut -d' ' -f2)
steps=$(grep -o '"step": [0-9]*' "$out/frozen/metrics.jsonl" | tail -1 | cut -d' ' -f2)
printf 'frozen ablation:   held-out copy accuracy %s after %s steps, %.1f s wall (chance: 1/16 = 0.0625)\n' \
  "$acc" "$steps" "$(awk "BEGIN{print $t1 - $t0}")"
