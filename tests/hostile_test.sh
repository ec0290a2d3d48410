#!/usr/bin/env bash
# Hostile input, end to end: the reproducers of issue 12 (crashes, hangs,
# silently wrong results, lost data), each now one clear line, a non-zero
# exit, and nothing lost.
#   tests/hostile_test.sh PATH/TO/tmm
set -u
tmm="$1"
. "$(dirname "$0")/lib.sh"

# mk FILE JSON: a safetensors file of that header and no data
mk() { python3 -c "import struct,sys;h=sys.argv[2].encode();open(sys.argv[1],'wb').write(struct.pack('<Q',len(h))+h)" "$@"; }
# edit MODEL PYTHON: rewrites a checkpoint's model file after running PYTHON on `meta` (its metadata) and
# `data` (a bytearray of its data), with both checksums recomputed as tmm computes them
edit() {
  python3 - "$1" "$2" <<'EOF'
import json, struct, sys
path, code = sys.argv[1], sys.argv[2]
b = open(path, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
header = json.loads(b[8:8 + n])
meta, data = header['__metadata__'], bytearray(b[8 + n:])
exec(code)
def fnv(h, bs):
    for x in bs:
        h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    return h
meta['data_fnv1a64'] = '%016x' % fnv(0xcbf29ce484222325, data)
h = 0xcbf29ce484222325
for k in sorted(k for k in meta if k not in ('data_fnv1a64', 'meta_fnv1a64')):
    h = fnv(h, k.encode() + b'\0' + meta[k].encode() + b'\0')
if int(meta.get('format_version', '0')) >= 6:   # the tensor table too (docs/formats.md)
    for name in sorted((k for k in header if k != '__metadata__'), key=lambda k: k.encode()):
        t = header[name]
        h = fnv(h, b'%s\0%s\0%s\0%d,%d\0' % (name.encode(), t['dtype'].encode(),
                ','.join(map(str, t['shape'])).encode(), *t['data_offsets']))
meta['meta_fnv1a64'] = '%016x' % h
text = json.dumps(header).encode()
text += b' ' * (-len(text) % 8)
open(path, 'wb').write(struct.pack('<Q', len(text)) + text + bytes(data))
EOF
}
# swap FILE: swaps the data_offsets of the first two tensors of the same shape and dtype in a safetensors
# header and leaves every checksum as it was (the bytes stay; what maps to them changes)
swap() {
  python3 - "$1" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
names = sorted(k for k in h if k != '__metadata__')
pair = next((a, c) for i, a in enumerate(names) for c in names[i + 1:]
            if (h[a]['shape'], h[a]['dtype']) == (h[c]['shape'], h[c]['dtype']))
h[pair[0]]['data_offsets'], h[pair[1]]['data_offsets'] = h[pair[1]]['data_offsets'], h[pair[0]]['data_offsets']
text = json.dumps(h, separators=(',', ':')).encode()
text += b' ' * (-len(text) % 8)
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(text)) + text + b[8 + n:])
print('swapped', *pair)
EOF
}
model_of() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")/model.safetensors"; }
small=(--d-model 16 --n-ctx 16 --layers 1 --batch 4 --eval-batches 2 --target-acc 0 --quiet)

# ---- the safetensors reader (before: SIGSEGV) ----
mk "$dir/m.st" '{"__metadata__":{"a":"1","b":"2"},"__metadata__":{"c":"3","d":"4"}}'
expect_fail "two __metadata__" 1 "'__metadata__' twice" "$tmm" index -c "$dir/m.st"
mk "$dir/a.st" '{"__metadata__":["a"]}'
expect_fail "__metadata__ as a list" 1 "not a JSON object" "$tmm" index -c "$dir/a.st"

# ---- a trained run to take apart ----
check "a run" "$tmm" train "${small[@]}" --steps 4 --eval-every 2 --run-dir "$dir/run"

# ---- a checkpoint whose train config says accum 0 (before: SIGFPE in tmm eval) ----
cp -r "$dir/run" "$dir/accum0"
edit "$(model_of "$dir/accum0")" '
c = json.loads(meta["train_config"]); c["train"]["accum"] = 0; meta["train_config"] = json.dumps(c)'
expect_fail "checkpoint with accum 0: eval" 1 "train.accum" "$tmm" eval --checkpoint "$dir/accum0"
expect_fail "checkpoint with accum 0: resume" 1 "train.accum" "$tmm" train --resume "$dir/accum0" --steps 8

# ---- NaN in a weight (before: tmm index looped forever, eval and generate printed garbage) ----
cp -r "$dir/run" "$dir/nan"
edit "$(model_of "$dir/nan")" 'data[0:4] = struct.pack("<f", float("nan"))'
expect_fail "NaN weight: index" 1 "holds NaN" "$tmm" index -c "$dir/nan"
expect_fail "NaN weight: eval" 1 "holds NaN" "$tmm" eval --checkpoint "$dir/nan"
expect_fail "NaN weight: generate" 1 "holds NaN" "$tmm" generate --checkpoint "$dir/nan" --prompt 01 -n 4
expect_fail "NaN weight: resume" 1 "holds NaN" "$tmm" train --resume "$dir/nan" --steps 8
cp -r "$dir/run" "$dir/nan2"
edit "$(model_of "$dir/nan2")" 'data[:] = struct.pack("<f", float("nan")) * (len(data) // 4)'
expect_fail "all NaN, --allow-nonfinite: eval says so" 1 "not finite" \
  "$tmm" eval --checkpoint "$dir/nan2" --allow-nonfinite
expect_fail "all NaN, --allow-nonfinite: generate says so" 1 "not finite" \
  "$tmm" generate --checkpoint "$dir/nan2" --prompt 01 -n 4 --allow-nonfinite

# ---- run directories ----
before=$(sha256sum "$dir/run/metrics.jsonl" "$dir/run/checkpoints/latest")
expect_fail "a new run in a directory holding a run" 1 "holds another run" \
  "$tmm" train "${small[@]}" --steps 2 --run-dir "$dir/run"
check "... changes nothing" bash -c '[ "$(sha256sum "$1/metrics.jsonl" "$1/checkpoints/latest")" = "$2" ]' _ \
  "$dir/run" "$before"
check "--force replaces it" "$tmm" train "${small[@]}" --steps 2 --eval-every 0 --run-dir "$dir/run" --force
check "... with a fresh metrics.jsonl" test "$(grep -c '"step"' "$dir/run/metrics.jsonl")" -eq 1

# two processes on one run directory: the second is refused, naming the first
"$tmm" train "${small[@]}" --steps 100000 --eval-every 0 --run-dir "$dir/busy" > "$dir/busy.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -f "$dir/busy/metrics.jsonl" ] && break; sleep 0.1; done
expect_fail "a locked run directory (even with --force)" 1 "in use by another process (pid $pid" \
  "$tmm" train "${small[@]}" --steps 2 --run-dir "$dir/busy" --force
kill -INT "$pid"; wait "$pid"

# a second signal ends a long step at once (before: it was ignored until the step ended, minutes at large
# shapes); the run stopped before its first checkpoint says how to go on (before: "--resume", which failed)
"$tmm" train --d-model 256 --n-ctx 8192 --layers 1 --batch 2 --steps 1 --eval-every 0 --toeplitz-impl direct \
  --quiet --run-dir "$dir/slow" > "$dir/slow.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -f "$dir/slow/metrics.jsonl" ] && break; sleep 0.1; done
