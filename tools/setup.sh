#!/usr/bin/env bash
# Installs the system packages that tmm needs, on Debian 12 or Ubuntu 22.04+.
#   tools/setup.sh          build and run: compiler, CMake, Vulkan, glslc, glslang, VkFFT, cJSON,
#                           LAPACKE with OpenBLAS, Open MPI (data-parallel training under mpirun),
#                           libmicrohttpd (tmm serve's HTTP server), and lavapipe (a Vulkan device that
#                           runs on the CPU)
#   tools/setup.sh --test   also the tests' needs: Criterion, the Khronos validation layer,
#                           PyTorch (python3-torch, for the parity test), strace (for the
#                           dependency audit, tools/check_deps.sh), clang with its
#                           libFuzzer runtime (tools/fuzz.sh), Node.js with npm (the
#                           tokenizer parity test and tmm serve's openai client test), curl (the
#                           serve test), openmpi-bin (mpirun, for the 2-rank test), and
#                           patchelf and git (tools/bundle.sh sets the bundle's RUNPATHs and stamps
#                           its commit; the bundle test)
#   tools/setup.sh --list [--test]   print the packages, one per line, and install nothing
# Idempotent: installs only what is missing. Uses sudo when not run as root.
# On other systems it prints the package list and exits non-zero.
# Every package that configuring, building, running or testing uses must be in these
# lists (or come with one of them): tools/check_deps.sh checks it in CI.
set -euo pipefail

# glslang-tools: glslang-dev's CMake package names /usr/bin/glslangValidator and
# fails without it, though glslang-dev does not depend on it.
build_pkgs=(cmake make gcc g++ pkg-config libvulkan-dev glslc glslang-dev glslang-tools spirv-tools
            libvkfft-dev libcjson-dev liblapacke-dev libpcre2-dev zlib1g-dev libopenmpi-dev libmicrohttpd-dev)
# libmicrohttpd12: tmm serve's HTTP server at run time (libmicrohttpd-dev builds against it)
# libopenblas0: the BLAS behind LAPACKE (tmm index) and PyTorch's on the CPU (tools/torch_compare.sh;
# the reference BLAS is 5-8x slower); once installed it is the system's libblas.so.3 for every program
run_pkgs=(libvulkan1 mesa-vulkan-drivers vulkan-tools libmicrohttpd12 libopenblas0)
# clang builds the fuzzers; CMake then picks LLVM's binutils and lld (llvm, lld) when they are there
# nodejs and npm run the tokenizer parity test (tests/tokenizer_parity_test.sh) and the openai client
# of tests/serve_test.sh; curl: that test's raw HTTP and server-sent events
# openmpi-bin: mpirun for the data-parallel test (tests/mpi_test.sh)
# patchelf and git: tools/bundle.sh (tests/bundle_test.sh)
test_pkgs=(libcriterion-dev vulkan-validationlayers python3-torch strace clang libclang-rt-dev llvm lld nodejs npm
           openmpi-bin patchelf git curl)

want=("${build_pkgs[@]}" "${run_pkgs[@]}")
list=0
for arg in "$@"; do
  case "$arg" in
    --test) want+=("${test_pkgs[@]}") ;;
    --list) list=1 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (use --test, --list or nothing)" >&2; exit 2 ;;
  esac
done
if [ "$list" -eq 1 ]; then
  printf '%s\n' "${want[@]}"
  exit 0
fi

. /etc/os-release 2>/dev/null || true
if ! command -v apt-get >/dev/null || [[ " ${ID:-} ${ID_LIKE:-} " != *" debian "* && " ${ID:-} ${ID_LIKE:-} " != *" ubuntu "* ]]; then
  echo "setup.sh: this script knows Debian and Ubuntu only. Install these packages (or your" >&2
  echo "system's equivalents) by hand, then build with CMake:" >&2
  echo "  ${want[*]}" >&2
  exit 1
fi

missing=()
for p in "${want[@]}"; do
  # NodeSource's nodejs package carries its own npm, which Debian's npm package would conflict with
  if [ "$p" = npm ] && command -v npm >/dev/null; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup.sh: all ${#want[@]} packages are installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: run as root or install sudo" >&2; exit 1; }
  sudo=(sudo)
fi
echo "setup.sh: installing ${#missing[@]} packages with apt-get (a few minutes on a fresh machine): ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
