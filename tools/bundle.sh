#!/usr/bin/env bash
# Packs tmm into a relocatable folder (and a .tar.gz) that runs on another
# x86-64 Linux machine that has a Vulkan driver and nothing else of ours: no
# Vulkan SDK, glslang, VkFFT, cJSON, LAPACKE, Criterion or package registry
# (docs/gpu.md: the bare GPU machine). The folder holds
#   bin/tmm             the command (Release, stripped)
#   bin/tmm_op_tests    the device-op tests in one Criterion executable (tests/CMakeLists.txt:
#                       TMM_OP_TESTS; --list names its suites)
#   lib/                libtmm.so and every shared library the binaries need that is not part of
#                       glibc, the Vulkan loader libvulkan.so.1 among them, and the Khronos
#                       validation layer (the op tests run with it on); everything in bin/ finds
#                       them through RUNPATH $ORIGIN/../lib, each library through $ORIGIN
#   lib/glvnd/          libGLdispatch.so.0, which NVIDIA's Vulkan driver needs: tools/gpu_check.sh
#                       puts it on LD_LIBRARY_PATH only where the machine has none
#   share/vulkan/explicit_layer.d/   the validation layer's manifest (VK_LAYER_PATH)
#   include/, lib/pkgconfig, lib/cmake   what `cmake --install` gives C users
#   tools/              gpu_check.sh, gpu_report.py, torch_bench.py, torch_ref.py
#   GPU.md, BUNDLE.txt  how to run it (docs/gpu.md), and what is inside, with versions
# The GPU's own driver and its ICD manifest come from the target machine.
#
#   tools/bundle.sh [options]
# options:
#   --build-dir DIR   bundle from this configured build (its tests on), building the three targets
#                     there first; default: a fresh Release build in build-bundle/ (MPI off)
#   --no-build        with --build-dir: take the targets as they are (they must be built)
#   --out DIR         the folder to write (default: BUILD/tmm-bundle); DIR.tar.gz beside it
#   --no-tar          write the folder only
#   --jobs N          build jobs (default 2)
#   -h, --help        this help
# Prints the folder, the archive and their sizes. tests/bundle_test.sh checks the result.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build= out= tar=1 jobs=2 do_build=1

