/* SVG plots of the symbol curves a(e^{iθ}), θ in [0, 2π), of every Toeplitz
 * vector: one file per layer and a summary grid. Written as plain text (svg.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/index.h"
#include "analysis/svg.h"
#include "files.h"
#include "status.h"

/* A symbol of degree D can wind D times: a smooth curve needs about 64 points
 * per degree. Layer files get that, up to 65536 points per curve; the summary
 * at most 4096. */
#define LAYER_CURVE_POINTS 65536
#define CELL_CURVE_POINTS 4096
#define LAYER_SIZE 560.0  /* px: the plot square of a layer file */
#define CELL_SIZE 260.0   /* px: one layer in the summary grid */
#define SYMBOL "a(e<tspan baseline-shift=\"super\" font-size=\"10\">i&#952;</tspan>)"

static const char *const palette[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                       "#9467bd", "#8c564b", "#e377c2", "#17becf" };

/* The curves of one layer: points of each entry's symbol, strided from the FFT samples. */
typedef struct curves {
    const tmm_index_entry *e; /* first entry of the layer */
    uint32_t count;           /* entries in the layer */
    uint32_t points;          /* per curve */
    double *re, *im;          /* count × points */
    double lo_x, hi_x, lo_y, hi_y;
} curves;

static tmm_status sample_layer(const tmm_checkpoint *ckpt, const tmm_index_entry *e, uint32_t count,
                               uint32_t max_points, curves *c)
{
    const uint32_t n = e->report.n;
    uint32_t N = 1024;
    while (N < n || (N < 64 * (uint64_t)n && N < LAYER_CURVE_POINTS))
        N <<= 1;
    const uint32_t stride = N > max_points ? N / max_points : 1;
    *c = (curves){ .e = e, .count = count, .points = N / stride };
    double *work = malloc(3 * (size_t)N * sizeof *work);
    c->re = malloc(2 * (size_t)count * c->points * sizeof *c->re);
    if (!work || !c->re) {
        free(work);
        free(c->re);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for symbol plots");
    }
    c->im = c->re + (size_t)count * c->points;
    double *re = work, *im = work + N, *w = work + 2 * (size_t)N;
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; i < count && s == TMM_OK; i++) {
        const float *src = tmm_index_vector(ckpt, &e[i]);
        for (uint32_t k = 0; k < n; k++)
            w[k] = src[k];
        s = tmm_symbol_samples(w, n, N, re, im);
        for (uint32_t j = 0; j < c->points; j++) {
            const double x = re[j * stride], y = im[j * stride];
            c->re[(size_t)i * c->points + j] = x;
            c->im[(size_t)i * c->points + j] = y;
            c->lo_x = fmin(c->lo_x, x); c->hi_x = fmax(c->hi_x, x);
            c->lo_y = fmin(c->lo_y, y); c->hi_y = fmax(c->hi_y, y);
        }
    }
    free(work);
    if (s != TMM_OK)
        free(c->re);
    return s;
}

static void entry_label(char *buf, size_t size, const tmm_index_result *r, const tmm_index_entry *e)
{
    const tmm_symbol_report *rep = &e->report;
    char idx[32];
    if (rep->wind.defined)
        snprintf(idx, sizeof idx, "index %d", -rep->wind.winding);
    else
        snprintf(idx, sizeof idx, "index undefined");
    int len = snprintf(buf, size, "%s", e->second ? "w2" : "w");
    if (r->heads > 1)
        len += snprintf(buf + len, size - (size_t)len, " head %u", e->head);
    if (r->taps > 1)
        len += snprintf(buf + len, size - (size_t)len, " tap %u", e->tap);
    snprintf(buf + len, size - (size_t)len, ": %s, min|a| %.3g", idx, rep->wind.min_abs);
}

/* Draws the curves into the square [x0, x0 + size] × [y0, y0 + size] (equal
 * scales on both axes, imaginary axis up), with the origin marked. */
static void draw_panel(tmm_svg *t, const curves *c, double x0, double y0, double size, double stroke)
{
    const double span = fmax(fmax(c->hi_x - c->lo_x, c->hi_y - c->lo_y), 1e-300);
    const double scale = 0.9 * size / span;
    const double cx = x0 + size / 2 - scale * (c->lo_x + c->hi_x) / 2;
    const double cy = y0 + size / 2 + scale * (c->lo_y + c->hi_y) / 2;
    tmm_svg_put(t, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" stroke=\"#ccc\"/>\n", x0, y0,
        size, size);
    tmm_svg_put(t, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#ddd\"/>\n", x0, cy, x0 + size, cy);
    tmm_svg_put(t, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", cx, y0, cx, y0 + size);
    for (uint32_t i = 0; i < c->count; i++) {
        const double *re = c->re + (size_t)i * c->points, *im = c->im + (size_t)i * c->points;
        const char *color = palette[i % (sizeof palette / sizeof palette[0])];
        tmm_svg_put(t, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.2f\" stroke-opacity=\"0.85\" points=\"", color,
            stroke);
        for (uint32_t j = 0; j <= c->points; j++) /* closed: back to θ = 0 */
            tmm_svg_put(t, "%.1f,%.1f ", cx + scale * re[j % c->points], cy - scale * im[j % c->points]);
        tmm_svg_put(t, "\"/>\n<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.1f\" fill=\"%s\"/>\n", cx + scale * re[0],
            cy - scale * im[0], 1.5 * stroke + 1, color);
    }
    const double m = 0.025 * size;
    tmm_svg_put(t, "<path d=\"M%.2f %.2fL%.2f %.2fM%.2f %.2fL%.2f %.2f\" stroke=\"black\" stroke-width=\"2\"/>\n", cx - m,
        cy - m, cx + m, cy + m, cx - m, cy + m, cx + m, cy - m);
}

static tmm_status write_text(const char *dir, const char *name, tmm_svg *t)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "plot directory path is too long: %s", dir);
    return tmm_svg_save(t, path);
}

