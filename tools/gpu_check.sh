#!/usr/bin/env bash
# The GPU check: one script that shows what tmm does on a machine's Vulkan GPU,
# and writes it to OUT_DIR as results.json and results.md (a Markdown table),
# with every step's output in logs.tar.gz. In about 6 minutes at most on an
# H200-class GPU (docs/gpu.md) it runs, each step under its own timeout, a
# failure recorded rather than fatal:
#   - tmm devices: the device tmm picks must be the discrete GPU where there is one;
#   - the device-op tests (bin/tmm_op_tests), suite by suite (the cooperative-matrix
#     suite a second time through VK_KHR_cooperative_matrix where NV was taken), with the Khronos
#     validation layer on (the bundle carries it; without it they cannot run);
#   - tmm check, plain and validated;
#   - tmm bench matmul at 4096^3; tmm bench mixer for auto, fft and attention up to
#     n = 65536 at d 512; tmm bench train for each architecture at the paper's shape
#     (d 512, n 1024, 16 layers, 4 heads, batch 8, vocab 8000) and the paper-512 preset;
#     tmm bench generate at positions 1, 1000 and 8000;
#   - tools/torch_bench.py on the same training shapes when python3 imports torch
#     (CUDA when there is a GPU, else the CPU), so the table puts tmm and PyTorch side by side.
# A step is started only while the time budget lasts; the rest are recorded as skipped.
#
#   tools/gpu_check.sh [options] OUT_DIR
# options:
#   --quick          tiny shapes, 2 steps, two op-test suites: the whole script on lavapipe in about
#                    a minute (tests/gpu_check_test.sh runs it so)
#   --tmm-dir DIR    a bundle (tools/bundle.sh) or a build directory (tests on); default: the bundle
#                    this script lies in, else build/
#   --budget S       start no step after S seconds (default 330; --quick 240)
#   --python PY      the Python that imports torch (default: the first of python3, /usr/bin/python3
#                    that does)
#   --no-torch       leave tools/torch_bench.py out
#   --keep-logs      keep OUT_DIR/logs/ beside logs.tar.gz (by default only the three files stay, so
#                    that a device run's few returned files are these)
#   -h, --help       this help
# Environment: the ICD is the machine's (VK_DRIVER_FILES or VK_ICD_FILENAMES when set; else the
# loader's own search, with NVIDIA's manifest under /usr/local/nvidia added when it finds none);
# TMM_CACHE_DIR (default: a fresh temporary folder).
# Exit status: 0 when every step passed, 1 when one failed or timed out (the results are written
# either way), 2 for bad usage.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
quick=0 tmm_dir= budget= py= torch=1 out= keep_logs=0

die() { echo "gpu_check.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --tmm-dir) tmm_dir="${2:?--tmm-dir needs a directory}"; shift 2 ;;
    --budget) budget="${2:?--budget needs seconds}"; shift 2
              [[ "$budget" =~ ^[1-9][0-9]*$ ]] || die "--budget must be a whole number of seconds, not '$budget'" ;;
    --python) py="${2:?--python needs a program}"; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --keep-logs) keep_logs=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [ -z "$out" ] || die "one OUT_DIR only ('$out', then '$1')"; out="$1"; shift ;;
  esac
done
[ -n "$out" ] || die "usage: tools/gpu_check.sh [--quick] [--tmm-dir DIR] OUT_DIR (see --help)"
[ -n "$budget" ] || budget=$([ "$quick" -eq 1 ] && echo 240 || echo 330)
start=$EPOCHREALTIME   # the budget counts from here

# ---- where tmm is: a bundle (bin/tmm) or a build tree (tmm, tests/) ----------
if [ -z "$tmm_dir" ]; then
  if [ -x "$here/../bin/tmm" ]; then tmm_dir="$here/.."; else tmm_dir="$here/../build"; fi
fi
abs="$(cd "$tmm_dir" 2>/dev/null && pwd)" || die "no directory '$tmm_dir' (--tmm-dir)"
tmm_dir="$abs"
if [ -x "$tmm_dir/bin/tmm" ]; then
  layout=bundle tmm="$tmm_dir/bin/tmm" op_tests="$tmm_dir/bin/tmm_op_tests"
elif [ -x "$tmm_dir/tmm" ]; then
  layout=build tmm="$tmm_dir/tmm" op_tests="$tmm_dir/tests/tmm_op_tests"
else
  die "no tmm in $tmm_dir: give a bundle (tools/bundle.sh) or a build directory with --tmm-dir"
fi

mkdir -p "$out"
out="$(cd "$out" && pwd)"
logs="$out/logs"
rm -rf "$logs" "$out/results.json" "$out/results.md" "$out/logs.tar.gz"
mkdir -p "$logs"
steps="$logs/steps.tsv"
: > "$steps"

