#!/usr/bin/env bash
# End-to-end checks of the tmm command line: help, bad input, a short training
# run, Ctrl-C (saves a checkpoint, exit 130), exact resume, tmm eval, tmm
# generate on the default copy run, a corrupt checkpoint refused with a
# clear message, and README.md: its links and those of docs/ resolve, and every
# command in its code blocks runs.
#   tests/cli_test.sh PATH/TO/tmm [PATH/TO/examples/generate]
set -u
tmm="$1"
. "$(dirname "$0")/lib.sh"

small=(--d-model 16 --n-ctx 16 --layers 1 --batch 4 --eval-batches 2 --quiet)

check "tmm --help" "$tmm" --help
check "tmm --version" "$tmm" --version
check "tmm train --help" "$tmm" train --help
check "tmm eval --help" "$tmm" eval --help
check "tmm bench --help" "$tmm" bench --help
expect_fail "unknown command" 2 "unknown command" "$tmm" frobnicate
# docs/config.md is the program's own table of config keys
check "docs/config.md is current" bash -c 'diff <("$1" train --list-config) "$2/../docs/config.md"' _ "$tmm" \
  "$(dirname "$0")"
expect_fail "bad number" 2 "expects a whole number" "$tmm" train --steps ten
expect_fail "unknown preset" 2 "no preset" "$tmm" train --preset nope
expect_fail "text without files" 1 "needs training files" "$tmm" train --task text
expect_fail "missing data file" 1 "nonexistent" "$tmm" train --data "$dir/nonexistent.txt"
echo '{"model": {"d_model": "big"}}' > "$dir/bad.json"
expect_fail "bad config value" 1 "model.d_model" "$tmm" train --config "$dir/bad.json"
echo '{"modle": {}}' > "$dir/bad2.json"
expect_fail "bad config section" 1 "unknown section" "$tmm" train --config "$dir/bad2.json"
expect_fail "eval without checkpoint" 2 "required" "$tmm" eval
expect_fail "mqar row longer than n" 1 "raise --n-ctx" "$tmm" train --task mqar --pairs 8 --n-ctx 16
expect_fail "mqar more pairs than keys" 1 "task.keys" "$tmm" train --task mqar --pairs 9 --keys 8

# --max-memory: refused before anything is made, in one line that names the limit and what would fit
expect_fail "--max-memory refuses" 1 "more than --max-memory 0.0001 GiB: nothing fits" \
  "$tmm" train --max-memory 0.0001 --quiet --run-dir "$dir/maxmem"
check "--max-memory: the refusal is one line" test "$(wc -l < "$dir/out")" -eq 1
check "--max-memory: nothing written" test ! -e "$dir/maxmem"
expect_fail "--max-memory: advice" 1 "fits (" \
  "$tmm" train --d-model 16 --n-ctx 16 --layers 1 --batch 8 --quiet --max-memory 0.0001 --run-dir "$dir/maxmem"
check "start-up memory summary" bash -c '"$@" | grep -q "^device memory: .* planned (precision fp32, recompute none, 4 sequences per micro-batch); the limit is --max-memory 1 GiB"' \
  _ "$tmm" train --d-model 16 --n-ctx 16 --layers 1 --batch 4 --steps 1 --eval-every 0 --max-memory 1 --run-dir "$dir/maxmem-ok"
# the Toeplitz direct/FFT choice's former names: still read, the flag with one deprecation line
check "--mixer-impl still works, with a deprecation line" bash -c '"$@" 2> "$0.err" &&
  grep -q "mixer-impl is deprecated" "$0.err" && grep -q "\"toeplitz_impl\":.*\"direct\"" "$0.cfg/config.json"' \
  "$dir/oldflag" "$tmm" train --d-model 16 --n-ctx 16 --layers 1 --batch 4 --steps 1 --eval-every 0 --quiet \
  --mixer-impl direct --run-dir "$dir/oldflag.cfg"
printf '{"train": {"mixer_impl": "fft"}}' > "$dir/oldkey.json"
check "train.mixer_impl in a config file is read as train.toeplitz_impl" bash -c '"$@" &&
  grep -q "\"toeplitz_impl\":.*\"fft\"" "$0/config.json"' "$dir/oldkey" "$tmm" train --config "$dir/oldkey.json" \
  --d-model 16 --n-ctx 16 --layers 1 --batch 4 --steps 1 --eval-every 0 --quiet --run-dir "$dir/oldkey"