static tmm_status layer_file(const char *dir, const tmm_index_result *r, const curves *c, uint32_t layer)
{
    tmm_svg t = { 0 };
    const double legend = 18.0 * c->count + 16, w = LAYER_SIZE + 20, h = LAYER_SIZE + 50 + legend;
    tmm_svg_put(&t, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
            "font-size=\"13\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", w, h);
    tmm_svg_put(&t, "<text x=\"10\" y=\"22\" font-size=\"15\">layer %u: symbol " SYMBOL ", &#952; from 0 (dot) to 2&#960;; "
            "&#215; marks 0</text>\n", layer);
    draw_panel(&t, c, 10, 36, LAYER_SIZE, 1.2);
    for (uint32_t i = 0; i < c->count; i++) {
        char label[160];
        entry_label(label, sizeof label, r, &c->e[i]);
        const double y = LAYER_SIZE + 60 + 18.0 * i;
        tmm_svg_put(&t, "<rect x=\"12\" y=\"%.0f\" width=\"14\" height=\"4\" fill=\"%s\"/>", y - 5,
            palette[i % (sizeof palette / sizeof palette[0])]);
        tmm_svg_put(&t, "<text x=\"32\" y=\"%.0f\">%s</text>\n", y, label);
    }
    tmm_svg_put(&t, "</svg>\n");
    char name[64];
    snprintf(name, sizeof name, "layer-%02u.svg", layer);
    tmm_status s = write_text(dir, name, &t);
    tmm_svg_free(&t);
    return s;
}

/* "index -1" when all of a layer's defined indices agree, else "index -21 to -9",
 * and how many are undefined. */
static void layer_summary(char *buf, size_t size, const tmm_index_entry *e, uint32_t count)
{
    int lo = 0, hi = 0;
    uint32_t defined = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (!e[i].report.wind.defined)
            continue;
        const int index = -e[i].report.wind.winding;
        lo = defined && lo < index ? lo : index;
        hi = defined && hi > index ? hi : index;
        defined++;
    }
    int len = 0;
    if (defined && lo == hi)
        len = snprintf(buf, size, "index %d", lo);
    else if (defined)
        len = snprintf(buf, size, "index %d to %d", lo, hi);
    if (defined < count)
        snprintf(buf + len, size - (size_t)len, "%s%u undefined", defined ? ", " : "", count - defined);
}

tmm_status tmm_index_plot(const char *dir, const tmm_checkpoint *ckpt, const tmm_index_result *r)
{
    TMM_TRY(tmm_make_dirs(dir));
    const uint32_t layers = ckpt->table.config.n_layers, per = layers ? r->count / layers : 0;
    uint32_t cols = 1;
    while (cols * cols < layers)
        cols++;
    const uint32_t rows = layers ? (layers + cols - 1) / cols : 0;
    tmm_svg sum = { 0 };
    tmm_svg_put(&sum, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
              "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
        cols * (CELL_SIZE + 10) + 10, rows * (CELL_SIZE + 30) + 40);
    tmm_svg_put(&sum, "<text x=\"10\" y=\"22\" font-size=\"15\">symbol curves " SYMBOL " of every layer; &#215; marks 0; "
              "index = &#8722;winding</text>\n");
    tmm_status s = TMM_OK;
    for (uint32_t l = 0; l < layers && s == TMM_OK; l++) {
        curves c;
        const tmm_index_entry *e = r->entries + (size_t)l * per;
        s = sample_layer(ckpt, e, per, LAYER_CURVE_POINTS, &c);
        if (s != TMM_OK)
            break;
        s = layer_file(dir, r, &c, l);
        free(c.re);
        if (s == TMM_OK)
            s = sample_layer(ckpt, e, per, CELL_CURVE_POINTS, &c);
        if (s != TMM_OK)
            break;
        const double x = 10 + (l % cols) * (CELL_SIZE + 10), y = 40 + (l / cols) * (CELL_SIZE + 30);
        char summary[256];
        layer_summary(summary, sizeof summary, e, per);
        tmm_svg_put(&sum, "<text x=\"%.0f\" y=\"%.0f\">layer %u: %s</text>\n", x, y + 14, l, summary);
        draw_panel(&sum, &c, x, y + 20, CELL_SIZE, 0.8);
        free(c.re);
    }
    tmm_svg_put(&sum, "</svg>\n");
    if (s == TMM_OK)
        s = write_text(dir, "summary.svg", &sum);
    tmm_svg_free(&sum);
    return s;
}
