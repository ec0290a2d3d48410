#!/usr/bin/env bash
# Validation loss of a TMM checkpoint distilled at several orders (tmm
# distill + tmm eval), beside the exact model's: the table of README "Fast
# generation". Each order's run directory stays in OUT/order-R.
#   tools/distill_sweep.sh TMM CHECKPOINT OUT [ORDERS] [HEAD]
#   e.g. tools/distill_sweep.sh build/tmm runs/text /tmp/sweep 4,8,16,32,64
set -euo pipefail
tmm="$1" ckpt="$2" out="$3" orders="${4:-4,8,16,32,64}" head="${5:-1}"
mkdir -p "$out"
loss() { "$tmm" eval --checkpoint "$1" "${@:2}" | awk '/^validation loss/ {print $3}'; }
acc() { "$tmm" eval --checkpoint "$1" "${@:2}" | awk -F': ' '/accuracy/ {print $2; exit}'; }
exact=$(loss "$ckpt")
printf '%-8s %12s %10s %10s %14s\n' order "val loss" "delta" accuracy "worst rel L2"
printf '%-8s %12s %10s %10s %14s\n' exact "$exact" 0 "$(acc "$ckpt")" -
for r in ${orders//,/ }; do
  "$tmm" distill --checkpoint "$ckpt" --out "$out/order-$r" --order "$r" --head "$head" --force --quiet
  l=$(loss "$out/order-$r")
  rel=$(python3 -c "import json,sys; print('%.3g' % json.load(open(sys.argv[1]))['summary']['rel_l2_max'])" \
        "$out/order-$r/distill.json")
  printf '%-8s %12s %10s %10s %14s\n' "$r" "$l" "$(python3 -c "print('%+.4f' % ($l - $exact))")" \
    "$(acc "$out/order-$r")" "$rel"
done