check "short training run" "$tmm" train "${small[@]}" --steps 30 --eval-every 10 --target-acc 0 --run-dir "$dir/a"
check "metrics.jsonl has evals" grep -q '"copy_acc"' "$dir/a/metrics.jsonl"
check "checkpoint saved" test -f "$dir/a/checkpoints/latest"
check "tmm eval" "$tmm" eval --checkpoint "$dir/a"
check "mqar training run" "$tmm" train "${small[@]}" --task mqar --pairs 2 --keys 8 --values 8 --steps 4 \
  --eval-every 2 --run-dir "$dir/mqar"
check "mqar metrics" grep -q '"mqar_acc"' "$dir/mqar/metrics.jsonl"
check "mqar eval" bash -c '"$0" eval --checkpoint "$1" | grep -q "^recall accuracy"' "$tmm" "$dir/mqar"
# every architecture through the same commands: train, eval, generate (its own decoding state)
# (--heads 2 where heads apply: every baseline but Hyena; --window 8 for swa)
arch_flags() { [ "$1" = hyena ] || echo --heads 2; [ "$1" = swa ] && echo --window 8; true; }
for arch in transformer swa linear hyena mamba2; do
  check "train --arch $arch" "$tmm" train --arch $arch "${small[@]}" $(arch_flags $arch) \
    --steps 4 --eval-every 2 --target-acc 0 --run-dir "$dir/arch-$arch"
  check "eval --arch $arch" bash -c '"$0" eval --checkpoint "$1" | grep -q "^copy accuracy"' "$tmm" "$dir/arch-$arch"
  check "generate --arch $arch" bash -c '[ "$("$0" generate --checkpoint "$1" --quiet --prompt 0123 --greedy -n 12 | wc -c)" -eq 13 ]' \
    "$tmm" "$dir/arch-$arch"
done

# tmm index: operator analysis of the trained checkpoint (CPU only, no device)
check "tmm index --help" "$tmm" index --help
check "tmm index" bash -c '"$0" index --checkpoint "$1" > "$2"' "$tmm" "$dir/a" "$dir/index.txt"
check "tmm index table" grep -q "^index histogram over 1 vector (1 layer x 1 head x 1 tap)" "$dir/index.txt"
check "tmm index --json --plot" bash -c '"$0" index --checkpoint "$1" --json --plot "$2" > "$3"' \
  "$tmm" "$dir/a" "$dir/plots" "$dir/index.json"
check "tmm index JSON" python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
v = r["vectors"]
assert len(v) == 1 and v[0]["param"] == "blocks.0.mix.w" and v[0]["n"] == 16, v
assert v[0]["index"] is None or v[0]["index"] == -v[0]["winding"]
assert v[0]["finite_section"]["sigma_max"] > 0 and sum(r["index_histogram"].values()) + r["undefined"] == 1' \
  "$dir/index.json"
check "tmm index layer plot" grep -q "<polyline" "$dir/plots/layer-00.svg"
check "tmm index summary plot" grep -q "<polyline" "$dir/plots/summary.svg"
expect_fail "tmm index: missing checkpoint" 1 "cannot load the checkpoint" "$tmm" index --checkpoint "$dir/none"
check "tmm index: the error is one line" test "$(wc -l < "$dir/out")" -eq 1
expect_fail "tmm index without --checkpoint" 2 "required" "$tmm" index
expect_fail "tmm index: bad tolerance" 2 "between 0 and 1" "$tmm" index --checkpoint "$dir/a" --tol 2

# Ctrl-C: the trainer saves a checkpoint and exits 130; resuming finishes the run
"$tmm" train "${small[@]}" --steps 100000 --eval-every 0 --target-acc 0 --run-dir "$dir/b" > "$dir/b.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  grep -q '"step"' "$dir/b/metrics.jsonl" 2>/dev/null && break
  sleep 0.2
done
kill -INT "$pid"
wait "$pid"
rc=$?
if [ "$rc" -eq 130 ] && [ -f "$dir/b/checkpoints/latest" ] && grep -q "resume with" "$dir/b.log"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: Ctrl-C (exit $rc)"; tail -5 "$dir/b.log"
fi
expect_fail "resume past the end" 1 "nothing to do" "$tmm" train --resume "$dir/b" --steps 1 --quiet
check "resume" "$tmm" train --resume "$dir/b" --steps "$(( $(sed 's/step-0*//' "$dir/b/checkpoints/latest") + 5 ))" --quiet

json_check() { # PYTHON COMMAND...: the command's JSON output (as r) passes the Python asserts
  local code="$1"; shift
  "$@" > "$dir/json" && python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
'"$code" "$dir/json"
}
check "bench mixer (every row, swa and linear included)" json_check \
  'assert {x["impl"] for x in r["rows"]} == {"direct", "fft", "auto", "attention", "swa", "linear"} and r["window"] == 8, r' \
  "$tmm" bench mixer --n 64 --d 16 --heads 2 --window 8 --json --svg "$dir/mixer.svg"
