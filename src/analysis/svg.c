/* SVG text and the experiments' charts (svg.h). */
#include "analysis/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"

void tmm_svg_put(tmm_svg *t, const char *fmt, ...)
{
    for (int attempt = 0; attempt < 2 && !t->failed; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        const int len = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (len < 0) {
            t->failed = true;
        } else if (t->buf && t->len + (size_t)len < t->cap) {
            t->len += (size_t)len;
            return;
        } else {
            size_t cap = t->cap ? t->cap : 4096;
            while (cap <= t->len + (size_t)len)
                cap *= 2;
            char *p = realloc(t->buf, cap);
            if (!p)
                t->failed = true;
            t->buf = p ? p : t->buf;
            t->cap = p ? cap : t->cap;
        }
    }
}

void tmm_svg_put_escaped(tmm_svg *t, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': tmm_svg_put(t, "&amp;"); break;
        case '<': tmm_svg_put(t, "&lt;"); break;
        case '>': tmm_svg_put(t, "&gt;"); break;
        case '"': tmm_svg_put(t, "&quot;"); break;
        default: tmm_svg_put(t, "%c", *s);
        }
    }
}

tmm_status tmm_svg_save(const tmm_svg *t, const char *path)
{
    if (t->failed)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory writing %s", path);
    return tmm_write_file_atomic(path, t->buf ? t->buf : "", t->len);
}

void tmm_svg_free(tmm_svg *t)
{
    free(t->buf);
    *t = (tmm_svg){ 0 };
}

/* ---- charts ---------------------------------------------------------------- */

#define WIDTH 780.0
#define HEIGHT 470.0
#define PX 80.0      /* plot area: left, top, width, height */
#define PY 48.0
#define PW 470.0
#define PH 330.0
#define LEGEND_X 570.0
#define MAX_TICKS 24

static const char *const palette[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                       "#e377c2", "#17becf", "#7f7f7f", "#bcbd22" };
#define PALETTE_SIZE (sizeof palette / sizeof palette[0])

static const char *color(uint32_t i) { return palette[i % PALETTE_SIZE]; }
/* Series past the palette are dashed, so no two look alike. */
static const char *dash(uint32_t i) { return i < PALETTE_SIZE ? "" : " stroke-dasharray=\"6 3\""; }

typedef struct axis {
    bool log;
    double lo, hi;            /* the axis' range (log: of the values, not their logs) */
    double ticks[MAX_TICKS];
    uint32_t n_ticks;
} axis;

static bool usable(double v, bool log) { return isfinite(v) && (!log || v > 0); }

/* A range and ticks covering [lo, hi]: multiples of 1, 2 or 5 times a power
 * of ten (linear), or the decades (log; with 2 and 5 when it spans at most two). */
static void axis_fit(axis *a, double lo, double hi, bool log, bool from_zero)
{
    *a = (axis){ .log = log };
    if (!(lo <= hi)) /* no usable value */
        lo = log ? 1 : 0, hi = log ? 10 : 1;
    if (log) {
        double l = floor(log10(lo)), h = ceil(log10(hi));
        if (h <= l)
            h = l + 1;
        a->lo = pow(10, l), a->hi = pow(10, h);
        const bool fine = h - l <= 2;
        for (double e = l; e <= h && a->n_ticks < MAX_TICKS; e++)
            for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) {
                const double v = m * pow(10, e);
                if ((m == 1 || (fine && e < h)) && a->n_ticks < MAX_TICKS)
                    a->ticks[a->n_ticks++] = v;
            }
        return;
    }
    if (from_zero && lo > 0)
        lo = 0;
    if (hi - lo < 1e-12 * fmax(1, fabs(hi)))
        lo -= fmax(1, fabs(lo)) * 0.1, hi += fmax(1, fabs(hi)) * 0.1;
    const double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    const double step = mag * (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10);
    a->lo = floor(lo / step) * step, a->hi = ceil(hi / step) * step;
    for (double v = a->lo; v <= a->hi + step * 1e-6 && a->n_ticks < MAX_TICKS; v += step)
        a->ticks[a->n_ticks++] = fabs(v) < step * 1e-9 ? 0 : v;
}

