/* zbpp — the pipeline run's report, measured side (the plan fills the predicted side,
 * pipeline_plan.c): the figures of the ranks this process ran, replica 0's timelines and memory
 * gathered to rank 0 over a transport, the measured bubble and the --trace files, and every
 * rank's own figures gathered for the printer (zb_pipeline_gather_rank_figures). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_dist.h"
#include "pipeline/pipeline_local.h"
#include "pipeline/pipeline_report.h"
#include "pipeline/rank_device.h"
#include "pipeline/pipeline_trace.h"
#include "pipeline/rank_memory.h"
#include "zbpp/util.h"

zb_status_t zb_pipeline_report_init(zb_pipeline_report_t *rep, int ranks, zb_err_t *err)
{
    memset(rep, 0, sizeof *rep);
    if (ranks < 1)
        return zb_err_set(err, ZB_EINVAL, "a pipeline report needs at least one rank (got %d)",
                          ranks);
    rep->ranks = ranks;
    rep->device_bytes_in_use = -1;
    rep->peak_stash_bytes = calloc((size_t)ranks, sizeof *rep->peak_stash_bytes);
    rep->predicted_stash_bytes = calloc((size_t)ranks, sizeof *rep->predicted_stash_bytes);
    rep->mem_predicted = calloc((size_t)ranks, sizeof *rep->mem_predicted);
    rep->mem_measured = calloc((size_t)ranks, sizeof *rep->mem_measured);
    rep->phases = calloc((size_t)ranks, sizeof *rep->phases);
    rep->action_measured = calloc((size_t)ranks * ZB_REPORT_KINDS, sizeof(double));
    rep->action_predicted = calloc((size_t)ranks * ZB_REPORT_KINDS, sizeof(double));
    if (!rep->peak_stash_bytes || !rep->predicted_stash_bytes || !rep->mem_predicted ||
        !rep->mem_measured || !rep->phases || !rep->action_measured || !rep->action_predicted) {
        zb_pipeline_report_free(rep);
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the report of %d ranks", ranks);
    }
    return ZB_OK;
}

void zb_pipeline_report_free(zb_pipeline_report_t *rep)
{
    if (!rep)
        return;
    free(rep->peak_stash_bytes), free(rep->predicted_stash_bytes);
    free(rep->mem_predicted), free(rep->mem_measured), free(rep->phases);
    free(rep->action_measured), free(rep->action_predicted);
    memset(rep, 0, sizeof *rep);
}

/* After the run, the figures of the ranks this process ran: the measured bubble of the last step
 * and the --trace files (replica 0's timelines: all here with threads, gathered to rank 0 over a
 * transport), rollbacks, stash peaks and whole-rank memory. */
zb_status_t pl_report_run(const pl_local_t *L, bool stepped, zb_pipeline_report_t *rep,
                              zb_err_t *err)
{
    pl_t *pl = L->pl;
    zb_status_t st = ZB_OK;
    for (int i = 0; i < L->n; i++) {
        const pl_rank_t *R = pl_local_rank(L, i);
        rep->rollbacks += R->rollbacks;
        if (R->rank < rep->ranks && (L->net || R->replica == 0)) {
            rep->peak_stash_bytes[R->rank] = (double)R->live_peak;
            if (!L->net) /* over a transport only this process's rank is measured */
                pl_mem_measure(R, &rep->mem_measured[R->rank]);
        }
    }
    rep->mem_measured_ok = !L->net;
    rep->rss_peak_bytes = zb_rss_peak_bytes();
    rep->device_bytes_in_use = pl->dev->bytes_in_use && !L->net ? pl->dev->bytes_in_use(pl) : -1;
    if (!stepped)
        return ZB_OK;
    if (L->net)
        return pl_gather_report(pl, rep, err);
    zb_exec_timeline_t *tls = calloc((size_t)pl->P, sizeof *tls);
    double *peaks = calloc((size_t)pl->P, sizeof *peaks);
    if (!tls || !peaks) {
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for the report");
    } else {
        for (int r = 0; r < pl->P; r++) { /* replica 0's ranks are pl->ranks[0..P-1] */
            tls[r] = pl->ranks[r].tl;
            peaks[r] = (double)pl->ranks[r].live_peak;
            if (r < rep->ranks)
                rep->phases[r] = pl->ranks[r].phases;
        }
        st = pl_report_measured(pl, tls, peaks, rep, err);
    }
    free(tls), free(peaks);
    return st;
}

