/* SVG Gantt chart of a timeline: title, one row per rank, a time axis with "nice" ticks, one
 * rectangle per compute action coloured by type, microbatch labels where they fit, a legend.
 * Plain SVG 1.1, no scripts or external resources. */
#include "zbpp/schedule_io.h"

#include <math.h>
#include <stdio.h>

#include "schedule/io_internal.h"

enum {
    SVG_LEFT = 70,   /* room for "rank 12" */
    SVG_RIGHT = 20,
    SVG_TOP = 44,    /* title */
    SVG_ROW = 26,    /* row height */
    SVG_GAP = 4,     /* vertical gap inside a row */
    SVG_AXIS = 34,   /* axis and tick labels */
    SVG_LEGEND = 28,
    SVG_MIN_PLOT = 600,
    SVG_MAX_PLOT = 4000,
};

/* Colourblind-friendly (Tableau 10) fills, one per compute type. */
static const char *svg_fill(zb_action_type_t t)
{
    switch (t) {
    case ZB_ACT_F: return "#4e79a7";
    case ZB_ACT_B: return "#f28e2b";
    case ZB_ACT_W: return "#59a14f";
    case ZB_ACT_BW: return "#e15759";
    default: return "#999999";
    }
}

/* A tick step of 1, 2 or 5 times a power of ten giving about `want` ticks over `range`. */
static double nice_step(double range, int want)
{
    double raw = range / want;
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

zb_status_t zb_svg_write(const zb_sim_t *sim, const char *title, FILE *out, zb_err_t *err)
{
    zb_status_t st = zb_io_check_sim(sim, "svg", err);
    if (st != ZB_OK)
        return st;
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "svg: no output");
    const zb_schedule_t *s = sim->schedule;

    /* Time origin: the earliest start (measured timelines need not start at 0). */
    double t0 = INFINITY, t1 = -INFINITY;
    for (int r = 0; r < sim->ranks; r++)
        for (int i = 0; i < sim->len[r]; i++) {
            t0 = fmin(t0, sim->start[r][i]);
            t1 = fmax(t1, sim->end[r][i]);
        }
    if (!(t1 > t0)) {
        t0 = 0;
        t1 = 1;
    }
    double range = t1 - t0;
    /* Width grows with the number of actions so labels stay legible, within bounds. */
    long nact = 0;
    for (int r = 0; r < sim->ranks; r++)
        nact += sim->len[r];
    double plot_w = fmin(SVG_MAX_PLOT, fmax(SVG_MIN_PLOT, 12.0 * (double)nact / sim->ranks));
    double xs = plot_w / range;
    int width = SVG_LEFT + (int)plot_w + SVG_RIGHT;
    int height = SVG_TOP + sim->ranks * SVG_ROW + SVG_AXIS + SVG_LEGEND;

    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            width, height, width, height);
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
    fputs("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", out);
    zb_io_xml_text(out, title ? title : s->name);
    fprintf(out, " \xe2\x80\x94 P=%d, v=%d, M=%d, makespan %.4g, bubble %.1f%%</text>\n",
            s->ranks, s->chunks, s->microbatches, sim->makespan, 100.0 * sim->bubble_rate);

    /* Rows: label and a light background band. */
    for (int r = 0; r < sim->ranks; r++) {
        int y = SVG_TOP + r * SVG_ROW;
        fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">rank %d</text>\n",
                SVG_LEFT - 8, y + SVG_ROW / 2 + 4, r);
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>\n",
                SVG_LEFT, y + SVG_GAP / 2, plot_w, SVG_ROW - SVG_GAP, r % 2 ? "#f4f4f4" : "#ececec");
    }

    /* Actions. */
    for (int r = 0; r < sim->ranks; r++) {
        int y = SVG_TOP + r * SVG_ROW + SVG_GAP / 2;
        for (int i = 0; i < sim->len[r]; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            zb_action_type_t t = (zb_action_type_t)a->type;
            if (!zb_action_is_compute(t))
                continue;
            double x = SVG_LEFT + (sim->start[r][i] - t0) * xs;
            double w = (sim->end[r][i] - sim->start[r][i]) * xs;
            /* Second chunk of a rank drawn lighter, so interleaved / V schedules read clearly. */
            bool odd_chunk = zb_io_local_chunk(s, a->stage) % 2;
            fprintf(out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                         "fill-opacity=\"%s\" stroke=\"white\" stroke-width=\"0.5\">"
                         "<title>%s stage %d mb %d [%.6g, %.6g]</title></rect>\n",
                    x, y, w, SVG_ROW - SVG_GAP, svg_fill(t), odd_chunk ? "0.6" : "1",
                    zb_action_type_name(t), a->stage, a->mb, sim->start[r][i], sim->end[r][i]);
            char label[16];
            int n = snprintf(label, sizeof label, "%d", a->mb);
            if (w >= 7.0 * n + 4)
                fprintf(out, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" fill=\"white\">%s"
                             "</text>\n", x + w / 2, y + (SVG_ROW - SVG_GAP) / 2 + 4, label);
        }
    }

    /* Time axis. */
    int ya = SVG_TOP + sim->ranks * SVG_ROW + 4;
    fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"black\"/>\n", SVG_LEFT,
            ya, SVG_LEFT + plot_w, ya);
    double step = nice_step(range, 10);
    for (int k = 0; k * step <= range * (1 + 1e-9) && k < 1000; k++) {
        double x = SVG_LEFT + k * step * xs;
        fprintf(out, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"black\"/>"
                     "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%.4g</text>\n",
                x, ya, x, ya + 5, x, ya + 17, k * step);
    }
    fprintf(out, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"end\" fill=\"#555\">time</text>\n",
            SVG_LEFT + plot_w, ya + 30);

    /* Legend. */
    static const zb_action_type_t kinds[] = {ZB_ACT_F, ZB_ACT_B, ZB_ACT_W, ZB_ACT_BW};
    static const char *const names[] = {"F forward", "B input grad", "W weight grad",
                                        "BW full backward"};
    int yl = SVG_TOP + sim->ranks * SVG_ROW + SVG_AXIS + 8;
    for (int k = 0; k < 4; k++) {
        int x = SVG_LEFT + k * 130;
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"%s\"/>"
                     "<text x=\"%d\" y=\"%d\">%s</text>\n",
                x, yl, svg_fill(kinds[k]), x + 19, yl + 10, names[k]);
    }
    fputs("</svg>\n", out);
    if (ferror(out))
        return zb_err_set(err, ZB_EIO, "svg: write failed");
    return ZB_OK;
}
