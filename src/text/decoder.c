/* Decoding: ids to bytes. A byte-level tokenizer's tokens are their bytes
 * (the ByteLevel decoder undone at load). A char-level one's pass through its
 * decoders as Hugging Face's decode_chain does, each on the list of token
 * strings: Replace (in each), ByteFallback (runs of "<0xHH>" tokens become
 * their bytes: tmm keeps them as they are where Hugging Face writes U+FFFD
 * for invalid UTF-8), Fuse (one string), Strip (up to start and stop copies
 * of a character at each end of each), Metaspace (the replacement character
 * back to a space, dropped in the first token unless prepend_scheme is
 * never); no decoder joins the tokens with spaces. */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "text/tokenizer_impl.h"

typedef struct strs {
    tmm_bytes buf;
    size_t *off, *len;
    size_t n, cap;
} strs;

static void strs_free(strs *l)
{
    free(l->buf.data), free(l->off), free(l->len);
    *l = (strs){ 0 };
}

static tmm_status strs_add(strs *l, const char *p, size_t n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        size_t *o = realloc(l->off, cap * sizeof *o);
        if (o)
            l->off = o;
        size_t *q = o ? realloc(l->len, cap * sizeof *q) : NULL;
        if (!q)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory decoding %zu tokens", l->n);
        l->len = q, l->cap = cap;
    }
    l->off[l->n] = l->buf.length;
    l->len[l->n] = n;
    l->n++;
    return tmm_bytes_append(&l->buf, p, n);
}

/* Appends to the last string. */
static tmm_status strs_more(strs *l, const char *p, size_t n)
{
    l->len[l->n - 1] += n;
    return tmm_bytes_append(&l->buf, p, n);
}

static const char *str(const strs *l, size_t i) { return l->buf.data ? l->buf.data + l->off[i] : ""; }

static int hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* "<0xHH>" as Hugging Face reads it (u8::from_str_radix, which takes "+H" too): the byte, or -1. */
static int byte_token(const char *p, size_t n)
{
    if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>')
        return -1;
    if (p[3] == '+')
        return hex(p[4]);
    return hex(p[3]) < 0 || hex(p[4]) < 0 ? -1 : hex(p[3]) << 4 | hex(p[4]);
}

static tmm_status step(const tok_dec *d, const strs *in, strs *out, bool piece)
{
    tmm_status s = TMM_OK;
    if (d->kind == TOK_DEC_FUSE) {
        s = strs_add(out, "", 0);
        for (size_t i = 0; i < in->n && s == TMM_OK; i++)
            s = strs_more(out, str(in, i), in->len[i]);
        return s;
    }
    bool bytes_open = false; /* ByteFallback: the last string out is a run of bytes */
    for (size_t i = 0; i < in->n && s == TMM_OK; i++) {
        const char *p = str(in, i);
        size_t n = in->len[i];
        if (d->kind == TOK_DEC_REPLACE) {
            if ((s = strs_add(out, "", 0)) == TMM_OK) {
                size_t before = out->buf.length;
                s = tmm_tok_replace(&d->pat, d->content, p, n, &out->buf);
                out->len[out->n - 1] = out->buf.length - before;
            }
        } else if (d->kind == TOK_DEC_BYTE_FALLBACK) {
            int b = byte_token(p, n);
            char c = (char)b;
            if (b >= 0)
                s = bytes_open ? strs_more(out, &c, 1) : strs_add(out, &c, 1);
            else
                s = strs_add(out, p, n);
            bytes_open = b >= 0;
        } else if (d->kind == TOK_DEC_STRIP) {
            size_t cl = strlen(d->strip), a = 0, z = n;
            for (uint32_t k = 0; k < d->start && z - a >= cl && memcmp(p + a, d->strip, cl) == 0; k++)
                a += cl;
            for (uint32_t k = 0; k < d->stop && z - a >= cl && memcmp(p + z - cl, d->strip, cl) == 0; k++)
                z -= cl;
            s = strs_add(out, p + a, z - a);
        } else if (d->kind == TOK_DEC_METASPACE) {
            size_t rl = strlen(d->replacement);
            bool drop = i == 0 && !piece && d->prepend_scheme != TOK_PREPEND_NEVER;
            s = strs_add(out, "", 0);
            for (size_t k = 0; k < n && s == TMM_OK;) {
                if (n - k >= rl && memcmp(p + k, d->replacement, rl) == 0) {
                    s = drop ? TMM_OK : strs_more(out, " ", 1);
                    k += rl;
                } else {
                    s = strs_more(out, p + k, 1);
                    k++;
                }
            }
        } else { /* ByteLevel: only with byte-level tokens, already bytes */
            s = strs_add(out, p, n);
        }
    }
    return s;
}