/* the first action's start over the timelines: where zb_exec_fill_sim puts time 0 */
static double timeline_origin(const zb_exec_timeline_t *tls, int P)
{
    double first = INFINITY;
    for (int r = 0; r < P; r++)
        for (int i = 0; i < tls[r].len; i++)
            first = fmin(first, tls[r].start[i]);
    return isfinite(first) ? first : 0;
}

const zb_action_type_t zb_report_kinds[ZB_REPORT_KINDS] = {ZB_ACT_F, ZB_ACT_B, ZB_ACT_W,
                                                           ZB_ACT_BW, ZB_ACT_R};

/* Each rank's mean action time per kind, measured (the run's timeline) and predicted (the
 * plan's schedule simulated under its costs): where the cost model is wrong, by how much. */
static void action_times(const pl_t *pl, const zb_sim_t *measured, const zb_sim_t *pred,
                         zb_pipeline_report_t *rep)
{
    for (int r = 0; r < pl->P && r < rep->ranks; r++)
        for (int k = 0; k < ZB_REPORT_KINDS; k++) {
            int nm = 0, np = 0;
            double tm = zb_sim_type_time(measured, pl->plan.sched, r, zb_report_kinds[k], &nm);
            double tp = zb_sim_type_time(pred, pl->plan.sched, r, zb_report_kinds[k], &np);
            rep->action_measured[(size_t)r * ZB_REPORT_KINDS + (size_t)k] = nm ? tm / nm : 0;
            rep->action_predicted[(size_t)r * ZB_REPORT_KINDS + (size_t)k] = np ? tp / np : 0;
        }
}

zb_status_t pl_report_measured(pl_t *pl, const zb_exec_timeline_t *tls, const double *peaks,
                               zb_pipeline_report_t *rep, zb_err_t *err)
{
    for (int r = 0; r < pl->P; r++)
        rep->peak_stash_bytes[r] = peaks[r];
    zb_sim_t measured;
    zb_status_t st = zb_exec_fill_sim(pl->plan.sched, tls, peaks, &measured, err);
    if (st == ZB_OK) {
        /* the trace titles show the report's bubble */
        rep->bubble_measured = measured.bubble_rate = zb_sim_span_idle(&measured);
        rep->span_measured = measured.span_max;
        rep->makespan_measured = measured.makespan;
        rep->first_action_at = timeline_origin(tls, pl->P);
        rep->busy_measured = measured.busy_max;
        rep->measured = true;
        /* the prediction the costs make for the same schedule: the action table and the traces */
        zb_sim_t pred;
        if ((st = zb_simulate(pl->plan.sched, &pl->plan.costs, &pred, err)) == ZB_OK) {
            pred.bubble_rate = zb_sim_span_idle(&pred); /* the report's bubble, as measured's */
            action_times(pl, &measured, &pred, rep);
            if (pl->opts->trace_path || pl->opts->trace_svg_path)
                st = pl_write_traces(pl, &measured, &pred,
                                     rep->ranks >= pl->P ? rep->phases : NULL,
                                     rep->first_action_at, err);
            zb_sim_free(&pred);
        }
        zb_exec_sim_free(&measured);
    }
    return st;
}

/* doubles of a zb_rank_mem_t and of a zb_step_phases_t appended to each rank's report row */
#define MEM_FIELDS (sizeof(zb_rank_mem_t) / sizeof(double))
#define PHASE_FIELDS (sizeof(zb_step_phases_t) / sizeof(double))
#define EXTRA_FIELDS (1 + MEM_FIELDS + PHASE_FIELDS) /* stash peak, memory, phases */

