#!/usr/bin/env bash
# The main job, from a fresh clone: set up, build (Release), list the Vulkan
# devices, then train the default model (a small TMM on the copy task, on the
# best device) until it copies held-out sequences with 99% accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${TMM_WERROR:+-DTMM_WERROR=ON}
cmake --build build -j "$(nproc)"
build/tmm devices
build/tmm train
