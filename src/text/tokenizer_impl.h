/* The tokenizer's inside, shared by the files of src/text (not an interface
 * for other layers: they use tokenizer.h). The pipeline is Hugging Face's
 * (docs/tokenizer.md, "Encoding"): added tokens, normalizers, pre-tokenizer
 * steps, the BPE model, the post-processor's template; decoders back. */
#ifndef TMM_TEXT_TOKENIZER_IMPL_H
#define TMM_TEXT_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text/tokenizer.h"

/* Largest vocabulary (one past the largest id) a tokenizer.json may have: the
 * tables are sized by it, so a hostile id cannot make tmm allocate much. */
#define TMM_TOK_MAX_VOCAB (1u << 22)
#define TMM_TOK_MAX_STEPS 8u
#define TMM_TOK_MAX_NORMS 8u
#define TMM_TOK_MAX_DECODERS 8u
#define TMM_TOK_MAX_POST 4u
#define TMM_TOK_BYTES_VOCAB 257u /* the byte tokenizer: bytes 0..255, end-of-text 256 */
#define TMM_TOK_NONE UINT32_MAX

/* The GPT-2 pre-tokenization pattern (the ByteLevel pre-tokenizer's own). */
#define TMM_TOK_GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* TOK_IN_VOCAB: listed in model.vocab (every non-added token, and added ones the file lists there too);
 * TOK_LSTRIP, TOK_RSTRIP, TOK_SINGLE_WORD: an added token's options */
enum {
    TOK_PRESENT = 1, TOK_ADDED = 2, TOK_SPECIAL = 4, TOK_NORMALIZED = 8, TOK_IN_VOCAB = 16,
    TOK_LSTRIP = 32, TOK_RSTRIP = 64, TOK_SINGLE_WORD = 128
};

/* A pattern of Split, Replace (normalizer and decoder): {"Regex": ...} or {"String": ...}. */
typedef struct tok_pattern {
    char *text;
    bool literal;
    pcre2_code *re; /* a Regex, compiled (literal strings are searched for directly) */
} tok_pattern;

/* Metaspace's prepend_scheme */
enum { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER };

/* Normalizers (a Sequence is its list) */
enum { TOK_NORM_PREPEND, TOK_NORM_REPLACE, TOK_NORM_NFC };
typedef struct tok_norm {
    int kind;
    tok_pattern pat; /* Replace */
    char *content;   /* Replace: what each match becomes; Prepend: the prefix */
} tok_norm;

/* Pre-tokenizer steps: zero or more regex Splits (Isolated), then ByteLevel
 * or Metaspace (or neither). */
enum { TOK_STEP_SPLIT, TOK_STEP_BYTE_LEVEL, TOK_STEP_METASPACE };
typedef struct tok_step {
    int kind;
    tok_pattern pat;       /* Split; ByteLevel with use_regex: GPT-2's pattern (pat.text NULL) */
    bool add_prefix_space; /* ByteLevel */
    bool use_regex;        /* ByteLevel: split with TMM_TOK_GPT2_PATTERN */
    bool trim_offsets;     /* ByteLevel: kept for saving (offsets only) */
    char replacement[5];   /* Metaspace: one character, UTF-8 */
    int prepend_scheme;    /* Metaspace */
    bool split;            /* Metaspace: split before each replacement character */
} tok_step;

/* Post-processors (a Sequence is its list): ByteLevel changes no id; the
 * template adds special tokens around the ids on request. */
enum { TOK_POST_BYTE_LEVEL, TOK_POST_TEMPLATE };
typedef struct tok_post {
    int kind;
    bool add_prefix_space, trim_offsets, use_regex; /* ByteLevel, kept for saving */
} tok_post;
typedef struct tok_template_piece {
    uint8_t sequence; /* 0: a special token, 1: sequence A, 2: sequence B */
    uint32_t type_id;
    uint32_t special; /* index into the template's specials */
} tok_template_piece;
typedef struct tok_template_special {
    char *name;
    uint32_t n;
    uint32_t *ids;
    char **tokens;
} tok_template_special;
typedef struct tok_template {
    uint32_t n_single, n_pair, n_specials;
    tok_template_piece *single, *pair;
    tok_template_special *specials;
} tok_template;

/* Decoders (a Sequence is its list) */
enum { TOK_DEC_BYTE_LEVEL, TOK_DEC_REPLACE, TOK_DEC_BYTE_FALLBACK, TOK_DEC_FUSE, TOK_DEC_STRIP, TOK_DEC_METASPACE };
typedef struct tok_dec {
    int kind;
    tok_pattern pat;                                /* Replace */
    char *content;                                  /* Replace: what each match becomes */
    char strip[5];                                  /* Strip: the character, UTF-8 */
    uint32_t start, stop;                           /* Strip */
    char replacement[5];                            /* Metaspace */
    int prepend_scheme;                             /* Metaspace */
    bool split;                                     /* Metaspace, kept for saving */
    bool add_prefix_space, trim_offsets, use_regex; /* ByteLevel, kept for saving */
} tok_dec;

