#!/usr/bin/env bash
# Fault check: training killed at any point, then resumed, ends with the same
# weights, bit for bit, as a run that was never interrupted; and after every
# kill the run directory holds a complete checkpoint that `tmm eval` loads.
#
#   tools/fault_check.sh PATH/TO/tmm [KILLS]     (CTest runs it as the test "fault")
#
# Kills: SIGKILL at pseudo-random times (KILLS of them, default 10, from a
# fixed seed, so a failure can be replayed); SIGKILL injected by strace at
# the N-th rename and the N-th fsync of the run (inside checkpoint writes:
# after the files are written but before they are renamed into place, between
# the step directory's rename and the "latest" pointer's); and SIGTERM, which
# must save a checkpoint and exit with 143 (that checkpoint resumes like any).
set -u
tmm="$1"
kills="${2:-10}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

steps=24
base=(--d-model 16 --n-ctx 16 --layers 1 --batch 4 --save-every 2 --keep 2 --eval-every 0
      --log-every 0 --target-acc 0 --toeplitz-impl direct --quiet)
args=("${base[@]}" --steps "$steps")

# The weights of a run's final checkpoint: the model file's data checksum (every byte of every tensor).
weights() {
  python3 - "$1/checkpoints/$(cat "$1/checkpoints/latest" 2>/dev/null)/model.safetensors" <<'EOF'
import json, struct, sys
try:
    b = open(sys.argv[1], 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    print(json.loads(b[8:8 + n])['__metadata__']['data_fnv1a64'])
except Exception as e:
    print('unreadable:', e)
EOF
}
step_of() { cat "$1/checkpoints/latest" 2>/dev/null || echo none; }

"$tmm" train "${args[@]}" --run-dir "$dir/ref" > "$dir/ref.log" 2>&1 || { echo "FAIL: reference run"; cat "$dir/ref.log"; exit 1; }
want=$(weights "$dir/ref")
echo "reference: $steps steps, weights $want"

# One interrupted run: start (or resume), let `killer` end it, check what is left, and repeat until done.
# killer: a command that runs tmm train with the arguments it is given and returns its exit status.
run_until_done() {
  local name="$1" killer="$2" run="$dir/$1" rounds=0 rc
  rm -rf "$run"
  while :; do
    rounds=$((rounds + 1))
    if [ -f "$run/checkpoints/latest" ]; then
      "$killer" "$rounds" train "${args[@]}" --resume "$run" > "$dir/last.log" 2>&1
    else
      "$killer" "$rounds" train "${args[@]}" --run-dir "$run" --force > "$dir/last.log" 2>&1
    fi
    rc=$?
    [ "$rc" -eq 0 ] && break
    # killed after its last save: the run is complete, and a resume says so (exit 1)
    grep -q "nothing to do" "$dir/last.log" && [ "$(step_of "$run")" = "$(printf 'step-%06d' "$steps")" ] && break
    if [ -f "$run/checkpoints/latest" ] && ! "$tmm" eval --checkpoint "$run" > "$dir/eval.log" 2>&1; then
      bad "$name: after a kill (exit $rc) the checkpoint $(step_of "$run") does not load:"; tail -3 "$dir/eval.log"
      return
    fi
    if [ "$rounds" -gt 60 ]; then
      bad "$name: no progress after 60 restarts"; tail -5 "$dir/last.log"; return
    fi
  done
  local got
  got=$(weights "$run")
  if [ "$got" = "$want" ]; then
    ok; echo "$name: done after $rounds starts, weights identical"
  else
    bad "$name: weights $got after $rounds starts, expected $want"
  fi
}

# 1. SIGKILL at pseudo-random times (0.3 .. 2.5 s after the start: start-up, steps and saves)
RANDOM=20261201
kill_at_random() {
  local round="$1"; shift
  [ "$round" -gt "$kills" ] && { "$tmm" "$@"; return; }
  "$tmm" "$@" & local pid=$!
  sleep "$(printf '0.%03d' $((300 + RANDOM % 700)))"
  [ $((RANDOM % 3)) -eq 0 ] && sleep 1.5
  kill -9 "$pid" 2>/dev/null
  wait "$pid"
}
run_until_done random-kills kill_at_random

# 2. SIGKILL inside checkpoint writes, injected at the N-th call of a syscall (one N per start)
if command -v strace > /dev/null; then
  for call in rename fsync; do
    kill_in_call() {
      local round="$1"; shift
      [ "$round" -gt 4 ] && { "$tmm" "$@"; return; }
      local syscalls=rename,renameat,renameat2
      [ "$call" = fsync ] && syscalls=fsync,fdatasync
      strace -f -qq -o /dev/null -e trace="$syscalls" -e inject="$syscalls":signal=KILL:when=$((2 * round + 1)) \
        "$tmm" "$@"
    }
    run_until_done "kill-at-$call" kill_in_call
  done
else
  bad "strace is missing (tools/setup.sh --test installs it): the kills inside checkpoint writes did not run"
fi

# 3. SIGTERM (what schedulers and `timeout` send): a checkpoint and exit 143
rm -rf "$dir/term"
"$tmm" train "${base[@]}" --steps 100000 --run-dir "$dir/term" > "$dir/term.log" 2>&1 & pid=$!
for _ in $(seq 100); do [ -f "$dir/term/metrics.jsonl" ] && break; sleep 0.1; done
sleep 1
kill -TERM "$pid"
wait "$pid"
rc=$?
if [ "$rc" -eq 143 ] && grep -q "interrupted after" "$dir/term.log" && [ -f "$dir/term/checkpoints/latest" ]; then
  ok; echo "SIGTERM: saved $(step_of "$dir/term") and exited 143"
else
  bad "SIGTERM: exit $rc, expected 143 with a checkpoint"; tail -3 "$dir/term.log"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
