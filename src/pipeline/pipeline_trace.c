/* zbpp — the pipeline trainer's --trace files: the last step's measured timeline and the
 * simulator's prediction from the plan's cost model, as Chrome traces and SVG charts, and the
 * overlay of both. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_trace.h"
#include "zbpp/pipeline_trace.h"
#include "zbpp/schedule_io.h"
#include "zbpp/svg.h"
#include "zbpp/util.h"

zb_status_t zb_pipeline_trace_path(const char *path, zb_trace_file_t which, char *out, size_t cap,
                                   zb_err_t *err)
{
    static const char *const suffix[ZB_TRACE_FILES] = {"", ".predicted.json", ".svg",
                                                       ".predicted.svg"};
    size_t n = strlen(path);
    if (which == ZB_TRACE_MEASURED_JSON) {
        if (n + 1 > cap)
            return zb_err_set(err, ZB_EINVAL, "trace path too long");
        memcpy(out, path, n + 1);
        return ZB_OK;
    }
    if (n >= 5 && !strcmp(path + n - 5, ".json"))
        n -= 5;
    int w = snprintf(out, cap, "%.*s%s", (int)n, path, suffix[which]);
    if (w < 0 || (size_t)w >= cap)
        return zb_err_set(err, ZB_EINVAL, "trace path too long: %s", path);
    return ZB_OK;
}

typedef struct {
    zb_trace_span_t *at;
    int n;
} spans_t;

static zb_status_t write_one(const char *path, const zb_sim_t *sim, bool svg, double scale,
                             const char *title, const spans_t *extra, zb_err_t *err)
{
    zb_atomic_file_t af;
    zb_status_t st = zb_atomic_open(&af, path, err);
    if (st != ZB_OK)
        return st;
    st = svg ? zb_svg_write(sim, title, af.f, err)
             : zb_trace_write_spans(sim, scale, extra ? extra->at : NULL, extra ? extra->n : 0,
                                    af.f, err);
    if (st != ZB_OK) {
        zb_atomic_abort(&af);
        return st;
    }
    return zb_atomic_commit(&af, err);
}

/* --trace-svg: measured and predicted in one chart, in seconds. Profiled costs are seconds
 * already; a FLOP-model prediction (block-F units) is scaled so its busiest rank's compute
 * equals the measured one's, which compares the shapes (bubbles) rather than the speed. */
static zb_status_t write_overlay(pl_t *pl, const zb_sim_t *measured, const zb_sim_t *pred,
                                 zb_err_t *err)
{
    char title[200];
    double scale = 1.0;
    if (!pl->prof && pred->busy_max > 0 && measured->busy_max > 0)
        scale = measured->busy_max / pred->busy_max;
    snprintf(title, sizeof title, "%s P=%d M=%d, last step: measured vs predicted (%s)",
             pl->plan.sched->name, pl->P, pl->M,
             pl->prof ? "profiled costs"
                      : "FLOP model scaled to the measured busiest rank");
    zb_svg_opts_t o = {.title = title, .time_unit = "s", .predicted_scale = scale};
    zb_atomic_file_t af;
    zb_status_t st = zb_atomic_open(&af, pl->opts->trace_svg_path, err);
    if (st != ZB_OK)
        return st;
    if ((st = zb_svg_write_overlay(measured, pred, &o, af.f, err)) != ZB_OK) {
        zb_atomic_abort(&af);
        return st;
    }
    return zb_atomic_commit(&af, err);
}

/* every rank's phase segments as trace intervals on the measured sim's clock */
static zb_status_t phase_spans(const pl_t *pl, const zb_step_phases_t *phases, double shift,
                               spans_t *out, zb_err_t *err)
{
    out->n = 0;
    out->at = phases ? malloc((size_t)pl->P * ZB_STEP_SEGMENTS * sizeof *out->at) : NULL;
    if (phases && !out->at)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the trace's step phases");
    for (int r = 0; phases && r < pl->P; r++)
        for (int k = 0; k < (int)phases[r].segments && k < ZB_STEP_SEGMENTS; k++)
            out->at[out->n++] = (zb_trace_span_t){
                .rank = r,
                .name = zb_step_phase_name((zb_step_phase_t)phases[r].seg_phase[k]),
                .start = phases[r].seg_start[k] - shift,
                .end = phases[r].seg_end[k] - shift};
    return ZB_OK;
}

zb_status_t pl_write_traces(pl_t *pl, const zb_sim_t *measured, const zb_sim_t *pred,
                            const zb_step_phases_t *phases, double shift, zb_err_t *err)
{
    const char *path = pl->opts->trace_path;
    char name[4400], title[200];
    spans_t extra;
    zb_status_t st = phase_spans(pl, phases, shift, &extra, err);
    if (st != ZB_OK)
        return st;
    /* profiled costs are seconds, like the measured timeline; a FLOP-model unit shows as 1 ms */
    double pscale = pl->prof ? 1e6 : 1000;
    for (int k = 0; st == ZB_OK && path && k < ZB_TRACE_FILES; k++) {
        bool is_pred = k == ZB_TRACE_PREDICTED_JSON || k == ZB_TRACE_PREDICTED_SVG;
        bool svg = k == ZB_TRACE_MEASURED_SVG || k == ZB_TRACE_PREDICTED_SVG;
        snprintf(title, sizeof title, "%s P=%d M=%d: %s", pl->plan.sched->name, pl->P, pl->M,
                 is_pred ? (pl->prof ? "predicted (profiled costs, s)"
                                     : "predicted (FLOP model, block-F units)")
                         : "measured (s)");
        if ((st = zb_pipeline_trace_path(path, (zb_trace_file_t)k, name, sizeof name, err)) ==
            ZB_OK)
            st = write_one(name, is_pred ? pred : measured, svg, is_pred ? pscale : 1e6, title,
                           is_pred ? NULL : &extra, err);
    }
    if (st == ZB_OK && pl->opts->trace_svg_path)
        st = write_overlay(pl, measured, pred, err);
    free(extra.at);
    return st;
}