kill -TERM "$pid"; sleep 0.5; kill -TERM "$pid"
SECONDS=0; wait "$pid"; rc=$?
check "a second SIGTERM during a long step ends it at once, exit 143" test "$rc" -eq 143 -a "$SECONDS" -lt 10
expect_fail "... its run directory, without a checkpoint, is refused with advice that works" 1 \
  "saved no checkpoint: start this one in another directory" "$tmm" train "${small[@]}" --steps 2 --run-dir "$dir/slow"
check "... and replaced with --force" "$tmm" train "${small[@]}" --steps 2 --eval-every 0 --run-dir "$dir/slow" --force

# pruning with a symbolic link among the checkpoints (before: deleted the link target's files)
mkdir -p "$dir/victim" && echo precious > "$dir/victim/file"
ln -s "$dir/victim" "$dir/run/checkpoints/step-000000"
check "resume and prune with a link present" \
  "$tmm" train --resume "$dir/run" --steps 6 --save-every 1 --keep 1 --quiet
check "... the link's target is intact" grep -q precious "$dir/victim/file"

# a run directory's metrics log as a link to a file outside it (before: the resumed run appended its
# records to the link's target)
cp -r "$dir/run" "$dir/linked" && cp "$dir/run/metrics.jsonl" "$dir/outside.jsonl"
ln -sf "$dir/outside.jsonl" "$dir/linked/metrics.jsonl"
before=$(sha256sum < "$dir/outside.jsonl")
config=$(sha256sum < "$dir/linked/config.json")
expect_fail "resume with metrics.jsonl a link outside the run" 1 "symbolic link, which tmm does not write through" \
  "$tmm" train --resume "$dir/linked" --steps 7 --quiet
check "... the link's target is unchanged" test "$(sha256sum < "$dir/outside.jsonl")" = "$before"
check "... and config.json too (the refused resume wrote nothing)" test "$(sha256sum < "$dir/linked/config.json")" = "$config"

# resuming a copied run continues in the copy (before: wrote into and pruned the original)
cp -r "$dir/run" "$dir/copy"
before=$(cd "$dir/run" && find . -type f | sort | xargs sha256sum)
step=$(cat "$dir/copy/checkpoints/latest")
check "resume a copy from its step directory" \
  "$tmm" train --resume "$dir/copy/checkpoints/$step" --steps 9 --save-every 1 --quiet
check "... the copy moved on" test "$(cat "$dir/copy/checkpoints/latest")" = step-000009
check "... the original is untouched" bash -c '[ "$(cd "$1" && find . -type f | sort | xargs sha256sum)" = "$2" ]' _ \
  "$dir/run" "$before"
mkdir -p "$dir/loose" && cp -r "$dir/copy/checkpoints/step-000009" "$dir/loose/"
expect_fail "resume a step directory outside any run" 1 "--run-dir" \
  "$tmm" train --resume "$dir/loose/step-000009" --steps 12

# ---- configuration values (before: accepted, then failed or lied at the end) ----
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 20) > "$dir/fox.txt"
expect_fail "val_fraction 0 with evaluations" 1 "no held-out text" \
  "$tmm" train "${small[@]}" --data "$dir/fox.txt" --val-fraction 0 --run-dir "$dir/vf"
check "... nothing was written" test ! -e "$dir/vf/checkpoints"
echo '{"task": {"val_fraction": 0}}' > "$dir/vf.json"
expect_fail "val_fraction 0 from a config file" 1 "no held-out text" \
  "$tmm" train "${small[@]}" --data "$dir/fox.txt" --config "$dir/vf.json" --run-dir "$dir/vf"
expect_fail "--eval-batches 0" 2 "--eval-batches expects a whole number from 1" \
  "$tmm" train --d-model 16 --n-ctx 16 --layers 1 --batch 4 --eval-batches 0 --quiet --run-dir "$dir/eb"
echo '{"train": {"eval_batches": 0}}' > "$dir/eb.json"
expect_fail "eval_batches 0 from a config file" 1 "train.eval_batches" "$tmm" train --config "$dir/eb.json"
expect_fail "tmm eval --batches 0" 2 "at least 1" "$tmm" eval --checkpoint "$dir/run" --batches 0
echo '{"train": {"steps": 5}, "train": {"steps": 6}}' > "$dir/dup.json"
expect_fail "a key given twice" 1 "occurs twice" "$tmm" train --config "$dir/dup.json"
expect_fail "TMM_DEVICE garbage" 1 "TMM_DEVICE is 'first'" env TMM_DEVICE=first "$tmm" check
expect_fail "TMM_VALIDATE garbage" 1 "TMM_VALIDATE" env TMM_VALIDATE=yes "$tmm" check

# ---- data files (before: cut silently at \u0000; a FIFO blocked forever; /dev/zero filled memory) ----
printf '{"text": "fine"}\n{"text": "cut \\u0000 here"}\n' > "$dir/nul.jsonl"
expect_fail "JSONL with \\u0000" 1 "nul.jsonl:2: holds the escape" \
  "$tmm" train "${small[@]}" --data "$dir/nul.jsonl" --run-dir "$dir/nul"
# the same escape in the other JSON readers (before: the string ended there: a config's run_dir "ab\u0000cd"
# trained into ab/, a task item was scored on the text before it)
printf '{"train": {"run_dir": "%s/ab\\u0000cd"}}' "$dir" > "$dir/nul.json"
expect_fail "a config with \\u0000" 1 "nul.json: holds the escape" "$tmm" train "${small[@]}" --config "$dir/nul.json"
check "... nothing was written" test ! -e "$dir/ab"
printf '{"sentence": "good\\u0000 bad", "label": 1}\n' > "$dir/nul-task.jsonl"
expect_fail "a task file with \\u0000" 1 "nul-task.jsonl:1: sst2 item: the line holds the escape" \
  "$tmm" eval --checkpoint "$dir/none" --task sst2 --data "$dir/nul-task.jsonl"
mkfifo "$dir/fifo"
expect_fail "a FIFO as --data" 1 "FIFO" "$tmm" train "${small[@]}" --data "$dir/fifo" --run-dir "$dir/f1"
expect_fail "a FIFO as --config" 1 "FIFO" "$tmm" train --config "$dir/fifo"
expect_fail "a FIFO as a prompt file" 1 "FIFO" "$tmm" generate --checkpoint "$dir/run" --prompt-file "$dir/fifo"
expect_fail "/dev/zero as --data" 1 "device" "$tmm" train "${small[@]}" --data /dev/zero --run-dir "$dir/f2"
expect_fail "/dev/zero as --config" 1 "device" "$tmm" train --config /dev/zero
expect_fail "/dev/zero as a prompt file" 1 "device" "$tmm" generate --checkpoint "$dir/run" --prompt-file /dev/zero
expect_fail "a directory as --config" 1 "directory" "$tmm" train --config "$dir"
expect_fail "bench mixer --svg a FIFO (before: blocked forever, and a failed plot exited 0)" 1 \
  "cannot write plot $dir/fifo: it is a FIFO" "$tmm" bench mixer --n 64 --impls direct --repeat 1 --svg "$dir/fifo"
head -c 2000000 /dev/zero | tr '\0' ' ' > "$dir/big.json"
expect_fail "a config file over its limit" 1 "more than the 1.0 MiB" "$tmm" train --config "$dir/big.json"

# ---- checkpoints of kernel-k models with heads from before windows stopped at head boundaries ----
check "a kernel-3, 2-head run" "$tmm" train "${small[@]}" --heads 2 --kernel 3 --steps 2 --eval-every 0 \
  --run-dir "$dir/kh"
edit "$(model_of "$dir/kh")" 'meta["format_version"] = "1"'
expect_fail "a version-1 kernel-k checkpoint with heads is refused" 1 "train it again" \
  "$tmm" eval --checkpoint "$dir/kh"
