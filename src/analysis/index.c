/* Index analysis of one Toeplitz vector and of every vector of a model. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/index.h"
#include "analysis/parallel.h"
#include "mixer/toeplitz_mixer.h"
#include "model/arch.h"
#include "status.h"

/* Counts the zeros of a against the unit circle from the companion matrix's
 * eigenvalues; `first` leading zero coefficients are zeros at 0. A zero z is
 * on the circle when |a(z/|z|)| <= tol_abs, the tolerance of the winding
 * number: then a defined winding number means no zero on the circle. */
static tmm_status zeros_by_eigenvalues(const double *w, uint32_t first, uint32_t degree, double tol_abs,
                                       tmm_symbol_report *r)
{
    const uint32_t d = degree - first;
    r->zeros_inside = first;
    r->zeros_on = r->zeros_outside = 0;
    if (d == 0)
        return TMM_OK;
    double *re = malloc(2 * (size_t)d * sizeof *re);
    if (!re)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for %u zeros", d);
    tmm_status s = tmm_poly_roots(w + first, d, re, re + d);
    for (uint32_t i = 0; s == TMM_OK && i < d; i++) {
        const double radius = hypot(re[i], re[d + i]);
        double ar = INFINITY, ai = 0;
        if (radius > 0) /* |a| = |b| on the circle, b = w[first..] */
            tmm_symbol_eval(w + first, d, atan2(re[d + i], re[i]), &ar, &ai);
        if (hypot(ar, ai) <= tol_abs)
            r->zeros_on++;
        else if (radius < 1)
            r->zeros_inside++;
        else
            r->zeros_outside++;
    }
    free(re);
    return s;
}

static tmm_status finite_section(const double *w, uint32_t n, tmm_symbol_report *r)
{
    double *sigma = malloc(n * sizeof *sigma);
    if (!sigma)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for %u singular values", n);
    tmm_status s = tmm_toeplitz_singular_values(w, n, sigma);
    if (s == TMM_OK) {
        r->svd = true;
        r->sigma_max = sigma[0];
        r->sigma_floor = n * DBL_EPSILON * sigma[0];
        /* det T = w_0^n: with w_0 = 0 the section is exactly singular */
        r->sigma_min = w[0] == 0 ? 0 : sigma[n - 1];
        r->sigma_min_resolved = w[0] == 0 || sigma[n - 1] > r->sigma_floor;
    }
    free(sigma);
    return s;
}

tmm_status tmm_symbol_analyse(const double *w, uint32_t n, const tmm_index_options *opt, tmm_symbol_report *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "an empty Toeplitz vector has no symbol");
    if (!(opt->tol > 0 && opt->tol < 1))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the tolerance must lie in (0, 1), got %g", opt->tol);
    for (uint32_t k = 0; k < n; k++)
        if (!isfinite(w[k]))
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the Toeplitz vector holds %s at lag %u: it has no symbol to "
                            "analyse", isnan(w[k]) ? "NaN" : "an infinite value", k);
    out->n = n;
    out->degree = -1;
    uint32_t first = n;
    for (uint32_t k = 0; k < n; k++) {
        out->l1 += fabs(w[k]);
        if (w[k] != 0) {
            out->degree = (int)k;
            if (first == n)
                first = k;
        }
    }
    out->w0_abs = fabs(w[0]);
    out->tol_abs = opt->tol * out->l1;
    TMM_TRY(tmm_symbol_winding(w, n, out->tol_abs, &out->wind));

    out->zeros_method = TMM_ZEROS_UNDEFINED;
    if (out->degree >= 0 && (uint32_t)out->degree - first < opt->exact_max_n) {
        tmm_status s = zeros_by_eigenvalues(w, first, (uint32_t)out->degree, out->tol_abs, out);
        if (s == TMM_OK)
            out->zeros_method = TMM_ZEROS_EIGENVALUES;
        else if (s == TMM_ERR_UNSUPPORTED)
            tmm_warn("%s; counting zeros by the winding number instead", tmm_last_error());
        else
            return s;
    }
    if (out->zeros_method == TMM_ZEROS_UNDEFINED && out->wind.defined) {
        out->zeros_method = TMM_ZEROS_ARGUMENT;
        out->zeros_inside = (uint32_t)out->wind.winding;
        out->zeros_on = 0;
        out->zeros_outside = (uint32_t)(out->degree - out->wind.winding);
    }
    if (n <= opt->exact_max_n) {
        tmm_status s = finite_section(w, n, out);
        if (s == TMM_ERR_UNSUPPORTED)
            tmm_warn("%s", tmm_last_error());
        else if (s != TMM_OK)
            return s;
    }
    return TMM_OK;
}

