#!/usr/bin/env bash
# The benchmark set over several checkpoints, as one comparison table
# (docs/guide/eval.md, docs/eval.md).
#
#   tools/bench_eval.sh [options] --task NAME=FILE [--task NAME=FILE ...] CHECKPOINT...
#
# Runs `tmm eval --checkpoint C --task NAME --data FILE --json` for every
# checkpoint and task and prints a Markdown table: one row per task and
# metric, one column per checkpoint, "value ± standard error" (the standard
# error is left out where it is not defined). Options:
#   --tmm PATH        the tmm binary (default: build/tmm beside this script, else tmm on PATH)
#   --limit N, --shots K, --max-gen N, --batch N, --device N: passed to every tmm eval
#   --json FILE       also write every report, as one JSON array, to FILE
# Progress goes to stderr; a failing evaluation stops the script with its message.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmm="$here/../build/tmm"
[ -x "$tmm" ] || tmm="$(command -v tmm || true)"
tasks=() ckpts=() pass=() json_out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tmm) tmm="$2"; shift 2 ;;
    --task) tasks+=("$2"); shift 2 ;;
    --limit|--shots|--max-gen|--batch|--device) pass+=("$1" "$2"); shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_eval.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) ckpts+=("$1"); shift ;;
  esac
done
if [ ${#tasks[@]} -eq 0 ] || [ ${#ckpts[@]} -eq 0 ]; then
  echo "bench_eval.sh: give at least one --task NAME=FILE and one checkpoint (see --help)" >&2
  exit 2
fi
[ -n "$tmm" ] && [ -x "$tmm" ] || { echo "bench_eval.sh: no tmm binary (build it, or give --tmm PATH)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
reports=()
for c in "${!ckpts[@]}"; do
  for t in "${!tasks[@]}"; do
    name="${tasks[$t]%%=*}" file="${tasks[$t]#*=}"
    echo "bench_eval.sh: ${ckpts[$c]}: $name" >&2
    out="$work/$c-$t.json"
    "$tmm" eval --checkpoint "${ckpts[$c]}" --task "$name" --data "$file" --json --quiet "${pass[@]}" > "$out"
    reports+=("$out")
  done
done
python3 - "$json_out" "${#ckpts[@]}" "${#tasks[@]}" "${reports[@]}" <<'PY'
import json, sys
json_out, nc, nt, paths = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
reports = [json.load(open(p)) for p in paths]
grid = [[reports[c * nt + t] for t in range(nt)] for c in range(nc)]
heads = ["%s (%s, step %d)" % (g[0]["checkpoint"], g[0]["arch"], g[0]["step"]) for g in grid]
print("| task | metric | " + " | ".join(heads) + " |")
print("|---|---|" + "---|" * nc)
for t in range(nt):
    first = grid[0][t]
    for metric in first["metrics"]:
        cells = []
        for c in range(nc):
            m = grid[c][t]["metrics"].get(metric)
            if m is None or m["value"] is None:
                cells.append("n/a")
            elif m["stderr"] is None:
                cells.append("%.4f" % m["value"])
            else:
                cells.append("%.4f ± %.4f" % (m["value"], m["stderr"]))
        label = first["task"] + ("" if not first["shots"] else " (%d-shot)" % first["shots"])
        print("| %s | %s | %s |" % (label, metric, " | ".join(cells)))
notes = set()
for g in grid:
    for r in g:
        if r["truncated"]:
            notes.add("%s on %s: %d of %d scored items cut from the left" % (r["checkpoint"], r["task"], r["truncated"], r["scored"]))
        for s in r["skipped"]["reasons"]:
            notes.add("%s: %d skipped: %s" % (r["task"], s["count"], s["reason"]))
if notes:
    print()
    for n in sorted(notes):
        print("- " + n)
if json_out:
    json.dump(reports, open(json_out, "w"), indent=1)
PY