cp -r "$dir/run" "$dir/v1"
edit "$(model_of "$dir/v1")" 'meta["format_version"] = "1"'
check "a version-1 flat checkpoint still loads" "$tmm" eval --checkpoint "$dir/v1"
cp -r "$dir/run" "$dir/v2"
edit "$(model_of "$dir/v2")" 'meta["format_version"] = "2"; del meta["arch"]; del meta["window"]; del meta["state"]'
check "a version-2 checkpoint (no arch, window, state) loads as a TMM" "$tmm" eval --checkpoint "$dir/v2"
cp -r "$dir/run" "$dir/v3"
edit "$(model_of "$dir/v3")" 'meta["format_version"] = "3"; del meta["state"]'
check "a version-3 checkpoint (no state) loads" "$tmm" eval --checkpoint "$dir/v3"
cp -r "$dir/run" "$dir/v4"
edit "$(model_of "$dir/v4")" 'meta["format_version"] = "4"; del meta["init"]'
check "a version-4 checkpoint (no init) loads" "$tmm" eval --checkpoint "$dir/v4"
rm -rf "$dir/v4"
cp -r "$dir/run" "$dir/v4"
edit "$(model_of "$dir/v4")" 'del meta["arch"]'
expect_fail "a current checkpoint without its arch" 1 "metadata 'arch' is missing" "$tmm" eval --checkpoint "$dir/v4"
cp -r "$dir/run" "$dir/v4s"
edit "$(model_of "$dir/v4s")" 'del meta["state"]'
expect_fail "a current checkpoint without its state" 1 "metadata 'state' is missing" "$tmm" eval --checkpoint "$dir/v4s"
cp -r "$dir/run" "$dir/ar"
edit "$(model_of "$dir/ar")" 'meta["arch"] = "mamba9"'
expect_fail "a checkpoint of an unknown arch" 1 "arch" "$tmm" eval --checkpoint "$dir/ar"

# ---- 64-bit seeds survive the saved config (before: rounded through a double; resume failed or changed data) ----
seeds=(--model-seed 18446744073709551615 --seed 9007199254740993)
check "extreme seeds: 4 steps in one go" "$tmm" train "${small[@]}" "${seeds[@]}" --steps 4 --eval-every 0 \
  --run-dir "$dir/seed1"
check "extreme seeds: 2 steps, stop" "$tmm" train "${small[@]}" "${seeds[@]}" --steps 4 --eval-every 0 \
  --stop-after 2 --run-dir "$dir/seed2"
check "... the config keeps them exactly" grep -q '"seed":[[:space:]]*"18446744073709551615"' "$dir/seed2/config.json"
check "... and resumed" "$tmm" train --resume "$dir/seed2" --quiet
check "... to the same weights" bash -c 'cmp <(tail -c +9 "$1" | tr -d "\0" | grep -ao "data_fnv1a64\":\"[0-9a-f]*") \
  <(tail -c +9 "$2" | tr -d "\0" | grep -ao "data_fnv1a64\":\"[0-9a-f]*")' _ \
  "$(model_of "$dir/seed1")" "$(model_of "$dir/seed2")"
check "... and evaluates" "$tmm" eval --checkpoint "$dir/seed2"
expect_fail "a seed past 2^64" 2 "--seed expects a whole number" "$tmm" train --seed 18446744073709551616

# ---- processes sharing a cache directory (before: removed each other's temporary files; each measured
# the mixer crossover on a loaded machine and the last writer won) ----
cache="$dir/shared-cache"
for i in 1 2 3; do
  TMM_CACHE_DIR="$cache" "$tmm" train --d-model 16 --n-ctx 512 --layers 1 --batch 1 --steps 2 --eval-every 0 \
    --target-acc 0 --quiet --run-dir "$dir/race$i" > "$dir/race$i.log" 2>&1 &
done
wait
check "three trainings sharing a cache all finish" test "$(grep -l "done after 2 steps" "$dir"/race?.log | wc -l)" -eq 3
check "... without a warning" bash -c '! grep -h "warning\|cannot" "$@"' _ "$dir"/race?.log
check "... and one measured the crossover for all" test "$(cat "$dir"/race?.log | grep -c "measuring where")" -eq 1

# ---- token shards (issue 16): a damaged, foreign or oversized shard is one clear line and changes nothing ----
mkdir -p "$dir/sc"
for i in $(seq 10); do printf 'shard document %d of a small corpus, with some words.\n' "$i" > "$dir/sc/d$i.txt"; done
"$tmm" prepare --tokenizer bytes --data "$dir/sc" --out "$dir/sh" --val-fraction 0.3 --quiet > /dev/null
"$tmm" tokenizer train --vocab 300 --data "$dir/sc" --out "$dir/tok300.json" --quiet > /dev/null
"$tmm" tokenizer train --vocab 258 --data "$dir/sc" --out "$dir/tok258.json" --quiet > /dev/null
"$tmm" prepare --tokenizer "$dir/tok300.json" --data "$dir/sc" --out "$dir/sh300" --val-fraction 0.3 --quiet > /dev/null
"$tmm" prepare --tokenizer "$dir/tok258.json" --data "$dir/sc" --out "$dir/sh258" --val-fraction 0.3 --quiet > /dev/null
sh_train=(--d-model 16 --n-ctx 8 --layers 1 --batch 2 --eval-batches 1 --eval-every 0 --quiet)
damaged() { rm -rf "$dir/shx" "$dir/shrun"; cp -r "$dir/sh" "$dir/shx"; }
damaged; truncate -s -3 "$dir/shx/train_000000.bin"
expect_fail "truncated shard" 1 "truncated" "$tmm" train "${sh_train[@]}" --data "$dir/shx" --run-dir "$dir/shrun"
check "... nothing written" test ! -e "$dir/shrun"
damaged; printf 'XXXX' | dd of="$dir/shx/train_000000.bin" conv=notrunc status=none
expect_fail "shard with a wrong magic" 1 "not a token shard" \
  "$tmm" train "${sh_train[@]}" --data "$dir/shx" --run-dir "$dir/shrun"
damaged; printf 'X' | dd of="$dir/shx/train_000000.bin" bs=1 seek=1030 conv=notrunc status=none
expect_fail "shard with a flipped token" 1 "corrupt" "$tmm" train "${sh_train[@]}" --data "$dir/shx" --run-dir "$dir/shrun"
damaged; sed -i 's/train_000000.bin/..\/..\/etc\/pass/' "$dir/shx/manifest.json"
expect_fail "manifest naming a path outside" 1 "expected \"train_000000.bin\"" \
  "$tmm" train "${sh_train[@]}" --data "$dir/shx" --run-dir "$dir/shrun"
damaged; rm "$dir/shx/manifest.json"
expect_fail "prepared directory without its manifest (interrupted prepare)" 1 "no manifest.json" \
  "$tmm" train "${sh_train[@]}" --data "$dir/shx" --run-dir "$dir/shrun"
expect_fail "shard files of two tokenizers" 1 "another tokenizer" "$tmm" train "${sh_train[@]}" \
  --data "$dir/sh/train_000000.bin" --data "$dir/sh258/train_000000.bin" --val-fraction 0 --run-dir "$dir/shrun"
expect_fail "vocabulary larger than the model's" 1 "smaller than the 300 tokens of the shards' tokenizer" \
  "$tmm" train "${sh_train[@]}" --data "$dir/sh300" --vocab 257 --run-dir "$dir/shrun"
check "a shard run" "$tmm" train "${sh_train[@]}" --data "$dir/sh" --vocab 300 --steps 2 --run-dir "$dir/shrun"
cp "$dir/shrun/metrics.jsonl" "$dir/shrun.metrics"
expect_fail "resumed on shards of another tokenizer" 1 "another tokenizer" \
  "$tmm" train --resume "$dir/shrun" --data "$dir/sh258" --steps 4 --quiet