zb_status_t pl_gather_report(pl_t *pl, zb_pipeline_report_t *rep, zb_err_t *err)
{
    zb_transport_t *net = pl->opts->transport;
    const int me = net->rank, P = pl->P;
    const uint32_t tag = zb_tag(ZB_TAG_REPORT, 0, 0);
    zb_status_t st = ZB_OK, local = ZB_OK;
    if (me > 0 && me < P) { /* replica 0's ranks: timeline (start, end) and stash peak */
        const pl_rank_t *R = &pl->ranks[me];
        size_t len = (size_t)R->tl.len;
        double *row = malloc((2 * len + EXTRA_FIELDS) * sizeof *row);
        if (!row)
            return zb_err_set(err, ZB_ENOMEM, "out of memory for the report");
        memcpy(row, R->tl.start, len * sizeof *row);
        memcpy(row + len, R->tl.end, len * sizeof *row);
        row[2 * len] = (double)R->live_peak;
        zb_rank_mem_t mem;
        pl_mem_measure(R, &mem);
        memcpy(row + 2 * len + 1, &mem, sizeof mem);
        memcpy(row + 2 * len + 1 + MEM_FIELDS, &R->phases, sizeof R->phases);
        st = zb_send(net, row, (2 * len + EXTRA_FIELDS) * sizeof *row, 0, tag, err);
        free(row);
        if (st == ZB_OK)
            st = zb_flush(net, err);
    } else if (me == 0) {
        zb_exec_timeline_t *tls = calloc((size_t)P, sizeof *tls);
        double *peaks = calloc((size_t)P, sizeof *peaks);
        double **rows = calloc((size_t)P, sizeof *rows);
        if (!tls || !peaks || !rows)
            local = zb_err_set(err, ZB_ENOMEM, "out of memory for the report");
        else {
            tls[0] = pl->ranks[0].tl;
            peaks[0] = (double)pl->ranks[0].live_peak;
            pl_mem_measure(&pl->ranks[0], &rep->mem_measured[0]);
            rep->phases[0] = pl->ranks[0].phases;
        }
        /* receive from every rank even after a local failure: they have sent already */
        for (int r = 1; r < P && st == ZB_OK; r++) {
            size_t len = (size_t)pl->plan.sched->rank[r].len;
            double *row = malloc((2 * len + EXTRA_FIELDS) * sizeof *row);
            if (!row) {
                st = zb_err_set(err, ZB_ENOMEM, "out of memory for the report");
                break;
            }
            st = zb_recv(net, row, (2 * len + EXTRA_FIELDS) * sizeof *row, r, tag, err);
            if (rows && local == ZB_OK) {
                rows[r] = row;
                tls[r] = (zb_exec_timeline_t){(int)len, row, row + len};
                peaks[r] = row[2 * len];
                if (r < rep->ranks) {
                    memcpy(&rep->mem_measured[r], row + 2 * len + 1, sizeof(zb_rank_mem_t));
                    memcpy(&rep->phases[r], row + 2 * len + 1 + MEM_FIELDS,
                           sizeof(zb_step_phases_t));
                }
            } else {
                free(row);
            }
        }
        if (st == ZB_OK && local == ZB_OK) {
            rep->mem_measured_ok = true;
            local = pl_report_measured(pl, tls, peaks, rep, err);
        }
        for (int r = 1; rows && r < P; r++)
            free(rows[r]);
        free(rows), free(tls), free(peaks);
    }
    if (st != ZB_OK)
        return st; /* a transport failure: the run aborts */
    st = pl_agree(pl, local, "write the run report (--trace)", err);
    if (st != ZB_OK)
        rep->failed_together = true;
    return st;
}

zb_status_t zb_pipeline_gather_rank_figures(zb_transport_t *net, int ranks,
                                            const zb_pipeline_report_t *rep,
                                            zb_pipeline_rank_figures_t *all, zb_err_t *err)
{
    if (!net || ranks < 1 || !rep || !all)
        return zb_err_set(err, ZB_EINVAL, "rank figures: missing transport or arguments");
    const zb_pipeline_rank_figures_t mine = {
        .stash_peak_bytes = rep->peak_stash_bytes[net->rank % ranks],
        .rollbacks = (double)rep->rollbacks,
        .bytes_sent = rep->step_bytes_sent,
        .bytes_received = rep->step_bytes_received,
        .msgs_sent = rep->step_msgs_sent,
        .msgs_received = rep->step_msgs_received,
        .wait_s = rep->step_wait_s,
        .step_ms_median = rep->step_ms_median};
    return zb_allgather_bytes(net, &mine, sizeof mine, all, err);
}
