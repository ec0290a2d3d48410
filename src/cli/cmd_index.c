/* tmm index: operator analysis of a checkpoint's Toeplitz layers (winding
 * number and Fredholm index of the symbol, distance from non-invertibility,
 * zeros, finite-section singular values). CPU only: opens no device. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/index.h"
#include "cli.h"
#include "status.h"

#define PI 3.14159265358979323846

static const char *const usage_text =
    "usage: tmm index --checkpoint DIR [--json] [--plot DIR] [--tol X] [--exact-max-n N] [--jobs N]\n\n"
    "Operator analysis of every Toeplitz vector w (length n) of a checkpoint: each layer's\n"
    "blocks.L.mix.w (and mix.w2 for the expanded variant), per head and kernel tap. CPU only.\n\n"
    "  -c, --checkpoint DIR   run directory, checkpoint directory or model file (required)\n"
    "      --json             print JSON instead of the table\n"
    "      --plot DIR         write DIR/layer-LL.svg (the symbol curves, origin marked) and\n"
    "                         DIR/summary.svg (all layers in a grid)\n"
    "      --tol X            relative tolerance, default 1e-6: the winding is undefined when\n"
    "                         min|a| <= X * sum|w_k| (a relative change of X in the weights could\n"
    "                         then put a zero on the circle); a zero z counts as on the circle\n"
    "                         when |a(z/|z|)| <= X * sum|w_k|\n"
    "      --exact-max-n N    singular values for n <= N, zeros from eigenvalues below degree N\n"
    "                         (default 2048; both O(n^3), about 20 s per vector at n = 2048)\n"
    "  -j, --jobs N           threads, one vector each (default: one per CPU)\n\n"
    "What the numbers mean (a(z) = sum_k w_k z^k is the symbol of the causal operator):\n"
    "  wind      winding number of a(e^{i theta}), theta in [0, 2 pi), around 0; certified:\n"
    "            a is sampled by FFT and each step between samples is proven by Taylor and\n"
    "            Bernstein bounds or refined. 'undef' when a zero is on or near the circle\n"
    "  index     Fredholm index of the infinite causal Toeplitz operator: -wind\n"
    "            (0: invertible like the identity; -1: like the shift)\n"
    "  min|a|    min over the unit circle of |a|: the distance in operator norm to the nearest\n"
    "            Toeplitz operator that is not Fredholm\n"
    "  at/pi     theta/pi in [0, 1] where min|a| occurs (w is real: also at -theta)\n"
    "  zeros     zeros of the polynomial a inside/on/outside the unit circle (w_0 = 0 puts a\n"
    "            zero at 0); with none near the circle, inside = wind. '*': counted by the\n"
    "            argument principle; '!': the eigenvalues disagree with the certified winding\n"
    "            (zeros too ill-conditioned near the circle; trust wind)\n"
    "  s_min s_max cond   extreme singular values and condition number of the n x n finite\n"
    "            section T[t][s] = w[t-s]; '<x': below what double precision resolves\n"
    "            (n * eps * s_max), so cond is at least the '>x' shown\n"
    "  |w0|      the diagonal: the finite section is invertible exactly when w_0 != 0\n"
    "The last line is the histogram of indices over all layers, heads and taps.\n";

static const char *zeros_method_name(tmm_zeros_method m)
{
    return m == TMM_ZEROS_EIGENVALUES ? "eigenvalues" : m == TMM_ZEROS_ARGUMENT ? "argument principle" : NULL;
}

/* The eigenvalue count contradicts the certified winding number. */
static bool zeros_disagree(const tmm_symbol_report *r)
{
    return r->zeros_method == TMM_ZEROS_EIGENVALUES && r->wind.defined && r->zeros_on == 0 &&
           (int)r->zeros_inside != r->wind.winding;
}

static const char *plural(uint32_t n)
{
    return n == 1 ? "" : "s";
}

static void print_param(char *buf, size_t size, const tmm_index_entry *e)
{
    snprintf(buf, size, "blocks.%u.mix.%s", e->layer, e->second ? "w2" : "w");
}

/* ---- table ---------------------------------------------------------------- */

typedef struct histogram {
    tmm_index_bin *bins;
    uint32_t count, undefined;
} histogram;