# ---- the environment: validation layer, ICD, glvnd, cache ----------------------
notes=()
if [ -f "$tmm_dir/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" ]; then
  export VK_LAYER_PATH="$tmm_dir/share/vulkan/explicit_layer.d${VK_LAYER_PATH:+:$VK_LAYER_PATH}"
fi
if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ]; then
  # The loader searches these folders; NVIDIA's manifest may live under /usr/local/nvidia instead
  # (this workplace's device machines): then it is added to the search (VK_ADD_DRIVER_FILES).
  nv=
  for d in /etc/vulkan/icd.d /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d /usr/local/etc/vulkan/icd.d; do
    compgen -G "$d/nvidia*.json" >/dev/null && nv="$d"
  done
  if [ -z "$nv" ] && [ -z "${VK_ADD_DRIVER_FILES:-}" ]; then
    for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/etc/vulkan/icd.d/nvidia_icd.json; do
      if [ -f "$f" ]; then
        export VK_ADD_DRIVER_FILES="$f"
        notes+=("NVIDIA's ICD manifest is not in the loader's folders: VK_ADD_DRIVER_FILES=$f")
        break
      fi
    done
  fi
fi
# NVIDIA's driver (libGLX_nvidia.so.0) needs libglvnd's dispatch library: the bundle's copy where
# the machine has none; and the driver's own folder where the linker cache does not know it.
ld_add=
ldcache=$(ldconfig -p 2>/dev/null || true)   # (not `ldconfig -p | grep -q`: SIGPIPE under pipefail)
if [[ "$ldcache" != *"libGLdispatch.so.0 "* ]]; then
  if [ -f "$tmm_dir/lib/glvnd/libGLdispatch.so.0" ]; then
    ld_add="$tmm_dir/lib/glvnd"
    notes+=("no libGLdispatch.so.0 on this machine: the bundle's (lib/glvnd) is on LD_LIBRARY_PATH")
  fi
fi
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  if [ -f "$d/libGLX_nvidia.so.0" ] && [[ "$ldcache" != *"libGLX_nvidia.so.0 "* ]]; then
    ld_add="${ld_add:+$ld_add:}$d"
    notes+=("libGLX_nvidia.so.0 is not in the linker cache: $d is on LD_LIBRARY_PATH")
    break
  fi
done
[ -z "$ld_add" ] || export LD_LIBRARY_PATH="$ld_add${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp_cache=
if [ -z "${TMM_CACHE_DIR:-}" ]; then
  tmp_cache=$(mktemp -d "${TMPDIR:-/tmp}/tmm-gpu-check.XXXXXX")
  export TMM_CACHE_DIR="$tmp_cache"
fi
trap '[ -z "$tmp_cache" ] || rm -rf "$tmp_cache"' EXIT
unset TMM_DEVICE TMM_VALIDATE
py_tried=()
if [ "$torch" -eq 1 ]; then
  candidates=("${py:-python3}")
  [ -n "$py" ] || candidates+=(/usr/bin/python3)
  py=
  for p in "${candidates[@]}"; do
    py_tried+=("$p")
    if timeout 120 "$p" -c 'import torch' > /dev/null 2>&1; then py="$p"; break; fi
  done
fi

# ---- shapes -------------------------------------------------------------------
if [ "$quick" -eq 1 ]; then
  D=32 N=64 L=2 H=4 B=2 V=64 STEPS=2 WINDOW=16
  MM=128 MIX_D=32 MIX_MAX=512 MIX_CAP=5
  GEN=(--d-model 32 --n-ctx 64 --layers 2 --heads 4 --vocab 64 --prompts 16 --positions 1,10,40 --repeat 2)
  PRESET_OVERRIDE=(--d-model 32 --n-ctx 64 --layers 1 --batch 2)
  SUITES_WANTED="ops pack16"
  CAP_OPS=$budget CAP_MIXER=$budget CAP_TRAIN=$budget CAP_TORCH=$budget
else
  D=512 N=1024 L=16 H=4 B=8 V=8000 STEPS=10 WINDOW=128
  MM=4096 MIX_D=512 MIX_MAX=65536 MIX_CAP=8
  GEN=(--d-model 512 --n-ctx 8192 --layers 16 --heads 4 --vocab 8000 --prompts 1000,8000 --positions 1,1000,8000
       --repeat 3)
  PRESET_OVERRIDE=()
  SUITES_WANTED=all
  # the most each group may take, so that one slow group leaves time for the others
  CAP_OPS=100 CAP_MIXER=75 CAP_TRAIN=100 CAP_TORCH=80
fi
JOBS=$(nproc 2>/dev/null || echo 2)
[ "$JOBS" -le 8 ] || JOBS=8

