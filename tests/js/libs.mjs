// tmm's tokenizers against the JavaScript libraries that carry the real vocabularies, for
// tests/tokenizer_parity_test.sh (and tests/tokenizer_speed.sh):
//   node libs.mjs prepare DIR KB   the tokenizer.json files rebuilt from the packages' data, texts of about
//                                  KB KiB each, and DIR/cases.txt: one comparison a line,
//                                  "NAME TOKENIZER TEXT FLAGS" (FLAGS: --special or -)
//   node libs.mjs encode DIR       every case's ids by its library into DIR/NAME.js.ids, the library's own
//                                  round trip into DIR/NAME.js.rt ("same" or "differs"), and Hugging Face's
//                                  decoding of the ids into DIR/NAME.js.dec where the case has one
//   node libs.mjs speed DIR        MB/s of each library's encoder on its case's text, one line per case
//
// The libraries (pinned by package-lock.json) and what tmm reads of them:
//   llama3-tokenizer-js    Llama 3: its vocabulary and merges, rebuilt as Llama 3's tokenizer.json
//   llama-tokenizer-js     Llama 2: the same, as Llama 2's tokenizer.json (Hugging Face's "legacy" Llama
//                          format: Prepend and Replace normalizers, byte_fallback, a Sequence decoder)
//   mistral-tokenizer-js   Mistral 7B: the same, as Mistral's tokenizer.json
//   gpt-tokenizer          its data/*.tiktoken files, OpenAI's own (their sha256 is tiktoken's)
//   js-tiktoken            a port of tiktoken, for its ids on the same encodings
//   @huggingface/tokenizers  Hugging Face's tokenizers in JavaScript, the reference for every tokenizer.json
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { Tokenizer } from "@huggingface/tokenizers";
import { makeText, makeInvalid } from "./text.mjs";

const require = createRequire(import.meta.url);
const [cmd, dir, arg] = process.argv.slice(2);
const path = (name) => `${dir}/${name}`;
const readIds = (name) => readFileSync(path(name), "utf8").split(/\s+/).filter(Boolean).map(Number);

// ---- the tokenizers -------------------------------------------------------------------------------

const LLAMA3_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function bpeModel(lib, extra) {
  const vocab = Object.create(null); // no "constructor" or "toString" of its own: those are tokens
  lib.vocabById.forEach((token, id) => { if (!(token in vocab)) vocab[token] = id; });
  // the libraries keep merges as "LEFT RIGHT" -> priority, in the order of the original merges
  const merges = [...lib.merges.entries()].sort((a, b) => a[1] - b[1]).map(([k]) => {
    const at = k.indexOf(" ");
    return [k.slice(0, at), k.slice(at + 1)];
  });
  return { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges, ...extra };
}

const added = (id, content, more = {}) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
  normalized: false, special: true, ...more });
const template = (bos, id) => ({
  type: "TemplateProcessing",
  single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
  pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
    { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
  special_tokens: { [bos]: { id: bos, ids: [id], tokens: [bos] } },
});

async function llama3Json() {
  const lib = (await import("llama3-tokenizer-js")).default;
  const model = bpeModel({ vocabById: lib.vocabById.slice(0, 128000), merges: lib.merges }, { ignore_merges: true });
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: lib.vocabById.slice(128000).map((c, i) => added(128000 + i, c)),
    normalizer: null,
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: LLAMA3_PATTERN }, behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: { type: "Sequence", processors: [
      { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
      template("<|begin_of_text|>", 128000)] },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model,
  };
}

// Llama 2 and Mistral as Hugging Face's tokenizer.json writes them (the "legacy" Llama format)
function sentencePieceJson(lib) {
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
    normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "▁" },
      { type: "Replace", pattern: { String: " " }, content: "▁" }] },
    pre_tokenizer: null,
    post_processor: template("<s>", 1),
    decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "▁" }, content: " " },
      { type: "ByteFallback" }, { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }] },
    model: bpeModel(lib, { unk_token: "<unk>", fuse_unk: true, byte_fallback: true }),
  };
}

const llama2Lib = async () => (await import("llama-tokenizer-js")).default;
const mistralLib = async () => (await import("mistral-tokenizer-js")).default;
const tiktokenData = (enc) => require.resolve(`gpt-tokenizer/data/${enc}.tiktoken`);

