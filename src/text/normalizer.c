/* Normalizers, in order (a Sequence is its list), as Hugging Face's: Prepend
 * puts its text before a non-empty piece, Replace puts content for every
 * match of its pattern (non-overlapping, left to right; a String literally),
 * NFC composes (nfc.c). */
#include <string.h>

#include "status.h"
#include "text/tokenizer_impl.h"

static tmm_status replace_literal(const tok_pattern *pt, const char *content, const char *p, size_t n, tmm_bytes *out)
{
    const char *pat = pt->text;
    size_t pn = strlen(pat), cn = strlen(content), done = 0;
    for (size_t i = 0; pn && i + pn <= n;) {
        const char *hit = memchr(p + i, pat[0], n - i - pn + 1);
        if (!hit)
            break;
        i = (size_t)(hit - p);
        if (memcmp(hit, pat, pn) != 0) {
            i++;
            continue;
        }
        TMM_TRY(tmm_bytes_append(out, p + done, i - done));
        TMM_TRY(tmm_bytes_append(out, content, cn));
        i += pn;
        done = i;
    }
    return tmm_bytes_append(out, p + done, n - done);
}

static tmm_status replace_regex(const tok_pattern *pt, const char *content, const char *p, size_t n, tmm_bytes *out)
{
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for regex match data");
    size_t cn = strlen(content), done = 0, pos = 0;
    tmm_status s = TMM_OK;
    while (s == TMM_OK && pos <= n) {
        int rc = pcre2_match(pt->re, (PCRE2_SPTR)p, n, pos, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "Replace failed at byte %zu of %zu: %s", pos, n,
                         (const char *)msg);
            break;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], z = ov[1];
        if ((s = tmm_bytes_append(out, p + done, a - done)) == TMM_OK)
            s = tmm_bytes_append(out, content, cn);
        done = z;
        if (z > a) {
            pos = z;
        } else { /* an empty match: the next search starts one character on */
            uint32_t cp;
            if (a >= n)
                break;
            pos = a + tmm_tok_utf8_get(p + a, n - a, &cp);
        }
    }
    pcre2_match_data_free(md);
    return s == TMM_OK && done < n ? tmm_bytes_append(out, p + done, n - done) : s;
}

tmm_status tmm_tok_replace(const tok_pattern *pat, const char *content, const char *p, size_t n, tmm_bytes *out)
{
    return pat->literal ? replace_literal(pat, content, p, n, out) : replace_regex(pat, content, p, n, out);
}

tmm_status tmm_tok_normalize(const tmm_tokenizer *t, tok_scratch *s, const char *text, size_t n, const char **out,
                             size_t *out_n)
{
    const char *cur = text;
    size_t len = n;
    for (uint32_t i = 0; i < t->n_norms; i++) {
        const tok_norm *nm = &t->norms[i];
        tmm_bytes *dst = cur == s->norm[0].data ? &s->norm[1] : &s->norm[0]; /* not the one cur is in */
        dst->length = 0;
        if (nm->kind == TOK_NORM_PREPEND) {
            if (len == 0)
                continue;
            TMM_TRY(tmm_bytes_append(dst, nm->content, strlen(nm->content)));
            TMM_TRY(tmm_bytes_append(dst, cur, len));
        } else if (nm->kind == TOK_NORM_REPLACE) {
            TMM_TRY(tmm_tok_replace(&nm->pat, nm->content, cur, len, dst));
        } else {
            TMM_TRY(tmm_tok_nfc(cur, len, dst));
        }
        cur = dst->data ? dst->data : "", len = dst->length;
    }
    *out = cur, *out_n = len;
    return TMM_OK;
}
