/* zbpp — the pipeline trainer's start-up planning and its trace files.
 *
 * Cost model: measured (opts->profile: zb_profile_measure on this machine, one core) or the FLOP
 * model. The partition balances it (embedding on the first stage, head on the last); the
 * per-stage zb_costs_t (times, memory from zb_gpt2_stage_mem, comm) feeds the generators that
 * need costs (auto, optimal), the memory check and the simulator's prediction. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/pipeline_internal.h"
#include "zbpp/plan.h"
#include "zbpp/pipeline_trace.h"
#include "zbpp/schedule_io.h"
#include "zbpp/svg.h"
#include "zbpp/util.h"

enum { PROFILE_REPS = 5 };

/* Cores this process may run on: its affinity mask (mpirun binds each rank to one core), else
 * every online core. */
static int usable_cores(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

zb_status_t pl_profile(pl_t *pl, const zb_gpt2_params_t *params, zb_err_t *err)
{
    if (!pl->opts->profile)
        return ZB_OK;
    /* MPI: each process would measure different figures, but all must plan alike: rank 0
     * measures and pl_share_profile (pipeline_dist.c) sends its figures to the others */
    if (pl->opts->transport && pl->opts->transport->rank != 0)
        return ZB_OK;
    zb_profile_t *p = calloc(1, sizeof *p);
    if (!p)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the profile");
    /* as many measuring threads as ranks will run at once, at most one per core this process
     * may use (threads sharing a core would each time double) */
    int world = pl->P * pl->N;
    /* each with its rank's worker group, on the cores the ranks will use (zbpp/workers.h) */
    int rank_threads = zb_workers_resolve(pl->cfg->threads, pl->opts->transport ? 1 : world);
    int cores = usable_cores() / rank_threads;
    cores = cores < 1 ? 1 : cores;
    int threads = world < cores ? world : cores;
    if (threads > ZB_PROFILE_MAX_THREADS)
        threads = ZB_PROFILE_MAX_THREADS;
    zb_status_t st = zb_profile_measure_ranks(params, &pl->mcfg, pl->mbB, pl->T, PROFILE_REPS,
                                              threads, rank_threads, pl->opts->pin, p, err);
    if (st != ZB_OK) {
        free(p);
        return st;
    }
    pl->prof = p;
    return ZB_OK;
}

void pl_plan_free(pl_t *pl)
{
    if (pl->prof)
        zb_profile_free(pl->prof);
    free(pl->prof);
    pl->prof = NULL;
    if (pl->have_costs)
        zb_costs_free(&pl->plan.costs);
    pl->have_costs = false;
}

#define MIB 1048576.0

/* FLOP model per stage: F = B = W = a third of the stage's work, in units of one block's F. */
static zb_status_t flop_stage_costs(pl_t *pl, const zb_block_costs_t *bc, int S, zb_costs_t *costs,
                                    zb_err_t *err)
{
    zb_status_t st = zb_costs_init_uniform(costs, S, 1, 1, 1, 0, 1, 0, -1, err);
    for (int s = 0; st == ZB_OK && s < S; s++) {
        double work = 0;
        for (int l = pl->plan.first[s]; l < pl->plan.first[s + 1]; l++)
            work += bc->block[l];
        if (s == 0)
            work += bc->embed;
        if (s == S - 1)
            work += bc->head;
        double unit = bc->block[0] / 3.0; /* time of one block's F */
        costs->t_f[s] = costs->t_b[s] = costs->t_w[s] = work / 3.0 / unit;
    }
    return st;
}

/* Memory deltas of every stage from the stash the ranks will allocate (--keep-activations). */
void pl_stage_memory(const pl_t *pl, int S, zb_costs_t *costs)
{
    for (int s = 0; s < S; s++) {
        zb_gpt2_span_t span = zb_partition_span(pl->plan.first, S, s);
        size_t after_f, after_b;
        zb_gpt2_stage_mem_keep(&pl->mcfg, &span, pl->mbB, pl->T, pl->keep, &after_f, &after_b);
        costs->m_f[s] = (double)after_f;
        costs->m_b[s] = (double)after_b - (double)after_f;
        costs->m_w[s] = -(double)after_b;
    }
}

/* Partition S stages balancing the cost model; fill pl->plan.first and the per-stage costs. */
static zb_status_t plan_stages(pl_t *pl, int S, zb_costs_t *costs, zb_err_t *err)
{
    int L = pl->mcfg.layers;
    if (S > ZB_TAG_MAX_STAGE + 1) /* also bounds pl->plan.first[] */
        return zb_err_set(err, ZB_EINVAL, "%d stages: at most %d are supported", S,
                          ZB_TAG_MAX_STAGE + 1);
    double *block = malloc((size_t)L * sizeof *block);
    if (!block)
        return zb_err_set(err, ZB_ENOMEM, "out of memory planning stages");
    zb_block_costs_t bc = {.layers = L, .block = block};
    if (pl->prof)
        zb_profile_block_costs(pl->prof, &bc);
    else
        zb_block_costs_flops(&pl->mcfg, pl->T, block, &bc.embed, &bc.head);
    zb_status_t st = zb_partition(&bc, S, pl->plan.first, err);
    if (st == ZB_OK)
        st = pl->prof ? zb_profile_stage_costs(pl->prof, pl->plan.first, S, costs, err)
                      : flop_stage_costs(pl, &bc, S, costs, err);
    if (st == ZB_OK)
        pl_stage_memory(pl, S, costs);
    if (st == ZB_OK && costs->m_keep) /* the runtime keeps a non-saving F's input in its receive
                                         buffer, counted with the messages: nothing in the stash */
        memset(costs->m_keep, 0, (size_t)S * sizeof *costs->m_keep);
    if (st == ZB_OK && pl->opts->mem_limit > 0) {
        /* the limit is on the whole rank: the activations get what the rest leaves */
        double fixed = pl_static_bound(pl, S), limit = pl->opts->mem_limit;
        costs->mem_limit = limit - fixed;
        if (costs->mem_limit <= 0)
            st = zb_err_set(err, ZB_EMEMLIMIT,
                            "memory limit %.2f MiB per rank is below the %.2f MiB that a rank's "
                            "parameters, gradients, optimizer state and message buffers need "
                            "with %d stages (before any activations)",
                            limit / MIB, fixed / MIB, S);
        if (st != ZB_OK) /* the caller owns the costs only on success */
            zb_costs_free(costs);
    }
    free(block);
    return st;
}

/* Generate with a cost model at v chunks per rank; *makespan = its simulated makespan. */
static zb_status_t try_chunks(pl_t *pl, const zb_gen_params_t *base, int v, zb_schedule_t **out,
                              zb_costs_t *costs, double *makespan, zb_err_t *err)
{
    if (v * pl->P > pl->mcfg.layers)
        return zb_err_set(err, ZB_EINVAL, "more stages (%d) than transformer blocks (%d)",
                          v * pl->P, pl->mcfg.layers);
    zb_status_t st = plan_stages(pl, v * pl->P, costs, err);
    if (st != ZB_OK)
        return st;
    zb_gen_params_t gp = *base;
    gp.chunks = v;
    gp.costs = costs;
    /* `auto` plans the recompute itself (which (stage, mb), where each R goes) */
    const zb_generator_info_t *fam = zb_generator_find(pl->opts->schedule);
    if (fam && !strcmp(fam->name, "auto"))
        gp.recompute = pl->opts->recompute;
    zb_sim_t sim;
    if ((st = zb_generate(pl->opts->schedule, &gp, out, err)) == ZB_OK &&
        (st = zb_simulate(*out, costs, &sim, err)) == ZB_OK) {
        *makespan = sim.makespan;
        zb_sim_free(&sim);
        return ZB_OK;
    }
    if (*out)
        zb_schedule_free(*out);
    *out = NULL;
    zb_costs_free(costs);
    return st;
}

/* No schedule of the cost-planning family fits --mem-limit: say so in MiB (the planner's own
 * message counts the cost model's bytes without a unit), with the smallest activation peak any
 * schedule can reach at --chunks (or one chunk), recomputing when --recompute allows it. */
static zb_status_t below_any_schedule(pl_t *pl, zb_err_t *err)
{
    const zb_pipeline_opts_t *o = pl->opts;
    int v = o->chunks ? o->chunks : 1;
    zb_costs_t c;
    zb_status_t st = plan_stages(pl, v * pl->P, &c, err);
    if (st != ZB_OK)
        return st;
    bool rc = o->recompute != ZB_RECOMPUTE_NONE;
    zb_placement_t place = v == 2 ? ZB_PLACE_V : ZB_PLACE_LOOP;
    double need_rc = zb_min_feasible_memory_recompute(pl->P, v, place, &c);
    double need = rc ? need_rc : zb_min_feasible_memory(pl->P, v, place, &c);
    char hint[96] = "";
    if (!rc && need_rc <= c.mem_limit)
        snprintf(hint, sizeof hint, "; with --recompute auto %.2f MiB", need_rc / MIB);
    st = zb_err_set(err, ZB_EMEMLIMIT,
                    "schedule %s: the memory limit of %.2f MiB per rank leaves the activations "
                    "%.2f MiB, below the %.2f MiB that any schedule needs with %d stage%s per rank "
                    "(one microbatch at a time%s)%s",
                    o->schedule, o->mem_limit / MIB, c.mem_limit / MIB, need / MIB, v,
                    v > 1 ? "s" : "", rc ? ", recomputing" : "", hint);
    zb_costs_free(&c);
    return st;
}

/* --schedule-file: the file's schedule, its shape checked against the run's. */
static zb_status_t schedule_from_file(pl_t *pl, zb_schedule_t **out, zb_err_t *err)
{
    const zb_pipeline_opts_t *o = pl->opts;
    const char *path = o->schedule_file;
    char *data = NULL;
    size_t len = 0;
    zb_status_t st = zb_read_file(path, (size_t)256 << 20, &data, &len, err);
    if (st != ZB_OK)
        return st;
    zb_err_t perr;
    st = zb_csv_read(data, len, out, &perr);
    free(data);
    if (st != ZB_OK)
        return zb_err_set(err, st, "schedule file %s: %s", path, perr.msg);
    const zb_schedule_t *s = *out;
    if (s->ranks != pl->P)
        st = zb_err_set(err, ZB_EINVAL, "schedule file %s has %d ranks (rows) but --ranks is %d",
                        path, s->ranks, pl->P);
    else if (s->microbatches != pl->M)
        st = zb_err_set(err, ZB_EINVAL,
                        "schedule file %s has %d microbatches but --microbatches is %d", path,
                        s->microbatches, pl->M);
    else if (o->chunks > 0 && s->chunks != o->chunks)
        st = zb_err_set(err, ZB_EINVAL,
                        "schedule file %s has %d stages per rank but --chunks is %d", path,
                        s->chunks, o->chunks);
    if (st != ZB_OK) {
        zb_schedule_free(*out);
        *out = NULL;
        return st;
    }
    const char *base = strrchr(path, '/');
    snprintf((*out)->name, sizeof (*out)->name, "file %.40s", base ? base + 1 : path);
    return ZB_OK;
}

/* The schedule before --recompute: from the file, the family, or planned with costs. */
static zb_status_t make_plain(pl_t *pl, zb_schedule_t **out, zb_costs_t *costs, zb_err_t *err)
{
    const zb_pipeline_opts_t *o = pl->opts;
    if (o->schedule_file) {
        zb_status_t st = schedule_from_file(pl, out, err);
        if (st == ZB_OK && (st = plan_stages(pl, (*out)->stages, costs, err)) != ZB_OK) {
            zb_schedule_free(*out);
            *out = NULL;
        }
        return st;
    }
    zb_gen_params_t gp = {.ranks = pl->P, .microbatches = pl->M, .chunks = o->chunks};
    zb_err_t first_err;
    *out = NULL;
    zb_status_t st = zb_generate(o->schedule, &gp, out, &first_err);
    if (st == ZB_OK) { /* a family that needs no costs: cost the stages for the prediction */
        if ((st = plan_stages(pl, (*out)->stages, costs, err)) != ZB_OK) {
            zb_schedule_free(*out);
            *out = NULL;
        }
        return st;
    }
    if (!zb_generator_find(o->schedule)) {
        if (err)
            *err = first_err;
        return st;
    }
    /* A family that plans with costs (auto, optimal): with --chunks as given, else the chunking
     * (1 or 2 per rank) whose schedule the simulator finds faster under the same costs. */
    int best_v = 0;
    double best = INFINITY;
    zb_err_t last_err = first_err;
    for (int v = o->chunks ? o->chunks : 1; v <= (o->chunks ? o->chunks : 2); v++) {
        zb_schedule_t *s = NULL;
        zb_costs_t c;
        double mk = INFINITY;
        if (try_chunks(pl, &gp, v, &s, &c, &mk, &last_err) != ZB_OK)
            continue;
        if (mk < best * (1 - 1e-9)) {
            if (*out)
                zb_schedule_free(*out), zb_costs_free(costs);
            *out = s, *costs = c, best = mk, best_v = v;
        } else {
            zb_schedule_free(s), zb_costs_free(&c);
        }
    }
    if (!*out) {
        if (last_err.status == ZB_EMEMLIMIT && o->mem_limit > 0)
            return below_any_schedule(pl, err);
        if (err)
            *err = last_err;
        return last_err.status != ZB_OK ? last_err.status : ZB_EINVAL;
    }
    /* plan_stages of the last try overwrote the partition: redo the winner's */
    zb_costs_t again;
    if ((st = plan_stages(pl, best_v * pl->P, &again, err)) != ZB_OK) {
        zb_schedule_free(*out), zb_costs_free(costs);
        *out = NULL;
        return st;
    }
    zb_costs_free(&again);
    return ZB_OK;
}

/* --recompute on the planned schedule. The runtime keeps a non-saving F's input in its receive
 * buffer (or the batch), which the whole-rank model already counts: the stash's kept memory is 0,
 * and an R takes an F's time (it is that forward again). `all` recomputes every microbatch;
 * `auto` keeps the schedule when it fits the limit, else recomputes every microbatch and drops
 * each R the limit does not need (zb_recompute_prune). A schedule that already has R's (a file,
 * or `auto` planned with recompute) is kept as it is. */
static zb_status_t apply_recompute(pl_t *pl, zb_schedule_t **s, zb_costs_t *costs,
                                   zb_err_t *err)
{
    zb_recompute_t mode = pl->opts->recompute;
    if (mode == ZB_RECOMPUTE_NONE || zb_schedule_has_recompute(*s))
        return ZB_OK;
    if (mode == ZB_RECOMPUTE_AUTO) {
        zb_err_t fit;
        zb_status_t st = zb_validate(*s, costs, &fit);
        if (st != ZB_EMEMLIMIT || pl_fits_each_rank(pl, *s, costs))
            return ZB_OK; /* fits (or fails for another reason the caller reports) */
    }
    zb_schedule_t *rc = NULL;
    zb_status_t st = zb_add_recompute(*s, NULL, &rc, err);
    if (st != ZB_OK)
        return st;
    long long work = 64LL * (long long)rc->stages * rc->microbatches;
    if (mode == ZB_RECOMPUTE_AUTO &&
        (st = zb_recompute_prune(rc, costs, work, NULL, err)) != ZB_OK) {
        zb_schedule_free(rc);
        return st;
    }
    if (zb_schedule_has_recompute(rc) && strlen(rc->name) + 3 < sizeof rc->name)
        strcat(rc->name, "+rc");
    zb_schedule_free(*s);
    *s = rc;
    return ZB_OK;
}

zb_status_t pl_make_schedule(pl_t *pl, zb_schedule_t **out, zb_costs_t *costs, zb_err_t *err)
{
    zb_status_t st = make_plain(pl, out, costs, err);
    if (st != ZB_OK)
        return st;
    if ((st = apply_recompute(pl, out, costs, err)) != ZB_OK) {
        zb_schedule_free(*out);
        *out = NULL;
        zb_costs_free(costs);
    }
    return st;
}

/* ---- trace files ---- */

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

static zb_status_t write_one(const char *path, const zb_sim_t *sim, bool svg, double scale,
                             const char *title, zb_err_t *err)
{
    zb_atomic_file_t af;
    zb_status_t st = zb_atomic_open(&af, path, err);
    if (st != ZB_OK)
        return st;
    st = svg ? zb_svg_write(sim, title, af.f, err) : zb_trace_write(sim, scale, af.f, err);
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

zb_status_t pl_write_traces(pl_t *pl, const zb_sim_t *measured, zb_err_t *err)
{
    const char *path = pl->opts->trace_path;
    char name[4400], title[200];
    zb_sim_t pred;
    memset(&pred, 0, sizeof pred);
    if (!pl->have_costs)
        return zb_err_set(err, ZB_EINVAL, "no cost model to predict the trace with");
    zb_status_t st = zb_simulate(pl->plan.sched, &pl->plan.costs, &pred, err);
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
            st = write_one(name, is_pred ? &pred : measured, svg, is_pred ? pscale : 1e6, title,
                           err);
    }
    if (st == ZB_OK && pl->opts->trace_svg_path)
        st = write_overlay(pl, measured, &pred, err);
    if (pred.len)
        zb_sim_free(&pred);
    return st;
}
