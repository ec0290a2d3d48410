#!/usr/bin/env bash
# End-to-end checks of the tmm command line: help, bad input, a short training
# run, Ctrl-C (saves a checkpoint, exit 130), exact resume, tmm eval, and a
# corrupt checkpoint refused with a clear message.
#   tests/cli_test.sh PATH/TO/tmm
set -u
tmm="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0
failed=0

check() { # name, then a command that must succeed
  local name="$1"; shift
  if "$@" > "$dir/out" 2>&1; then
    cat "$dir/out" >> "$dir/all.log"
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name"; sed 's/^/    /' "$dir/out" | tail -20
  fi
}

expect_fail() { # name, expected exit status, words the message must contain, command...
  local name="$1" want="$2" words="$3"; shift 3
  "$@" > "$dir/out" 2>&1
  local rc=$?
  cat "$dir/out" >> "$dir/all.log"
  if [ "$rc" -eq "$want" ] && grep -q -- "$words" "$dir/out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name (exit $rc, want $want with '$words')"; sed 's/^/    /' "$dir/out" | tail -5
  fi
}

small=(--d-model 16 --n-ctx 16 --layers 1 --batch 4 --eval-batches 2 --quiet)

check "tmm --help" "$tmm" --help
check "tmm --version" "$tmm" --version
check "tmm train --help" "$tmm" train --help
check "tmm eval --help" "$tmm" eval --help
check "tmm bench --help" "$tmm" bench --help
expect_fail "unknown command" 2 "unknown command" "$tmm" frobnicate
expect_fail "bad number" 2 "expects a whole number" "$tmm" train --steps ten
expect_fail "unknown preset" 2 "no preset" "$tmm" train --preset nope
expect_fail "text without files" 1 "needs training files" "$tmm" train --task text
expect_fail "missing data file" 1 "nonexistent" "$tmm" train --data "$dir/nonexistent.txt"
echo '{"model": {"d_model": "big"}}' > "$dir/bad.json"
expect_fail "bad config value" 1 "model.d_model" "$tmm" train --config "$dir/bad.json"
echo '{"modle": {}}' > "$dir/bad2.json"
expect_fail "bad config section" 1 "unknown section" "$tmm" train --config "$dir/bad2.json"
expect_fail "eval without checkpoint" 2 "required" "$tmm" eval

check "short training run" "$tmm" train "${small[@]}" --steps 30 --eval-every 10 --target-acc 0 --run-dir "$dir/a"
check "metrics.jsonl has evals" grep -q '"copy_acc"' "$dir/a/metrics.jsonl"
check "checkpoint saved" test -f "$dir/a/checkpoints/latest"
check "tmm eval" "$tmm" eval --checkpoint "$dir/a"

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

check "bench mixer" "$tmm" bench mixer --n 64 --d 16 --heads 2 --json --svg "$dir/mixer.svg"
check "bench mixer plot" grep -q "<polyline" "$dir/mixer.svg"
check "bench train" "$tmm" bench train --d-model 16 --n-ctx 16 --layers 1 --batch 2 --steps 2 --json

# a flipped byte in the saved weights is refused
model="$dir/a/checkpoints/$(cat "$dir/a/checkpoints/latest")/model.safetensors"
size=$(stat -c %s "$model")
printf '\x55' | dd of="$model" bs=1 seek=$((size - 3)) conv=notrunc status=none
expect_fail "corrupt checkpoint" 1 "checksum" "$tmm" eval --checkpoint "$dir/a"

# TMM_VALIDATE=1 (set by CTest): the Khronos layer saw nothing wrong in any run
cat "$dir/b.log" >> "$dir/all.log"
if grep -q "tmm: validation" "$dir/all.log"; then
  failed=$((failed + 1)); echo "FAIL: validation messages:"; grep "tmm: validation" "$dir/all.log" | head -5
else
  passed=$((passed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