static void print_table(const tmm_checkpoint *ck, const tmm_index_result *r, const tmm_index_options *opt,
                        const histogram *h, double elapsed)
{
    const tmm_model_config *c = &ck->table.config;
    printf("checkpoint: %s (step %llu)\n", ck->dir, (unsigned long long)ck->step);
    printf("model: %u layer%s, ", c->n_layers, plural(c->n_layers));
    if (c->heads)
        printf("%u heads", c->heads);
    else
        printf("flat mixing");
    printf(", n %u, kernel %u%s; %u Toeplitz vector%s; tol %g\n\n", c->n_ctx, c->kernel,
           c->expanded ? ", expanded (w and w2)" : "", r->count, plural(r->count), opt->tol);
    printf("layer  w   head  tap   wind  index     min|a|   at/pi   zeros in/on/out       s_min"
           "       s_max        cond       |w0|\n");
    bool argument = false, disagree = false, below_floor = false;
    for (uint32_t i = 0; i < r->count; i++) {
        const tmm_index_entry *e = &r->entries[i];
        const tmm_symbol_report *p = &e->report;
        char head[16] = "-", tap[16] = "-", wind[16] = "undef", index[16] = "undef", zeros[48] = "undef";
        if (r->heads > 1)
            snprintf(head, sizeof head, "%u", e->head);
        if (r->taps > 1)
            snprintf(tap, sizeof tap, "%u", e->tap);
        if (p->wind.defined) {
            snprintf(wind, sizeof wind, "%d", p->wind.winding);
            snprintf(index, sizeof index, "%d", -p->wind.winding);
        }
        if (p->zeros_method != TMM_ZEROS_UNDEFINED)
            snprintf(zeros, sizeof zeros, "%u/%u/%u%s", p->zeros_inside, p->zeros_on, p->zeros_outside,
                     p->zeros_method == TMM_ZEROS_ARGUMENT ? "*" : zeros_disagree(p) ? "!" : "");
        argument |= p->zeros_method == TMM_ZEROS_ARGUMENT;
        disagree |= zeros_disagree(p);
        char smin[24] = "n/a", smax[24] = "n/a", cond[24] = "n/a";
        if (p->svd) {
            snprintf(smax, sizeof smax, "%.3e", p->sigma_max);
            if (p->sigma_min == 0 && p->sigma_min_resolved) {
                snprintf(smin, sizeof smin, "0");
                snprintf(cond, sizeof cond, "inf");
            } else if (p->sigma_min_resolved) {
                snprintf(smin, sizeof smin, "%.3e", p->sigma_min);
                snprintf(cond, sizeof cond, "%.3e", p->sigma_max / p->sigma_min);
            } else {
                below_floor = true;
                snprintf(smin, sizeof smin, "<%.1e", p->sigma_floor);
                snprintf(cond, sizeof cond, ">%.1e", p->sigma_max / p->sigma_floor);
            }
        }
        printf("%5u  %-3s %4s  %3s  %5s  %5s  %9.3e  %6.4f  %15s  %10s  %10s  %10s  %9.3e\n", e->layer,
               e->second ? "w2" : "w", head, tap, wind, index, p->wind.min_abs, p->wind.min_theta / PI, zeros, smin,
               smax, cond, p->w0_abs);
    }
    if (argument)
        printf("*: degree >= %u: zeros counted by the argument principle (inside = wind)\n", opt->exact_max_n);
    if (disagree)
        printf("!: the eigenvalue count of zeros inside differs from the certified winding number: zeros lie too\n"
               "   close to the circle for the companion eigenvalues; trust wind\n");
    if (below_floor)
        printf("<x: s_min is below n*eps*s_max, what double precision resolves: cond is at least >x\n");
    if (c->n_ctx > opt->exact_max_n)
        printf("n/a: n > %u: no finite-section SVD (raise --exact-max-n; O(n^3))\n", opt->exact_max_n);

    printf("\nindex histogram over %u vector%s (%u layer%s x %u head%s x %u tap%s%s):", r->count, plural(r->count),
           c->n_layers, plural(c->n_layers), r->heads, plural(r->heads), r->taps, plural(r->taps),
           c->expanded ? " x w, w2" : "");
    for (uint32_t b = 0; b < h->count; b++)
        printf("%s %d: %u", b ? "," : "", h->bins[b].index, h->bins[b].count);
    printf("%s undefined: %u   (%.2f s)\n", h->count ? "," : "", h->undefined, elapsed);
}

