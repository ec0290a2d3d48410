// tmm's tokenizer against Hugging Face's pure-JS tokenizers (@huggingface/tokenizers),
// for tests/tokenizer_parity_test.sh:
//   node parity.mjs text OUT MB        varied valid UTF-8 text (text.mjs), about MB MiB
//   node parity.mjs invalid OUT        text with invalid UTF-8 in it (for tmm's round trip only)
//   node parity.mjs llama3 IN OUT      IN's tokenizer.json rewritten in the Llama 3 style: a Split of
//                                      Llama 3's pattern, then ByteLevel without its regex, ignore_merges
//   node parity.mjs encode TOK TEXT    the library's ids of TEXT (decoded as UTF-8), one line
import { readFileSync, writeFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";
import { makeText, makeInvalid } from "./text.mjs";

const [cmd, a, b] = process.argv.slice(2);
if (cmd === "text") {
  writeFileSync(a, makeText(1024 * Number(process.argv[4] ?? 1), ["<|endoftext|>"]));
} else if (cmd === "invalid") {
  writeFileSync(a, makeInvalid());
} else if (cmd === "llama3") {
  const tok = JSON.parse(readFileSync(a, "utf8"));
  tok.pre_tokenizer = {
    type: "Sequence",
    pretokenizers: [
      { type: "Split", pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
        behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
    ],
  };
  tok.model.ignore_merges = true;
  writeFileSync(b, JSON.stringify(tok));
} else if (cmd === "encode") {
  const tok = new Tokenizer(JSON.parse(readFileSync(a, "utf8")), {});
  const ids = tok.encode(readFileSync(b, "utf8"), { add_special_tokens: true }).ids;
  process.stdout.write(ids.join(" ") + "\n");
} else {
  console.error("usage: node parity.mjs text|invalid|llama3|encode ...");
  process.exit(2);
}
