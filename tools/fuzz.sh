#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer harnesses of tests/fuzz/ with clang, under
# AddressSanitizer and UBSan, in build-fuzz/, and runs each one for a while,
# starting from its committed seed corpus (tests/fuzz/corpus/NAME/; new inputs
# go to build-fuzz/corpus/NAME/, kept between runs). Prints the executions and
# findings of each harness; any crash, leak, hang (-timeout) or memory blow-up
# (-rss_limit_mb) fails, with the input saved in build-fuzz/artifacts/.
# Harnesses run side by side, one per core (each libFuzzer process is one thread).
#   tools/fuzz.sh                  20 s per harness (CI)
#   tools/fuzz.sh --seconds 3600   a longer run
#   tools/fuzz.sh --jobs N         N harnesses at a time (default: the number of cores)
#   tools/fuzz.sh --build-only
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=20
jobs=$(nproc)
build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --jobs needs a positive number, not '$jobs'" >&2; exit 2; }
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds needs a positive number, not '$seconds'" >&2; exit 2; }
command -v clang >/dev/null || { echo "fuzz.sh: needs clang (tools/setup.sh --test installs it)" >&2; exit 2; }
dir=build-fuzz
mkdir -p "$dir"
CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DTMM_FUZZ=ON -DTMM_BUILD_TESTS=OFF \
  -DTMM_BUILD_EXAMPLES=OFF ${TMM_WERROR:+-DTMM_WERROR=ON} > "$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; exit 1; }
harnesses=(fuzz_safetensors fuzz_config fuzz_data fuzz_tokenizer fuzz_shards fuzz_eval_task fuzz_corpus fuzz_train_state
           fuzz_serve_request)
cmake --build "$dir" -j "$(nproc)" --target "${harnesses[@]}" >> "$dir/build.log" 2>&1 ||
  { tail -40 "$dir/build.log" >&2; exit 1; }
[ "$build_only" -eq 1 ] && exit 0

mkdir -p "$dir/artifacts"
# fuzz_one HARNESS: runs it; its line of the report goes to $dir/HARNESS.result, exit 1 on a finding.
fuzz_one() {
  local h=$1 name=${1#fuzz_} log="$dir/$1.log" result execs
  mkdir -p "$dir/corpus/$name"
  if "$dir/tests/fuzz/$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$dir/artifacts/$name-" \
       "$dir/corpus/$name" "tests/fuzz/corpus/$name" > "$log" 2>&1; then
    result="0 findings"
  else
    result="FINDING: $(grep -m1 -E 'ERROR|runtime error|Timeout|out-of-memory|leak' "$log" || echo "exit status $?")"
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  printf '%s\t%s\t%s\n' "${execs:-0}" "$(ls "$dir/corpus/$name" | wc -l)" "$result" > "$dir/$h.result"
  [ "$result" = "0 findings" ]
}
rm -f "$dir"/*.result
running=0
for h in "${harnesses[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
  fuzz_one "$h" &
  running=$((running + 1))
done
wait || true

failed=0
total=0
for h in "${harnesses[@]}"; do
  IFS=$'\t' read -r execs corpus result < "$dir/$h.result" || { execs=0 corpus=? result="FINDING: no result"; }
  [ "$result" = "0 findings" ] || failed=$((failed + 1))
  total=$((total + execs))
  printf 'fuzz.sh: %-12s %10s executions in %ss, corpus %s inputs: %s\n' "${h#fuzz_}" "$execs" "$seconds" "$corpus" "$result"
done
echo "fuzz.sh: $total executions over ${#harnesses[@]} harnesses ($jobs at a time), $failed with findings (logs: $dir/*.log)"
[ "$failed" -eq 0 ]