/* ---- JSON ------------------------------------------------------------------- */

static cJSON *entry_json(const tmm_index_entry *e)
{
    const tmm_symbol_report *p = &e->report;
    char param[64];
    print_param(param, sizeof param, e);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "layer", e->layer);
    cJSON_AddStringToObject(o, "param", param);
    cJSON_AddNumberToObject(o, "head", e->head);
    cJSON_AddNumberToObject(o, "tap", e->tap);
    cJSON_AddNumberToObject(o, "n", p->n);
    cJSON_AddNumberToObject(o, "degree", p->degree);
    if (p->wind.defined) {
        cJSON_AddNumberToObject(o, "winding", p->wind.winding);
        cJSON_AddNumberToObject(o, "index", -p->wind.winding);
    } else {
        cJSON_AddNullToObject(o, "winding");
        cJSON_AddNullToObject(o, "index");
    }
    cJSON_AddNumberToObject(o, "min_abs", p->wind.min_abs);
    cJSON_AddNumberToObject(o, "min_theta", p->wind.min_theta);
    cJSON_AddNumberToObject(o, "max_abs", p->wind.max_abs);
    cJSON_AddNumberToObject(o, "tol_abs", p->tol_abs);
    cJSON_AddNumberToObject(o, "l1", p->l1);
    cJSON_AddNumberToObject(o, "w0_abs", p->w0_abs);
    cJSON_AddNumberToObject(o, "fft_points", p->wind.fft_points);
    cJSON_AddNumberToObject(o, "direct_evals", p->wind.direct_evals);
    if (p->zeros_method == TMM_ZEROS_UNDEFINED) {
        cJSON_AddNullToObject(o, "zeros");
    } else {
        cJSON *z = cJSON_AddObjectToObject(o, "zeros");
        cJSON_AddStringToObject(z, "method", zeros_method_name(p->zeros_method));
        cJSON_AddNumberToObject(z, "inside", p->zeros_inside);
        cJSON_AddNumberToObject(z, "on", p->zeros_on);
        cJSON_AddNumberToObject(z, "outside", p->zeros_outside);
        cJSON_AddBoolToObject(z, "agrees_with_winding", !zeros_disagree(p));
    }
    if (!p->svd) {
        cJSON_AddNullToObject(o, "finite_section");
    } else {
        cJSON *f = cJSON_AddObjectToObject(o, "finite_section");
        const double smin = p->sigma_min_resolved ? p->sigma_min : p->sigma_floor;
        cJSON_AddNumberToObject(f, "sigma_min", smin);
        cJSON_AddBoolToObject(f, "sigma_min_resolved", p->sigma_min_resolved);
        cJSON_AddNumberToObject(f, "sigma_max", p->sigma_max);
        cJSON_AddNumberToObject(f, "sigma_floor", p->sigma_floor);
        if (smin == 0)
            cJSON_AddNullToObject(f, "cond");
        else
            cJSON_AddNumberToObject(f, "cond", p->sigma_max / smin);
        cJSON_AddBoolToObject(f, "cond_lower_bound", !p->sigma_min_resolved);
    }
    return o;
}

static int print_json(const tmm_checkpoint *ck, const tmm_index_result *r, const tmm_index_options *opt,
                      const histogram *hist, const char *plot_dir, double elapsed)
{
    const tmm_model_config *c = &ck->table.config;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "checkpoint", ck->dir);
    cJSON_AddNumberToObject(root, "step", (double)ck->step);
    cJSON *m = cJSON_AddObjectToObject(root, "model");
    cJSON_AddNumberToObject(m, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(m, "n_ctx", c->n_ctx);
    cJSON_AddNumberToObject(m, "heads", c->heads);
    cJSON_AddNumberToObject(m, "kernel", c->kernel);
    cJSON_AddBoolToObject(m, "expanded", c->expanded);
    cJSON_AddNumberToObject(root, "tol", opt->tol);
    cJSON_AddNumberToObject(root, "exact_max_n", opt->exact_max_n);
    cJSON *vectors = cJSON_AddArrayToObject(root, "vectors");
    for (uint32_t i = 0; i < r->count; i++)
        cJSON_AddItemToArray(vectors, entry_json(&r->entries[i]));
    cJSON *h = cJSON_AddObjectToObject(root, "index_histogram");
    for (uint32_t b = 0; b < hist->count; b++) {
        char key[16];
        snprintf(key, sizeof key, "%d", hist->bins[b].index);
        cJSON_AddNumberToObject(h, key, hist->bins[b].count);
    }
    cJSON_AddNumberToObject(root, "undefined", hist->undefined);
    if (plot_dir)
        cJSON_AddStringToObject(root, "plot_dir", plot_dir);
    cJSON_AddNumberToObject(root, "seconds", elapsed);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        cli_fail("out of memory printing JSON\n");
        return 1;
    }
    puts(text);
    cJSON_free(text);
    return 0;
}