# ---- the step runner ------------------------------------------------------------
elapsed() { awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a }'; }
failed=0
group_end=   # the end (seconds since the start) of the current group of steps, if it has its own cap
# cap SECONDS: the steps that follow, together, get at most SECONDS (full mode: so that a slow group
# leaves time for the rest)
cap() { group_end=$(($(elapsed) + $1)); }
# step NAME GROUP TIMEOUT COMMAND...: runs COMMAND (stdout to logs/NAME.out, stderr to logs/NAME.err)
# under TIMEOUT seconds, cut to what the budget (and the group's cap) has left; one line in
# logs/steps.tsv.
step() {
  local name="$1" group="$2" limit="$3"; shift 3
  local now left status rc t0 secs
  now=$(elapsed)
  left=$((budget - now))
  [ -z "$group_end" ] || [ $((group_end - now)) -ge "$left" ] || left=$((group_end - now))
  if [ "$left" -lt 5 ]; then
    printf '%s\t%s\tskipped\t\t0\t0\t%s\n' "$name" "$group" "$*" >> "$steps"
    echo "gpu_check.sh: [$(elapsed)s] $name: skipped (its time is spent)"
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  t0=$EPOCHREALTIME
  if timeout -k 5 "$limit" "$@" > "$logs/$name.out" 2> "$logs/$name.err" < /dev/null; then rc=0; else rc=$?; fi
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
  case "$rc" in
    0) status=ok ;;
    124|137) status=timeout ;;
    *) status=fail ;;
  esac
  [ "$status" = ok ] || failed=1
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$group" "$status" "$rc" "$secs" "$limit" "$*" >> "$steps"
  echo "gpu_check.sh: [$(elapsed)s] $name: $status (${secs} s)"
}

echo "gpu_check.sh: $layout $tmm_dir, results in $out ($([ "$quick" -eq 1 ] && echo quick || echo full), budget ${budget} s)"

# ---- the machine ----------------------------------------------------------------
{
  echo "uname: $(uname -srm)"
  echo "os: $( . /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}")"
  echo "cpus: $(nproc 2>/dev/null || echo '?')"
  echo "mode: $([ "$quick" -eq 1 ] && echo quick || echo full)"
  echo "budget_s: $budget"
  echo "layout: $layout"
  echo "tmm_dir: $tmm_dir"
  echo "tmm_version: $("$tmm" --version 2>&1 | head -1)"
  echo "VK_DRIVER_FILES: ${VK_DRIVER_FILES:-}"
  echo "VK_ICD_FILENAMES: ${VK_ICD_FILENAMES:-}"
  echo "VK_ADD_DRIVER_FILES: ${VK_ADD_DRIVER_FILES:-}"
  echo "VK_LAYER_PATH: ${VK_LAYER_PATH:-}"
  echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
  has_layer=no
  for d in ${VK_LAYER_PATH:+${VK_LAYER_PATH//:/ }} /usr/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d \
           /usr/local/share/vulkan/explicit_layer.d; do
    [ ! -f "$d/VkLayer_khronos_validation.json" ] || has_layer="yes ($d)"
  done
  echo "validation_layer: $has_layer"
  for n in "${notes[@]}"; do echo "note: $n"; done
  if command -v nvidia-smi >/dev/null; then
    echo "nvidia_smi: $(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4 | tr '\n' ';')"
  fi
  [ ! -f "$tmm_dir/BUNDLE.txt" ] || echo "bundle: $(sed -n 2p "$tmm_dir/BUNDLE.txt" | sed 's/^ *//')"
} > "$logs/machine.txt"

# ---- devices and check ------------------------------------------------------------
step devices devices 30 "$tmm" devices
if [ -s "$logs/devices.err" ] || ! grep -q 'tmm uses this one' "$logs/devices.out" ||
   { command -v nvidia-smi >/dev/null && ! grep -q 'discrete GPU' "$logs/devices.out"; }; then
  # no device, or none of the GPU that nvidia-smi sees: what the loader tried, for the report
  VK_LOADER_DEBUG=error,warn,info timeout 30 "$tmm" devices > "$logs/loader_debug.out" 2>&1 || true
fi
step check check 60 "$tmm" check
step check_validated check 60 env TMM_VALIDATE=1 "$tmm" check

# ---- the device-op tests, suite by suite --------------------------------------------
cap "$CAP_OPS"
if [ -x "$op_tests" ]; then
  step op_list op_tests 60 "$op_tests" --list
  suites=$(sed -n 's/^\([A-Za-z0-9_]*\): [0-9]* tests\{0,1\}$/\1/p' "$logs/op_list.out" 2>/dev/null || true)
  for s in $suites; do
    if [ "$SUITES_WANTED" != all ] && [[ " $SUITES_WANTED " != *" $s "* ]]; then continue; fi
    step "op_$s" op_tests 150 "$op_tests" --filter "$s/*" --jobs "$JOBS" --timeout 120 --ascii \
      --json="$logs/op_$s.json"
  done
  # The KHR module (the NV kernel rewritten, runtime/spirv_coopmat.h) where the NV
  # extension is taken by default: the cooperative-matrix suite again through KHR,
  # without the validation layer (the bundle's, 1.3.239, predates the extension).
  if [ "$SUITES_WANTED" = all ] && [[ " $(echo $suites) " == *" matmul_coopmat "* ]] &&
     grep -q 'cooperative-matrix matmul yes: VK_NV' "$logs/devices.out" 2>/dev/null; then
    step devices_khr devices 30 env TMM_COOPMAT_EXTENSION=KHR "$tmm" devices
    step op_matmul_coopmat_khr op_tests 150 env TMM_COOPMAT_EXTENSION=KHR TMM_TEST_VALIDATE=0 "$op_tests" \
      --filter "matmul_coopmat/*" \
      --jobs "$JOBS" --timeout 120 --ascii --json="$logs/op_matmul_coopmat_khr.json"
  fi
else
  printf 'op_tests\top_tests\tfail\t\t0\t0\tno %s (bundle: tools/bundle.sh; build: make tmm_op_tests)\n' "$op_tests" >> "$steps"
  failed=1
fi

# ---- benchmarks ---------------------------------------------------------------------
cap 90
step bench_matmul matmul 90 "$tmm" bench matmul --m "$MM" --n "$MM" --k "$MM" --variant all --json
cap "$CAP_MIXER"
for impl in auto fft attention; do
  step "bench_mixer_$impl" mixer 120 "$tmm" bench mixer --max-n "$MIX_MAX" --d "$MIX_D" --heads 4 --impls "$impl" \
    --time-cap "$MIX_CAP" --svg "$logs/mixer_$impl.svg" --json
done
# every architecture on the paper's block (paper-512: MLP expansion 4) at n N, batch B
cap "$CAP_TRAIN"
for arch in tmm transformer swa linear hyena mamba2; do
  heads=$H win=()
  case "$arch" in
    hyena|mamba2) heads=0 ;;   # Hyena has no heads; Mamba 2's default heads are 64 inner channels each
    swa) win=(--window "$WINDOW") ;;
  esac
  step "bench_train_$arch" train 120 "$tmm" bench train --preset paper-512 --arch "$arch" --d-model "$D" \
    --n-ctx "$N" --layers "$L" --heads "$heads" "${win[@]}" --batch "$B" --vocab "$V" --steps "$STEPS" --json
