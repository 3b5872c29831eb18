/* SVG Gantt charts of timelines: the plain chart (zb_svg_write), the chart with options (axis
 * unit, message arrows) and the measured-vs-predicted overlay. Layout: title, one row per rank
 * (two lanes in the overlay), a time axis with "nice" ticks and its unit, a legend listing the
 * kinds present. Plain SVG 1.1, no scripts or external resources. */
#include "zbpp/schedule_io.h"
#include "zbpp/svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/io_internal.h"

enum {
    SVG_LEFT = 110,  /* room for "rank 12 measured" */
    SVG_RIGHT = 20,
    SVG_TOP = 44,    /* title */
    SVG_ROW = 26,    /* lane height */
    SVG_GAP = 4,     /* vertical gap inside a lane */
    SVG_AXIS = 40,   /* axis, tick labels and the axis title */
    SVG_LEGEND_LINE = 20, /* one legend line */
    SVG_MIN_PLOT = 600,
    SVG_MAX_PLOT = 4000,
    SVG_MAX_ARROWS = 20000,
};

/* Colourblind-friendly (Tableau 10) fills, one per compute type. */
static const char *svg_fill(zb_action_type_t t)
{
    switch (t) {
    case ZB_ACT_F: return "#4e79a7";
    case ZB_ACT_B: return "#f28e2b";
    case ZB_ACT_W: return "#59a14f";
    case ZB_ACT_BW: return "#e15759";
    case ZB_ACT_R: return "#b07aa1";
    case ZB_ACT_O: return "#edc948";
    case ZB_ACT_L: return "#76b7b2";
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

/* What a chart draws, computed once. */
typedef struct {
    double t0, range;   /* earliest start, span of the longest timeline drawn */
    double plot_w, xs;  /* plot width in px, px per time unit */
    int lanes;          /* lanes per rank (1, or 2 for the overlay) */
    int ranks;
    bool kind_present[ZB_ACT_COUNT];
    bool second_chunk;  /* some action of a rank's second (or later) chunk is drawn */
    const char *extra;  /* the legend's last line (arrows, overlay lanes), or NULL */
} layout_t;

/* Legend lines: the kinds, then the chunk shading and the extra note, each on its own line so
 * that neither runs past the right edge. */
static int legend_lines(const layout_t *L)
{
    return 1 + (L->second_chunk ? 1 : 0) + (L->extra ? 1 : 0);
}

static void time_bounds(const zb_sim_t *sim, double *t0, double *t1)
{
    *t0 = INFINITY;
    *t1 = -INFINITY;
    for (int r = 0; r < sim->ranks; r++)
        for (int i = 0; i < sim->len[r]; i++) {
            *t0 = fmin(*t0, sim->start[r][i]);
            *t1 = fmax(*t1, sim->end[r][i]);
        }
    if (!(*t1 > *t0)) { /* empty or zero-length timeline */
        *t0 = isfinite(*t0) ? *t0 : 0;
        *t1 = *t0 + 1;
    }
}

static long action_count(const zb_sim_t *sim)
{
    long n = 0;
    for (int r = 0; r < sim->ranks; r++)
        n += sim->len[r];
    return n;
}

static void note_kinds(layout_t *L, const zb_sim_t *sim)
{
    const zb_schedule_t *s = sim->schedule;
    for (int r = 0; r < sim->ranks; r++)
        for (int i = 0; i < sim->len[r]; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            if (zb_action_is_comm((zb_action_type_t)a->type))
                continue;
            L->kind_present[a->type] = true;
            if (zb_io_local_chunk(s, a->stage) > 0)
                L->second_chunk = true;
        }
}

static void begin(FILE *out, const layout_t *L, int *width, int *height)
{
    *width = SVG_LEFT + (int)L->plot_w + SVG_RIGHT;
    *height = SVG_TOP + L->ranks * L->lanes * SVG_ROW + SVG_AXIS + 6 +
              SVG_LEGEND_LINE * legend_lines(L);
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            *width, *height, *width, *height);
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", *width, *height);
    /* arrow head for message arrows */
    fputs("<defs><marker id=\"zb-arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" "
          "markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\">"
          "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#333\"/></marker></defs>\n",
          out);
}

/* Row backgrounds and labels; lane_names[lanes] may be NULL (one lane). */
static void rows(FILE *out, const layout_t *L, const char *const *lane_names)
{
    for (int r = 0; r < L->ranks; r++)
        for (int l = 0; l < L->lanes; l++) {
            int y = SVG_TOP + (r * L->lanes + l) * SVG_ROW;
            fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">rank %d%s%s</text>\n",
                    SVG_LEFT - 8, y + SVG_ROW / 2 + 4, r, lane_names ? " " : "",
                    lane_names ? lane_names[l] : "");
            fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>\n",
                    SVG_LEFT, y + SVG_GAP / 2, L->plot_w, SVG_ROW - SVG_GAP,
                    r % 2 ? "#f4f4f4" : "#ececec");
        }
}

