#!/usr/bin/env bash
# tools/bundle.sh on the tree ctest has built (no second build), then the bundle as a bare
# machine sees it:
#   - ldd resolves every library of every program and library in it inside the bundle,
#     except glibc's, and the archive unpacks to a folder elsewhere that still does;
#   - from that copy, under env -i with only the lavapipe ICD and the bundle's layer folder:
#     tmm devices, tmm check (plain and with the validation layer, which must be the
#     bundle's), and the op tests' `ops` suite and listing;
#   - where a private mount namespace is allowed (unshare), the same again with the
#     machine's own copies of what the bundle brings (the Vulkan loader, the validation
#     layer, cJSON, PCRE2, LAPACK, Criterion) hidden, and the system's layer manifests too.
#   tests/bundle_test.sh BUILD_DIR
set -u
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)"
. "$(dirname "$0")/lib.sh"

check "bundle.sh --no-build" "$src/tools/bundle.sh" --build-dir "$build" --no-build --out "$dir/made/tmm-bundle"
check "archive unpacks elsewhere" bash -c 'mkdir -p "$1/moved" && tar -C "$1/moved" -xzf "$1/made/tmm-bundle.tar.gz" &&
  rm -rf "$1/made"' _ "$dir"
b="$dir/moved/tmm-bundle"
check "bundle layout" bash -c 'for f in bin/tmm bin/tmm_op_tests lib/libtmm.so lib/libvulkan.so.1 BUNDLE.txt GPU.md \
  lib/libVkLayer_khronos_validation.so share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json \
  tools/gpu_check.sh tools/gpu_report.py tools/torch_bench.py tools/torch_ref.py include/tmm/tmm.h; do
    [ -e "$1/$f" ] || { echo "missing: $f"; exit 1; }; done' _ "$b"

# every ELF file: each needed library resolves into the bundle, or is glibc's
glibc='^(linux-vdso\.so\.1|ld-linux[-a-z0-9_]*\.so\.[0-9]|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libmvec\.so\.1)$'
ldd_check() {
  local n=0 f line name path
  while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    n=$((n + 1))
    while IFS= read -r line; do
      line="${line#"${line%%[![:space:]]*}"}"
      name="${line%% *}"
      case "$line" in
        *"=> not found"*) echo "$f: $name not found"; return 1 ;;
        *" => "*) path="${line#* => }"; path="${path%% (*}" ;;
        *) path="$name" ;;   # the vdso, or the dynamic loader named by its path
      esac
      name="$(basename "$name")"
      if [[ "$path" == "$b"/* ]]; then continue; fi
      [[ "$name" =~ $glibc ]] || { echo "$f: $name resolves outside the bundle: $path"; return 1; }
    done < <(env -i ldd "$f")
  done < <(find "$b/bin" "$b/lib" -type f -print0)
  echo "$n ELF files checked"
  [ "$n" -ge 10 ]
}
check "ldd: all inside the bundle but glibc" ldd_check

icd="${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-}}"
[ -n "$icd" ] || icd=$(ls /usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -1)
# the clean environment: nothing but the ICD, the bundle's layers, a home and a cache (and the
# sanitizer build's options)
clean=(env -i HOME="$dir/home" PATH=/usr/bin:/bin VK_DRIVER_FILES="$icd" TMM_CACHE_DIR="$dir/cache"
       VK_LAYER_PATH="$b/share/vulkan/explicit_layer.d")
for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS; do
  [ -z "${!v:-}" ] || clean+=("$v=${!v}")
done
mkdir -p "$dir/home"
runs() { # LABEL PREFIX...: the bundle's programs run under PREFIX
  local label="$1"; shift
  check "$label: tmm devices" bash -c '"$@" > "$0/devices.txt" 2>&1 && grep -q "tmm uses this one" "$0/devices.txt" ||
    { cat "$0/devices.txt"; exit 1; }' "$dir" "$@" "${clean[@]}" "$b/bin/tmm" devices
  check "$label: tmm check" "$@" "${clean[@]}" "$b/bin/tmm" check
  check "$label: tmm check, validated by the bundle's layer" bash -c '"$@" > "$0/ld.txt" 2>&1 &&
    grep -q "calling init: $0/moved/tmm-bundle/.*libVkLayer_khronos_validation.so" "$0/ld.txt" ||
    { grep -v "^ *[0-9]*:" "$0/ld.txt" | tail -5; echo "(validation layer loaded: $(grep -c VkLayer_khronos "$0/ld.txt"))"; exit 1; }' \
    "$dir" "$@" "${clean[@]}" LD_DEBUG=libs TMM_VALIDATE=1 "$b/bin/tmm" check
  check "$label: op tests, suite ops" "$@" "${clean[@]}" "$b/bin/tmm_op_tests" --filter 'ops/*' --jobs 2
  check "$label: op tests listed" bash -c '"$@" | grep -q "^toeplitz_fft: [0-9]* tests"' _ "$@" "${clean[@]}" \
    "$b/bin/tmm_op_tests" --list
}
runs "env -i"

# The same with the machine's copies hidden: bind /dev/null over each (PCRE2 last: mount needs it).
hide=()
for n in libvulkan.so.1 libcjson.so.1 liblapacke.so.3 liblapack.so.3 libblas.so.3 libcriterion.so.3 \
         libVkLayer_khronos_validation.so libpcre2-8.so.0; do
  for d in /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/lapack /usr/lib/x86_64-linux-gnu/blas /usr/lib64 /usr/lib; do
    [ ! -e "$d/$n" ] || hide+=("$(readlink -f "$d/$n")")
  done
done
ns=(unshare -m --propagation private)
[ "$(id -u)" -eq 0 ] || ns=(unshare -r -m --propagation private)
if "${ns[@]}" mount --bind "$dir/home" "$dir/home" 2>/dev/null; then
  cat > "$dir/hidden.sh" <<'EOF'
# hidden.sh COMMAND...: COMMAND with the listed files (HIDE, newline-separated) and the system's layer manifests hidden
mkdir -p "$HIDE_EMPTY"
for d in /usr/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d; do
  [ ! -d "$d" ] || mount --bind "$HIDE_EMPTY" "$d" || exit 9
done
while IFS= read -r f; do
  [ -z "$f" ] || mount --bind /dev/null "$f" || exit 9
done <<< "$HIDE"
exec "$@"
EOF
  runs "system copies hidden" env HIDE="$(printf '%s\n' "${hide[@]}" | sort -u | grep -v pcre2; printf '%s\n' "${hide[@]}" |
    grep pcre2)" HIDE_EMPTY="$dir/empty" "${ns[@]}" bash "$dir/hidden.sh"
else
  echo "note: no private mount namespace here (unshare): the run with the system's copies hidden is left out"
fi
finish
