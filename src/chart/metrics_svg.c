/* The training metrics plot (`zbpp plot`): stacked panels sharing the step axis — loss (+ val
 * loss), learning rate, tokens/s — each with ticks, an axis title with its unit, and a legend. */
#include "zbpp/svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    M_LEFT = 80, M_RIGHT = 30, M_TOP = 40,
    M_PLOT_W = 760, M_PANEL_H = 200, M_PANEL_GAP = 56, M_BOTTOM = 50,
};

static double nice_step(double range, int want)
{
    double raw = range / want;
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* Finite min/max over the series (and the second one when given). */
static void range_of(const double *a, const double *b, int n, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (isfinite(a[i])) {
            *lo = fmin(*lo, a[i]);
            *hi = fmax(*hi, a[i]);
        }
        if (b && isfinite(b[i])) {
            *lo = fmin(*lo, b[i]);
            *hi = fmax(*hi, b[i]);
        }
    }
    if (!isfinite(*lo)) {
        *lo = 0;
        *hi = 1;
    } else if (*hi - *lo <= fabs(*hi) * 1e-12) { /* flat: give it some room */
        double pad = *hi != 0 ? fabs(*hi) * 0.1 : 1;
        *lo -= pad;
        *hi += pad;
    }
}

typedef struct {
    double x0, x1, y0, y1; /* data ranges */
    int top;               /* panel top in px */
} panel_t;

static double px(const panel_t *p, double x) { return M_LEFT + (x - p->x0) / (p->x1 - p->x0) * M_PLOT_W; }
static double py(const panel_t *p, double y)
{
    return p->top + M_PANEL_H - (y - p->y0) / (p->y1 - p->y0) * M_PANEL_H;
}

static void frame(FILE *out, const panel_t *p, const char *ytitle, bool x_title)
{
    fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" "
                 "stroke=\"#888\"/>\n", M_LEFT, p->top, M_PLOT_W, M_PANEL_H);
    double ys = nice_step(p->y1 - p->y0, 5);
    for (double v = ceil(p->y0 / ys) * ys; v <= p->y1 + ys * 1e-9; v += ys) {
        double y = py(p, v);
        fprintf(out, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#ddd\"/>"
                     "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\">%.6g</text>\n",
                M_LEFT, y, M_LEFT + M_PLOT_W, y, M_LEFT - 6, y + 4, fabs(v) < ys * 1e-9 ? 0 : v);
    }
    double xs = nice_step(p->x1 - p->x0, 8);
    for (double v = ceil(p->x0 / xs) * xs; v <= p->x1 + xs * 1e-9; v += xs) {
        double x = px(p, v);
        fprintf(out, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#888\"/>"
                     "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%.6g</text>\n",
                x, p->top + M_PANEL_H, x, p->top + M_PANEL_H + 5, x, p->top + M_PANEL_H + 18, v);
    }
    fprintf(out, "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\" "
                 "fill=\"#333\">%s</text>\n", 16, p->top + M_PANEL_H / 2, ytitle);
    if (x_title)
        fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#333\">step "
                     "(optimizer steps)</text>\n", M_LEFT + M_PLOT_W / 2, p->top + M_PANEL_H + 36);
}

/* The series as one polyline through its finite points (records without the field, e.g. val_loss
 * records between train records, or a null loss of a skipped step, are passed over); with more
 * points than pixels, each pixel column keeps its min and max so spikes stay visible. Markers
 * when points are sparse. */
static void series(FILE *out, const panel_t *p, const double *x, const double *y, int n,
                   const char *color, bool dashed)
{
    int pts = 0;
    for (int i = 0; i < n; i++)
        pts += isfinite(y[i]);
    bool dense = pts > 2 * M_PLOT_W;
    bool open = false;
    int col = -1;
    double cmin = 0, cmax = 0;
    for (int i = 0; i <= n; i++) {
        if (i < n && !(isfinite(y[i]) && isfinite(x[i])))
            continue;
        bool ok = i < n;
        int c = ok ? (int)floor(px(p, x[i])) : -2;
        if (dense && col >= 0 && (c != col || !ok)) { /* flush the column */
            fprintf(out, " %d,%.2f %d,%.2f", col, py(p, cmin), col, py(p, cmax));
            col = -1;
        }
        if (!ok) {
            if (open)
                fputs("\"/>\n", out);
            open = false;
            continue;
        }
        if (!open) {
            fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"",
                    color, dashed ? " stroke-dasharray=\"5,3\"" : "");
            open = true;
        }
        if (!dense) {
            fprintf(out, " %.2f,%.2f", px(p, x[i]), py(p, y[i]));
        } else if (col < 0) {
            col = c;
            cmin = cmax = y[i];
        } else {
            cmin = fmin(cmin, y[i]);
            cmax = fmax(cmax, y[i]);
        }
    }
    if (pts <= 60) /* sparse (e.g. val_loss every N steps): mark the points */
        for (int i = 0; i < n; i++)
            if (isfinite(y[i]) && isfinite(x[i]))
                fprintf(out, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"%s\"/>\n",
                        px(p, x[i]), py(p, y[i]), color);
}

