/* ASCII grid of a timeline for the terminal.
 *
 * Time is cut into cells of width q (the shortest compute action). An action owns every cell
 * whose midpoint lies inside [start, end), so adjacent actions never fight over a cell and
 * rounding is consistent across ranks. Each cell is cw characters: room for a letter, the
 * largest microbatch number and a separating space. Too wide for max_width: first drop the space,
 * then the numbers (cw = 1), then grow q until it fits. */
#include "zbpp/schedule_io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/io_internal.h"

static int digits(int v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

static char action_letter(const zb_schedule_t *s, const zb_action_t *a)
{
    char c;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_F: c = 'F'; break;
    case ZB_ACT_W: c = 'W'; break;
    case ZB_ACT_R: c = 'R'; break;
    case ZB_ACT_O: c = 'O'; break;
    case ZB_ACT_L: c = 'L'; break;
    default: c = 'B'; break; /* B, and a fused BW */
    }
    return zb_io_local_chunk(s, a->stage) % 2 ? (char)(c - 'A' + 'a') : c;
}

/* The cells of the drawing: cell k covers [t0 + k q, t0 + (k + 1) q), cw characters each. */
typedef struct {
    double t0, q;
    long ncols;
    int cw;
    bool spaced;
} grid_t;

/* Fill `row` (width characters) with rank r's compute actions (kind < 0) or its copies of type
 * `kind` (ZB_ACT_O or ZB_ACT_L). */
static void draw_row(char *row, size_t width, const grid_t *g, const zb_sim_t *sim, int r,
                     int kind)
{
    const zb_schedule_t *s = sim->schedule;
    const long ncols = g->ncols;
    const int cw = g->cw;
    memset(row, '.', width);
    row[width] = '\0';
    for (int i = 0; i < sim->len[r]; i++) {
        const zb_action_t *a = &s->rank[r].actions[i];
        if (kind < 0 ? !zb_action_is_compute((zb_action_type_t)a->type) : a->type != kind)
            continue;
        double cs = (sim->start[r][i] - g->t0) / g->q, ce = (sim->end[r][i] - g->t0) / g->q;
        long first = (long)ceil(cs - 0.5), last = (long)ceil(ce - 0.5) - 1;
        if (first > last) { /* narrower than a cell: show it only where nothing else is */
            first = last = (long)floor(cs);
            if (first >= ncols)
                first = last = ncols - 1;
            if (row[(size_t)first * cw] != '.')
                continue;
        }
        if (first < 0)
            first = 0;
        if (last >= ncols)
            last = ncols - 1;
        char label[24];
        char letter = action_letter(s, a);
        int ln = cw > 1 ? snprintf(label, sizeof label, "%c%d", letter, a->mb)
                        : snprintf(label, sizeof label, "%c", letter);
        size_t o = (size_t)first * cw, e = (size_t)(last + 1) * cw;
        char fill = cw == 1 ? letter : last == first ? ' ' : '-';
        for (size_t k = 0; o + k < e; k++)
            row[o + k] = (int)k < ln ? label[k] : fill;
        if (g->spaced && e - o > (size_t)ln)
            row[e - 1] = ' '; /* keep neighbours apart */
    }
}

zb_status_t zb_ascii_write(const zb_sim_t *sim, int max_width, FILE *out, zb_err_t *err)
{
    zb_status_t st = zb_io_check_sim(sim, "ascii", err);
    if (st != ZB_OK)
        return st;
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "ascii: no output");
    if (max_width <= 0)
        max_width = 200;
    if (max_width < 8)
        max_width = 8;
    const zb_schedule_t *s = sim->schedule;

    double t0 = INFINITY, t1 = -INFINITY, q = INFINITY;
    for (int r = 0; r < sim->ranks; r++)
        for (int i = 0; i < sim->len[r]; i++) {
            t0 = fmin(t0, sim->start[r][i]);
            t1 = fmax(t1, sim->end[r][i]);
            double d = sim->end[r][i] - sim->start[r][i];
            if (zb_action_is_compute((zb_action_type_t)s->rank[r].actions[i].type) && d > 0)
                q = fmin(q, d);
        }
    if (!(t1 > t0)) { /* nothing takes time: nothing to draw */
        fprintf(out, "%s: empty timeline\n", s->name);
        return ferror(out) ? zb_err_set(err, ZB_EIO, "ascii: write failed") : ZB_OK;
    }
    double range = t1 - t0;
    if (!isfinite(q) || range / q > 1e6)
        q = range / max_width;
    /* Widest layout that fits: "F12 " (a space between actions), then "F12", then "F". */
    int cw = 2 + digits(s->microbatches > 0 ? s->microbatches - 1 : 0);
    long ncols = (long)ceil(range / q - 1e-9);
    bool scaled = false, spaced = true;
    if (ncols * cw > max_width) {
        cw--;
        spaced = false;
    }
    if (ncols * cw > max_width) {
        cw = 1; /* letters only */
        if (ncols > max_width) {
            q = range / max_width;
            ncols = max_width;
            scaled = true;
        }
    }
    size_t width = (size_t)ncols * (size_t)cw;
    char *row = malloc(width + 1);
    if (!row)
        return zb_err_set(err, ZB_ENOMEM, "ascii: out of memory");

    fprintf(out, "%s: P=%d v=%d M=%d, one cell = %.4g time units%s\n", s->name, s->ranks,
            s->chunks, s->microbatches, q, scaled ? " (scaled down to fit)" : "");
    const grid_t g = {.t0 = t0, .q = q, .ncols = ncols, .cw = cw, .spaced = spaced};
    const bool copies = zb_schedule_has_offload(s);
    int rw = digits(s->ranks - 1);
    for (int r = 0; r < sim->ranks; r++) {
        draw_row(row, width, &g, sim, r, -1);
        fprintf(out, "r%-*d%s |%s|\n", rw, r, copies ? "  " : "", row);
        /* copies run beside the compute: one row per channel under the rank's */
        for (int dir = ZB_ACT_O; copies && dir <= ZB_ACT_L; dir++) {
            draw_row(row, width, &g, sim, r, dir);
            fprintf(out, "r%-*d %c |%s|\n", rw, r, dir == ZB_ACT_O ? 'O' : 'L', row);
        }
    }
    fputs("F forward, B backward (input grad; full backward if unsplit), W weight grad, "
          "lowercase = second chunk, . idle\n", out);
    if (zb_schedule_has_recompute(sim->schedule))
        fputs("R recompute (rebuilds what a non-saving F dropped)\n", out);
    if (copies)
        fputs("O offload of a stash to host memory, L its reload (rows O and L: the rank's copy "
              "channels)\n", out);
    free(row);
    if (ferror(out))
        return zb_err_set(err, ZB_EIO, "ascii: write failed");
    return ZB_OK;
}
