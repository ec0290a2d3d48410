#!/usr/bin/env bash
# The layers are the build's (CMakeLists.txt, "libraries"; DEVELOPERS.md,
# "Layout"): compiled as a layer is, with only its include folders
# (build/layers/LAYER/), a file may include its own layer and those below it,
# and an upward include does not compile.
#   layers_test.sh CC SOURCE_DIR BUILD_DIR
set -u
cc=$1 src=$2 build=$3
. "$(dirname "$0")/lib.sh"

# compiles LAYER HEADER: a file of the layer that includes HEADER, syntax only
compiles() {
  printf '#include "%s"\nint tmm_layer_probe;\n' "$2" > "$dir/probe.c"
  "$cc" -std=c17 -fsyntax-only -I "$src/include" -I "$src/runtime" -I "$build/generated" -I "$build/layers/$1" \
    "$dir/probe.c"
}
allowed() { check "$1 may include $2" compiles "$1" "$2"; }
refused() { # LAYER HEADER: the include fails, for the header is out of the layer's reach
  if compiles "$1" "$2" > "$dir/out" 2>&1; then
    failed=$((failed + 1)); echo "FAIL: $1 may include $2 (upward)"
  elif grep -q "$2: No such file or directory" "$dir/out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAIL: $1 including $2: another error"; sed 's/^/    /' "$dir/out" | head -5
  fi
}

allowed ops ops/ops.h
refused ops model/model.h
refused ops io/safetensors.h
allowed text io/json.h
refused text mixer/mixer.h
allowed mixer model/params.h
allowed mixer ops/toeplitz.h
refused mixer model/model.h
refused mixer model/arch.h
allowed model mixer/mixer.h
refused model train/trainer.h
allowed train model/model.h
refused train gen/generator.h
refused train experiment/experiment.h
allowed gen model/checkpoint.h
refused gen train/trainer.h
allowed text text/tokenizer.h
refused ref cli/cli.h
refused eval experiment/experiment.h
allowed bench gen/generator.h
allowed bench mixer/toeplitz_select.h
refused bench experiment/experiment.h
refused bench cli/bench.h
refused gen bench/bench.h
allowed serve gen/generator.h
allowed serve io/json.h
refused serve train/trainer.h
refused serve bench/bench.h
refused gen serve/serve.h
refused bench serve/serve_sched.h
finish