check "bench mixer plot" grep -q "<polyline" "$dir/mixer.svg"
check "bench memory --json (every row)" json_check 'rows = [(x["precision"], x["recompute"]) for x in r["rows"]]
assert rows == [("fp32", "none"), ("fp16", "none"), ("bf16", "none"), ("fp32", "block"), ("fp16", "mixer"), ("fp16", "block")], rows
for f in r["rows"]:
    assert f["measured_peak_bytes"] == f["planned_bytes"] > 0 and f["max_batch"] > 2 and f["tokens_per_s"] > 0, f
act = {(x["precision"], x["recompute"]): x["activations"] for x in r["rows"]}
assert act[("fp16", "block")] < act[("fp32", "block")] < act[("fp32", "none")] and act[("fp16", "none")] < act[("fp32", "none")], act' \
  "$tmm" bench memory --d-model 16 --n-ctx 16 --layers 3 --batch 2 --steps 1 --json
check "bench memory table (every row)" bash -c '[ "$("$@" | grep -cE "^(fp32/none|fp16/none|bf16/none|fp32/block|fp16/mixer|fp16/block) ")" -eq 6 ]' \
  _ "$tmm" bench memory --d-model 16 --n-ctx 16 --layers 1 --batch 2 --steps 0
check "bench train" "$tmm" bench train --d-model 16 --n-ctx 16 --layers 1 --batch 2 --steps 2 --json
# the baselines (issue 14): bench train and generate per architecture, bench arch at matched parameters
for arch in transformer swa linear hyena mamba2; do
  check "bench train --arch $arch" json_check \
    'assert r["model"]["arch"] == "'$arch'" and r["model"].get("window", 8) == 8 and r["tokens_per_s"] > 0, r' \
    "$tmm" bench train --arch $arch $(arch_flags $arch) --d-model 16 --n-ctx 16 --layers 1 --batch 2 --steps 1 --json
  check "bench generate --arch $arch" json_check \
    'assert r["arch"] == "'$arch'" and r.get("window", 8) == 8 and r["decode"][1]["cached_ms"] > 0, r' \
    "$tmm" bench generate --arch $arch $(arch_flags $arch) --d-model 16 --n-ctx 64 --layers 1 \
    --prompts 8 --positions 1,40 --repeat 2 --json
done
tiny_arch=("$tmm" bench arch --d-model 16 --n-ctx 32 --layers 1 --heads 2 --window 8 --batch 2 --steps 1 --vocab 16
           --positions 1,20 --repeat 2)
check "bench arch --json" json_check 'assert [a["arch"] for a in r["archs"]] == ["tmm", "transformer", "swa", "linear", "hyena", "mamba2"], r
t = r["archs"][0]
assert t["expansion"] == 4 and r["archs"][2]["window"] == 8 and r["window"] == 8, r
assert "expansion" not in r["archs"][5] and 1 <= r["archs"][5]["n_layers"] <= 4, r
for a in r["archs"][:5]:
    assert 1 <= a["expansion"] <= 16 and a["n_layers"] == 1, a
    # the nearest expansion: a step of e changes a baseline by at most 3 d^2 L parameters (d 16, L 1),
    # unless even e = 1 is larger (the Hyena filter MLP alone is 8.5k parameters)
    assert abs(a["params"] - t["params"]) <= 3 * 16 * 16 / 2 or (a["expansion"] == 1 and a["params"] > t["params"]), a
for a in r["archs"]:
    assert a["params"] > 0 and a["tokens_per_s"] > 0 and a["memory_bytes"] > 0, a
    assert [p["position"] for p in a["decode"]] == [1, 20] and min(p["ms_per_token"] for p in a["decode"]) > 0, a' \
  "${tiny_arch[@]}" --json
check "bench arch --archs" json_check 'assert [a["arch"] for a in r["archs"]] == ["swa", "mamba2"], r' \
  "${tiny_arch[@]}" --archs mamba2,swa --json
check "bench arch table" bash -c '"$@" | grep -q "^swa (W 8) "' _ "${tiny_arch[@]}"
expect_fail "bench: unknown architecture" 2 "expects tmm, transformer, swa, linear, hyena or mamba2" "$tmm" bench train --arch mamba
check "bench: the error is one line" test "$(wc -l < "$dir/out")" -eq 1
expect_fail "bench: --window without swa" 1 "window is for sliding-window attention" \
  "$tmm" bench generate --arch transformer --window 8
