#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set up (with test packages), build,
# and run every test on the default Vulkan device (lavapipe on a machine without
# a GPU) with the Khronos validation layer on: any validation message fails.
#   TMM_WERROR=1 tools/test.sh     warnings are errors (CI)
#   tools/test.sh --sanitize       ASan + UBSan + LeakSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --test
dir=build
opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan
  opts=(-DCMAKE_BUILD_TYPE=Debug -DTMM_SANITIZE=ON)
fi
cmake -S . -B "$dir" "${opts[@]}" -DTMM_BUILD_TESTS=ON ${TMM_WERROR:+-DTMM_WERROR=ON}
cmake --build "$dir" -j "$(nproc)"
ctest --test-dir "$dir" --output-on-failure
