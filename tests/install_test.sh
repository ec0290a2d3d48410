#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then examples/generate.c built
# against that copy both ways a C user would (pkg-config, and find_package(tmm)
# in a CMake project), run on a checkpoint trained by the installed tmm, and
# compared with the in-tree build of the same example.
#   tests/install_test.sh BUILD_DIR SOURCE_DIR IN_TREE_EXAMPLE [EXTRA_CFLAGS]
# EXTRA_CFLAGS: what the consumer needs besides (the sanitizer flags in that build).
set -u
build="$1" src="$2" in_tree="$3" extra="${4:-}"
. "$(dirname "$0")/lib.sh"
prefix="$dir/prefix"

check "cmake --install" cmake --install "$build" --prefix "$prefix"
libdir=$(dirname "$(find "$prefix" -name 'libtmm.so' | head -1)")
check "installed files" bash -c 'for f in "$@"; do [ -e "$f" ] || { echo "missing: $f"; exit 1; }; done' _ \
  "$prefix/bin/tmm" "$libdir/libtmm.so" "$prefix/include/tmm/tmm.h" "$prefix/include/tmm/model.h" \
  "$prefix/include/tmm/generate.h" "$libdir/pkgconfig/tmm.pc" "$libdir/cmake/tmm/tmmConfig.cmake"

# libtmm.so exports exactly the functions the installed headers declare with TMM_API.
exported() { nm -D --defined-only "$libdir/libtmm.so" | awk '$2 == "T" { print $3 }' | sort; }
declared() { grep -ho 'TMM_API[^(]*(' "$prefix"/include/tmm/*.h | grep -o 'tmm_[a-z0-9_]*($' | tr -d '(' | sort; }
check "exports = TMM_API declarations" diff <(exported) <(declared)

# 1. pkg-config
check "pkg-config build" bash -c 'PKG_CONFIG_PATH="$1/pkgconfig" cc -std=c17 -Wall -Wextra -Werror $4 "$2/examples/generate.c" \
  $(PKG_CONFIG_PATH="$1/pkgconfig" pkg-config --cflags --libs tmm) -o "$3/generate-pc"' _ "$libdir" "$src" "$dir" "$extra"

# 2. find_package(tmm) giving tmm::tmm
mkdir -p "$dir/consumer"
cat > "$dir/consumer/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(tmm 0.1 REQUIRED)
add_executable(generate "$src/examples/generate.c")
target_link_libraries(generate PRIVATE tmm::tmm)
EOF
check "find_package build" bash -c 'cmake -S "$1/consumer" -B "$1/consumer/build" -DCMAKE_PREFIX_PATH="$2" \
  -DCMAKE_C_FLAGS="$3" && cmake --build "$1/consumer/build"' _ "$dir" "$prefix" "$extra"

# The installed command trains a checkpoint; all three builds of the example generate the same text from it.
check "installed tmm trains" "$prefix/bin/tmm" train --d-model 16 --n-ctx 16 --layers 1 --batch 4 --steps 3 \
  --eval-every 0 --quiet --run-dir "$dir/run"
run_example() { # binary, output file
  LD_LIBRARY_PATH="$libdir" "$1" "$dir/run" 0123456789 8 > "$2" 2>&1
}
check "example (pkg-config) runs" run_example "$dir/generate-pc" "$dir/pc.txt"
check "example (find_package) runs" run_example "$dir/consumer/build/generate" "$dir/cmake.txt"
check "example (in tree) runs" run_example "$in_tree" "$dir/tree.txt"
check "same output" bash -c 'cmp "$1/pc.txt" "$1/tree.txt" && cmp "$1/cmake.txt" "$1/tree.txt"' _ "$dir"

finish