/* Added tokens to find in text: those matched before normalization
 * (normalized false) or in the normalized text (normalized true, by their
 * normalized content). Sorted by first byte, longest first. */
typedef struct tok_added_set {
    uint32_t n;
    uint32_t *id;
    uint64_t *off; /* of each one's text in text */
    uint32_t *len;
    char *text;
    uint32_t first[257]; /* entries [first[b], first[b+1]) start with byte b */
} tok_added_set;

struct tmm_tokenizer {
    bool bytes;      /* kind "bytes" */
    bool byte_level; /* the pre-tokenizer ends in ByteLevel: tokens are bytes (their vocabulary strings are
                        bytes_to_unicode), the model starts from bytes; else from characters */
    uint32_t vocab;
    uint64_t *offset; /* vocab + 1 offsets of each id's bytes in data */
    char *data;       /* byte-level: a token's bytes; else its vocabulary string; added tokens: their content */
    uint8_t *flags;   /* TOK_* per id */
    uint32_t byte_id[256];     /* byte-level: the token of each byte, or TMM_TOK_NONE */
    uint32_t fallback_id[256]; /* byte_fallback: the token "<0xHH>" of each byte, or TMM_TOK_NONE */
    bool all_bytes;            /* byte-level with every byte's token: no fallback needed */
    /* merges by rank: pair[r] = {left, right}, result[r] */
    uint32_t n_merges;
    uint32_t (*merge_pair)[2];
    uint32_t *merge_result;
    /* (left << 32 | right) -> rank, open addressing (capacity a power of 2) */
    uint64_t *rank_keys;
    uint32_t *rank_vals;
    uint64_t rank_mask;
    /* bytes -> id of the model's tokens (model.vocab) */
    uint32_t *word_slots;
    uint64_t word_mask;
    /* char-level without ignore_merges: a piece is cut between two characters of the vocabulary
     * that no merge joins (no merge of a token ending in the one with a token starting with the
     * other), where BPE could not merge across anyway: (last << 21 | first) of every merge */
    bool split_words;
    uint64_t *cross_keys;
    uint64_t cross_mask;
    /* the BPE model's options */
    bool ignore_merges, byte_fallback, fuse_unk;
    char *unk_token;
    uint32_t unk_id; /* TMM_TOK_NONE when unk_token is null or not in the vocabulary */
    /* normalizer, pre-tokenizer, post-processor, decoder */
    uint32_t n_norms;
    tok_norm norms[TMM_TOK_MAX_NORMS];
    uint32_t n_steps;
    tok_step steps[TMM_TOK_MAX_STEPS];
    uint32_t n_post;
    tok_post post[TMM_TOK_MAX_POST];
    tok_template template; /* used when post has a TOK_POST_TEMPLATE */
    bool has_template;
    uint32_t n_decoders; /* 0: decoder null (tokens joined by spaces) */
    tok_dec decoders[TMM_TOK_MAX_DECODERS];
    bool decoder_sequence; /* written as a Sequence */
    /* char-level tokenizers: each token's text when decoded alone, in the middle of a text */
    uint64_t *piece_offset;
    char *piece_data;
    /* added tokens in file order, and the two sets matched in text */
    uint32_t n_added;
    uint32_t *added;
    tok_added_set raw_set, norm_set;
    pcre2_code *word_re; /* single_word: a word character (Rust's \w) */
    uint32_t eot;
    uint64_t fingerprint;
};

/* bytes_to_unicode (GPT-2): the code point that stands for each byte, and
 * back (-1 for a code point below TMM_TOK_MAP_CHARS that stands for none). */
#define TMM_TOK_MAP_CHARS 324u
typedef struct tmm_tok_map {
    uint32_t byte_char[256];
    int16_t char_byte[TMM_TOK_MAP_CHARS];
} tmm_tok_map;
void tmm_tok_byte_map(tmm_tok_map *m);
/* UTF-8 of a code point into out (1 to 4 bytes); returns the length. */
size_t tmm_tok_utf8_put(uint32_t cp, char *out);
/* The code point at p (n bytes left) and its length; an invalid or
 * truncated sequence is one byte, *cp = UINT32_MAX. */
size_t tmm_tok_utf8_get(const char *p, size_t n, uint32_t *cp);
/* Unicode's White_Space (Rust's char::is_whitespace, Oniguruma's \s). */
bool tmm_tok_is_space(uint32_t cp);

/* An empty tokenizer with room for vocab ids (all absent). */
tmm_status tmm_tok_alloc(uint32_t vocab, tmm_tokenizer **out);
/* The steps, post-processor and decoder of a byte-level BPE with ByteLevel
 * everywhere (tmm's trained tokenizers; with pattern, a Split of it first
 * and ByteLevel without its regex, as tiktoken's). */