async function writeModels() {
  const l3 = await llama3Json();
  writeFileSync(path("llama3.json"), JSON.stringify(l3));
  // added tokens that take the whitespace beside them
  const strip = structuredClone(l3);
  for (const a of strip.added_tokens) {
    if (a.content === "<|eot_id|>") a.lstrip = true;
    if (a.content === "<|start_header_id|>" || a.content === "<|end_header_id|>") a.rstrip = true;
    if (a.content === "<|python_tag|>") a.lstrip = a.rstrip = true;
  }
  writeFileSync(path("llama3-strip.json"), JSON.stringify(strip));
  const l2 = sentencePieceJson(await llama2Lib());
  writeFileSync(path("llama2.json"), JSON.stringify(l2));
  // the same model behind the Metaspace pre-tokenizer (Hugging Face's non-legacy Llama format)
  const meta = structuredClone(l2);
  meta.normalizer = null;
  meta.pre_tokenizer = { type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: false };
  writeFileSync(path("llama2-metaspace.json"), JSON.stringify(meta));
  const nfc = structuredClone(l2);
  nfc.normalizer.normalizers.unshift({ type: "NFC" });
  writeFileSync(path("llama2-nfc.json"), JSON.stringify(nfc));
  writeFileSync(path("mistral.json"), JSON.stringify(sentencePieceJson(await mistralLib())));
}

// ---- the cases --------------------------------------------------------------------------------------

const llama3Specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
  "<|eot_id|>", "<|python_tag|>", "<|reserved_special_token_7|>", "<|reserved_special_token_247|>",
  "<|reserved_special_token_248|>", "<|endoftext|>", "<|eot_id", "\n\n<|eot_id|>  ", " <|start_header_id|> \n"];
const llama2Specials = ["<s>", "</s>", "<unk>", " <s> ", "\n</s>\n", "▁", "▁▁", " ▁x", "<s"];
const tiktokenSpecials = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>",
  "<|im_start|>", "<|endoftext", " <|endoftext|> "];

// name, tokenizer file, text file, flags, reference encoder, its decoder check
function cases() {
  const c = [];
  const add = (name, tok, text, flags, ref) => c.push({ name, tok, text, flags, ref });
  add("llama3", "llama3.json", "text-llama3.txt", "--special", "llama3-tokenizer-js");
  add("llama3-hf", "llama3.json", "text-llama3.txt", "--special", "hf");
  add("llama3-strip-hf", "llama3-strip.json", "text-llama3.txt", "--special", "hf");
  add("llama2", "llama2.json", "text-plain.txt", "-", "llama-tokenizer-js");
  add("llama2-bos", "llama2.json", "text-plain.txt", "--special", "llama-tokenizer-js bos");
  add("llama2-hf", "llama2.json", "text-llama2.txt", "--special", "hf");
  add("llama2-metaspace-hf", "llama2-metaspace.json", "text-llama2.txt", "--special", "hf");
  add("llama2-nfc-hf", "llama2-nfc.json", "text-plain.txt", "--special", "hf");
  add("mistral", "mistral.json", "text-plain.txt", "-", "mistral-tokenizer-js");
  add("mistral-hf", "mistral.json", "text-llama2.txt", "--special", "hf");
  add("p50k_base-js-tiktoken", tiktokenData("p50k_base"), "text-tiktoken.txt", "--special", "js-tiktoken p50k_base");
  for (const enc of ["r50k_base", "cl100k_base", "o200k_base"]) {
    add(`${enc}-js-tiktoken`, tiktokenData(enc), "text-tiktoken.txt", "--special", `js-tiktoken ${enc}`);
    add(`${enc}-gpt-tokenizer`, tiktokenData(enc), "text-gpt.txt", "-", `gpt-tokenizer ${enc}`);
  }
  add("cl100k_base-converted-hf", "cl100k_base.json", "text-gpt.txt", "--special", "hf");
  add("o200k_base-converted-hf", "o200k_base.json", "text-gpt.txt", "--special", "hf");
  return c;
}