expect_fail "bench: --window 0" 2 "at least 1" "$tmm" bench train --arch swa --window 0
# a preset sets the whole model first, wherever it stands (before: a flag before it was replaced silently)
check "bench train: --d-model before --preset is kept" json_check 'assert r["model"]["d_model"] == 32, r' \
  "$tmm" bench train --d-model 32 --preset tiny-copy --batch 2 --steps 1 --json
expect_fail "bench memory: --preset and --config" 2 "both set the whole model" \
  "$tmm" bench memory --preset tiny-copy --config /dev/null
expect_fail "bench generate: --arch with a checkpoint" 2 "has its own" "$tmm" bench generate --checkpoint "$dir/a" --arch swa
expect_fail "bench arch: window past n" 2 "at most --n-ctx" "$tmm" bench arch --n-ctx 64 --window 100
expect_fail "bench arch: position past n" 2 "passes --n-ctx" "$tmm" bench arch --n-ctx 64 --positions 1,100
expect_fail "bench arch: heads" 2 "--heads must be at least 1" "$tmm" bench arch --heads 0
expect_fail "bench arch: head width" 1 "head width" "$tmm" bench arch --d-model 512 --heads 2
expect_fail "bench arch: unknown option" 2 "unknown option" "$tmm" bench arch --frob
expect_fail "bench arch: unknown architecture" 2 "expects tmm" "$tmm" bench arch --archs tmm,mamba
expect_fail "bench arch: empty architecture list" 2 "names separated by commas" "$tmm" bench arch --archs tmm,
expect_fail "bench mixer: --window without swa" 2 "add swa" "$tmm" bench mixer --impls attention --window 8

# generation: the default copy run reproduces a held-out sequence under --greedy
check "default copy run" "$tmm" train --run-dir "$dir/copy" --quiet
held=a4c123b1612dd272d1371c17149d439536b3216fdaeeb975729fae923d5a4fd1 # not in the training stream
gen=("$tmm" generate --checkpoint "$dir/copy" --quiet)
check "generate --greedy copies" bash -c '[ "$("$@" --prompt "'$held'" --greedy -n 64)" = "'$held'" ]' _ "${gen[@]}"
check "generate streams and reports speeds" bash -c '"$@" --prompt 0123 -n 4 2>&1 >/dev/null | grep -q "time to first token"' \
  _ "$tmm" generate --checkpoint "$dir/copy"
check "sampling with a seed is reproducible" bash -c \
  '[ "$("$@" --seed 9 --temperature 2 --top-k 8 --top-p 0.9)" = "$("$@" --seed 9 --temperature 2 --top-k 8 --top-p 0.9)" ]' \
  _ "${gen[@]}" --prompt 0123456789 -n 40
printf '%s' "$held" > "$dir/prompt.txt"
check "generate --prompt-file" bash -c '[ "$("$@" --prompt-file "'"$dir/prompt.txt"'" --greedy -n 64)" = "'$held'" ]' \
  _ "${gen[@]}"
expect_fail "generate: full context stops with a message" 0 "context of 128 tokens is full" \
  "${gen[@]}" --prompt "$held" --greedy -n 100
check "generate --slide goes past the context" bash -c '[ "$("$@" --prompt "'$held'" --greedy -n 200 --slide | wc -c)" -eq 201 ]' \
  _ "${gen[@]}"
expect_fail "generate without a prompt" 2 "exactly one of" "${gen[@]}"
expect_fail "generate: bad symbol" 1 "not a symbol" "${gen[@]}" --prompt "xyz"
expect_fail "generate: bad temperature" 2 "temperature" "${gen[@]}" --prompt 01 --temperature -1
expect_fail "generate: missing checkpoint" 1 "cannot load" "$tmm" generate --checkpoint "$dir/none" --prompt 01
if [ -n "${2:-}" ]; then
  check "example program (public API, batch of 2)" \
    bash -c '[ "$("$1" "$2" "'$held'" 64 | head -1)" = "after the prompt:      '$held'" ]' \
    _ "$2" "$dir/copy"
fi
printf 'the quick brown fox jumps over the lazy dog.\n%.0s' $(seq 40) > "$dir/fox.txt"
check "short text run" "$tmm" train "${small[@]}" --task text --data "$dir/fox.txt" --steps 20 --eval-every 0 \
  --run-dir "$dir/text"
check "generate text (bytes)" bash -c '[ "$("$@" | wc -c)" -ge 2 ]' \
  _ "$tmm" generate --checkpoint "$dir/text" --prompt "the quick" -n 24 --seed 1 --quiet
