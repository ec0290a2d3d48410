#!/usr/bin/env bash
# tmm eval --task end to end (docs/eval.md): a tiny text model trained here
# scored on every task kind of tests/data/eval with --json (the report's
# fields checked), few-shot, --limit, tools/bench_eval.sh's comparison table,
# and bad input refused with one clear line.
#   tests/eval_test.sh PATH/TO/tmm
set -u
tmm="$1"
src="$(cd "$(dirname "$0")/.." && pwd)"
data="$src/tests/data/eval"
. "$(dirname "$0")/lib.sh"

printf 'the quick brown fox jumps over the lazy dog.\n%.0s' $(seq 40) > "$dir/fox.txt"
check "train a tiny text model" "$tmm" train --d-model 16 --n-ctx 64 --layers 1 --batch 4 --quiet --task text \
  --data "$dir/fox.txt" --steps 4 --eval-every 0 --run-dir "$dir/run"
check "train a tiny transformer" "$tmm" train --arch transformer --heads 2 --d-model 16 --n-ctx 64 --layers 1 \
  --batch 4 --quiet --task text --data "$dir/fox.txt" --steps 4 --eval-every 0 --run-dir "$dir/run-tf"
check "eval --task help" bash -c '"$1" eval --task help | grep -q "squad_v2"' _ "$tmm"