check "... nothing changed" bash -c 'cmp "$1/metrics.jsonl" "$2" && [ "$(cat "$1/checkpoints/latest")" = step-000002 ]' \
  _ "$dir/shrun" "$dir/shrun.metrics"
# one file named twice (before: its text was read twice, and prepare put one copy in each split: the
# held-out set was the training text)
expect_fail "prepare: a file named twice, as a file and inside its directory" 1 "are the same file" \
  "$tmm" prepare --tokenizer bytes --data "$dir/sc" --data "$dir/sc/d1.txt" --out "$dir/shtwice" --quiet
check "... nothing was written" test ! -e "$dir/shtwice"
expect_fail "train: a file named twice, through another spelling" 1 "are the same file" \
  "$tmm" train "${sh_train[@]}" --data "$dir/fox.txt" --data "$dir/../$(basename "$dir")/fox.txt" --run-dir "$dir/twice"
expect_fail "tokenizer train: a file named twice" 1 "are the same file" \
  "$tmm" tokenizer train --vocab 260 --data "$dir/fox.txt" --data "$dir/fox.txt" --out "$dir/twice.json" --quiet
# gzip by content, as tmm tokenizer train reads: a .gz name on plain text is that text
printf 'not gzip at all' > "$dir/fake.gz"
check "prepare: a .gz that is not gzip is read as it is" "$tmm" prepare --tokenizer bytes --data "$dir/fake.gz" \
  --val-fraction 0 --out "$dir/shfake" --quiet
check "... its 15 bytes and an end-of-text" grep -q '"tokens": *16' "$dir/shfake/manifest.json"
gzip -c "$dir/fake.gz" > "$dir/fake.txt"
check "prepare: gzip data under a plain name is decompressed" "$tmm" prepare --tokenizer bytes \
  --data "$dir/fake.txt" --val-fraction 0 --out "$dir/shfake2" --quiet
check "... to the same shards" cmp "$dir/shfake/train_000000.bin" "$dir/shfake2/train_000000.bin"
head -c 40 "$dir/sc/d1.txt" > /dev/null; gzip -c "$dir/sh/train_000000.bin" | head -c 100 > "$dir/cut.gz"
expect_fail "prepare: a truncated .gz" 1 "corrupt gzip" \
  "$tmm" prepare --tokenizer bytes --data "$dir/cut.gz" --out "$dir/shbad" --quiet
printf '{"text": "ok"}\n{"txt": "no text field"}\n' > "$dir/bad.jsonl"
expect_fail "prepare: a JSONL line without text" 1 "bad.jsonl:2: no \"text\" field" \
  "$tmm" prepare --tokenizer bytes --data "$dir/bad.jsonl" --out "$dir/shbad" --quiet
check "... leaves no manifest and no temporary shard" \
  bash -c '[ ! -e "$1/manifest.json" ] && ! ls "$1" | grep -q tmp' _ "$dir/shbad"

# ---- tokenizers (issue 16): tokenizer.json, token ids and corpora, each refused in one line ----
tk="$dir/tok"
mkdir -p "$tk"
printf 'the cat sat on the mat\n' > "$tk/text.txt"
check "a small tokenizer trains" "$tmm" tokenizer train --quiet --vocab 270 --data "$tk/text.txt" --out "$tk/ok.json"
tj() { python3 - "$tk/ok.json" "$tk/$1" "$2" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
exec(sys.argv[3])
open(sys.argv[2], 'w').write(json.dumps(t))
PY
}
tj unigram.json 't["model"] = {"type": "Unigram", "vocab": [["a", 0.0]]}'
expect_fail "a Unigram tokenizer.json" 1 "model type 'Unigram' is not supported" \
  "$tmm" tokenizer encode --tokenizer "$tk/unigram.json" hi
tj wordpiece.json 't["model"]["type"] = "WordPiece"'
expect_fail "a WordPiece tokenizer.json" 1 "WordPiece" "$tmm" tokenizer encode --tokenizer "$tk/wordpiece.json" hi
tj nfkd.json 't["normalizer"] = {"type": "NFKD"}'
expect_fail "a normalizer" 1 "normalizer 'NFKD' is not supported" "$tmm" tokenizer encode --tokenizer "$tk/nfkd.json" hi
head -c 3000 "$tk/ok.json" > "$tk/truncated.json"
expect_fail "a truncated tokenizer.json" 1 "not valid JSON" "$tmm" tokenizer encode --tokenizer "$tk/truncated.json" hi
tj badmerge.json 't["model"]["merges"].append(["the", "zzz"])'
expect_fail "a merge naming an unknown token" 1 "'zzz', which is not in the vocabulary" \
  "$tmm" tokenizer encode --tokenizer "$tk/badmerge.json" hi
tj bigid.json 't["model"]["vocab"]["zz"] = 1e300'
expect_fail "an id far out of range" 1 "out of range" "$tmm" tokenizer encode --tokenizer "$tk/bigid.json" hi
tj dupid.json 't["model"]["vocab"]["zz"] = 3'
expect_fail "two tokens with one id" 1 "gives id 3 to both" "$tmm" tokenizer encode --tokenizer "$tk/dupid.json" hi
tj nobyte.json 'del t["model"]["vocab"]["a"]; t["model"]["merges"] = []'
check "a vocabulary missing a byte: loaded, the byte dropped as Hugging Face does (issue 35)" \
  bash -c '[ "$("$1" tokenizer encode --tokenizer "$2" "cab")" = "99 98" ]' _ "$tmm" "$tk/nobyte.json"
tj slow.json 't["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}, {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}'
expect_fail "a catastrophic Split pattern fails, not hangs" 1 "pre-tokenization failed" \
  "$tmm" tokenizer encode --tokenizer "$tk/slow.json" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"
python3 -c "print('[' * 100000 + ']' * 100000)" > "$tk/deep.json"
expect_fail "deeply nested JSON" 1 "not valid JSON" "$tmm" tokenizer encode --tokenizer "$tk/deep.json" hi
expect_fail "a device as tokenizer.json" 1 "" "$tmm" tokenizer encode --tokenizer /dev/zero hi
expect_fail "an id past the vocabulary" 1 "token id 999 (at 1) is not in the vocabulary" \
  "$tmm" tokenizer decode --tokenizer "$tk/ok.json" 5 999
expect_fail "an id that is not a number" 1 "'12x' is not a token id" "$tmm" tokenizer decode 12x
expect_fail "a vocabulary below 257" 1 "257" "$tmm" tokenizer train --vocab 100 --data "$tk/text.txt" --out "$tk/x.json"
printf '{"text": "a"}\n{"txt": "b"}\n' > "$tk/bad.jsonl"
expect_fail "a JSONL line without text" 1 "bad.jsonl:2: no \"text\" field" \
  "$tmm" tokenizer train --quiet --vocab 300 --data "$tk/bad.jsonl" --out "$tk/x.json"
expect_fail "a missing corpus file" 1 "no such file" \
  "$tmm" tokenizer train --quiet --vocab 300 --data "$tk/nothing.txt" --out "$tk/x.json"
check "... and no tokenizer was written" test ! -e "$tk/x.json"
cp "$tk/text.txt" "$tk/corpus.txt"
expect_fail "tokenizer train --out naming its corpus" 1 "--out $tk/corpus.txt is the input" \
  "$tmm" tokenizer train --quiet --vocab 260 --data "$tk/text.txt" --data "$tk/corpus.txt" --out "$tk/corpus.txt"