check "generate text from an empty prompt" "$tmm" generate --checkpoint "$dir/text" --prompt "" -n 8 --quiet
check "bench generate" bash -c '"$@" | python3 -c "import json,sys; r=json.load(sys.stdin); assert r[\"decode\"] and r[\"decode_speedup_at_1000\"] is None"' \
  _ "$tmm" bench generate --d-model 16 --n-ctx 64 --layers 1 --heads 2 --prompts 8,32 --positions 1,40 --repeat 2 --json

# tmm distill (docs/model.md "Distilled decoding"): the copy run through state-space models
check "distill the copy run" "$tmm" distill --checkpoint "$dir/copy" --out "$dir/copy-d" --order 64 --quiet
check "distill.json reports every vector" python3 -c "import json,sys; r=json.load(open(sys.argv[1])); \
assert len(r['vectors']) == 2 and all(v['order'] <= 64 and v['max_abs'] >= 0 and v['bound'] >= 0 for v in r['vectors'])" \
  "$dir/copy-d/distill.json"
check "distilled decoding copies (order 64)" bash -c '[ "$("$@" --prompt "'$held'" --greedy -n 64)" = "'$held'" ]' \
  _ "$tmm" generate --checkpoint "$dir/copy-d" --quiet
check "eval of a distilled checkpoint" bash -c '"$0" eval --checkpoint "$1" | grep -q "^distilled: "' "$tmm" "$dir/copy-d"
check "eval --exact" bash -c '! "$0" eval --checkpoint "$1" --exact | grep -q "^distilled"' "$tmm" "$dir/copy-d"
check "bench generate: distilled beside exact" bash -c '"$@" | python3 -c "import json,sys; r=json.load(sys.stdin); \
assert all(d[\"distilled_ms\"] > 0 for d in r[\"decode\"]) and r[\"distilled_fidelity\"][\"steps\"] > 0"' \
  _ "$tmm" bench generate --checkpoint "$dir/copy-d" --prompts 8 --positions 1,100 --repeat 2 --json
check "distill --tol" bash -c '"$0" distill --checkpoint "$1" --out "$2" --tol 0.3 --json | python3 -c "import json,sys; \
r=json.load(sys.stdin); assert all(v[\"rel_l2\"] <= 0.3 for v in r[\"vectors\"])"' "$tmm" "$dir/copy" "$dir/copy-t"
expect_fail "distill: --order and --tol" 2 "not both" "$tmm" distill --checkpoint "$dir/copy" --out "$dir/x" --order 4 --tol 0.1
expect_fail "distill: --out is required" 2 "--out DIR2 is required" "$tmm" distill --checkpoint "$dir/copy"
expect_fail "distill: a run is there" 1 "already holds a run" "$tmm" distill --checkpoint "$dir/copy" --out "$dir/copy-d" --order 2
check "distill --force replaces it" "$tmm" distill --checkpoint "$dir/copy" --out "$dir/copy-t" --order 2 --force --quiet
expect_fail "distill: into its own run" 1 "own run directory" "$tmm" distill --checkpoint "$dir/copy" --out "$dir/copy" --order 2
expect_fail "distill: not a TMM" 1 "only a TMM" "$tmm" distill --checkpoint "$dir/arch-mamba2" --out "$dir/x" --order 2
dfile="$dir/copy-d/checkpoints/$(cat "$dir/copy-d/checkpoints/latest")/distill.safetensors"
printf '\x7f' | dd of="$dfile" bs=1 seek=$(( $(stat -c %s "$dfile") - 5 )) conv=notrunc 2>/dev/null
expect_fail "a damaged distill.safetensors is refused" 1 "damaged" "$tmm" generate --checkpoint "$dir/copy-d" --prompt 01

# a flipped byte in the saved weights is refused
model="$dir/a/checkpoints/$(cat "$dir/a/checkpoints/latest")/model.safetensors"
size=$(stat -c %s "$model")
printf '\x55' | dd of="$model" bs=1 seek=$((size - 3)) conv=notrunc status=none
expect_fail "corrupt checkpoint" 1 "checksum" "$tmm" eval --checkpoint "$dir/a"

# ---- prepared shards (tmm prepare): bytes, then BPE; train, resume, generate ----
mkdir -p "$dir/corpus/sub"
for i in $(seq 12); do
  printf 'document %d: the quick brown fox jumps over the lazy dog %d times.\n' "$i" "$i" > "$dir/corpus/doc$i.txt"
done
printf '{"text": "a jsonl document about foxes"}\n\n{"text": ""}\n{"text": "and one about dogs"}\n' \
  > "$dir/corpus/sub/lines.jsonl"
