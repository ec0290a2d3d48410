/* Unicode Normalization Form C (UAX #15) of UTF-8 text, for the NFC
 * normalizer: full canonical decomposition, canonical ordering, then
 * canonical composition, with the tables of nfc_tables.c (Unicode 14, as
 * PCRE2 10.42) and Hangul by its algorithm. Bytes that are not UTF-8 pass
 * through and end the run of text around them. ASCII followed by ASCII is
 * copied as it is: it never composes. */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "text/nfc_tables.h"
#include "text/tokenizer_impl.h"

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, L_COUNT = 19, V_COUNT = 21,
       T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

static int ccc(uint32_t cp)
{
    size_t lo = 0, hi = tmm_nfc_n_ccc;
    if (cp < 0x300)
        return 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < tmm_nfc_ccc_ranges[mid].first)
            hi = mid;
        else if (cp > tmm_nfc_ccc_ranges[mid].last)
            lo = mid + 1;
        else
            return tmm_nfc_ccc_ranges[mid].ccc;
    }
    return 0;
}

static const tmm_nfc_decomp *decomp(uint32_t cp)
{
    size_t lo = 0, hi = tmm_nfc_n_decomps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < tmm_nfc_decomps[mid].cp)
            hi = mid;
        else if (cp > tmm_nfc_decomps[mid].cp)
            lo = mid + 1;
        else
            return &tmm_nfc_decomps[mid];
    }
    return NULL;
}

static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    uint64_t key = (uint64_t)a << 21 | b;
    size_t lo = 0, hi = tmm_nfc_n_comps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (key < tmm_nfc_comps[mid].pair)
            hi = mid;
        else if (key > tmm_nfc_comps[mid].pair)
            lo = mid + 1;
        else
            return tmm_nfc_comps[mid].composite;
    }
    return UINT32_MAX;
}

typedef struct run {
    uint32_t *cp;
    size_t n, cap;
} run;

static tmm_status push(run *r, uint32_t cp)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        uint32_t *p = realloc(r->cp, cap * sizeof *p);
        if (!p)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory normalizing text");
        r->cp = p, r->cap = cap;
    }
    r->cp[r->n++] = cp;
    return TMM_OK;
}

static tmm_status decompose(run *r, uint32_t cp)
{
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t s = cp - S_BASE, t = s % T_COUNT;
        TMM_TRY(push(r, L_BASE + s / N_COUNT));
        TMM_TRY(push(r, V_BASE + (s % N_COUNT) / T_COUNT));
        return t ? push(r, T_BASE + t) : TMM_OK;
    }
    const tmm_nfc_decomp *d = cp >= 0xC0 ? decomp(cp) : NULL;
    if (!d)
        return push(r, cp);
    for (uint16_t i = 0; i < d->n; i++)
        TMM_TRY(push(r, tmm_nfc_decomp_data[d->at + i]));
    return TMM_OK;
}

/* Orders, composes and writes the run; empties it. */
static tmm_status flush(run *r, tmm_bytes *out)
{
    uint32_t *c = r->cp;
    size_t n = r->n;
    for (size_t i = 1; i < n; i++) { /* canonical ordering: a stable sort of each run of non-starters */
        int k = ccc(c[i]);
        if (k == 0)
            continue;
        size_t j = i;
        uint32_t x = c[i];
        while (j > 0 && ccc(c[j - 1]) > k) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = x;
    }
    size_t m = 0, starter = SIZE_MAX;
    int last = -1; /* the class of the last character kept since the starter; -1: none */
    for (size_t i = 0; i < n; i++) {
        int k = ccc(c[i]);
        if (starter != SIZE_MAX && last < k + (last == -1)) { /* not blocked */
            uint32_t comp = compose(c[starter], c[i]);
            if (comp != UINT32_MAX) {
                c[starter] = comp;
                continue;
            }
        }
        if (k == 0)
            starter = m, last = -1;
        else
            last = k;
        c[m++] = c[i];
    }
    char buf[4];
    for (size_t i = 0; i < m; i++)
        TMM_TRY(tmm_bytes_append(out, buf, tmm_tok_utf8_put(c[i], buf)));
    r->n = 0;
    return TMM_OK;
}

tmm_status tmm_tok_nfc(const char *text, size_t n, tmm_bytes *out)
{
    run r = { 0 };
    tmm_status s = TMM_OK;
    for (size_t i = 0; i < n && s == TMM_OK;) {
        unsigned char b = (unsigned char)text[i];
        uint32_t cp;
        size_t len;
        if (b < 0x80 && (i + 1 == n || (unsigned char)text[i + 1] < 0x80)) {
            if ((s = flush(&r, out)) == TMM_OK)
                s = tmm_bytes_append(out, text + i, 1);
            i++;
        } else if ((len = tmm_tok_utf8_get(text + i, n - i, &cp)), cp == UINT32_MAX) {
            if ((s = flush(&r, out)) == TMM_OK)
                s = tmm_bytes_append(out, text + i, 1);
            i++;
        } else {
            s = decompose(&r, cp);
            i += len;
        }
    }
    if (s == TMM_OK)
        s = flush(&r, out);
    free(r.cp);
    return s;
}