check "... the corpus is intact" cmp "$tk/text.txt" "$tk/corpus.txt"
expect_fail "tokenizer convert IN IN" 1 "OUT $tk/ok.json is the input" "$tmm" tokenizer convert "$tk/ok.json" "$tk/ok.json"
# outputs that are not regular files (before: the atomic rename replaced the node itself; as root,
# --samples /dev/full made /dev/full a file)
expect_fail "tokenizer train --out a FIFO" 1 "it is a FIFO (named pipe); tmm replaces regular files only" \
  "$tmm" tokenizer train --quiet --vocab 260 --data "$tk/text.txt" --out "$dir/fifo"
check "... the FIFO is still one" test -p "$dir/fifo"
expect_fail "tokenizer convert into a directory" 1 "it is a directory" "$tmm" tokenizer convert "$tk/ok.json" "$tk"

# ---- issue 35: SentencePiece-style tokenizer.json parts and .tiktoken files, each refused in one line ----
one_line() { # the last expect_fail printed one line (a check of its own: check overwrites $dir/out)
  local lines
  lines=$(wc -l < "$dir/out")
  check "... in one line" test "$lines" -eq 1
}
bad_tok() { # NAME WORDS PYTHON: ok.json edited by PYTHON is refused in one line naming WORDS
  tj "$1.json" "$3"
  expect_fail "tokenizer.json: $1" 1 "$2" "$tmm" tokenizer encode --tokenizer "$tk/$1.json" hi
  one_line
}
bad_tok metaspace-not-last "Metaspace pre-tokenizer before other steps" \
  't["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "Metaspace", "replacement": "_"}, t["pre_tokenizer"]]}'
bad_tok metaspace-two-chars "must be one character" \
  't["pre_tokenizer"] = {"type": "Metaspace", "replacement": "__"}; t["decoder"] = None'
bad_tok metaspace-scheme "prepend_scheme must be" \
  't["pre_tokenizer"] = {"type": "Metaspace", "replacement": "_", "prepend_scheme": 3}; t["decoder"] = None'
bad_tok metaspace-prefix "add_prefix_space false does not match" \
  't["pre_tokenizer"] = {"type": "Metaspace", "replacement": "_", "prepend_scheme": "first", "add_prefix_space": False}; t["decoder"] = None'
bad_tok template-b "'single' names sequence B" \
  't["post_processor"] = {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "B", "type_id": 0}}], "pair": [], "special_tokens": {}}'
bad_tok template-unknown "not in its special_tokens" \
  't["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<cls>", "type_id": 0}}], "pair": [], "special_tokens": {}}'
bad_tok template-id "past the vocabulary" \
  't["post_processor"] = {"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [4000000], "tokens": ["<s>"]}}}'
bad_tok template-lengths "two lists of the same length" \
  't["post_processor"] = {"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1, 2], "tokens": ["<s>"]}}}'
bad_tok bert "post_processor 'BertProcessing' is not supported" 't["post_processor"] = {"type": "BertProcessing"}'
bad_tok two-templates "more than one TemplateProcessing" \
  'tp = {"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {}}; t["post_processor"] = {"type": "Sequence", "processors": [tp, tp]}'
bad_tok decoder-ctc "decoder 'CTC' is not supported" 't["decoder"] = {"type": "CTC"}'
bad_tok decoder-mixed "needs the ByteLevel decoder alone" \
  't["decoder"] = {"type": "Sequence", "decoders": [t["decoder"], {"type": "Fuse"}]}'
bad_tok decoder-strip "the Strip decoder's 'start' must be a whole number" \
  't["pre_tokenizer"] = None; t["decoder"] = {"type": "Strip", "content": " ", "start": -1, "stop": 0}'
bad_tok normalizer-regex "does not compile" \
  't["normalizer"] = {"type": "Replace", "pattern": {"Regex": "[a-"}, "content": ""}'
bad_tok normalizer-deep "nested at most 4 deep" \
  'n = {"type": "NFC"}
for _ in range(8): n = {"type": "Sequence", "normalizers": [n]}
t["normalizer"] = n'
bad_tok normalizer-lower "normalizer 'Lowercase' is not supported" 't["normalizer"] = {"type": "Lowercase"}'
bad_tok added-flag "'lstrip' must be true or false" 't["added_tokens"][0]["lstrip"] = "yes"'
bad_tok dropout "dropout is not supported" 't["model"]["dropout"] = 0.1'
bad_tok bytelevel-keys "stand for no byte" 't["model"]["vocab"]["\u2581x"] = 5000'
tj sp-unk.json 't["pre_tokenizer"] = None; t["decoder"] = None; t["model"]["unk_token"] = "<nope>"'
expect_fail "tokenizer.json: unk_token outside the vocabulary, when the text needs it" 1 \
  "unk_token '<nope>', which is not in the vocabulary" "$tmm" tokenizer encode --tokenizer "$tk/sp-unk.json" $'x\xe2\x98\x83'
python3 - "$tk" <<'PY'
import base64, sys
d = sys.argv[1]
lines = ["%s %d" % (base64.b64encode(bytes([b])).decode(), b) for b in range(256)]
def w(name, text): open(d + "/" + name, "wb").write(text if isinstance(text, bytes) else text.encode())
w("small.tiktoken", "\n".join(lines) + "\n")
w("r50k_base.tiktoken", "\n".join(lines) + "\n")                     # the right name, 256 of 50256 ranks
w("bad64.tiktoken", "\n".join(lines[:10] + ["!!!! 10"] + lines[11:]) + "\n")
w("badrank.tiktoken", "\n".join(lines[:10] + ["Cg== -3"] + lines[11:]) + "\n")
# r50k_base's 50256 ranks: the bytes and 50000 pairs of bytes
full = lines + ["%s %d" % (base64.b64encode(bytes([i >> 8, i & 255])).decode(), 256 + i) for i in range(50000)]
w("r50k_base-duprank.tiktoken", "\n".join(full[:-1] + [full[-1].split()[0] + " 300"]) + "\n")
w("r50k_base-duptoken.tiktoken", "\n".join(full[:-1] + ["YQ== 50255"]) + "\n")
w("r50k_base-nobyte.tiktoken", "\n".join(full[1:] + ["AAAA 0"]) + "\n")
w("r50k_base-special.tiktoken", "\n".join(full[:-1] + [full[-1].split()[0] + " 50256"]) + "\n")
w("long.tiktoken", "\n".join(lines + [base64.b64encode(b"x" * 300).decode() + " 256"]) + "\n")
w("binary.tiktoken", bytes(range(1, 256)) * 64)
w("bigrank.tiktoken", "\n".join(lines + ["YWI= 99999999999999999999"]) + "\n")
PY
bad_tt() { # NAME WORDS [ENCODING]: a .tiktoken file refused in one line naming WORDS
  expect_fail ".tiktoken: $1" 1 "$2" "$tmm" tokenizer convert ${3:+--encoding "$3"} "$tk/$1.tiktoken" "$tk/out.json"
  one_line
}
bad_tt small "neither a tokenizer.json nor a .tiktoken file of an encoding tmm knows"
bad_tt r50k_base "256 ranks, but r50k_base has 50256"
bad_tt small "256 ranks, but cl100k_base has 100256" cl100k_base
bad_tt small "unknown tiktoken encoding 'gpt9'" gpt9
bad_tt bad64 "bad64.tiktoken:11: not \"BASE64 RANK\""
bad_tt badrank "badrank.tiktoken:11: the rank is not"
bad_tt bigrank "bigrank.tiktoken:257: the rank is not a whole number"
bad_tt long "long.tiktoken:257: not \"BASE64 RANK\" (a token of 1 to 256 bytes"
bad_tt binary "not \"BASE64 RANK\""
check "... and convert wrote nothing" test ! -e "$tk/out.json"
bad_tt r50k_base-duprank "rank 300 is given twice"
bad_tt r50k_base-duptoken "ranks 97 and 50255 are the same token"
bad_tt r50k_base-nobyte "no rank for the byte 0x00 (tiktoken needs all 256)"
bad_tt r50k_base-special "rank 50256 is r50k_base's special token <|endoftext|>"
expect_fail "tokenizer convert without OUT" 2 "needs IN and OUT" "$tmm" tokenizer convert "$tk/ok.json"
expect_fail "tokenizer convert into a missing directory" 1 "" "$tmm" tokenizer convert "$tk/ok.json" "$tk/no/such/dir/x.json"
check "tokenizer convert: a tokenizer.json is written back as one" "$tmm" tokenizer convert "$tk/ok.json" "$tk/ok2.json"