/* ---- a model ------------------------------------------------------------------ */

const float *tmm_index_vector(const tmm_checkpoint *ckpt, const tmm_index_entry *e)
{
    const tmm_param_table *t = &ckpt->table;
    const tmm_block_params *b = &t->blocks[e->layer];
    const tmm_param *p = &t->params[b->mix[e->second ? TMM_TZ_W2 : TMM_TZ_W]];
    const uint32_t taps = p->shape[1], n = p->shape[2];
    return ckpt->params + p->offset + ((size_t)e->head * taps + e->tap) * n;
}

/* One entry's analysis (tmm_parallel_for: every result lands in its own
 * entry, so the output does not depend on the number of workers). */
typedef struct index_job {
    const tmm_checkpoint *ckpt;
    const tmm_index_options *opt;
    tmm_index_result *out;
} index_job;

static tmm_status analyse_entry(void *ctx, uint32_t i)
{
    const index_job *j = ctx;
    const uint32_t n = j->ckpt->table.config.n_ctx;
    double *w = malloc(n * sizeof *w);
    if (!w)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for a Toeplitz vector");
    tmm_index_entry *e = &j->out->entries[i];
    const float *src = tmm_index_vector(j->ckpt, e);
    for (uint32_t k = 0; k < n; k++)
        w[k] = src[k];
    tmm_status s = tmm_symbol_analyse(w, n, j->opt, &e->report);
    free(w);
    return s;
}

tmm_status tmm_index_model(const tmm_checkpoint *ckpt, const tmm_index_options *opt, tmm_index_result *out)
{
    memset(out, 0, sizeof *out);
    const tmm_model_config *c = &ckpt->table.config;
    if (!tmm_arch_of(c->arch)->toeplitz)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the index is of Toeplitz vectors: this is a %s model, not a TMM",
                        tmm_arch_name(c->arch));
    const uint32_t heads = c->heads ? c->heads : 1, taps = c->kernel, per = c->expanded ? 2 : 1;
    const uint64_t count = (uint64_t)c->n_layers * per * heads * taps;
    out->entries = calloc(count ? count : 1, sizeof *out->entries);
    if (!out->entries)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for %llu Toeplitz vectors",
                        (unsigned long long)count);
    out->heads = heads;
    out->taps = taps;
    for (uint32_t l = 0; l < c->n_layers; l++)
        for (uint32_t v = 0; v < per; v++)
            for (uint32_t g = 0; g < heads; g++)
                for (uint32_t a = 0; a < taps; a++)
                    out->entries[out->count++] = (tmm_index_entry){ .layer = l, .head = g, .tap = a, .second = v == 1 };

    index_job job = { ckpt, opt, out };
    tmm_status s = tmm_parallel_for(out->count, opt->jobs, analyse_entry, &job);
    if (s != TMM_OK)
        tmm_index_result_free(out);
    return s;
}

uint32_t tmm_index_histogram(const tmm_index_result *r, tmm_index_bin *bins, uint32_t *undefined)
{
    uint32_t nb = 0;
    *undefined = 0;
    for (uint32_t i = 0; i < r->count; i++) {
        const tmm_winding *wd = &r->entries[i].report.wind;
        if (!wd->defined) {
            ++*undefined;
            continue;
        }
        const int index = -wd->winding;
        uint32_t p = 0;
        while (p < nb && bins[p].index < index)
            p++;
        if (p < nb && bins[p].index == index) {
            bins[p].count++;
            continue;
        }
        memmove(bins + p + 1, bins + p, (nb - p) * sizeof *bins);
        bins[p] = (tmm_index_bin){ index, 1 };
        nb++;
    }
    return nb;
}

void tmm_index_result_free(tmm_index_result *r)
{
    free(r->entries);
    memset(r, 0, sizeof *r);
}