/* One rectangle per compute action of `sim` in lane `lane`, its timeline shifted by -origin and
 * multiplied by tscale; with `labels`, their microbatch numbers instead (a second pass, drawn
 * after the arrows so that no arrow covers a number). */
static void actions(FILE *out, const layout_t *L, const zb_sim_t *sim, int lane, double origin,
                    double tscale, double opacity, bool labels)
{
    const zb_schedule_t *s = sim->schedule;
    for (int r = 0; r < sim->ranks; r++) {
        int y = SVG_TOP + (r * L->lanes + lane) * SVG_ROW + SVG_GAP / 2;
        int h = SVG_ROW - SVG_GAP;
        for (int i = 0; i < sim->len[r]; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            zb_action_type_t t = (zb_action_type_t)a->type;
            double x = SVG_LEFT + (sim->start[r][i] - origin) * tscale * L->xs;
            double w = (sim->end[r][i] - sim->start[r][i]) * tscale * L->xs;
            if (zb_action_is_copy(t) && !labels) {
                /* a copy runs beside the compute: a thin bar, O along the top of the lane and L
                 * along the bottom */
                fprintf(out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                             "fill-opacity=\"%.2g\"><title>%s stage %d mb %d [%.6g, %.6g]"
                             "</title></rect>\n",
                        x, t == ZB_ACT_O ? y : y + h - h / 4, w, h / 4, svg_fill(t), opacity,
                        zb_action_type_name(t), a->stage, a->mb, sim->start[r][i],
                        sim->end[r][i]);
                continue;
            }
            if (!zb_action_is_compute(t))
                continue;
            /* A rank's second chunk is drawn lighter, so interleaved / V schedules read clearly
             * (the legend says so). */
            bool later_chunk = zb_io_local_chunk(s, a->stage) > 0;
            if (!labels) {
                fprintf(out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                             "fill=\"%s\" fill-opacity=\"%.2g\" stroke=\"white\" "
                             "stroke-width=\"0.5\"><title>%s stage %d mb %d [%.6g, %.6g]"
                             "</title></rect>\n",
                        x, y, w, h, svg_fill(t), opacity * (later_chunk ? 0.55 : 1.0),
                        zb_action_type_name(t), a->stage, a->mb, sim->start[r][i],
                        sim->end[r][i]);
                continue;
            }
            /* The microbatch number, at 11 px when it fits, else at 8 px, else not at all
             * (digit advance ~0.6 em). */
            char label[16];
            int n = snprintf(label, sizeof label, "%d", a->mb);
            int size = w >= 6.6 * n + 3 ? 11 : w >= 4.8 * n + 2 ? 8 : 0;
            if (size)
                fprintf(out, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\" "
                             "font-size=\"%d\">%s</text>\n",
                        x + w / 2, y + h / 2.0 + size * 0.36, later_chunk ? "#111" : "white",
                        size, label);
        }
    }
}

