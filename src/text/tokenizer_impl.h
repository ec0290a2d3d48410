/* The tokenizer's inside, shared by the files of src/text (not an interface
 * for other layers: they use tokenizer.h). */
#ifndef TMM_TEXT_TOKENIZER_IMPL_H
#define TMM_TEXT_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text/tokenizer.h"

/* Largest vocabulary (one past the largest id) a tokenizer.json may have: the
 * tables are sized by it, so a hostile id cannot make tmm allocate much. */
#define TMM_TOK_MAX_VOCAB (1u << 22)
#define TMM_TOK_MAX_STEPS 8u
#define TMM_TOK_BYTES_VOCAB 257u /* the byte tokenizer: bytes 0..255, end-of-text 256 */
#define TMM_TOK_NONE UINT32_MAX

/* The GPT-2 pre-tokenization pattern (the ByteLevel pre-tokenizer's own). */
#define TMM_TOK_GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* TOK_IN_VOCAB: listed in model.vocab (every non-added token, and added ones the file lists there too) */
enum { TOK_PRESENT = 1, TOK_ADDED = 2, TOK_SPECIAL = 4, TOK_NORMALIZED = 8, TOK_IN_VOCAB = 16 };

/* One pre-tokenizer step: a regex Split (Isolated) or the final ByteLevel. */
typedef struct tok_step {
    bool byte_level;
    char *pattern;         /* Split: the pattern as written in the file */
    bool literal;          /* Split: pattern.String rather than pattern.Regex */
    bool add_prefix_space; /* ByteLevel */
    bool use_regex;        /* ByteLevel: split with TMM_TOK_GPT2_PATTERN */
    bool trim_offsets;     /* ByteLevel: kept for saving (offsets only) */
    pcre2_code *re;        /* the compiled Split pattern, or GPT-2's for ByteLevel with use_regex */
} tok_step;

struct tmm_tokenizer {
    bool bytes; /* kind "bytes" */
    uint32_t vocab;
    uint64_t *offset; /* vocab + 1 offsets of each id's bytes in data */
    char *data;
    uint8_t *flags; /* TOK_* per id */
    uint32_t byte_id[256];
    /* merges by rank: pair[r] = {left, right}, result[r] */
    uint32_t n_merges;
    uint32_t (*merge_pair)[2];
    uint32_t *merge_result;
    /* (left << 32 | right) -> rank, open addressing (capacity a power of 2) */
    uint64_t *rank_keys;
    uint32_t *rank_vals;
    uint64_t rank_mask;
    /* bytes -> id of the non-added tokens (ignore_merges) */
    uint32_t *word_slots;
    uint64_t word_mask;
    bool ignore_merges;
    /* model fields kept for saving */
    char *unk_token;
    bool fuse_unk;
    uint32_t n_steps;
    tok_step steps[TMM_TOK_MAX_STEPS];
    bool post_byte_level; /* post_processor ByteLevel (else null) */
    bool post_add_prefix_space, post_trim_offsets, post_use_regex;
    bool dec_add_prefix_space, dec_trim_offsets, dec_use_regex;
    /* added tokens in file order, and by first byte, longest first */
    uint32_t n_added;
    uint32_t *added;
    uint32_t *added_sorted;
    uint32_t added_first[257]; /* added_sorted[added_first[b] .. added_first[b+1]) start with byte b */
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
/* UTF-8 of a code point below U+0800 into out (1 or 2 bytes); returns the length. */
size_t tmm_tok_utf8_put(uint32_t cp, char *out);

/* An empty tokenizer with room for vocab ids (all absent). */
tmm_status tmm_tok_alloc(uint32_t vocab, tmm_tokenizer **out);
/* Builds the lookup tables, the sorted added tokens, eot and the fingerprint
 * once ids, merges and steps are set; compiles the patterns. */
tmm_status tmm_tok_finish(tmm_tokenizer *tok);
/* Compiles a pattern in UTF mode with Hugging Face's (Oniguruma's) \s. */
tmm_status tmm_tok_compile(const char *pattern, bool literal, pcre2_code **out);

uint64_t tmm_tok_hash(const void *data, size_t n);
uint32_t tmm_tok_rank(const tmm_tokenizer *tok, uint32_t left, uint32_t right);
uint32_t tmm_tok_word_id(const tmm_tokenizer *tok, const char *bytes, size_t n);

/* Scratch space of the merge loop (in the cache, or per call). */
typedef struct tok_scratch {
    uint32_t *id, *prev, *next;
    struct tok_heap_entry *heap;
    size_t capacity;
} tok_scratch;
void tmm_tok_scratch_free(tok_scratch *s);
/* BPE of one pre-tokenized word (raw bytes), appended to out. */
tmm_status tmm_tok_bpe_word(const tmm_tokenizer *tok, tok_scratch *s, const char *word, size_t n, tmm_tokens *out);

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
