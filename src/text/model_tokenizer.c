/* The kinds of tokenizer a model has, by name: bytes, the copy task's
 * symbols, or its run's tokenizer.json; and prompts through a tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

#include "status.h"

static const char symbols[] = "0123456789abcdefghijklmnopqrstuvwxyz";
#define N_SYMBOLS 36u

tmm_status tmm_model_tokenizer_pick(const char *name, uint32_t vocab, tmm_model_tokenizer *out)
{
    if (!name)
        name = vocab == TMM_TEXT_VOCAB ? "bytes" : "copy-symbols";
    if (strcmp(name, "bytes") == 0) {
        if (vocab < TMM_TEXT_VOCAB)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a byte-level tokenizer needs a vocabulary of %u, the model "
                            "has %u", TMM_TEXT_VOCAB, vocab);
        *out = TMM_TOKENIZER_BYTES;
    } else if (strcmp(name, "copy-symbols") == 0) {
        *out = TMM_TOKENIZER_COPY;
    } else if (strcmp(name, TMM_RUN_TOKENIZER) == 0) {
        *out = TMM_TOKENIZER_RUN;
    } else {
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "unknown tokenizer '%s' (this tmm knows bytes, copy-symbols, "
                        "%s)", name, TMM_RUN_TOKENIZER);
    }
    return TMM_OK;
}

const char *tmm_model_tokenizer_name(tmm_model_tokenizer t)
{
    return t == TMM_TOKENIZER_BYTES ? "bytes" : t == TMM_TOKENIZER_COPY ? "copy-symbols" : TMM_RUN_TOKENIZER;
}

tmm_status tmm_tokenizer_encode_prompt(const tmm_tokenizer *tok, const char *text, size_t length, uint32_t **tokens,
                                 uint32_t *count)
{
    *tokens = NULL;
    *count = 0;
    tmm_tokens t = { 0 };
    tmm_status s = tmm_tokenizer_encode(tok, NULL, text, length, true, &t);
    if (s == TMM_OK && t.count > UINT32_MAX)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a prompt of %zu tokens is too long", t.count);
    if (s == TMM_OK && !t.ids && !(t.ids = malloc(sizeof *t.ids)))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s != TMM_OK) {
        free(t.ids);
        return s;
    }
    *tokens = t.ids;
    *count = (uint32_t)t.count;
    return TMM_OK;
}

size_t tmm_tokenizer_decode_token(const tmm_tokenizer *tok, uint32_t token, char *buf, size_t size)
{
    const char *bytes = NULL;
    size_t len = token == tmm_tokenizer_eot(tok) ? 0 : tmm_tokenizer_token_bytes(tok, token, &bytes);
    if (size > 0) {
        size_t k = len < size - 1 ? len : size - 1;
        if (k)
            memcpy(buf, bytes, k);
        buf[k] = '\0';
    }
    return len;
}

static int symbol_value(char ch)
{
    const char *p = ch ? strchr(symbols, ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch) : NULL;
    return p ? (int)(p - symbols) : -1;
}

static bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == ','; }

static tmm_status copy_tokens(uint32_t vocab, const char *text, size_t length, uint32_t *tokens, uint32_t *count)
{
    uint32_t k = 0;
    for (size_t i = 0; i < length;) {
        if (is_space(text[i])) {
            i++;
            continue;
        }
        uint64_t v;
        size_t start = i;
        if (vocab <= N_SYMBOLS) {
            int s = symbol_value(text[i++]);
            if (s < 0 || (uint32_t)s >= vocab)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "character '%c' at offset %zu is not a symbol of this "
                                "copy model (its %u symbols are %.*s)", text[start], start, vocab, (int)vocab,
                                symbols);
            v = (uint64_t)s;
        } else {
            v = 0;
            while (i < length && text[i] >= '0' && text[i] <= '9' && v < vocab)
                v = v * 10 + (uint64_t)(text[i++] - '0');
            if (i == start || (i < length && !is_space(text[i])) || v >= vocab)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "at offset %zu: expected a symbol number below %u "
                                "separated by spaces", start, vocab);
        }
        tokens[k++] = (uint32_t)v;
    }
    *count = k;
    return TMM_OK;
}

tmm_status tmm_model_tokenizer_encode(tmm_model_tokenizer t, uint32_t vocab, const char *text, size_t length, uint32_t **tokens,
                            uint32_t *count)
{
    *tokens = NULL;
    *count = 0;
    if (t == TMM_TOKENIZER_RUN) /* its tokenizer is the generator's (tmm_tokenizer_encode_prompt) */
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "this model's tokenizer is its run's tokenizer.json, which is not "
                        "loaded here");
    if (length > UINT32_MAX)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a prompt of %zu bytes is too long", length);
    uint32_t *out = malloc((length ? length : 1) * sizeof *out);
    if (!out)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_status s = TMM_OK;
    if (t == TMM_TOKENIZER_BYTES) {
        for (size_t i = 0; i < length; i++)
            out[i] = (unsigned char)text[i];
        *count = (uint32_t)length;
    } else {
        s = copy_tokens(vocab, text, length, out, count);
    }
    if (s != TMM_OK) {
        free(out);
        *count = 0;
        return s;
    }
    *tokens = out;
    return TMM_OK;
}

size_t tmm_model_tokenizer_decode(tmm_model_tokenizer t, uint32_t vocab, uint32_t token, char *buf, size_t size)
{
    char tmp[16];
    size_t len;
    if (t == TMM_TOKENIZER_RUN) {
        len = 0; /* without the run's tokenizer.json there is no text */
    } else if (t == TMM_TOKENIZER_BYTES) {
        if (token >= 256)
            len = 0;
        else
            tmp[0] = (char)token, len = 1;
    } else if (vocab <= N_SYMBOLS) {
        tmp[0] = token < vocab ? symbols[token] : '?';
        len = 1;
    } else {
        len = (size_t)snprintf(tmp, sizeof tmp, "%u ", token);
    }
    if (size > 0) {
        size_t k = len < size - 1 ? len : size - 1;
        memcpy(buf, tmp, k);
        buf[k] = '\0';
    }
    return len;
}