die() { echo "bundle.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="${2:?--build-dir needs a directory}"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --no-tar) tar=0; shift ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift 2
            [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a whole number of at least 1, not '$jobs'" ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for tool in cmake ldd patchelf strip objdump; do
  command -v "$tool" >/dev/null || die "needs $tool (tools/setup.sh --test installs it)"
done
[ "$(uname -m)" = x86_64 ] || echo "bundle.sh: note: this bundle is for $(uname -m) machines only" >&2

targets=(tmm_cli tmm_shared tmm_op_tests)
if [ -z "$build" ]; then
  [ "$do_build" -eq 1 ] || die "--no-build needs --build-dir"
  build="$src/build-bundle"
  # Release; no MPI (the bundle runs one process: Open MPI's plugins and mpirun would have to
  # come too); the tests on for tmm_op_tests; lib/ whatever the prefix, for the RUNPATHs below.
  mkdir -p "$build"
  echo "bundle.sh: configuring a Release build in $build"
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTMM_MPI=OFF -DTMM_BUILD_TESTS=ON \
    -DTMM_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_LIBDIR=lib > "$build/bundle-configure.log" 2>&1 ||
    { tail -20 "$build/bundle-configure.log" >&2; die "configuring $build failed (log: $build/bundle-configure.log)"; }
fi
abs="$(cd "$build" 2>/dev/null && pwd)" || die "no build directory '$build'"
build="$abs"
cache="$build/CMakeCache.txt"
[ -f "$cache" ] || die "$build is not a configured CMake build (no CMakeCache.txt)"
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$cache")
[ "$libdir" = lib ] || die "$build installs libraries into '$libdir': configure it with -DCMAKE_INSTALL_LIBDIR=lib"
if [ "$do_build" -eq 1 ]; then
  echo "bundle.sh: building ${targets[*]} in $build (-j $jobs)"
  cmake --build "$build" -j "$jobs" --target "${targets[@]}" > "$build/bundle-build.log" 2>&1 ||
    { tail -30 "$build/bundle-build.log" >&2; die "building in $build failed (log: $build/bundle-build.log)"; }
fi
for f in "$build/tmm" "$build/tests/tmm_op_tests"; do
  [ -x "$f" ] || die "$f is not built (configure with -DTMM_BUILD_TESTS=ON, and build it or drop --no-build)"
done
# (no `cmd | grep -q` under pipefail: grep's early exit can fail the pipeline with SIGPIPE)
ldcache=$(ldconfig -p 2>/dev/null || true)
if [[ "$(ldd "$build/tmm" 2>/dev/null || true)" == *libmpi* ]]; then
  echo "bundle.sh: note: $build links MPI: its libraries come along, but not Open MPI's plugins or mpirun" >&2
fi

[ -n "$out" ] || out="$build/tmm-bundle"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
if [ -e "$out" ]; then
  # only ever replace a bundle (or an empty folder), never another folder by mistake
  [ -f "$out/BUNDLE.txt" ] || [ -f "$out/.libs" ] || [ -z "$(ls -A "$out" 2>/dev/null)" ] ||
    die "$out exists and is not a bundle (no BUNDLE.txt): remove it or choose another --out"
  rm -rf "$out"
fi
mkdir -p "$out"
: > "$out/.libs"   # NAME SOURCE of each library copied, for BUNDLE.txt

# 1. what C users get from `cmake --install` (bin/tmm, lib/libtmm.so*, headers, tmm.pc, tmmConfig.cmake)
cmake --install "$build" --prefix "$out" --strip > "$out/.install.log" 2>&1 ||
  { cat "$out/.install.log" >&2; die "cmake --install failed"; }
rm -f "$out/.install.log"
install -m 755 "$build/tests/tmm_op_tests" "$out/bin/tmm_op_tests"
strip "$out/bin/tmm_op_tests"

is_elf() { [ -f "$1" ] && [ ! -L "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

# glibc's own libraries stay the target's: they must match its dynamic loader.
is_glibc() {
  case "$1" in
    linux-vdso.so.*|linux-gate.so.*|ld-linux*.so.*|libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|librt.so.1| \
    libresolv.so.2|libutil.so.1|libanl.so.1|libmvec.so.1|libBrokenLocale.so.1|libnsl.so.1|libnss_*.so.2| \
    libthread_db.so.1|libc_malloc_debug.so.0|libmemusage.so|libpcprofile.so) return 0 ;;
  esac
  return 1
}

# copy_deps FILE: every library FILE needs (ldd: the whole closure) that is not glibc's, into lib/.
copy_deps() {
  local name arrow path rest
  while read -r name arrow path rest; do
    [ "$arrow" = "=>" ] || continue
    is_glibc "$name" && continue
    [ "$path" != not ] || die "$(basename "$1") needs $name, which this machine does not have"
    [ -e "$out/lib/$name" ] && continue
    cp -L "$path" "$out/lib/$name"
    chmod 755 "$out/lib/$name"
    echo "$name $(readlink -f "$path")" >> "$out/.libs"
  done < <(env -u LD_LIBRARY_PATH ldd "$1")
}

# 2. the Khronos validation layer: its library and a manifest that points at it relative to itself
layer_json=
for d in ${VK_LAYER_PATH:+${VK_LAYER_PATH//:/ }} /usr/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d \
         /usr/local/share/vulkan/explicit_layer.d; do
  if [ -f "$d/VkLayer_khronos_validation.json" ]; then layer_json="$d/VkLayer_khronos_validation.json"; break; fi
done
layer=none
if [ -n "$layer_json" ]; then
  lib_path=$(sed -n 's/.*"library_path"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$layer_json" | head -1)
  case "$lib_path" in
    /*) lib_file="$lib_path" ;;
    */*) lib_file="$(dirname "$layer_json")/$lib_path" ;;
    *) lib_file=$(awk -v n="$lib_path" '$1 == n && /x86-64/ && !f { print $NF; f = 1 }' <<< "$ldcache")
       [ -n "$lib_file" ] || lib_file=$(ls /usr/lib/x86_64-linux-gnu/"$lib_path" /usr/lib/"$lib_path" 2>/dev/null | head -1) ;;
  esac
  [ -n "$lib_file" ] && [ -f "$lib_file" ] || die "the validation layer's manifest $layer_json names '$lib_path', which is not there"
  cp -L "$lib_file" "$out/lib/libVkLayer_khronos_validation.so"
  chmod 755 "$out/lib/libVkLayer_khronos_validation.so"
  echo "libVkLayer_khronos_validation.so $(readlink -f "$lib_file")" >> "$out/.libs"
  mkdir -p "$out/share/vulkan/explicit_layer.d"
  sed 's#\("library_path"[[:space:]]*:[[:space:]]*"\)[^"]*"#\1../../../lib/libVkLayer_khronos_validation.so"#' \
    "$layer_json" > "$out/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"
  layer=$(sed -n 's/.*"api_version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$layer_json" | head -1)
else
  echo "bundle.sh: warning: no Khronos validation layer here (Debian: vulkan-validationlayers): the op tests" \
       "need it, so bin/tmm_op_tests will only run where the target has one" >&2
fi

# 3. every library that bin/ and lib/ need, but glibc's
for f in "$out"/bin/* "$out"/lib/*.so*; do
  is_elf "$f" && copy_deps "$f"
done
[ -e "$out/lib/libvulkan.so.1" ] || die "tmm does not link libvulkan.so.1 dynamically: no loader to bundle"
# libglvnd's dispatch library, for NVIDIA's driver on machines without libglvnd (not on the RUNPATH)
gld=$(awk '$1 == "libGLdispatch.so.0" && /x86-64/ && !f { print $NF; f = 1 }' <<< "$ldcache")
if [ -n "$gld" ]; then
  mkdir -p "$out/lib/glvnd"
  cp -L "$gld" "$out/lib/glvnd/libGLdispatch.so.0"
  chmod 755 "$out/lib/glvnd/libGLdispatch.so.0"
  copy_deps "$out/lib/glvnd/libGLdispatch.so.0"
  echo "glvnd/libGLdispatch.so.0 $(readlink -f "$gld")" >> "$out/.libs"
fi

# 4. RUNPATHs: bin/ finds lib/, each library finds its neighbours
for f in "$out"/bin/*; do
  is_elf "$f" && patchelf --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$out"/lib/*.so* "$out"/lib/glvnd/*.so*; do
  is_elf "$f" && patchelf --set-rpath '$ORIGIN' "$f"
done

# 5. the GPU check and its PyTorch side, and the guide
mkdir -p "$out/tools"
install -m 755 "$src/tools/gpu_check.sh" "$src/tools/gpu_report.py" "$src/tools/torch_bench.py" "$out/tools/"
install -m 644 "$src/tools/torch_ref.py" "$out/tools/"
install -m 644 "$src/docs/gpu.md" "$out/GPU.md"

# 6. BUNDLE.txt: what is inside
glibc=$(for f in "$out"/bin/* "$out"/lib/*.so* "$out"/lib/glvnd/*.so*; do
          is_elf "$f" && objdump -T "$f" 2>/dev/null
        done | grep -o 'GLIBC_2\.[0-9.]*' | sort -uV | tail -1 || true)
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null | head -1 || true)
btype=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")
listing=$(env -i "$out/bin/tmm_op_tests" --list 2>/dev/null || true)
suites=$(awk '/^[A-Za-z0-9_]+: [0-9]+ tests?$/ { n++ } END { print n + 0 }' <<< "$listing")
ntests=$(awk '/^[A-Za-z0-9_]+: [0-9]+ tests?$/ { n += $2 } END { print n + 0 }' <<< "$listing")
{
  echo "tmm bundle"
  echo "  $("$out/bin/tmm" --version 2>/dev/null | head -1), commit $commit${dirty:+ (with uncommitted changes)}, $btype build"
  echo "  built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $( . /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-$(uname -s)}") $(uname -m)"
  echo "  needs: $(uname -m) Linux with glibc ${glibc#GLIBC_} or newer, and a Vulkan 1.1 driver with its ICD manifest"
  echo
  echo "bin/tmm                the command"
  echo "bin/tmm_op_tests       the device-op tests: $ntests tests in $suites suites (--list; --filter 'SUITE/*')"
  echo "tools/gpu_check.sh     the GPU check: tools/gpu_check.sh OUT_DIR (GPU.md)"
  echo "validation layer       ${layer/none/not included (none on the build machine)}"
  echo
  echo "lib/ (from the build machine):"
  # the Debian package of each, from one dpkg -S (merged /usr: a package may list the file under /lib)
  sort -u "$out/.libs" > "$out/.libs.sorted"
  owners=$( { cut -d' ' -f2 "$out/.libs.sorted" | sed 's#^/usr/lib/#/lib/#' | xargs dpkg -S 2>/dev/null
              cut -d' ' -f2 "$out/.libs.sorted" | xargs dpkg -S 2>/dev/null; } || true)
  while read -r name from; do
    pkg=$(awk -v a="$from" -v b="${from/#\/usr\/lib\//\/lib\/}" -F': ' '($2 == a || $2 == b) && !f { print $1; f = 1 }' \
          <<< "$owners")
    printf '  %-36s %s%s\n' "$name" "$from" "${pkg:+ ($pkg)}"
  done < "$out/.libs.sorted"
} > "$out/BUNDLE.txt"
rm -f "$out/.libs" "$out/.libs.sorted"

echo "bundle.sh: $out: $(du -sh "$out" | cut -f1)"
if [ "$tar" -eq 1 ]; then
  tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
  echo "bundle.sh: $out.tar.gz: $(du -h "$out.tar.gz" | cut -f1) ($(stat -c %s "$out.tar.gz") bytes)"
fi