done
step bench_train_paper512 train 150 "$tmm" bench train --preset paper-512 "${PRESET_OVERRIDE[@]}" --vocab "$V" \
  --steps "$STEPS" --json

# ---- PyTorch on the same shapes ---------------------------------------------------
cap "$CAP_TORCH"
if [ "$torch" -eq 1 ]; then
  if [ -n "$py" ]; then
    torch_args=(--device auto --steps "$STEPS" --vocab "$V" --window "$WINDOW")
    step torch_check torch 120 "$py" "$here/torch_bench.py" --check
    step torch_train torch 240 "$py" "$here/torch_bench.py" --preset paper-512 --archs tmm,transformer,swa,linear \
      --d-model "$D" --n-ctx "$N" --layers "$L" --heads "$H" --batch "$B" "${torch_args[@]}"
    step torch_train_paper512 torch 120 "$py" "$here/torch_bench.py" --preset paper-512 --archs tmm \
      "${PRESET_OVERRIDE[@]}" "${torch_args[@]}"
  else
    printf 'torch\ttorch\tabsent\t\t0\t0\tno Python here imports torch (tried: %s)\n' "${py_tried[*]}" >> "$steps"
    echo "gpu_check.sh: torch: not run (no Python here imports torch: ${py_tried[*]})"
  fi
fi

# ---- generation ---------------------------------------------------------------------
group_end=
for arch in tmm transformer; do
  step "bench_generate_$arch" generate 150 "$tmm" bench generate --arch "$arch" "${GEN[@]}" --json
done

# ---- the report -----------------------------------------------------------------------
echo "total_s: $(elapsed)" >> "$logs/machine.txt"
report_rc=0
if command -v python3 >/dev/null; then
  python3 "$here/gpu_report.py" "$out" || report_rc=$?
else
  echo "gpu_check.sh: no python3 here: the step logs are in $out/logs.tar.gz, without results.json/results.md" >&2
  report_rc=1
fi
tar -C "$out" -czf "$out/logs.tar.gz" logs
[ "$keep_logs" -eq 1 ] || rm -rf "$logs"
echo "gpu_check.sh: $out/results.json, $out/results.md, $out/logs.tar.gz ($(elapsed) s)"
[ "$failed" -eq 0 ] && [ "$report_rc" -eq 0 ]
