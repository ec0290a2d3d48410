#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set up (with test packages), build,
# and run every test on the default Vulkan device (lavapipe on a machine without
# a GPU) with the Khronos validation layer on: any validation message fails.
# Tests run side by side, one per core (ctest -j); the long ones run their short
# mode (the same checks on fewer layers, steps or shapes: DEVELOPERS.md, "What
# CI runs").
#   tools/test.sh                  the suite (CI)
#   TMM_WERROR=1 tools/test.sh     warnings are errors (CI)
#   tools/test.sh --sanitize       ASan + UBSan + LeakSanitizer build (-O1) in build-asan/
#   tools/test.sh --full           the long tests at full length (TMM_TEST_FULL=1)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
for arg in "$@"; do
  case "$arg" in
    --sanitize) dir=build-asan; opts=(-DCMAKE_BUILD_TYPE=Debug -DTMM_SANITIZE=ON) ;;
    --full) export TMM_TEST_FULL=1 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option '$arg' (use --sanitize, --full or nothing)" >&2; exit 2 ;;
  esac
done
tools/setup.sh --test
cmake -S . -B "$dir" "${opts[@]}" -DTMM_BUILD_TESTS=ON ${TMM_WERROR:+-DTMM_WERROR=ON}
cmake --build "$dir" -j "$(nproc)"
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)"
