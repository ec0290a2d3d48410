#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer harnesses of tests/fuzz/ with clang, under
# AddressSanitizer and UBSan, in build-fuzz/, and runs each one for a while,
# starting from its committed seed corpus (tests/fuzz/corpus/NAME/; new inputs
# go to build-fuzz/corpus/NAME/, kept between runs). Prints the executions and
# findings of each harness; any crash, leak, hang (-timeout) or memory blow-up
# (-rss_limit_mb) fails, with the input saved in build-fuzz/artifacts/.
#   tools/fuzz.sh                  20 s per harness (CI)
#   tools/fuzz.sh --seconds 3600   a longer run
#   tools/fuzz.sh --build-only
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=20
build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
command -v clang >/dev/null || { echo "fuzz.sh: needs clang (tools/setup.sh --test installs it)" >&2; exit 2; }
dir=build-fuzz
mkdir -p "$dir"
CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DTMM_FUZZ=ON -DTMM_BUILD_TESTS=OFF \
  -DTMM_BUILD_EXAMPLES=OFF ${TMM_WERROR:+-DTMM_WERROR=ON} > "$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; exit 1; }
harnesses=(fuzz_safetensors fuzz_config fuzz_data fuzz_tokenizer fuzz_shards fuzz_eval_task)
cmake --build "$dir" -j "$(nproc)" --target "${harnesses[@]}" >> "$dir/build.log" 2>&1 ||
  { tail -40 "$dir/build.log" >&2; exit 1; }
[ "$build_only" -eq 1 ] && exit 0

mkdir -p "$dir/artifacts"
failed=0
total=0
for h in "${harnesses[@]}"; do
  name=${h#fuzz_}
  mkdir -p "$dir/corpus/$name"
  log="$dir/$h.log"
  if "$dir/tests/fuzz/$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$dir/artifacts/$name-" \
       "$dir/corpus/$name" "tests/fuzz/corpus/$name" > "$log" 2>&1; then
    result="0 findings"
  else
    result="FINDING: $(grep -m1 -E 'ERROR|runtime error|Timeout|out-of-memory|leak' "$log" || echo "exit status $?")"
    failed=$((failed + 1))
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  total=$((total + ${execs:-0}))
  printf 'fuzz.sh: %-12s %10s executions in %ss, corpus %s inputs: %s\n' "$name" "${execs:-?}" "$seconds" \
    "$(ls "$dir/corpus/$name" | wc -l)" "$result"
done
echo "fuzz.sh: $total executions over ${#harnesses[@]} harnesses, $failed with findings (logs: $dir/*.log)"
[ "$failed" -eq 0 ]