# report JSON: TASK FILE KEYS... [-- EXTRA ARGS]
report() {
  local task="$1" file="$2" keys="$3"; shift 3
  check "eval --task $task --json $*" bash -c '"$@" > "'"$dir"'/r.json" && python3 -c "
import json, math, sys
r = json.load(open(sys.argv[1]))
assert r[\"task\"] == sys.argv[2], r
for k in sys.argv[3].split(\",\"):
    m = r[\"metrics\"][k]
    assert 0 <= m[\"value\"] <= 1, m
    assert m[\"stderr\"] is None or m[\"stderr\"] >= 0, m
assert r[\"scored\"] + r[\"skipped\"][\"count\"] <= r[\"items\"], r
assert sum(x[\"count\"] for x in r[\"skipped\"][\"reasons\"]) == r[\"skipped\"][\"count\"], r
assert r[\"truncated\"] <= r[\"scored\"], r
" "'"$dir"'/r.json" "'"$task"'" "'"$keys"'"' _ \
    "$tmm" eval --checkpoint "$dir/run" --task "$task" --data "$data/$file" --json --quiet "$@"
}
report hellaswag hellaswag.jsonl acc,acc_norm
report arc_easy arc_easy.jsonl acc,acc_norm
report arc_challenge arc_easy.jsonl acc,acc_norm --shots 1
report sst2 sst2.jsonl acc,acc_norm --limit 2
report mrpc mrpc.jsonl acc,acc_norm,f1 --batch 3
report rte rte.jsonl acc,acc_norm --shots 1 --fewshot-data "$data/rte.jsonl"
report squad squad.jsonl exact_match,f1 --max-gen 4
report squad_v2 squad_v2.jsonl exact_match,f1 --max-gen 4
report longbench longbench.jsonl exact_match,f1 --max-gen 4
report ifeval ifeval.jsonl prompt_level_strict_acc,inst_level_strict_acc,prompt_level_loose_acc,inst_level_loose_acc --max-gen 8
check "hellaswag: the unlabelled item is skipped with its reason" bash -c \
  '"$@" | grep -q "skipped 1: no label (a test split)"' _ "$tmm" eval --checkpoint "$dir/run" --task hellaswag \
  --data "$data/hellaswag.jsonl" --quiet
check "longbench: contexts cut from the left are counted" bash -c \
  '"$@" | grep -q "2 cut from the left"' _ "$tmm" eval --checkpoint "$dir/run" --task longbench \
  --data "$data/longbench.jsonl" --quiet --max-gen 4
check "--limit 1 scores one item" bash -c '"$@" | grep -q "1 scored"' _ "$tmm" eval --checkpoint "$dir/run" \
  --task arc_easy --data "$data/arc_easy.jsonl" --limit 1 --quiet
check "--samples: one valid JSON line per scored item" bash -c '"$@" > /dev/null && python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding=\"utf-8\")]
assert [r[\"line\"] for r in rows] == [1, 2, 3] and all(\"generated\" in r and \"answers\" in r for r in rows), rows
" "'"$dir"'/samples.jsonl"' _ "$tmm" eval --checkpoint "$dir/run" --task squad_v2 --data "$data/squad_v2.jsonl" \
  --quiet --max-gen 8 --samples "$dir/samples.jsonl"
check "same result twice" bash -c 'diff <("$@") <("$@")' _ "$tmm" eval --checkpoint "$dir/run" --task squad \
  --data "$data/squad.jsonl" --quiet --max-gen 4
check "bench_eval.sh: one table over two checkpoints" bash -c '"$1" --tmm "$2" --limit 2 --max-gen 4 \
  --task arc_easy="$3/arc_easy.jsonl" --task squad="$3/squad.jsonl" "$4" "$5" > "$6/table" &&
  grep -q "^| arc_easy | acc " "$6/table" && grep -q "^| squad | f1 " "$6/table" && [ "$(grep -c "^|" "$6/table")" -eq 6 ]' \
  _ "$src/tools/bench_eval.sh" "$tmm" "$data" "$dir/run" "$dir/run-tf" "$dir"

# a model on prepared shards reads its run's tokenizer.json (byte-level BPE)
mkdir -p "$dir/bpe"
for i in $(seq 12); do
  printf 'document %d: the quick brown fox jumps over the lazy dog %d times. Answer: yes\n' "$i" "$i" > "$dir/bpe/doc$i.txt"
done
check "a BPE model" bash -c '"$1" tokenizer train --vocab 300 --data "$2/bpe" --out "$2/tok.json" --quiet &&
  "$1" prepare --tokenizer "$2/tok.json" --data "$2/bpe" --out "$2/sh" --val-fraction 0.3 --quiet &&
  "$1" train --d-model 16 --n-ctx 64 --layers 1 --batch 4 --quiet --data "$2/sh" --steps 2 --eval-every 0 \
    --run-dir "$2/run-bpe"' _ "$tmm" "$dir"
check "eval --task with a BPE tokenizer" bash -c '"$@" | grep -q "tokenizer bpe" && "$@" | grep -q "^acc_norm"' _ \
  "$tmm" eval --checkpoint "$dir/run-bpe" --task arc_easy --data "$data/arc_easy.jsonl" --quiet --shots 1
check "QA with a BPE tokenizer" "$tmm" eval --checkpoint "$dir/run-bpe" --task squad_v2 --data "$data/squad_v2.jsonl" \
  --quiet --max-gen 4

# bad input: one line, exit 1 (bad files) or 2 (bad options)
printf '{"endings": ["a", "b"], "label": 0}\n' > "$dir/noctx.jsonl"
expect_fail "a missing field is named" 1 "noctx.jsonl:1: hellaswag item: missing field \"ctx\"" \
  "$tmm" eval --checkpoint "$dir/run" --task hellaswag --data "$dir/noctx.jsonl"
printf '{"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": 1}\n' > "$dir/type.jsonl"
expect_fail "a mistyped field is named" 1 "type.jsonl:1: arc_easy item: field \"answerKey\" is a number" \
  "$tmm" eval --checkpoint "$dir/run" --task arc_easy --data "$dir/type.jsonl"
python3 -c "print('{\"sentence\": \"' + 'x' * (65 << 20) + '\", \"label\": 1}')" > "$dir/huge.jsonl"
expect_fail "a huge line" 1 "huge.jsonl:1: the line has" \
  "$tmm" eval --checkpoint "$dir/run" --task sst2 --data "$dir/huge.jsonl"
rm -f "$dir/huge.jsonl"
printf '{"sentence": "a", "label": 1}\0\n' > "$dir/nul.jsonl"
expect_fail "a NUL byte" 1 "NUL byte" "$tmm" eval --checkpoint "$dir/run" --task sst2 --data "$dir/nul.jsonl"
expect_fail "a directory as the task file" 1 "task file" "$tmm" eval --checkpoint "$dir/run" --task sst2 --data "$dir"
expect_fail "a missing task file" 1 "nothing.jsonl" \
  "$tmm" eval --checkpoint "$dir/run" --task sst2 --data "$dir/nothing.jsonl"
expect_fail "an unknown task" 2 "no task 'glue'; tasks: hellaswag" \
  "$tmm" eval --checkpoint "$dir/run" --task glue --data "$data/sst2.jsonl"
expect_fail "no --data" 2 "are all required" "$tmm" eval --checkpoint "$dir/run" --task sst2
expect_fail "--batch 0" 2 "at least 1" "$tmm" eval --checkpoint "$dir/run" --task sst2 --data "$data/sst2.jsonl" --batch 0
expect_fail "too many shots" 1 "only 4 usable" \
  "$tmm" eval --checkpoint "$dir/run" --task sst2 --data "$data/sst2.jsonl" --shots 5
expect_fail "ifeval is zero-shot" 1 "zero-shot" \
  "$tmm" eval --checkpoint "$dir/run" --task ifeval --data "$data/ifeval.jsonl" --shots 1
expect_fail "a missing checkpoint" 1 "cannot load" \
  "$tmm" eval --checkpoint "$dir/none" --task sst2 --data "$data/sst2.jsonl"
check "the copy-task model" "$tmm" train --d-model 16 --n-ctx 16 --layers 1 --batch 4 --quiet --steps 1 \
  --eval-every 0 --target-acc 0 --run-dir "$dir/copy"
expect_fail "a copy-task model reads no text" 1 "copy-task symbols" \
  "$tmm" eval --checkpoint "$dir/copy" --task sst2 --data "$data/sst2.jsonl"
finish