# tmm eval --task: task files (issue 22); tests/eval_test.sh has the rest
printf '{"sentence": "a"}\n' > "$dir/nolabel.jsonl"
expect_fail "a task item without its label" 1 "nolabel.jsonl:1: sst2 item: missing field \"label\"" \
  "$tmm" eval --checkpoint "$dir/none" --task sst2 --data "$dir/nolabel.jsonl"
# bad_task NAME TASK WORDS LINE: a task file of that one line is refused with WORDS
bad_task() {
  printf '%s\n' "$4" > "$dir/task.jsonl"
  expect_fail "$1" 1 "$3" "$tmm" eval --checkpoint "$dir/none" --task "$2" --data "$dir/task.jsonl"
}
bad_task "an IFEval keyword that is no regular expression" ifeval "not a valid regular expression" \
  '{"prompt": "p", "instruction_id_list": ["keywords:existence"], "kwargs": [{"keywords": ["(("]}]}'
# an output that is an input (before: --samples over --data replaced the benchmark file with the samples)
printf '{"sentence": "a", "label": 1}\n' > "$dir/sst.jsonl" && ln -sf sst.jsonl "$dir/sst-link.jsonl"
expect_fail "eval --samples naming --data through a link" 1 "--samples $dir/sst.jsonl is the input $dir/sst-link.jsonl" \
  "$tmm" eval --checkpoint "$dir/none" --task sst2 --data "$dir/sst-link.jsonl" --samples "$dir/sst.jsonl"
check "... the task file is intact" grep -q '"sentence"' "$dir/sst.jsonl"
expect_fail "a device as a task file" 1 "task file" "$tmm" eval --checkpoint "$dir/none" --task sst2 --data /dev/zero
# numbers past any integer (found by fuzz_eval_task: the cast came before the range check, undefined behaviour)
bad_task "an IFEval count too large for any integer" ifeval "whole number from 0 to 1e9" \
  '{"prompt": "p", "instruction_id_list": ["length_constraints:number_words"], "kwargs": [{"num_words": 2e20, "relation": "at least"}]}'
bad_task "a task label too large for any integer" sst2 "whole number" '{"sentence": "a", "label": 1e300}'

# ---- issue 31: a refused resume changes nothing; the metrics log continues from the checkpoint ----
"$tmm" train "${small[@]}" --steps 6 --save-every 3 --log-every 1 --eval-every 3 --run-dir "$dir/r31" > /dev/null 2>&1
cp "$dir/r31/config.json" "$dir/r31-config.json"
expect_fail "resume a run that is at its last step" 1 "nothing to do" \
  "$tmm" train --resume "$dir/r31" --steps 6 --batch 8 --lr 0.5
expect_fail "... or past it" 1 "nothing to do" "$tmm" train --resume "$dir/r31" --steps 5 --lr 0.5
check "... config.json is unchanged" cmp "$dir/r31/config.json" "$dir/r31-config.json"
# a crash after step 6 whose last checkpoint is step 3 (latest cut back to it), with a torn last line
echo step-000003 > "$dir/r31/checkpoints/latest"
printf '{"step": 7, "lo' >> "$dir/r31/metrics.jsonl"
check "resume after a crash past the checkpoint" "$tmm" train --resume "$dir/r31" --steps 8 --log-every 1 --quiet
check "... one record per step, 1 to 8, in order" python3 -c '
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
sys.exit(0 if steps == sorted(set(steps)) and set(range(1, 9)) <= set(steps) else "steps %s" % steps)' \
  "$dir/r31/metrics.jsonl"
printf 'step-000008\nstep-000003\n' > "$dir/r31/checkpoints/latest"
expect_fail "a latest file of two lines" 1 "holds more than one line" \
  "$tmm" train --resume "$dir/r31" --steps 10

# ---- issue 31: the checksums cover the tensor table (before: swapped offsets loaded without complaint) ----
"$tmm" train --d-model 16 --n-ctx 16 --layers 2 --batch 4 --eval-batches 2 --target-acc 0 --quiet --steps 2 \
  --eval-every 0 --run-dir "$dir/sw" > /dev/null 2>&1
cp -r "$dir/sw" "$dir/sw-state"
"$tmm" distill --checkpoint "$dir/sw" --out "$dir/sw-distill" --order 2 --quiet > /dev/null 2>&1
check "a model file whose header swaps two tensors (setup)" swap "$(model_of "$dir/sw")"
expect_fail "... is refused by eval" 1 "header checksum mismatch" "$tmm" eval --checkpoint "$dir/sw"
expect_fail "... and by generate" 1 "header checksum mismatch" \
  "$tmm" generate --checkpoint "$dir/sw" -n 2 --prompt a
check "a train state whose header swaps two tensors (setup)" \
  swap "$(dirname "$(model_of "$dir/sw-state")")/train_state.safetensors"
expect_fail "... is refused by --resume" 1 "header checksum mismatch" "$tmm" train --resume "$dir/sw-state" --steps 4
check "a distill file whose header swaps two layers' modes (setup)" \
  swap "$(dirname "$(model_of "$dir/sw-distill")")/distill.safetensors"
expect_fail "... is refused by generate" 1 "tensor table checksum mismatch" \
  "$tmm" generate --checkpoint "$dir/sw-distill" -n 2 --prompt a

# ---- issue 31: destructive paths refused before anything is deleted ----
"$tmm" prepare --tokenizer bytes --data "$dir/sc" --out "$dir/inout" --val-fraction 0.3 --quiet > /dev/null
printf 'a document\n\nanother\n' > "$dir/inout/x.txt"
ls "$dir/inout" > "$dir/inout.before"
expect_fail "prepare --force with --out equal to --data" 1 "holds the input" \
  "$tmm" prepare --tokenizer bytes --data "$dir/inout" --out "$dir/inout" --force --quiet
check "... nothing was deleted" bash -c 'ls "$1" | cmp - "$2"' _ "$dir/inout" "$dir/inout.before"

# a distill that fails (the disk full at each point where it writes) leaves no directory behind
# (before: an empty run directory, which a rerun had to --force); a tmpfs per size, in a mount namespace
if unshare -rm true 2> /dev/null; then
  check "distill on a full disk, at every point it writes: nothing left behind" unshare -rm bash -c '
    tmm=$1 ck=$2 mnt=$3 failures=0; mkdir -p "$mnt"
    for kb in $(seq 4 4 512); do
      mount -t tmpfs -o size=${kb}k tmpfs "$mnt" || exit 2
      if "$tmm" distill --checkpoint "$ck" --out "$mnt/d" --order 2 --quiet > /dev/null 2>&1; then
        umount "$mnt"; echo "$failures sizes failed, ${kb} KiB worked"; [ "$failures" -gt 0 ]; exit; fi
      failures=$((failures + 1))
      [ -e "$mnt/d" ] && { echo "a failed distill left $mnt/d at ${kb} KiB:"; ls -R "$mnt/d"; exit 1; }
      umount "$mnt"
    done
    echo "distill never succeeded"; exit 1' _ "$tmm" "$dir/sw-state" "$dir/mnt"
