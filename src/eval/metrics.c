/* SQuAD's answer normalization, exact match and F1 (the official
 * evaluate-v2.0.py), means, standard errors, binary F1 and MCC. */
#include "eval/metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/rng.h"

static bool is_punct(unsigned char c) { return c < 128 && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) && c; }
static bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
/* a character of Python's \w: ASCII letters, digits and _, and (any byte of) a non-ASCII character */
static bool is_word(unsigned char c) { return c >= 128 || c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'); }

char *tmm_squad_normalize(const char *text)
{
    size_t n = strlen(text);
    char *a = malloc(n + 1), *b = malloc(n + 1);
    if (!a || !b) {
        free(a), free(b);
        return NULL;
    }
    /* lower, then remove punctuation */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!is_punct(c))
            a[m++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    a[m] = '\0';
    /* \b(a|an|the)\b -> ' ' */
    size_t k = 0;
    for (size_t i = 0; i < m;) {
        size_t w = 0;
        if (i == 0 || !is_word((unsigned char)a[i - 1])) {
            static const char *const articles[] = { "the", "an", "a" };
            for (int j = 0; j < 3 && !w; j++) {
                size_t l = strlen(articles[j]);
                if (strncmp(a + i, articles[j], l) == 0 && (i + l == m || !is_word((unsigned char)a[i + l])))
                    w = l;
            }
        }
        if (w) {
            b[k++] = ' ';
            i += w;
        } else {
            b[k++] = a[i++];
        }
    }
    b[k] = '\0';
    /* ' '.join(text.split()) */
    m = 0;
    for (size_t i = 0; i < k;) {
        while (i < k && is_space((unsigned char)b[i]))
            i++;
        if (i == k)
            break;
        if (m)
            a[m++] = ' ';
        while (i < k && !is_space((unsigned char)b[i]))
            a[m++] = b[i++];
    }
    a[m] = '\0';
    free(b);
    return a;
}

double tmm_squad_exact(const char *gold, const char *pred)
{
    char *g = tmm_squad_normalize(gold), *p = tmm_squad_normalize(pred);
    double r = g && p && strcmp(g, p) == 0;
    free(g), free(p);
    return r;
}

/* the words of a normalized text (it is modified: spaces become NULs) */
static uint32_t split_words(char *s, char **words)
{
    uint32_t n = 0;
    for (char *t = s; *t;) {
        words[n++] = t;
        char *e = strchr(t, ' ');
        if (!e)
            break;
        *e = '\0';
        t = e + 1;
    }
    return n;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

double tmm_squad_f1(const char *gold, const char *pred)
{
    char *g = tmm_squad_normalize(gold), *p = tmm_squad_normalize(pred);
    char **gw = malloc((strlen(gold) / 2 + 2) * sizeof *gw), **pw = malloc((strlen(pred) / 2 + 2) * sizeof *pw);
    double f1 = 0;
    if (g && p && gw && pw) {
        uint32_t ng = split_words(g, gw), np = split_words(p, pw);
        if (ng == 0 || np == 0) {
            f1 = ng == np;
        } else {
            /* |Counter(gold) & Counter(pred)|: merge the sorted word lists */
            qsort(gw, ng, sizeof *gw, cmp_str);
            qsort(pw, np, sizeof *pw, cmp_str);
            uint32_t same = 0;
            for (uint32_t i = 0, j = 0; i < ng && j < np;) {
                int c = strcmp(gw[i], pw[j]);
                if (c == 0)
                    same++, i++, j++;
                else if (c < 0)
                    i++;
                else
                    j++;
            }
            if (same) {
                double precision = (double)same / np, recall = (double)same / ng;
                f1 = 2 * precision * recall / (precision + recall);
            }
        }
    }
    free(g), free(p), free(gw), free(pw);
    return f1;
}

void tmm_squad_score(const char *const *golds, uint32_t count, const char *pred, double *exact, double *f1)
{
    *exact = 0, *f1 = 0;
    uint32_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        char *g = tmm_squad_normalize(golds[i]);
        bool empty = !g || !*g;
        free(g);
        if (empty)
            continue;
        used++;
        *exact = fmax(*exact, tmm_squad_exact(golds[i], pred));
        *f1 = fmax(*f1, tmm_squad_f1(golds[i], pred));
    }
    if (!used) {
        *exact = tmm_squad_exact("", pred);
        *f1 = tmm_squad_f1("", pred);
    }
}

double tmm_eval_mean(const double *x, uint32_t n)
{
    double s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += x[i];
    return n ? s / n : NAN;
}

double tmm_eval_stderr(const double *x, uint32_t n)
{
    if (n < 2)
        return NAN;
    double mu = tmm_eval_mean(x, n), ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (x[i] - mu) * (x[i] - mu);
    return sqrt(ss / (n - 1)) / sqrt((double)n);
}

static void confusion(const uint32_t *gold, const uint32_t *pred, uint32_t n, double c[2][2])
{
    memset(c, 0, 4 * sizeof c[0][0]);
    for (uint32_t i = 0; i < n; i++)
        c[gold[i] == 1][pred[i] == 1] += 1;
}

double tmm_eval_binary_f1(const uint32_t *gold, const uint32_t *pred, uint32_t n)
{
    double c[2][2];
    confusion(gold, pred, n, c);
    double tp = c[1][1], fp = c[0][1], fn = c[1][0];
    return tp == 0 ? 0 : 2 * tp / (2 * tp + fp + fn);
}

double tmm_eval_mcc(const uint32_t *gold, const uint32_t *pred, uint32_t n)
{
    double c[2][2];
    confusion(gold, pred, n, c);
    double tp = c[1][1], tn = c[0][0], fp = c[0][1], fn = c[1][0];
    double d = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn);
    return d == 0 ? 0 : (tp * tn - fp * fn) / sqrt(d);
}

double tmm_eval_bootstrap_stderr(double (*metric)(const uint32_t *, const uint32_t *, uint32_t),
                                 const uint32_t *gold, const uint32_t *pred, uint32_t n, uint32_t iters)
{
    if (n < 2 || iters < 2)
        return NAN;
    uint32_t *g = malloc((size_t)n * sizeof *g), *p = malloc((size_t)n * sizeof *p);
    double sum = 0, sum2 = 0;
    for (uint32_t it = 0; g && p && it < iters; it++) {
        for (uint32_t i = 0; i < n; i++) {
            uint32_t j = (uint32_t)(tmm_rng_bits(0x626f6f74 + it, i) % n); /* "boot" */
            g[i] = gold[j], p[i] = pred[j];
        }
        double v = metric(g, p, n);
        sum += v, sum2 += v * v;
    }
    double var = (sum2 - sum * sum / iters) / (iters - 1);
    double se = g && p ? sqrt(var > 0 ? var : 0) : NAN;
    free(g), free(p);
    return se;
}

uint32_t tmm_utf8_length(const char *text)
{
    uint32_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        n += (*p & 0xC0) != 0x80;
    return n;
}