gzip -c "$dir/fox.txt" > "$dir/corpus/sub/fox.txt.gz"
check "prepare (bytes, 1 thread)" "$tmm" prepare --tokenizer bytes --data "$dir/corpus" --out "$dir/sh1" \
  --threads 1 --val-fraction 0.3 --shard-tokens 200 --quiet
check "prepare (bytes, 2 threads)" "$tmm" prepare --tokenizer bytes --data "$dir/corpus" --out "$dir/sh2" \
  --threads 2 --val-fraction 0.3 --shard-tokens 200 --quiet
check "prepare: the same shards for 1 and 2 threads" diff -r "$dir/sh1" "$dir/sh2"
check "prepare: documents from text, JSONL and .gz (one empty skipped)" \
  grep -q '"documents": 15,' "$dir/sh1/manifest.json"
expect_fail "prepare refuses a prepared directory" 1 "already holds" \
  "$tmm" prepare --tokenizer bytes --data "$dir/corpus" --out "$dir/sh1" --quiet
# one text file is one document: its last 5% of tokens validate (docs/data.md "Too few documents")
check "prepare: one text file gives training and validation text" \
  bash -c '"$1" prepare --tokenizer bytes --data "$2" --out "$3" --quiet | grep -q "last document was cut" &&
           python3 -c "import json,sys; m=json.load(open(sys.argv[1])); t=[s[\"tokens\"] for s in m[\"shards\"] if s[\"split\"]==\"train\"]; v=[s[\"tokens\"] for s in m[\"shards\"] if s[\"split\"]==\"val\"]; n=sum(t)+sum(v)-2; assert len(t)==1 and len(v)==1 and v[0]-1==max(1,int(n*0.05)), (t,v)" "$3/manifest.json"' \
  _ "$tmm" "$dir/fox.txt" "$dir/one"
check "prepare: --val-fraction 0 cuts nothing" bash -c '"$1" prepare --tokenizer bytes --data "$2" --out "$3" \
  --val-fraction 0 --quiet | grep -vq "was cut" && ! ls "$3"/val_* 2> /dev/null' _ "$tmm" "$dir/fox.txt" "$dir/one0"
printf 'x' > "$dir/onebyte.txt"
expect_fail "prepare: a one-token corpus cannot be split" 1 "too small to hold both" \
  "$tmm" prepare --tokenizer bytes --data "$dir/onebyte.txt" --out "$dir/one1" --quiet
shard_run=(--d-model 16 --n-ctx 16 --layers 1 --batch 4 --eval-batches 2 --quiet --data "$dir/sh1" --eval-every 4
           --save-every 4 --keep 0)
check "train on shards (windows)" "$tmm" train "${shard_run[@]}" --steps 8 --run-dir "$dir/shA"
check "train on shards: stop at 4" "$tmm" train "${shard_run[@]}" --steps 4 --run-dir "$dir/shB"
check "train on shards: resume to 8" "$tmm" train --resume "$dir/shB" --steps 8 --quiet
weights() { grep -ao '"data_fnv1a64":"[0-9a-f]*"' "$1/checkpoints/step-000008/model.safetensors"; }
check "a resumed shard run equals an uninterrupted one" \
  bash -c '[ -n "$1" ] && [ "$1" = "$2" ]' _ "$(weights "$dir/shA")" "$(weights "$dir/shB")"
check "the run holds its tokenizer" cmp "$dir/sh1/tokenizer.json" "$dir/shA/tokenizer.json"
check "train on shards (documents)" "$tmm" train "${shard_run[@]}" --steps 2 --text-mode documents \
  --run-dir "$dir/shD"
check "eval a shard run" "$tmm" eval --checkpoint "$dir/shA"
check "generate from a shard run" bash -c '"$@" > /dev/null' \
  _ "$tmm" generate --checkpoint "$dir/shA" --prompt "the quick" -n 8 --seed 1 --quiet
check "tokenizer train (BPE, 300 entries)" "$tmm" tokenizer train --vocab 300 --data "$dir/corpus" \
  --out "$dir/bpe.json" --quiet
check "prepare (BPE)" "$tmm" prepare --tokenizer "$dir/bpe.json" --data "$dir/corpus" --out "$dir/shbpe" \
  --val-fraction 0.3 --quiet
check "train on BPE shards" "$tmm" train --d-model 16 --n-ctx 16 --layers 1 --batch 4 --eval-batches 2 --quiet \
  --data "$dir/shbpe" --steps 4 --eval-every 4 --run-dir "$dir/shE"
check "... with the tokenizer's vocabulary" grep -q '"vocab":[[:space:]]*300' "$dir/shE/config.json"
check "generate decodes with the run's BPE tokenizer" bash -c '"$@" > /dev/null' \
  _ "$tmm" generate --checkpoint "$dir/shE" --prompt "the quick brown" -n 12 --seed 1 --quiet
