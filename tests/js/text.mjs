// Varied, deterministic text for tmm's tokenizer parity tests (tests/js/parity.mjs, tests/js/libs.mjs).
// A small LCG, so the text is the same on every machine and run.
//
// Code points stable since Unicode 13 or earlier (PCRE2 10.42 knows Unicode 14; Node's ICU is newer),
// without U+0085 and U+FEFF: the JS libraries' regexes use JavaScript's \s, which differs from
// Oniguruma's, tiktoken's and tmm's White_Space there (docs/tokenizer.md), and without U+017F (long s),
// which tiktoken's and Llama 3's case-insensitive (?i:'s) matches and the JS libraries' ['sS] do not.
let state = 12345n;
export function seed(s) {
  state = BigInt(s);
}
function rand(n) {
  state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
  return Number(state >> 33n) % n;
}
const pick = (a) => a[rand(a.length)];
const range = (lo, hi) => String.fromCodePoint(lo + rand(hi - lo + 1));

const words = [
  "the", "The", "and", "tokenizer", "Toeplitz", "mixer", "GPU", "naïve", "café", "Straße", "Ωmega",
  "привет", "мир", "Ελληνικά", "שָׁלוֹם", "مرحبا", "हिन्दी", "தமிழ்", "ไทย", "한국어", "日本語", "中文字符",
  "ｆｕｌｌｗｉｄｔｈ", "e\u0301", "a\u0308\u0323", "Z\u0351\u0352\u0353", "ǅ", "ﬁ", "İstanbul", "HTTPServer",
  "camelCase", "snake_case", "x86_64", "ÀÉÎÕÜ", "각", "\u1100\u1161\u11a8", "Å", "Å", "Ω", "ﬀ",
];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'LL", "’s", "'x", "'Ve"];
const spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2003", "\t \t", "      ",
  "\n    ", "\r", "\u2028", "\n\n\n\n", "        "];
const emoji = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇫🇷", "🤖", "✨", "🧪", "1️⃣", "🦙"];
const punct = [".", ",", "!", "?", "...", "—", "–", "(", ")", "[", "]", "{", "}", "\"", "“", "”", "«", "»", "#", "@",
  "$", "%", "^", "&", "*", "+", "=", "/", "\\", "|", "~", "`", "<", ">", "<|endoftext", "<|", "|>", "</", "<s", "<0x41>"];
const code = [
  "for (int i = 0; i < n; i++) {\n    x[i] += y[i];\n}\n",
  "def f(x):\n    return x ** 2  # square\n",
  "if (a != b && c <= d) return -1;\n",
  "    const s = `${a}-${b}`;\n",
  "#include <stdio.h>\n",
  "SELECT id, name FROM users WHERE id = 42;\n",
  "\t\t}\n\t}\n}\n",
  "x=1;y=22;z=333;w=4444;v=55555\n",
  "<div class=\"a\">&amp;</div>\n",
  "https://example.com/a/b?c=1&d=2#e\n",
];

function piece(specials) {
  switch (rand(15)) {
    case 0: case 1: case 2: return pick(words);
    case 3: return pick(words) + pick(contractions);
    case 4: return String(rand(10 ** (1 + rand(8))));
    case 5: return pick(emoji);
    case 6: return pick(punct);
    case 7: return range(0x4e00, 0x9fa5) + range(0x4e00, 0x9fa5) + range(0x3041, 0x3096);
    case 8: return range(0x00c0, 0x024f) + range(0x0300, 0x036f) + range(0x0061, 0x007a); // Latin + combining
    case 9: return range(0x0021, 0x007e) + range(0x00a1, 0x00ff);
    case 10: return range(0x0660, 0x0669) + range(0x0966, 0x096f) + "²³½"; // other digits and numbers
    case 11: return pick(code);
    case 12: return specials.length && rand(4) == 0 ? pick(specials) : pick(words);
    case 13: return range(0xac00, 0xd7a3) + range(0x0e01, 0x0e2e); // Hangul syllables, Thai
    default: return range(0x0400, 0x04ff) + range(0x0531, 0x0556) + range(0x10a0, 0x10c5);
  }
}

// About kb KiB of text; specials: strings inserted now and then (special tokens).
export function makeText(kb, specials = [], s = 12345) {
  seed(s);
  const parts = [];
  let n = 0;
  while (n < kb * 1024) {
    const p = piece(specials) + (rand(3) ? " " : pick(spaces));
    parts.push(p);
    n += Buffer.byteLength(p);
  }
  return parts.join("");
}

// Text with invalid UTF-8 in it (for tmm's round trip only).
export function makeInvalid(count = 4000) {
  seed(777);
  const chunks = [];
  const bad = [[0xff], [0xc3], [0xe6, 0x97], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80, 0x80],
    [0xc0, 0xaf], [0xf0, 0x9f, 0x98]];
  for (let i = 0; i < count; i++) {
    chunks.push(Buffer.from(piece([]) + pick(spaces)));
    chunks.push(Buffer.from(pick(bad)));
  }
  return Buffer.concat(chunks);
}
