#!/usr/bin/env bash
# tmm's token ids against Hugging Face's own tokenizers library in pure JavaScript
# (@huggingface/tokenizers from npm, pinned by tests/js/package-lock.json) on about
# 2 MiB of varied, deterministic text (tests/js/parity.mjs: several scripts, combining
# marks, emoji, CJK, digits, contractions, whitespace runs, <|endoftext|>), for
#   a tokenizer trained by `tmm tokenizer train`, and
#   the same in the Llama 3 style (a regex Split, then ByteLevel without its regex,
#   ignore_merges), written by the JS script;
# and decode(encode(x)) == x on text with invalid UTF-8 (where tmm and Hugging Face
# cannot agree: docs/tokenizer.md). The library is installed with `npm ci` into
# NODE_DIR (the build directory's tokenizer-js/), once: reruns are offline.
#   tests/tokenizer_parity_test.sh TMM NODE_DIR
set -uo pipefail
tmm="$(realpath "${1:?usage: tokenizer_parity_test.sh TMM NODE_DIR}")"
node_dir="${2:?usage: tokenizer_parity_test.sh TMM NODE_DIR}"
src="$(cd "$(dirname "$0")" && pwd)"
. "$src/lib.sh"

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "tokenizer_parity_test.sh: needs $tool (tools/setup.sh --test installs it)"; exit 1; }
done
mkdir -p "$node_dir"
if ! cmp -s "$src/js/package-lock.json" "$node_dir/package-lock.json" || [ ! -d "$node_dir/node_modules/@huggingface/tokenizers" ]; then
  cp "$src/js/package.json" "$src/js/package-lock.json" "$node_dir/"
  (cd "$node_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
    { echo "tokenizer_parity_test.sh: npm ci failed in $node_dir (the npm registry is needed once)"; exit 1; }
fi
cp "$src/js/parity.mjs" "$node_dir/"
js() { node "$node_dir/parity.mjs" "$@"; }

js text "$dir/text.txt" 2
js invalid "$dir/invalid.bin"

same_ids() { # TOKENIZER: tmm's ids equal the library's on text.txt
  "$tmm" tokenizer encode --tokenizer "$1" --special --file "$dir/text.txt" > "$dir/tmm.ids" || return 1
  js encode "$1" "$dir/text.txt" > "$dir/js.ids" || return 1
  if ! cmp -s "$dir/tmm.ids" "$dir/js.ids"; then
    python3 - "$dir/tmm.ids" "$dir/js.ids" <<'PY' 2>/dev/null || echo "ids differ"
import sys
a, b = open(sys.argv[1]).read().split(), open(sys.argv[2]).read().split()
i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
print(f"ids differ at {i} of {len(a)} (tmm) / {len(b)} (js): tmm {a[i-3:i+5]} js {b[i-3:i+5]}")
PY
    return 1
  fi
  echo "$(wc -w < "$dir/tmm.ids") ids equal"
}

round_trip() { # TOKENIZER FILE: decode(encode(FILE)) == FILE, with the word cache and without
  for cache in "" --no-cache; do
    "$tmm" tokenizer encode --tokenizer "$1" $cache --file "$2" > "$dir/rt.ids" || return 1
    "$tmm" tokenizer decode --tokenizer "$1" < "$dir/rt.ids" > "$dir/rt.out" || return 1
    cmp "$2" "$dir/rt.out" || return 1
  done
}

check "train a tokenizer" "$tmm" tokenizer train --quiet --vocab 3000 --data "$dir/text.txt" --out "$dir/trained.json"
check "trained: ids equal Hugging Face's" same_ids "$dir/trained.json"
check "write the Llama 3 style tokenizer" js llama3 "$dir/trained.json" "$dir/llama3.json"
check "Llama 3 style: ids equal Hugging Face's" same_ids "$dir/llama3.json"
check "trained: round trip of invalid UTF-8" round_trip "$dir/trained.json" "$dir/invalid.bin"
check "Llama 3 style: round trip of invalid UTF-8" round_trip "$dir/llama3.json" "$dir/invalid.bin"
check "trained: round trip of the text" round_trip "$dir/trained.json" "$dir/text.txt"
finish