rm "$dir/shE/tokenizer.json"
expect_fail "generate without the run's tokenizer.json" 1 "tokenizer.json" \
  "$tmm" generate --checkpoint "$dir/shE" --prompt "the" -n 2 --quiet

# ---- README.md and docs/: the links resolve, and every command in README's code blocks runs ----
# (README cannot drift from the program: each command runs in order, in a scratch directory with a
# small corpus/, with tiny settings where it would be long; see readme_commands below)
root="$(cd "$(dirname "$0")/.." && pwd)"
check "relative links in README.md and docs/ resolve" python3 -c 'import glob, os, re, sys
root = sys.argv[1]
def slug(h):  # a GitHub heading anchor
    return re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
bad = []
files = [os.path.join(root, "README.md")]
files += glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True)
for f in files:
    text = re.sub(r"```.*?```", "", open(f, encoding="utf-8").read(), flags=re.S)
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(target):
            bad.append("%s: %s (no such file)" % (os.path.relpath(f, root), link))
        elif anchor and target.endswith(".md"):
            heads = [slug(h) for h in re.findall(r"^#+ (.*)$", open(target, encoding="utf-8").read(), re.M)]
            if anchor not in heads:
                bad.append("%s: %s (no such heading)" % (os.path.relpath(f, root), link))
assert len(files) > 10, files
assert not bad, "\n".join(bad)' "$root"

# readme_commands README TMM ROOT: one line per command of README's code blocks, "COMMAND<TAB>ARGS":
# COMMAND as README writes it, ARGS the words to run (shell-quoted), with TMM for build/tmm and tiny
# settings substituted. A command is a line of a ```sh block (or a "$ " line of any other block)
# whose first word is tmm, build/tmm, tools/... or mpirun; "\" continues it, "#" starts a comment.
readme_commands() {
  python3 -c 'import re, shlex, sys
readme, tmm, root = sys.argv[1:4]
def set_opt(w, flag, value):  # replace every value of flag, or append it
    if flag in w:
        for i, x in enumerate(w):
            if x == flag:
                w[i + 1] = value
    else:
        w += [flag, value]
def drop_opt(w, flag):
    while flag in w:
        i = w.index(flag)
        del w[i:i + 2]
def tiny(w):  # w: the words after the binary
    if "--help" in w or "-h" in w or "--list-config" in w:
        return w
    cmd, sub = w[0], (w[1] if len(w) > 1 else "")
    if cmd == "train" and "--resume" in w:
        set_opt(w, "--steps", "4")
    elif cmd == "train":
        for f, v in (("--steps", "2"), ("--batch", "2"), ("--eval-batches", "2")):
            set_opt(w, f, v)
        if "--preset" in w and w[w.index("--preset") + 1] != "tiny-copy":
            for f, v in (("--d-model", "32"), ("--layers", "1"), ("--n-ctx", "64")):
                set_opt(w, f, v)
    elif cmd == "bench":
        small = {"train": [("--d-model", "16"), ("--n-ctx", "16"), ("--layers", "1"), ("--batch", "2"), ("--steps", "1")],
                 "memory": [("--d-model", "16"), ("--n-ctx", "16"), ("--layers", "1"), ("--batch", "2"), ("--steps", "0")],
                 "arch": [("--d-model", "16"), ("--n-ctx", "32"), ("--layers", "1"), ("--heads", "2"), ("--window", "8"),
                          ("--batch", "2"), ("--steps", "1"), ("--vocab", "16"), ("--positions", "1,20"), ("--repeat", "2")],
                 "generate": [("--prompts", "8"), ("--positions", "1,40"), ("--repeat", "2")],
                 "matmul": [("--m", "64"), ("--n", "64"), ("--k", "64")],
                 "mixer": [("--n", "64"), ("--d", "16"), ("--heads", "2"), ("--repeat", "1")]}
        if sub == "generate" and "--checkpoint" not in w:
            small[sub] += [("--d-model", "16"), ("--n-ctx", "64"), ("--layers", "1"), ("--heads", "2")]
        if sub == "mixer":
            for f in ("--max-n", "--fit-from", "--time-cap"):
                drop_opt(w, f)
        assert sub in small, "no tiny settings for tmm bench %s: add them to tests/cli_test.sh" % sub
        for f, v in small[sub]:
            set_opt(w, f, v)
    if cmd in ("train", "prepare", "distill", "experiment") or (cmd == "tokenizer" and sub == "train"):
        w.append("--quiet")
    return w
block, pending, seen = None, "", set()
for line in open(readme, encoding="utf-8"):
    line = line.rstrip("\n")
    fence = re.match(r"^```(\S*)", line)
    if fence:
        block = fence.group(1) if block is None else None
        continue
    if block is None:
        continue
    s = line.strip()
    if pending:
        s, pending = pending + " " + s, ""
    elif s.startswith("$ "):
        s = s[2:]
    elif block != "sh":
        continue
    if s.endswith("\\"):
        pending = s[:-1]
        continue
    w = shlex.split(s, comments=True)
    if not w or not (w[0] in ("tmm", "build/tmm", "mpirun") or w[0].startswith("tools/")):
        continue
    name = shlex.join(w)
    if name in seen:
        continue
    seen.add(name)
    if w[0] in ("tmm", "build/tmm"):
        w = [tmm] + tiny(w[1:])
    elif w[0] == "tools/bench_eval.sh":
        w = [root + "/" + w[0], "--tmm", tmm] + w[1:]
    elif w[0].startswith("tools/"):
        w = [root + "/" + w[0]] + w[1:]
    print(name + "\t" + shlex.join(w))' "$1" "$2" "$3"
}
readme_skip() { # COMMAND: why README's COMMAND cannot run in this test, or nothing (keep this list short)
  case "$1" in
    tools/run.sh*) echo "installs packages (root, a network) and trains the whole default run" ;;
    tools/test.sh*) echo "the whole suite, this test among it" ;;
    mpirun*) echo "several processes under MPI; tests/mpi_test.sh runs 2 ranks" ;;
    "build/tmm experiment --help"*|"tmm experiment --help"*) ;;
    "build/tmm serve --help"*|"tmm serve --help"*) ;;
    "build/tmm serve "*|"tmm serve "*)
      echo "a server that runs until it is stopped; tests/serve_test.sh starts one and talks to it" ;;
    "build/tmm experiment "*|"tmm experiment "*)
      echo "minutes of training even at --preset small; CI's experiments stage runs all six (tools/experiments.sh)" ;;
  esac
}
# the scratch directory of README's examples: a small corpus/ (text, JSONL, .gz) and tests/data
mkdir -p "$dir/readme/corpus"
for i in $(seq 12); do
  printf 'document %d: the quick brown fox jumps over the lazy dog %d times. Copying is permitted.\n' "$i" "$i" \
    > "$dir/readme/corpus/doc$i.txt"