/* Position of v along an axis of length len px, from 0 at lo. */
static double axis_at(const axis *a, double v, double len)
{
    return a->log ? (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo)) * len
                  : (v - a->lo) / (a->hi - a->lo) * len;
}

static tmm_status check_chart(const tmm_chart *c)
{
    if (c->n_series == 0 || c->n_series > TMM_CHART_MAX_SERIES || !c->series)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "chart '%s': %u series (1 to %d)", c->title, c->n_series,
                        TMM_CHART_MAX_SERIES);
    return TMM_OK;
}

/* The document's start: size, background, title. */
static void chart_head(tmm_svg *t, const tmm_chart *c)
{
    tmm_svg_put(t, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                   "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<title>",
                WIDTH, HEIGHT, WIDTH, HEIGHT);
    tmm_svg_put_escaped(t, c->title);
    tmm_svg_put(t, "</title>\n<text class=\"title\" x=\"%.0f\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">",
                PX + PW / 2);
    tmm_svg_put_escaped(t, c->title);
    tmm_svg_put(t, "</text>\n");
}

/* The frame, the y axis with ticks and grid lines, both axis labels, the note. */
static void chart_axes(tmm_svg *t, const tmm_chart *c, const axis *y)
{
    tmm_svg_put(t, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n",
                PX, PY, PW, PH);
    for (uint32_t i = 0; i < y->n_ticks; i++) {
        const double py = PY + PH - axis_at(y, y->ticks[i], PH);
        tmm_svg_put(t, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                       "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                    PX, py, PX + PW, py, PX - 6, py + 4, y->ticks[i]);
    }
    tmm_svg_put(t, "<text class=\"x-label\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">", PX + PW / 2,
                PY + PH + 42);
    tmm_svg_put_escaped(t, c->x_label ? c->x_label : "");
    tmm_svg_put(t, "</text>\n<text class=\"y-label\" x=\"0\" y=\"0\" text-anchor=\"middle\" "
                   "transform=\"translate(20 %.0f) rotate(-90)\">",
                PY + PH / 2);
    tmm_svg_put_escaped(t, c->y_label ? c->y_label : "");
    tmm_svg_put(t, "</text>\n");
    if (c->note) {
        tmm_svg_put(t, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" fill=\"#555\">", PX, HEIGHT - 12);
        tmm_svg_put_escaped(t, c->note);
        tmm_svg_put(t, "</text>\n");
    }
}

static void chart_legend(tmm_svg *t, const tmm_chart *c, bool bars)
{
    for (uint32_t i = 0; i < c->n_series; i++) {
        const double y = PY + 10 + 20.0 * i;
        if (bars)
            tmm_svg_put(t, "<rect x=\"%.0f\" y=\"%.0f\" width=\"18\" height=\"10\" fill=\"%s\"/>", LEGEND_X, y - 9,
                        color(i));
        else
            tmm_svg_put(t, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"%s/>",
                        LEGEND_X, y - 4, LEGEND_X + 18, y - 4, color(i), dash(i));
        tmm_svg_put(t, "<text class=\"legend\" x=\"%.0f\" y=\"%.0f\">", LEGEND_X + 24, y);
        tmm_svg_put_escaped(t, c->series[i].label ? c->series[i].label : "");
        tmm_svg_put(t, "</text>\n");
    }
}

tmm_status tmm_svg_line_chart(const tmm_chart *c, tmm_svg *t)
{
    TMM_TRY(check_chart(c));
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (uint32_t s = 0; s < c->n_series; s++)
        for (uint32_t i = 0; i < c->series[s].count; i++) {
            const double x = c->series[s].x[i], y = c->series[s].y[i];
            if (!usable(x, c->log_x) || !usable(y, c->log_y))
                continue;
            xlo = fmin(xlo, x), xhi = fmax(xhi, x), ylo = fmin(ylo, y), yhi = fmax(yhi, y);
        }
    axis ax, ay;
    axis_fit(&ax, xlo, xhi, c->log_x, false);
    axis_fit(&ay, ylo, yhi, c->log_y, c->y_from_zero);
    chart_head(t, c);
    chart_axes(t, c, &ay);
    for (uint32_t i = 0; i < ax.n_ticks; i++) {
        const double px = PX + axis_at(&ax, ax.ticks[i], PW);
        tmm_svg_put(t, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#e4e4e4\"/>"
                       "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n",
                    px, PY, px, PY + PH, px, PY + PH + 18, ax.ticks[i]);
    }
    for (uint32_t s = 0; s < c->n_series; s++) {
        const tmm_chart_series *ser = &c->series[s];
        uint32_t shown = 0;
        tmm_svg_put(t, "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
                    color(s), dash(s));
        for (uint32_t i = 0; i < ser->count; i++)
            if (usable(ser->x[i], c->log_x) && usable(ser->y[i], c->log_y)) {
                tmm_svg_put(t, "%.1f,%.1f ", PX + axis_at(&ax, ser->x[i], PW), PY + PH - axis_at(&ay, ser->y[i], PH));
                shown++;
            }
        tmm_svg_put(t, "\"/>\n");
        for (uint32_t i = 0; i < ser->count && shown <= 40; i++) /* markers where points are few */
            if (usable(ser->x[i], c->log_x) && usable(ser->y[i], c->log_y))
                tmm_svg_put(t, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>", PX + axis_at(&ax, ser->x[i], PW),
                            PY + PH - axis_at(&ay, ser->y[i], PH), color(s));
        tmm_svg_put(t, "\n");
    }
    chart_legend(t, c, false);
    tmm_svg_put(t, "</svg>\n");
    return TMM_OK;
}

tmm_status tmm_svg_bar_chart(const tmm_chart *c, tmm_svg *t)
{
    TMM_TRY(check_chart(c));
    if (c->n_categories == 0 || !c->categories)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "bar chart '%s' has no categories", c->title);
    double ylo = INFINITY, yhi = -INFINITY;
    for (uint32_t s = 0; s < c->n_series; s++)
        for (uint32_t i = 0; i < c->series[s].count && i < c->n_categories; i++)
            if (usable(c->series[s].y[i], c->log_y))
                ylo = fmin(ylo, c->series[s].y[i]), yhi = fmax(yhi, c->series[s].y[i]);
    axis ay;
    axis_fit(&ay, ylo, yhi, c->log_y, true);
    chart_head(t, c);
    chart_axes(t, c, &ay);
    const double slot = PW / c->n_categories, bar = 0.8 * slot / c->n_series;
    for (uint32_t k = 0; k < c->n_categories; k++) {
        const double x0 = PX + k * slot + 0.1 * slot;
        tmm_svg_put(t, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">", PX + (k + 0.5) * slot, PY + PH + 18);
        tmm_svg_put_escaped(t, c->categories[k]);
        tmm_svg_put(t, "</text>\n");
        for (uint32_t s = 0; s < c->n_series; s++) {
            const double x = x0 + s * bar;
            const double v = k < c->series[s].count ? c->series[s].y[k] : NAN;
            if (!usable(v, c->log_y)) { /* no value: a mark, explained by the note */
                tmm_svg_put(t, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\" fill=\"%s\">"
                               "&#8212;</text>\n", x + bar / 2, PY + PH - 4, color(s));
                continue;
            }
            const double h = axis_at(&ay, v, PH);
            tmm_svg_put(t, "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>"
                           "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\">%.3g</text>\n",
                        x, PY + PH - h, bar * 0.92, h, color(s), x + bar / 2, PY + PH - h - 3, v);
        }
    }
    chart_legend(t, c, true);
    tmm_svg_put(t, "</svg>\n");
    return TMM_OK;
}