/* The decoders on the token strings in *l; piece: one token in the middle of a
 * text (not the first; a Strip after a Fuse, which strips the whole text's
 * ends, is left out). */
static tmm_status chain(const tmm_tokenizer *t, strs *l, bool piece)
{
    bool fused = false;
    for (uint32_t k = 0; k < t->n_decoders; k++) {
        const tok_dec *d = &t->decoders[k];
        if (piece && fused && d->kind == TOK_DEC_STRIP)
            continue;
        fused |= d->kind == TOK_DEC_FUSE;
        strs out = { 0 };
        tmm_status s = step(d, l, &out, piece);
        if (s != TMM_OK) {
            strs_free(&out);
            return s;
        }
        strs_free(l);
        *l = out;
    }
    return TMM_OK;
}

tmm_status tmm_tokenizer_decode(const tmm_tokenizer *tok, const uint32_t *ids, size_t count, bool special,
                                tmm_bytes *out)
{
    for (size_t i = 0; i < count; i++)
        if (ids[i] >= tok->vocab)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "token id %u (at %zu) is not in the vocabulary of %u", ids[i],
                            i, tok->vocab);
    size_t before = out->length;
    tmm_status s = TMM_OK;
    if (tok->bytes || tok->byte_level) {
        for (size_t i = 0; i < count && s == TMM_OK; i++)
            if (special || !(tok->flags[ids[i]] & TOK_SPECIAL))
                s = tmm_bytes_append(out, tok->data + tok->offset[ids[i]], tmm_tok_len(tok, ids[i]));
    } else {
        strs l = { 0 };
        bool first = true;
        for (size_t i = 0; i < count && s == TMM_OK; i++) {
            uint32_t id = ids[i];
            if (!special && (tok->flags[id] & TOK_SPECIAL))
                continue;
            if (!tok->n_decoders && !first) /* no decoder: Hugging Face joins the tokens with spaces */
                s = strs_add(&l, " ", 1);
            if (s == TMM_OK)
                s = strs_add(&l, tok->data + tok->offset[id], tmm_tok_len(tok, id));
            first = false;
        }
        if (s == TMM_OK)
            s = chain(tok, &l, false);
        for (size_t i = 0; i < l.n && s == TMM_OK; i++)
            s = tmm_bytes_append(out, str(&l, i), l.len[i]);
        strs_free(&l);
    }
    if (s != TMM_OK)
        out->length = before;
    return s;
}

tmm_status tmm_tok_decoder_pieces(tmm_tokenizer *t)
{
    free(t->piece_offset), free(t->piece_data);
    t->piece_offset = NULL, t->piece_data = NULL;
    if (t->bytes || t->byte_level)
        return TMM_OK;
    tmm_bytes data = { 0 };
    t->piece_offset = malloc(((size_t)t->vocab + 1) * sizeof *t->piece_offset);
    tmm_status s = t->piece_offset ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the pieces");
    for (uint32_t id = 0; id < t->vocab && s == TMM_OK; id++) {
        t->piece_offset[id] = data.length;
        if (!(t->flags[id] & TOK_PRESENT))
            continue;
        strs l = { 0 };
        if ((s = strs_add(&l, t->data + t->offset[id], tmm_tok_len(t, id))) == TMM_OK)
            s = chain(t, &l, true);
        for (size_t i = 0; i < l.n && s == TMM_OK; i++)
            s = tmm_bytes_append(&data, str(&l, i), l.len[i]);
        strs_free(&l);
    }
    if (s == TMM_OK) {
        t->piece_offset[t->vocab] = data.length;
        t->piece_data = data.data ? data.data : malloc(1);
        if (!t->piece_data)
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the pieces");
    } else {
        free(data.data);
    }
    return s;
}