/* For arrows: where the F and the B/BW of each (stage, mb) sit. */
typedef struct {
    int rank, idx;
} slot_t;

static zb_status_t arrows(FILE *out, const layout_t *L, const zb_sim_t *sim, double origin,
                          zb_err_t *err)
{
    const zb_schedule_t *s = sim->schedule;
    size_t n = (size_t)s->stages * (size_t)s->microbatches;
    /* count messages first, to refuse unreadable charts before allocating */
    long msgs = 0;
    for (int st = 0; st + 1 < s->stages; st++)
        if (zb_stage_rank(s, st) != zb_stage_rank(s, st + 1))
            msgs += 2L * s->microbatches;
    if (msgs > SVG_MAX_ARROWS)
        return zb_err_set(err, ZB_EINVAL, "svg: %ld messages are too many to draw as arrows "
                                          "(at most %d)", msgs, SVG_MAX_ARROWS);
    slot_t *fw = malloc(n * sizeof *fw), *bw = malloc(n * sizeof *bw);
    if (!fw || !bw) {
        free(fw);
        free(bw);
        return zb_err_set(err, ZB_ENOMEM, "svg: out of memory for arrows");
    }
    for (size_t k = 0; k < n; k++)
        fw[k].rank = bw[k].rank = -1;
    for (int r = 0; r < sim->ranks; r++)
        for (int i = 0; i < sim->len[r]; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            if (a->stage < 0 || a->stage >= s->stages || a->mb < 0 || a->mb >= s->microbatches)
                continue;
            size_t k = (size_t)a->stage * s->microbatches + a->mb;
            if (a->type == ZB_ACT_F)
                fw[k] = (slot_t){r, i};
            else if (a->type == ZB_ACT_B || a->type == ZB_ACT_BW)
                bw[k] = (slot_t){r, i};
        }
    fputs("<g stroke=\"#333\" stroke-width=\"0.8\" stroke-opacity=\"0.7\" fill=\"none\" "
          "marker-end=\"url(#zb-arrow)\">\n", out);
    for (int st = 0; st + 1 < s->stages; st++)
        for (int m = 0; m < s->microbatches; m++)
            for (int dir = 0; dir < 2; dir++) { /* 0: activation st -> st+1, 1: gradient back */
                size_t from = (size_t)(dir ? st + 1 : st) * s->microbatches + m;
                size_t to = (size_t)(dir ? st : st + 1) * s->microbatches + m;
                slot_t a = dir ? bw[from] : fw[from], b = dir ? bw[to] : fw[to];
                if (a.rank < 0 || b.rank < 0 || a.rank == b.rank)
                    continue;
                double x1 = SVG_LEFT + (sim->end[a.rank][a.idx] - origin) * L->xs;
                double x2 = SVG_LEFT + (sim->start[b.rank][b.idx] - origin) * L->xs;
                /* from the sender's box edge facing the receiver to the receiver's facing
                 * edge: between neighbouring ranks the arrow runs in the gap between rows,
                 * off the boxes and their numbers */
                bool down = b.rank > a.rank;
                double y1 = SVG_TOP + a.rank * L->lanes * SVG_ROW +
                            (down ? SVG_ROW - SVG_GAP / 2.0 : SVG_GAP / 2.0);
                double y2 = SVG_TOP + b.rank * L->lanes * SVG_ROW +
                            (down ? SVG_GAP / 2.0 : SVG_ROW - SVG_GAP / 2.0);
                fprintf(out, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>\n", x1,
                        y1, x2, y2);
            }
    fputs("</g>\n", out);
    free(fw);
    free(bw);
    return ZB_OK;
}