else
  echo "note: no mount namespace here (unshare -rm): the full-disk distill check did not run"
fi

# ---- issue 31: one directory walk for every corpus reader (before: tokenizer train followed links to
# directories, and a fan-out of 4 links a level over 15 levels meant 4^15 paths) ----
mkdir -p "$dir/fan/l0" && printf 'a few words for the tokenizer to count. %.0s' $(seq 40) > "$dir/fan/l0/doc.txt"
echo "a hidden file: skipped by every reader" > "$dir/fan/.hidden.txt"
for l in $(seq 15); do
  mkdir -p "$dir/fan/l$l"
  for k in 1 2 3 4; do ln -s "$dir/fan/l$((l - 1))" "$dir/fan/l$l/link$k"; done
done
check "tokenizer train over a fan-out of directory links ends (links skipped)" \
  timeout 60 "$tmm" tokenizer train --vocab 260 --data "$dir/fan" --out "$dir/fan-tok.json" --quiet
check "prepare reads the same single file" "$tmm" prepare --tokenizer bytes --data "$dir/fan" --out "$dir/fan-sh" \
  --val-fraction 0 --quiet
check "... one document" python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); sys.exit(m["documents"] != 1)' \
  "$dir/fan-sh/manifest.json"

# ---- issue 31: compressed input, read the same way by every reader ----
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 200) | gzip > "$dir/g.gz"
expect_fail "tmm train on a .gz text file (before: trained on the compressed bytes)" 1 "gzip-compressed" \
  "$tmm" train --task text --data "$dir/g.gz" --d-model 16 --n-ctx 16 --layers 1 --batch 4 --steps 2 \
  --run-dir "$dir/gzrun"
python3 -c 'import gzip, sys; gzip.open(sys.argv[1], "wb", 9).write(bytes(200 << 20))' "$dir/bomb.gz"
expect_fail "prepare: a gzip bomb (200 MiB of zeros in $(( $(stat -c %s "$dir/bomb.gz") >> 10 )) KiB)" 1 \
  "decompression bomb" "$tmm" prepare --tokenizer bytes --data "$dir/bomb.gz" --out "$dir/bombsh" --quiet
check "... leaves nothing behind (the directory it made goes too)" test ! -e "$dir/bombsh"
head -c $(( (64 << 20) + 1 )) /dev/zero | tr '\0' a > "$dir/long.jsonl"
expect_fail "prepare: a JSONL line of 64 MiB + 1 byte, streamed" 1 "long.jsonl:1: a line longer than 64 MiB" \
  "$tmm" prepare --tokenizer bytes --data "$dir/long.jsonl" --out "$dir/bombsh" --quiet
expect_fail "tokenizer train: the same rule" 1 "long.jsonl:1: a line longer than 64 MiB" \
  "$tmm" tokenizer train --vocab 260 --data "$dir/long.jsonl" --out "$dir/bomb-tok.json" --quiet
rm "$dir/long.jsonl"
printf '{"text": "one", "text": "two"}\n' > "$dir/dup.jsonl"
for cmd in "prepare --tokenizer bytes --out $dir/dupsh" "tokenizer train --vocab 260 --out $dir/dup.json" \
           "train --task text --d-model 16 --n-ctx 16 --layers 1 --steps 1 --run-dir $dir/duprun"; do
  # shellcheck disable=SC2086 # the command's words
  expect_fail "${cmd%% -*}: a JSONL key given twice (before: tmm train and prepare took one of them)" 1 \
    "dup.jsonl:1: the key 'text' appears twice" "$tmm" $cmd --data "$dir/dup.jsonl" --quiet
done
printf '{"text": "a"}\n%.0s' $(seq 4000) > "$dir/lines.jsonl"
python3 -c 'import gzip, sys; gzip.open(sys.argv[1], "wb", 9).write(open(sys.argv[2], "rb").read() * 1200)' \
  "$dir/lines.jsonl.gz" "$dir/lines.jsonl"
expect_fail "prepare: a bomb of short JSONL lines ($(( $(stat -c %s "$dir/lines.jsonl.gz") >> 10 )) KiB)" 1 \
  "decompression bomb" "$tmm" prepare --tokenizer bytes --data "$dir/lines.jsonl.gz" --out "$dir/bombsh" --quiet
check "... leaves nothing behind" test ! -e "$dir/bombsh"
expect_fail "tokenizer train: the same bomb" 1 "decompression bomb" \
  "$tmm" tokenizer train --vocab 260 --data "$dir/bomb.gz" --out "$dir/bomb-tok.json" --quiet
expect_fail "tokenizer train: a truncated .gz (before: trained on the part that inflated)" 1 "corrupt gzip" \
  "$tmm" tokenizer train --vocab 260 --data "$dir/cut.gz" --out "$dir/cut-tok.json" --quiet

# ---- issue 31: distillation near the full order (before: a bound of 0 beside a relative error of 0.72) ----
expect_fail "distill --order 0" 2 "--order must be at least 1" \
  "$tmm" distill --checkpoint "$dir/sw-state" --out "$dir/d0" --order 0
for order in 13 14 15 1000; do
  check "distill --order $order of an n = 16 model: every fit within the bound it reports" bash -c '
    "$1" distill --checkpoint "$2" --out "$3" --order "$4" --quiet && python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
