#!/usr/bin/env bash
# The main job, from a fresh clone: set up, build (Release), list the Vulkan
# devices and run the self-check on the one tmm picks.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${TMM_WERROR:+-DTMM_WERROR=ON}
cmake --build build -j "$(nproc)"
build/tmm devices
build/tmm check
