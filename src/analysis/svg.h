/* SVG written as plain text: a growing text buffer (the symbol plots of
 * tmm index use it directly) and two charts for the experiments' results, a
 * line chart and a grouped bar chart, each with a title, labelled axes and a
 * legend. */
#ifndef TMM_ANALYSIS_SVG_H
#define TMM_ANALYSIS_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct tmm_svg {
    char *buf;
    size_t len, cap;
    bool failed;   /* out of memory: every later put does nothing, save fails */
} tmm_svg;

/* Appends printf-style text. */
void tmm_svg_put(tmm_svg *t, const char *fmt, ...) TMM_PRINTF(2, 3);
/* Appends s with &, <, > and " escaped. */
void tmm_svg_put_escaped(tmm_svg *t, const char *s);
/* Writes the text to path atomically. */
tmm_status tmm_svg_save(const tmm_svg *t, const char *path);
void tmm_svg_free(tmm_svg *t);

#define TMM_CHART_MAX_SERIES 16

typedef struct tmm_chart_series {
    const char *label;      /* the legend's entry */
    const double *x, *y;    /* count points; non-finite values (and <= 0 on a log axis) are skipped */
    uint32_t count;         /* bar charts: y[c] per category, x unused */
} tmm_chart_series;

typedef struct tmm_chart {
    const char *title;
    const char *x_label, *y_label;  /* with units: "training steps", "held-out accuracy (fraction)" */
    bool log_x, log_y;              /* log axes (decade ticks) */
    bool y_from_zero;               /* a linear y axis starts at 0 */
    const tmm_chart_series *series;
    uint32_t n_series;              /* 1 .. TMM_CHART_MAX_SERIES */
    const char *const *categories;  /* bar charts: the groups along x */
    uint32_t n_categories;
    const char *note;               /* a line under the plot (e.g. what a missing bar means), or NULL */
} tmm_chart;

/* The chart as a whole SVG document appended to out (which starts empty).
 * Errors: no series, too many, or (bars) no categories. */
tmm_status tmm_svg_line_chart(const tmm_chart *chart, tmm_svg *out);
tmm_status tmm_svg_bar_chart(const tmm_chart *chart, tmm_svg *out);

#endif