for v in r[\"vectors\"]:
    norm = v[\"l2\"] / v[\"rel_l2\"] if v[\"rel_l2\"] > 0 else 0
    assert v[\"l2\"] <= v[\"bound\"] + 1e-5 * norm, v
    assert v[\"order\"] <= min(int(sys.argv[2]), 15), v
" "$3/distill.json" "$4"' _ "$tmm" "$dir/sw-state" "$dir/dfull$order" "$order"
done
expect_fail "distill --tol 1e-9, which no order reaches" 1 "reaches the relative L2 error" \
  "$tmm" distill --checkpoint "$dir/sw-state" --out "$dir/dtol" --tol 1e-9
check "... and leaves no run directory" test ! -e "$dir/dtol"

# ---- silent acceptance on the command line (review): each now one clear line ----
# a resumed run keeps its model, task and accumulation (before: --task copy on a text run switched the task)
cp -r "$dir/run" "$dir/rk"
cp "$dir/rk/config.json" "$dir/rk-config.json"
head -c 4000 "$(dirname "$0")/../README.md" > "$dir/rk.txt"
check "a text run to resume" \
  "$tmm" train "${small[@]}" --data "$dir/rk.txt" --steps 2 --eval-every 0 --run-dir "$dir/rkt"
expect_fail "resume a text run with --task copy" 2 "--task copy: the run being resumed has task.name text, not copy" \
  "$tmm" train --resume "$dir/rkt" --task copy --steps 4
expect_fail "resume a copy run with --task text" 2 "--task text: the run being resumed has task.name copy" \
  "$tmm" train --resume "$dir/rk" --task text --steps 8
expect_fail "resume a copy run with --data (which sets the text task)" 2 \
  "--data $dir/rk.txt: .* task.name copy, not text" \
  "$tmm" train --resume "$dir/rk" --data "$dir/rk.txt" --steps 8
expect_fail "resume with another width" 2 "--d-model 32: the run being resumed has model.d_model 16, not 32" \
  "$tmm" train --resume "$dir/rk" --d-model 32 --steps 8
expect_fail "resume with another architecture" 2 "model.arch tmm, not transformer" \
  "$tmm" train --resume "$dir/rk" --arch transformer --steps 8
expect_fail "resume with another accumulation" 2 "--accum 2: .* train.accum 1, not 2" \
  "$tmm" train --resume "$dir/rk" --accum 2 --batch 4 --steps 8
echo '{"model": {"n_layers": 3}}' > "$dir/rk-layers.json"
expect_fail "resume with a config file of another depth" 2 "--config $dir/rk-layers.json: .* model.n_layers 1, not 3" \
  "$tmm" train --resume "$dir/rk" --config "$dir/rk-layers.json" --steps 8
expect_fail "resume with a preset of another model (given before --resume)" 2 \
  "--preset small-text: .*model.d_model 16" \
  "$tmm" train --preset small-text --resume "$dir/rk" --steps 8
expect_fail "resume with another text mode" 2 "task.mode windows, not documents" \
  "$tmm" train --resume "$dir/rkt" --text-mode documents --steps 4
check "... config.json is unchanged" cmp "$dir/rk/config.json" "$dir/rk-config.json"
check "resume with the run's own values and what may change (steps, lr, evaluation, batch)" \
  "$tmm" train --resume "$dir/rk" --d-model 16 --n-ctx 16 --layers 1 --vocab 0 --heads 0 --accum 1 --task copy \
  --steps 10 --lr 0.01 --eval-every 3 --batch 8 --quiet
check "... the config file that set the depth, set back by --layers" \
  "$tmm" train --resume "$dir/rk" --config "$dir/rk-layers.json" --layers 1 --steps 11 --quiet
check "resume a text run with its data moved (--data keeps the task)" bash -c \
  'mv "$2" "$2.moved" && "$1" train --resume "$3" --data "$2.moved" --steps 4 --quiet' _ "$tmm" "$dir/rk.txt" "$dir/rkt"
mv "$dir/rk.txt.moved" "$dir/rk.txt"

# an option that takes a value, given twice, is refused in every command (before: the last one won)
twice() { # NAME WORDS COMMAND...: exit 2 naming the option given twice
  expect_fail "given twice: $1" 2 "$2 given twice" "${@:3}"
}
twice "train --steps" "--steps" "$tmm" train --steps 10 --steps 20
twice "train --frozen, then --frozen=false" "--frozen" "$tmm" train --frozen --frozen=false
twice "train --resume" "--resume" "$tmm" train --resume "$dir/rk" --resume "$dir/rkt"
twice "train --preset" "--preset" "$tmm" train --preset tiny-copy --preset small-text
twice "eval --batches" "--batches" "$tmm" eval --checkpoint "$dir/rk" --batches 1 --batches 2
twice "eval --task --limit" "--limit" "$tmm" eval --checkpoint "$dir/rk" --task sst2 --data x --limit 1 --limit 2
twice "generate -c, then --checkpoint" "--checkpoint" "$tmm" generate -c "$dir/rk" --checkpoint "$dir/rkt" -p 1
twice "generate --mixer-impl, then --toeplitz-impl (its new name)" "--toeplitz-impl" \
  "$tmm" generate -c "$dir/rk" -p 1 --mixer-impl fft --toeplitz-impl direct
twice "serve --port" "--port" "$tmm" serve --checkpoint "$dir/rk" --port 1 --port 2
twice "distill --order" "--order" "$tmm" distill --checkpoint "$dir/rk" --out "$dir/x" --order 1 --order 2
twice "index --tol" "--tol" "$tmm" index --checkpoint "$dir/rk" --tol 0.1 --tol 0.2
twice "prepare --out" "--out" "$tmm" prepare --tokenizer bytes --data "$dir/rk.txt" --out "$dir/p1" --out "$dir/p2"
twice "tokenizer encode --tokenizer" "--tokenizer" "$tmm" tokenizer encode --tokenizer bytes --tokenizer bytes a
twice "tokenizer train --vocab" "--vocab" "$tmm" tokenizer train --vocab 300 --vocab 400 --data "$dir/rk.txt" --out x
twice "check --device" "--device" "$tmm" check --device 0 --device 0
twice "experiment --out" "--out" "$tmm" experiment copy --out a --out b
twice "bench matmul --m" "--m" "$tmm" bench matmul --m 4 --m 8
twice "bench mixer --n" "--n" "$tmm" bench mixer --n 4 --n 8
twice "bench generate --prompts" "--prompts" "$tmm" bench generate --prompts 4 --prompts 8
twice "bench train --steps" "--steps" "$tmm" bench train --steps 1 --steps 2
twice "bench memory --config" "--config" "$tmm" bench memory --config "$dir/rk-layers.json" --config b.json
twice "bench arch --repeat" "--repeat" "$tmm" bench arch --repeat 1 --repeat 2
# ... but the list options that accumulate, documented as such, still repeat
check "repeatable: train --config, bench arch and experiment --archs (parsed, then --help)" bash -c '
  "$1" train --config a.json --config b.json --help > /dev/null &&
  "$1" bench arch --archs tmm --archs swa --help > /dev/null &&
  "$1" experiment copy --archs tmm --archs swa --data a --data b --help > /dev/null' _ "$tmm"
cp "$dir/rk.txt" "$dir/rk2.txt"
check "repeatable: train --data, both files in its config" bash -c '
  "$1" train --d-model 16 --n-ctx 16 --layers 1 --batch 4 --steps 1 --eval-every 0 --quiet --data "$2" --data "$3" \
    --run-dir "$4" && grep -q rk2.txt "$4/config.json" && grep -q "rk.txt" "$4/config.json"' \
  _ "$tmm" "$dir/rk.txt" "$dir/rk2.txt" "$dir/rkd"
check "repeatable: prepare --data" "$tmm" prepare --tokenizer bytes --data "$dir/rk.txt" --data "$dir/rk2.txt" \
  --out "$dir/rkp" --quiet

# an option that cannot do what it says for this checkpoint is refused (before: ignored)
expect_fail "eval --exact of a checkpoint that is not distilled" 1 "--exact: .* is not distilled" \
  "$tmm" eval --checkpoint "$dir/rk" --exact
expect_fail "generate --exact of one" 1 "is not distilled" "$tmm" generate --checkpoint "$dir/rkt" -p a -n 1 --exact
expect_fail "serve --exact of one" 1 "is not distilled" "$tmm" serve --checkpoint "$dir/rkt" --port 0 --exact
check "eval --exact of a distilled checkpoint" "$tmm" eval --checkpoint "$dir/dfull13" --exact
check "a transformer run" "$tmm" train "${small[@]}" --arch transformer --steps 1 --eval-every 0 --run-dir "$dir/rktr"
expect_fail "generate --toeplitz-impl on a model without Toeplitz layers" 2 \
  "--toeplitz-impl: $dir/rktr is a transformer model, which has no Toeplitz layers" \
  "$tmm" generate --checkpoint "$dir/rktr" -p 1 -n 1 --toeplitz-impl fft
expect_fail "bench generate --toeplitz-impl on a random transformer" 2 "the random model is a transformer model" \
  "$tmm" bench generate --arch transformer --toeplitz-impl direct
expect_fail "generate --greedy with a sampling option" 2 \
  "--greedy takes the most likely token: --seed would do nothing" \
  "$tmm" generate --checkpoint "$dir/rk" -p 1 -n 1 --greedy --seed 3
expect_fail "eval --task: --max-gen on a multiple-choice task says it does nothing" 1 \
  "note: --max-gen does nothing for sst2" \
  "$tmm" eval --checkpoint "$dir/rk" --task sst2 --data "$dir/none.jsonl" --max-gen 4

finish