/* ---- command ------------------------------------------------------------------ */

int cmd_index(int argc, char **argv)
{
    enum { OPT_JSON = 256, OPT_PLOT, OPT_TOL, OPT_EXACT };
    static const struct option longopts[] = { { "checkpoint", required_argument, NULL, 'c' },
                                              { "json", no_argument, NULL, OPT_JSON },
                                              { "plot", required_argument, NULL, OPT_PLOT },
                                              { "tol", required_argument, NULL, OPT_TOL },
                                              { "exact-max-n", required_argument, NULL, OPT_EXACT },
                                              { "jobs", required_argument, NULL, 'j' },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0, 0, 0, 0 } };
    const char *path = NULL, *plot_dir = NULL;
    bool json = false;
    unsigned long v;
    tmm_index_options opt = TMM_INDEX_OPTIONS_DEFAULT;
    int o;
    cli_args args = { .longopts = longopts, .shortopts = "c:j:h" };
    while ((o = cli_getopt(&args, argc, argv)) != -1) {
        switch (o) {
        case 'c': path = optarg; break;
        case OPT_JSON: json = true; break;
        case OPT_PLOT: plot_dir = optarg; break;
        case OPT_TOL: if (!cli_parse_fraction("--tol", optarg, &opt.tol)) return 2; break;
        case OPT_EXACT:
            if (!cli_parse_uint("--exact-max-n", optarg, 1u << 16, &v))
                return 2;
            opt.exact_max_n = (uint32_t)v;
            break;
        case 'j':
            if (!cli_parse_uint("--jobs", optarg, 1024, &v))
                return 2;
            opt.jobs = (uint32_t)v;
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return 2;
        }
    }
    if (optind < argc) {
        cli_fail("unexpected argument '%s'; see tmm index --help\n", argv[optind]);
        return 2;
    }
    if (!path) {
        cli_fail("--checkpoint DIR is required (a run directory from tmm train)\n");
        return 2;
    }
    tmm_checkpoint ck;
    tmm_status s = tmm_checkpoint_load_model(path, NULL, &ck);
    if (s != TMM_OK)
        return cli_error("cannot load the checkpoint", s);
    const double t0 = (tmm_bench_now_ms() * 1e-3);
    const char *what = "analysis failed";
    tmm_index_result r;
    s = tmm_index_model(&ck, &opt, &r);
    const double elapsed = (tmm_bench_now_ms() * 1e-3) - t0;
    histogram h = { 0 };
    if (s == TMM_OK) {
        h.bins = malloc((r.count ? r.count : 1) * sizeof *h.bins);
        if (h.bins)
            h.count = tmm_index_histogram(&r, h.bins, &h.undefined);
        else
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for the histogram");
    }
    if (s == TMM_OK && plot_dir) {
        what = "cannot write the plots";
        s = tmm_index_plot(plot_dir, &ck, &r);
    }
    int rc;
    if (s != TMM_OK) {
        rc = cli_error(what, s);
    } else if (json) {
        rc = print_json(&ck, &r, &opt, &h, plot_dir, elapsed);
    } else {
        print_table(&ck, &r, &opt, &h, elapsed);
        if (plot_dir)
            printf("plots: %s/layer-*.svg, %s/summary.svg\n", plot_dir, plot_dir);
        rc = 0;
    }
    free(h.bins);
    tmm_index_result_free(&r);
    tmm_checkpoint_free(&ck);
    return rc;
}