static void axis(FILE *out, const layout_t *L, const char *unit)
{
    int ya = SVG_TOP + L->ranks * L->lanes * SVG_ROW + 4;
    fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"black\"/>\n", SVG_LEFT,
            ya, SVG_LEFT + L->plot_w, ya);
    double step = nice_step(L->range, 10);
    for (int k = 0; k * step <= L->range * (1 + 1e-9) && k < 1000; k++) {
        double x = SVG_LEFT + k * step * L->xs;
        fprintf(out, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"black\"/>"
                     "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%.4g</text>\n",
                x, ya, x, ya + 5, x, ya + 17, k * step);
    }
    fputs("<text x=\"", out);
    fprintf(out, "%.2f\" y=\"%d\" text-anchor=\"middle\" fill=\"#333\">time (", SVG_LEFT + L->plot_w / 2,
            ya + 32);
    zb_io_xml_text(out, unit ? unit : "cost units");
    fputs(")</text>\n", out);
}

/* Legend: the kinds present, then what the lighter shade (and the overlay lanes) mean. */
static void legend(FILE *out, const layout_t *L)
{
    static const zb_action_type_t kinds[] = {ZB_ACT_F, ZB_ACT_B,  ZB_ACT_W, ZB_ACT_BW,
                                             ZB_ACT_R, ZB_ACT_O, ZB_ACT_L};
    static const char *const names[] = {"F forward",   "B input gradient",
                                        "W weight gradient", "BW full backward (B+W)",
                                        "R recompute", "O offload (to host)",
                                        "L reload (from host)"};
    int yl = SVG_TOP + L->ranks * L->lanes * SVG_ROW + SVG_AXIS + 4;
    int x = SVG_LEFT;
    for (int k = 0; k < (int)(sizeof kinds / sizeof kinds[0]); k++) {
        if (!L->kind_present[kinds[k]])
            continue;
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"%s\"/>"
                     "<text x=\"%d\" y=\"%d\">%s</text>\n",
                x, yl, svg_fill(kinds[k]), x + 19, yl + 10, names[k]);
        x += 40 + 6 * (int)strlen(names[k]);
    }
    int y2 = yl + SVG_LEGEND_LINE;
    x = SVG_LEFT;
    if (L->second_chunk) {
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"%s\"/>"
                     "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"%s\" "
                     "fill-opacity=\"0.55\"/><text x=\"%d\" y=\"%d\">darker: a rank's first "
                     "chunk (model part); lighter: its second chunk</text>\n",
                x, y2, svg_fill(ZB_ACT_F), x + 16, y2, svg_fill(ZB_ACT_F), x + 35, y2 + 10);
        y2 += SVG_LEGEND_LINE;
    }
    if (L->extra)
        fprintf(out, "<text x=\"%d\" y=\"%d\">%s</text>\n", x, y2 + 10, L->extra);
}

static zb_status_t finish(FILE *out, zb_err_t *err)
{
    fputs("</svg>\n", out);
    if (ferror(out))
        return zb_err_set(err, ZB_EIO, "svg: write failed");
    return ZB_OK;
}

zb_status_t zb_svg_write_opts(const zb_sim_t *sim, const zb_svg_opts_t *opts, FILE *out,
                              zb_err_t *err)
{
    zb_status_t st = zb_io_check_sim(sim, "svg", err);
    if (st != ZB_OK)
        return st;
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "svg: no output");
    zb_svg_opts_t o = opts ? *opts : (zb_svg_opts_t){0};
    const zb_schedule_t *s = sim->schedule;

    layout_t L = {.lanes = 1, .ranks = sim->ranks};
    double t1;
    time_bounds(sim, &L.t0, &t1);
    L.range = t1 - L.t0;
    /* Width grows with the number of actions so labels stay legible, within bounds. */
    L.plot_w = fmin(SVG_MAX_PLOT, fmax(SVG_MIN_PLOT, 12.0 * (double)action_count(sim) / sim->ranks));
    L.xs = L.plot_w / L.range;
    note_kinds(&L, sim);
    L.extra = o.arrows ? "arrows: messages between ranks (activations forward, gradients "
                         "backward)"
                       : NULL;

    int width, height;
    begin(out, &L, &width, &height);
    fputs("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", out);
    zb_io_xml_text(out, o.title ? o.title : s->name);
    fprintf(out, " \xe2\x80\x94 P=%d, v=%d, M=%d, makespan %.4g, bubble %.1f%%</text>\n",
            s->ranks, s->chunks, s->microbatches, sim->makespan, 100.0 * sim->bubble_rate);
    rows(out, &L, NULL);
    actions(out, &L, sim, 0, L.t0, 1.0, 1.0, false);
    if (o.arrows && (st = arrows(out, &L, sim, L.t0, err)) != ZB_OK)
        return st;
    actions(out, &L, sim, 0, L.t0, 1.0, 1.0, true);
    axis(out, &L, o.time_unit);
    legend(out, &L);
    return finish(out, err);
}

