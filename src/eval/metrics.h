/* The metrics of tmm eval --task (docs/eval.md "Metrics"): SQuAD's official
 * answer normalization, exact match and token F1, means and their standard
 * errors, and the binary F1 and Matthews correlation of GLUE. */
#ifndef TMM_EVAL_METRICS_H
#define TMM_EVAL_METRICS_H

#include <stdint.h>

/* SQuAD's normalize_answer: lowercase, remove punctuation (ASCII
 * string.punctuation), remove the words a, an, the, collapse whitespace.
 * malloc'ed; NULL when out of memory. */
char *tmm_squad_normalize(const char *text);
/* compute_exact and compute_f1 of the official evaluation script (v2.0). */
double tmm_squad_exact(const char *gold, const char *pred);
double tmm_squad_f1(const char *gold, const char *pred);
/* The best of each over the gold answers; the golds that normalize to
 * nothing are dropped, and none left means the gold is "" (SQuAD v2's
 * unanswerable question). */
void tmm_squad_score(const char *const *golds, uint32_t count, const char *pred, double *exact, double *f1);

/* Mean, and lm-eval's standard error of the mean: the sample standard
 * deviation (n - 1) over sqrt(n); NaN for n < 2. */
double tmm_eval_mean(const double *x, uint32_t n);
double tmm_eval_stderr(const double *x, uint32_t n);
/* F1 of class 1 and the Matthews correlation of binary predictions (as
 * sklearn's f1_score and matthews_corrcoef; 0 where undefined). */
double tmm_eval_binary_f1(const uint32_t *gold, const uint32_t *pred, uint32_t n);
double tmm_eval_mcc(const uint32_t *gold, const uint32_t *pred, uint32_t n);
/* lm-eval's bootstrap standard error of such a metric: the sample standard
 * deviation (n - 1) of the metric over `iters` resamples of the n items with
 * replacement, drawn from a fixed seed (a rerun gives the same value). NaN
 * for n < 2 or iters < 2, or out of memory. */
#define TMM_EVAL_BOOTSTRAP_ITERS 1000
double tmm_eval_bootstrap_stderr(double (*metric)(const uint32_t *, const uint32_t *, uint32_t),
                                 const uint32_t *gold, const uint32_t *pred, uint32_t n, uint32_t iters);
/* Unicode code points in a UTF-8 string (Python's len): the length lm-eval's
 * acc_norm divides by. */
uint32_t tmm_utf8_length(const char *text);

#endif