done
printf '{"text": "This program is free software."}\n{"text": "a jsonl document about foxes"}\n' \
  > "$dir/readme/corpus/lines.jsonl"
gzip -c "$dir/fox.txt" > "$dir/readme/corpus/fox.txt.gz"
ln -s "$root/tests" "$dir/readme/tests"
readme_tmm="$(cd "$(dirname "$tmm")" && pwd)/$(basename "$tmm")"
if readme_commands "$root/README.md" "$readme_tmm" "$root" > "$dir/readme.cmds" 2> "$dir/readme.err"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: README's commands could not be read"; sed 's/^/    /' "$dir/readme.err" | tail -5
fi
ran=0 found=0
cd "$dir/readme" || exit 1
while IFS=$'\t' read -r name words; do
  why="$(readme_skip "$name")"
  if [ -n "${TMM_TEST_SANITIZED:-}" ] && [ -z "$why" ]; then
    # the same commands run in the plain build's suite; here the checks above run under ASan
    found=$((found + 1))
    continue
  fi
  if [ -n "$why" ]; then
    echo "README: not run here: $name ($why)"
    continue
  fi
  eval "args=($words)"
  check "README: $name" timeout 120 "${args[@]}"
  ran=$((ran + 1))
done < "$dir/readme.cmds"
cd - > /dev/null || exit 1
if [ -n "${TMM_TEST_SANITIZED:-}" ]; then
  echo "README: $found commands found, not run in the sanitizer build (the plain build's cli test runs them)"
  check "README: its commands were found (at least 15)" test "$found" -ge 15
else
  check "README: its commands were found and run (at least 15)" test "$ran" -ge 15
fi
# every command of tmm --help is shown in README's code blocks
for c in $("$tmm" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }'); do
  check "README shows tmm $c" grep -qE "^(build/)?tmm $c( |$)" <(cut -f1 "$dir/readme.cmds")
done

# TMM_VALIDATE=1 (set by CTest): the Khronos layer saw nothing wrong in any run
cat "$dir/b.log" >> "$dir/all.log"
if grep -q "tmm: validation" "$dir/all.log"; then
  failed=$((failed + 1)); echo "FAIL: validation messages:"; grep "tmm: validation" "$dir/all.log" | head -5
else
  passed=$((passed + 1))
fi

finish
