// tmm's tokenizer against Hugging Face's pure-JS tokenizers (@huggingface/tokenizers),
// for tests/tokenizer_parity_test.sh:
//   node parity.mjs text OUT MB        varied valid UTF-8 text, deterministic (OUT), about MB MiB
//   node parity.mjs invalid OUT        text with invalid UTF-8 in it (for tmm's round trip only)
//   node parity.mjs llama3 IN OUT      IN's tokenizer.json rewritten in the Llama 3 style: a Split of
//                                      Llama 3's pattern, then ByteLevel without its regex, ignore_merges
//   node parity.mjs encode TOK TEXT    the library's ids of TEXT (decoded as UTF-8), one line
import { readFileSync, writeFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

// A small LCG, so the text is the same on every machine and run.
let state = 12345n;
function rand(n) {
  state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
  return Number(state >> 33n) % n;
}
const pick = (a) => a[rand(a.length)];
const range = (lo, hi) => String.fromCodePoint(lo + rand(hi - lo + 1));

// Code points stable since Unicode 13 or earlier (PCRE2 10.42 knows Unicode 14; Node's ICU is newer),
// without U+0085 and U+FEFF: the JS library's ByteLevel regex uses JavaScript's \s, which differs
// from Oniguruma's (and tmm's) White_Space there (docs/tokenizer.md).
const words = [
  "the", "The", "and", "tokenizer", "Toeplitz", "mixer", "GPU", "naïve", "café", "Straße", "Ωmega",
  "привет", "мир", "Ελληνικά", "שָׁלוֹם", "مرحبا", "हिन्दी", "தமிழ்", "ไทย", "한국어", "日本語", "中文字符",
  "ｆｕｌｌｗｉｄｔｈ", "e\u0301", "a\u0308\u0323", "Z\u0351\u0352\u0353", "ǅ", "ﬁ", "İstanbul",
];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'LL", "’s", "'x"];
const spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2003", "\t \t", "      "];
const emoji = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇫🇷", "🤖", "✨", "🧪", "1️⃣"];
const punct = [".", ",", "!", "?", "...", "—", "–", "(", ")", "[", "]", "{", "}", "\"", "“", "”", "«", "»", "#", "@",
  "$", "%", "^", "&", "*", "+", "=", "/", "\\", "|", "~", "`", "<", ">", "<|endoftext|>", "<|endoftext", "<|"];

function piece() {
  switch (rand(12)) {
    case 0: case 1: case 2: return pick(words);
    case 3: return pick(words) + pick(contractions);
    case 4: return String(rand(10 ** (1 + rand(8))));
    case 5: return pick(emoji);
    case 6: return pick(punct);
    case 7: return range(0x4e00, 0x9fa5) + range(0x4e00, 0x9fa5) + range(0x3041, 0x3096);
    case 8: return range(0x00c0, 0x024f) + range(0x0300, 0x036f) + range(0x0061, 0x007a); // Latin + combining
    case 9: return range(0x0021, 0x007e) + range(0x00a1, 0x00ff);
    case 10: return range(0x0660, 0x0669) + range(0x0966, 0x096f) + "²³½"; // other digits and numbers
    default: return range(0x0400, 0x04ff) + range(0x0531, 0x0556) + range(0x10a0, 0x10c5);
  }
}

function text(mb) {
  const parts = [];
  let n = 0;
  while (n < mb * (1 << 20)) {
    const p = piece() + (rand(3) ? " " : pick(spaces));
    parts.push(p);
    n += Buffer.byteLength(p);
  }
  return parts.join("");
}

const [cmd, a, b] = process.argv.slice(2);
if (cmd === "text") {
  writeFileSync(a, text(Number(process.argv[4] ?? 1)));
} else if (cmd === "invalid") {
  const chunks = [];
  for (let i = 0; i < 4000; i++) {
    chunks.push(Buffer.from(piece() + pick(spaces)));
    const bad = [[0xff], [0xc3], [0xe6, 0x97], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80, 0x80],
      [0xc0, 0xaf], [0xf0, 0x9f, 0x98]];
    chunks.push(Buffer.from(pick(bad)));
  }
  writeFileSync(a, Buffer.concat(chunks));
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
