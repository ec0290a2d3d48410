#!/usr/bin/env bash
# Validation loss of a TMM checkpoint distilled at several orders (tmm
# distill + tmm eval), beside the exact model's, and how far distilled
# decoding strays from exact decoding (tmm bench generate): the tables of
# docs/results/distillation.md. Each order's run directory stays in OUT/order-R.
# CHECKPOINT must be a run directory (its config.json gives n).
#   tools/distill_sweep.sh TMM CHECKPOINT OUT [ORDERS] [HEAD]
#   e.g. tools/distill_sweep.sh build/tmm runs/text /tmp/sweep 4,8,16,32,64
# BATCHES=N evaluates N held-out batches (the same ones for every order)
# instead of one pass over the held-out split.
set -euo pipefail
tmm="$1" ckpt="$2" out="$3" orders="${4:-4,8,16,32,64}" head="${5:-1}"
mkdir -p "$out"
batches=(${BATCHES:+--batches "$BATCHES"})
# validation loss and accuracy of one evaluation
evaluate() { "$tmm" eval --checkpoint "$1" "${batches[@]}" | awk -F': ' '/^validation loss/ {split($2, a, " "); l = a[1]}
  /accuracy/ {acc = $2} END {print l, acc}'; }
read -r exact exact_acc < <(evaluate "$ckpt")
# along a greedy continuation to position 1000 (or n - 2): the largest |logit difference| from exact
# decoding, the share of steps with the same argmax, and the first position where it differs
fidelity() {
  "$tmm" bench generate --checkpoint "$1" --prompts 16 --positions "$2" --repeat 2 --json | python3 -c "
import json, sys
f = json.load(sys.stdin)['distilled_fidelity']
print('%10.3g %9.1f%% %10s' % (f['max_abs_logit_diff'], 100 * f['argmax_agreement'],
      f['first_different_position'] if f['first_different_position'] is not None else 'none'))"
}
n=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['model']['n_ctx'])" "$ckpt/config.json")
to=$(( n > 1002 ? 1000 : n - 2 ))
printf '%-8s %12s %10s %10s %14s %10s %10s %10s\n' order "val loss" "delta" accuracy "worst rel L2" "max dlogit" \
  "argmax" "first diff"
printf '%-8s %12s %10s %10s %14s\n' exact "$exact" 0 "$exact_acc" -
for r in ${orders//,/ }; do
  "$tmm" distill --checkpoint "$ckpt" --out "$out/order-$r" --order "$r" --head "$head" --force --quiet
  read -r l a < <(evaluate "$out/order-$r")
  rel=$(python3 -c "import json,sys; print('%.3g' % json.load(open(sys.argv[1]))['summary']['rel_l2_max'])" \
        "$out/order-$r/distill.json")
  printf '%-8s %12s %10s %10s %14s %s\n' "$r" "$l" "$(python3 -c "print('%+.4f' % ($l - $exact))")" \
    "$a" "$rel" "$(fidelity "$out/order-$r" "$to")"
done