tmm_status tmm_tok_set_byte_level(tmm_tokenizer *t, const char *pattern);
/* Builds the lookup tables, the added-token sets, eot and the fingerprint
 * once ids, merges and steps are set; compiles the patterns. */
tmm_status tmm_tok_finish(tmm_tokenizer *t);
/* Compiles a pattern in UTF mode with Hugging Face's (Oniguruma's) \s. */
tmm_status tmm_tok_compile(const char *pattern, bool literal, pcre2_code **out);
void tmm_tok_pattern_free(tok_pattern *p);

uint64_t tmm_tok_hash(const void *data, size_t n);
uint32_t tmm_tok_rank(const tmm_tokenizer *tok, uint32_t left, uint32_t right);
uint32_t tmm_tok_word_id(const tmm_tokenizer *tok, const char *bytes, size_t n);
static inline size_t tmm_tok_len(const tmm_tokenizer *t, uint32_t id)
{
    return (size_t)(t->offset[id + 1] - t->offset[id]);
}

/* Scratch space of the merge loop (in the cache, or per call). */
typedef struct tok_scratch {
    uint32_t *id, *prev, *next;
    struct tok_heap_entry *heap;
    size_t capacity;
    tmm_bytes norm[2]; /* normalized text */
    tmm_bytes meta;    /* Metaspace's text */
} tok_scratch;
void tmm_tok_scratch_free(tok_scratch *s);
/* The cross_keys table (split_words). */
tmm_status tmm_tok_build_cross(tmm_tokenizer *t);
/* Can a merge join a symbol ending in character a to one starting with b? */
bool tmm_tok_crosses(const tmm_tokenizer *t, uint32_t a, uint32_t b);
/* BPE of one pre-tokenized word, appended to out (Hugging Face's BPE model:
 * unknown bytes or characters through byte_fallback or unk_token). */
tmm_status tmm_tok_bpe_word(const tmm_tokenizer *tok, tok_scratch *s, const char *word, size_t n, tmm_tokens *out);

/* ---- added tokens (added_tokens.c) ---- */

/* Builds both sets from the added tokens' flags and contents (the
 * normalized ones through the normalizer). */
tmm_status tmm_tok_added_build(tmm_tokenizer *t);
void tmm_tok_added_free(tok_added_set *set);
/* The next added token of set in s[0..n) at or after *pos (Hugging Face's
 * AddedVocabulary::find_matches, leftmost-longest): its split [*start, *stop)
 * with lstrip and rstrip applied (never before done), its id; *pos moves past
 * it. Special tokens are skipped unless special. False when there is none. */
bool tmm_tok_added_next(const tmm_tokenizer *t, const tok_added_set *set, const char *s, size_t n, bool special,
                        size_t done, size_t *pos, size_t *start, size_t *stop, uint32_t *id);

/* ---- normalizers (normalizer.c, nfc.c) ---- */

/* text through the normalizers into s's buffers; *out points at the result
 * (text itself when there are none). */
tmm_status tmm_tok_normalize(const tmm_tokenizer *t, tok_scratch *s, const char *text, size_t n, const char **out,
                             size_t *out_n);
/* Every match of pat in p[0..n) replaced by content (Replace, normalizer
 * and decoder), appended to out. */
tmm_status tmm_tok_replace(const tok_pattern *pat, const char *content, const char *p, size_t n, tmm_bytes *out);
/* NFC of text (invalid UTF-8 passes through), appended to out. */
tmm_status tmm_tok_nfc(const char *text, size_t n, tmm_bytes *out);

/* ---- decoding (decoder.c) ---- */

/* The char-level tokenizers' pieces (piece_offset, piece_data). */
tmm_status tmm_tok_decoder_pieces(tmm_tokenizer *t);

/* ---- tiktoken (tiktoken.c) ---- */

/* A .tiktoken file's text (base64 token, rank per line) as the named
 * encoding (r50k_base, p50k_base, cl100k_base, o200k_base; NULL: by the
 * number of ranks); exact: the number of ranks must be the encoding's. */
tmm_status tmm_tok_tiktoken_parse(const char *text, size_t n, const char *origin, const char *encoding, bool exact,
                                  tmm_tokenizer **out);
/* The encoding a file name names ("cl100k_base.tiktoken"), or NULL. */
const char *tmm_tok_tiktoken_name(const char *path);

/* Word cache (word_cache.c). */
struct tmm_tok_cache {
    const tmm_tokenizer *owner;
    uint64_t owner_fingerprint;
    bool disabled;
    tok_scratch scratch;
    pcre2_match_data *match;
    struct cache_slot *slots;
    size_t n_slots, used;
    char *arena;
    size_t arena_used, arena_cap;
};
/* The ids of word from the cache (*ids, *count) or false. */
bool tmm_tok_cache_get(tmm_tok_cache *c, const tmm_tokenizer *tok, const char *word, size_t n, const uint32_t **ids,
                       uint32_t *count);
void tmm_tok_cache_put(tmm_tok_cache *c, const char *word, size_t n, const uint32_t *ids, uint32_t count);

#endif