function prepare() {
  const kb = Number(arg ?? 256);
  writeFileSync(path("text-plain.txt"), makeText(kb, [], 1));
  writeFileSync(path("text-llama3.txt"), makeText(kb, llama3Specials, 2));
  writeFileSync(path("text-llama2.txt"), makeText(kb, llama2Specials, 3));
  writeFileSync(path("text-tiktoken.txt"), makeText(kb, tiktokenSpecials, 4));
  // gpt-tokenizer 4.0.0 finds special tokens only at the start of the text or right after another one
  // (its sticky regex): this text has none, only near misses
  writeFileSync(path("text-gpt.txt"), makeText(kb, ["<|endoftext", "<|im_start", "endoftext|>"], 5));
  writeFileSync(path("invalid.bin"), makeInvalid(2000));
  writeFileSync(path("cases.txt"), cases().map((c) => [c.name, c.tok.startsWith("/") ? c.tok : path(c.tok),
    path(c.text), c.flags].join(" ")).join("\n") + "\n");
}

// ---- the reference encoders --------------------------------------------------------------------------

// encode(text) -> ids, decode(ids) -> text (round trip of the library's own ids, without its specials
// added), hfDecode(ids) -> Hugging Face's decoding (skip_special_tokens), or null
async function encoder(c) {
  const [lib, enc] = c.ref.split(" ");
  if (lib === "hf") {
    const tok = new Tokenizer(JSON.parse(readFileSync(path(c.tok), "utf8")), {});
    return {
      encode: (t) => tok.encode(t, { add_special_tokens: true }).ids,
      roundTrip: (t) => tok.decode(tok.encode(t, { add_special_tokens: false }).ids, { clean_up_tokenization_spaces: false }),
      decode: (ids) => tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }),
    };
  }
  if (lib === "llama3-tokenizer-js") {
    const l = (await import("llama3-tokenizer-js")).default;
    return { encode: (t) => l.encode(t, { bos: true, eos: false }), roundTrip: (t) => l.decode(l.encode(t, { bos: false, eos: false })) };
  }
  if (lib === "llama-tokenizer-js" || lib === "mistral-tokenizer-js") {
    const l = lib === "llama-tokenizer-js" ? await llama2Lib() : await mistralLib();
    return { encode: (t) => l.encode(t, enc === "bos", true), roundTrip: (t) => l.decode(l.encode(t, false, true), false, true) };
  }
  if (lib === "js-tiktoken") {
    const { getEncoding } = await import("js-tiktoken");
    const e = getEncoding(enc);
    return { encode: (t) => e.encode(t, "all"), roundTrip: (t) => e.decode(e.encode(t, "all")) };
  }
  if (lib === "gpt-tokenizer") {
    const e = await import(`gpt-tokenizer/encoding/${enc}`);
    return { encode: (t) => e.encode(t), roundTrip: (t) => e.decode(e.encode(t)) };
  }
  throw new Error(`unknown library ${lib}`);
}

async function encodeAll() {
  for (const c of cases()) {
    if (!existsSync(c.tok.startsWith("/") ? c.tok : path(c.tok))) continue;
    const text = readFileSync(path(c.text), "utf8");
    const e = await encoder(c);
    const ids = e.encode(text);
    writeFileSync(path(`${c.name}.js.ids`), ids.join(" ") + "\n");
    writeFileSync(path(`${c.name}.js.rt`), e.roundTrip(text) === text ? "same\n" : "differs\n");
    if (e.decode)
      writeFileSync(path(`${c.name}.js.dec`), e.decode(readIds(`${c.name}.js.ids`)));
  }
}

async function speed() {
  for (const c of cases()) {
    if (c.ref === "hf" && !c.name.endsWith("-hf")) continue;
    const text = readFileSync(path(c.text), "utf8");
    const e = await encoder(c);
    e.encode(text.slice(0, 20000)); // warm up
    const t0 = performance.now();
    const n = e.encode(text).length;
    const s = (performance.now() - t0) / 1e3;
    console.log(`${c.name} ${c.ref.split(" ")[0]} ${(Buffer.byteLength(text) / 1e6 / s).toFixed(2)} MB/s ${n} tokens`);
  }
}

if (cmd === "prepare") {
  await writeModels();
  prepare();
} else if (cmd === "encode") {
  await encodeAll();
} else if (cmd === "speed") {
  await speed();
} else {
  console.error("usage: node libs.mjs prepare DIR KB | encode DIR | speed DIR");
  process.exit(2);
}
