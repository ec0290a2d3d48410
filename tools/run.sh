#!/usr/bin/env bash
# The main job, from a fresh clone: set up, build (Release), list the Vulkan
# devices, then train the default model (a small TMM on the copy task, on the
# best device) until it copies held-out sequences with 99% accuracy.
# Needs no test packages: the test suite is not configured here (tools/test.sh).
# The run goes to runs/quickstart, which this script owns: a second run.sh
# replaces the first one's run there (every other directory is left alone).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=0
for p in $(tools/setup.sh --list); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing=$((missing + 1))
done
echo "tools/run.sh: 1) install ${missing} missing packages  2) build tmm (Release, about 1 minute on 2 cores)"
echo "              3) list the Vulkan devices  4) train the default model into runs/quickstart (under a"
echo "              minute on a CPU; replaces an earlier run.sh's run there)"
tools/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTMM_BUILD_TESTS=OFF ${TMM_WERROR:+-DTMM_WERROR=ON}
cmake --build build -j "$(nproc)"
build/tmm devices
build/tmm train --run-dir runs/quickstart --force