static void legend_entry(FILE *out, int x, int y, const char *color, bool dashed, const char *txt)
{
    fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                 "<text x=\"%d\" y=\"%d\">%s</text>\n",
            x, y, x + 22, y, color, dashed ? " stroke-dasharray=\"5,3\"" : "", x + 28, y + 4, txt);
}

zb_status_t zb_metrics_svg_write(const zb_metrics_t *m, const char *title, FILE *out,
                                 zb_err_t *err)
{
    if (!m || !out || m->count < 1 || !m->step)
        return zb_err_set(err, ZB_EINVAL, "plot: no metrics to draw");
    int panels = 1 + m->has_lr + m->has_tokens_per_s;
    int height = M_TOP + panels * (M_PANEL_H + M_PANEL_GAP) + M_BOTTOM - M_PANEL_GAP;
    int width = M_LEFT + M_PLOT_W + M_RIGHT;
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
                 "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
            width, height, width, height, width, height);
    panel_t p = {.top = M_TOP};
    range_of(m->step, NULL, m->count, &p.x0, &p.x1);

    /* title: the last loss and val_loss */
    double last_loss = NAN, last_val = NAN;
    for (int i = 0; i < m->count; i++) {
        if (isfinite(m->loss[i]))
            last_loss = m->loss[i];
        if (isfinite(m->val_loss[i]))
            last_val = m->val_loss[i];
    }
    fputs("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", out);
    for (const char *c = title ? title : "training"; *c; c++) { /* XML-escape */
        switch (*c) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*c, out);
        }
    }
    fprintf(out, " \xe2\x80\x94 %d records", m->count);
    if (isfinite(last_loss))
        fprintf(out, ", last loss %.4f", last_loss);
    if (isfinite(last_val))
        fprintf(out, ", last val loss %.4f", last_val);
    fputs("</text>\n", out);

    /* loss panel */
    range_of(m->loss, m->val_loss, m->count, &p.y0, &p.y1);
    frame(out, &p, "loss (nats per token)", panels == 1);
    if (m->has_loss)
        series(out, &p, m->step, m->loss, m->count, "#4e79a7", false);
    if (m->has_val_loss)
        series(out, &p, m->step, m->val_loss, m->count, "#e15759", true);
    int lx = M_LEFT + M_PLOT_W - 150;
    if (m->has_loss)
        legend_entry(out, lx, p.top + 14, "#4e79a7", false, "train loss");
    if (m->has_val_loss)
        legend_entry(out, lx, p.top + 30, "#e15759", true, "validation loss");

    const double *rest[2] = {m->lr, m->tokens_per_s};
    const bool has[2] = {m->has_lr, m->has_tokens_per_s};
    const char *const names[2] = {"learning rate", "throughput (tokens/s)"};
    const char *const colors[2] = {"#59a14f", "#f28e2b"};
    int drawn = 1;
    for (int k = 0; k < 2; k++) {
        if (!has[k])
            continue;
        p.top = M_TOP + drawn * (M_PANEL_H + M_PANEL_GAP);
        drawn++;
        range_of(rest[k], NULL, m->count, &p.y0, &p.y1);
        if (k == 1)
            p.y0 = fmin(p.y0, 0); /* throughput from 0: dips read as fractions */
        frame(out, &p, names[k], drawn == panels);
        series(out, &p, m->step, rest[k], m->count, colors[k], false);
    }
    fputs("</svg>\n", out);
    if (ferror(out))
        return zb_err_set(err, ZB_EIO, "plot: write failed");
    return ZB_OK;
}