zb_status_t zb_svg_write(const zb_sim_t *sim, const char *title, FILE *out, zb_err_t *err)
{
    zb_svg_opts_t o = {.title = title};
    return zb_svg_write_opts(sim, &o, out, err);
}

zb_status_t zb_svg_write_overlay(const zb_sim_t *measured, const zb_sim_t *predicted,
                                 const zb_svg_opts_t *opts, FILE *out, zb_err_t *err)
{
    zb_status_t st = zb_io_check_sim(measured, "svg overlay (measured)", err);
    if (st == ZB_OK)
        st = zb_io_check_sim(predicted, "svg overlay (predicted)", err);
    if (st != ZB_OK)
        return st;
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "svg overlay: no output");
    if (measured->ranks != predicted->ranks)
        return zb_err_set(err, ZB_EINVAL, "svg overlay: measured timeline has %d ranks, the "
                                          "prediction %d", measured->ranks, predicted->ranks);
    zb_svg_opts_t o = opts ? *opts : (zb_svg_opts_t){0};
    double ps = o.predicted_scale == 0 ? 1.0 : o.predicted_scale;
    if (!(ps > 0) || !isfinite(ps))
        return zb_err_set(err, ZB_EINVAL, "svg overlay: bad predicted_scale %g", ps);

    layout_t L = {.lanes = 2, .ranks = measured->ranks};
    double m0, m1, p0, p1;
    time_bounds(measured, &m0, &m1);
    time_bounds(predicted, &p0, &p1);
    L.t0 = 0;
    L.range = fmax(m1 - m0, (p1 - p0) * ps);
    long nact = action_count(measured) > action_count(predicted) ? action_count(measured)
                                                                 : action_count(predicted);
    L.plot_w = fmin(SVG_MAX_PLOT, fmax(SVG_MIN_PLOT, 12.0 * (double)nact / L.ranks));
    L.xs = L.plot_w / L.range;
    note_kinds(&L, measured);
    note_kinds(&L, predicted);
    L.extra = "per rank: predicted lane (faded) above, measured lane below; both timelines "
              "start at 0";

    int width, height;
    begin(out, &L, &width, &height);
    fputs("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", out);
    zb_io_xml_text(out, o.title ? o.title : measured->schedule->name);
    fprintf(out, " \xe2\x80\x94 measured makespan %.4g vs predicted %.4g (%.2fx), bubble %.1f%% "
                 "vs %.1f%%</text>\n",
            measured->makespan, predicted->makespan * ps,
            predicted->makespan > 0 ? measured->makespan / (predicted->makespan * ps) : 0.0,
            100.0 * measured->bubble_rate, 100.0 * predicted->bubble_rate);
    static const char *const lanes[] = {"predicted", "measured"};
    rows(out, &L, lanes);
    for (int pass = 0; pass < 2; pass++) { /* the boxes, then their numbers */
        actions(out, &L, predicted, 0, p0, ps, 0.5, pass == 1);
        actions(out, &L, measured, 1, m0, 1.0, 1.0, pass == 1);
    }
    axis(out, &L, o.time_unit);
    legend(out, &L);
    return finish(out, err);
}
