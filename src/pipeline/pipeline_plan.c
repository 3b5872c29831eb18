/* zbpp — the pipeline trainer's start-up planning: a pure function from the run's shape,
 * options and profile to its plan (pipeline_types.h, pl_plan_t).
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

#include "pipeline/offload_link.h"
#include "pipeline/pipeline_plan.h"
#include "pipeline/rank_cuda.h"
#include "pipeline/rank_memory.h"
#include "pipeline/stash_slots.h"
#include "zbpp/cuda.h"
#include "zbpp/plan.h"
#include "zbpp/schedule_io.h"
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

/* On GPUs: time the stages in the partition a rank will get (the ranks sharing the first GPU,
 * rank g on GPU g mod N: rank_cuda.c), so the plan's costs are those of the run's SMs. */
static zb_status_t profile_on_gpu(const pl_t *pl, const zb_gpt2_params_t *params,
                                  zb_profile_t *out, zb_err_t *err)
{
    int ndev = 0;
    zb_status_t st = zb_cuda_device_count(&ndev, err);
    if (st != ZB_OK)
        return st;
    zb_cuda_train_opts_t o = *pl->opts->cuda;
    o.profile_ranks = ndev > 0 ? pl_cuda_ranks_on(pl, ndev, 0) : 1; /* the first GPU's split */
    return zb_cuda_profile_measure(params, &pl->mcfg, pl->mbB, pl->T, PROFILE_REPS, &o, out, err);
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
    /* ranks on GPUs: the stages' costs on the GPU (the whole device, not a partition yet) */
    zb_status_t st = pl->opts->cuda
                         ? profile_on_gpu(pl, params, p, err)
                         : zb_profile_measure_ranks(params, &pl->mcfg, pl->mbB, pl->T,
                                                    PROFILE_REPS, threads, rank_threads,
                                                    pl->opts->pin, p, err);
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
    pl_plan_t *plan = &pl->plan;
    zb_schedule_free(plan->sched);
    if (plan->costs.stages > 0)
        zb_costs_free(&plan->costs);
    free(plan->unit_owner);
    free(plan->tail);
    free(plan->o_release);
    memset(plan, 0, sizeof *plan);
}

#define MIB 1048576.0

/* Whether the run has a memory limit, and rank r's: --mem-limit for every rank, or one each. */
static bool has_limit(const pl_t *pl)
{
    return pl->opts->mem_limit_ranks || pl->opts->mem_limit > 0;
}

static double rank_limit(const pl_t *pl, int r)
{
    return pl->opts->mem_limit_ranks ? pl->opts->mem_limit_ranks[r] : pl->opts->mem_limit;
}

/* "the memory limit of X MiB per rank", or with one limit per rank "rank r's memory limit of
 * X MiB", for the messages that name a limit. */
static const char *limit_phrase(const pl_t *pl, int r, char *buf, size_t n)
{
    if (pl->opts->mem_limit_ranks)
        snprintf(buf, n, "rank %d's memory limit of %.2f MiB", r, rank_limit(pl, r) / MIB);
    else
        snprintf(buf, n, "the memory limit of %.2f MiB per rank", pl->opts->mem_limit / MIB);
    return buf;
}

/* A schedule before lowering, with the partition and the per-stage costs it was planned with. */
typedef struct {
    zb_schedule_t *sched;
    zb_costs_t costs;
    int first[1025];
    bool offload_planned; /* the family planned --offload with its costs (auto): keep, offload
                           * or recompute per stash already chosen */
} candidate_t;

static void candidate_free(candidate_t *c)
{
    if (c->sched) {
        zb_schedule_free(c->sched);
        zb_costs_free(&c->costs);
    }
    c->sched = NULL;
}

/* FLOP model per stage: F = B = W = a third of the stage's work, in units of one block's F. */
static zb_status_t flop_stage_costs(const zb_block_costs_t *bc, int S, const int *first,
                                    zb_costs_t *costs, zb_err_t *err)
{
    zb_status_t st = zb_costs_init_uniform(costs, S, 1, 1, 1, 0, 1, 0, -1, err);
    for (int s = 0; st == ZB_OK && s < S; s++) {
        double work = 0;
        for (int l = first[s]; l < first[s + 1]; l++)
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

/* The FLOP model's partition of S stages into first[] and its per-stage costs. */
static zb_status_t flop_partition(const pl_t *pl, int S, int *first, zb_costs_t *costs,
                                  zb_err_t *err)
{
    int L = pl->mcfg.layers;
    double *block = malloc((size_t)L * sizeof *block);
    if (!block)
        return zb_err_set(err, ZB_ENOMEM, "out of memory planning stages");
    zb_block_costs_t bc = {.layers = L, .block = block};
    zb_block_costs_flops(&pl->mcfg, pl->T, block, &bc.embed, &bc.head);
    zb_status_t st = zb_partition(&bc, S, first, err);
    if (st == ZB_OK)
        st = flop_stage_costs(&bc, S, first, costs, err);
    free(block);
    return st;
}

/* The host link the GPU's ranks share, in the simulator (zb_share_t.link), where the profile
 * timed a copy alone and with every rank copying: each copy's own bandwidth is the one alone,
 * and the link carries `threads` times the share each rank got with all copying. */
static void share_host_link(const zb_profile_t *p, zb_costs_t *costs)
{
    if (!p || p->threads < 2 || !(p->copy_d2h_alone > 0) || !(p->copy_h2d_alone > 0) ||
        !(p->copy_d2h > 0) || !(p->copy_h2d > 0))
        return;
    costs->share.link[0] = p->threads * p->copy_d2h;
    costs->share.link[1] = p->threads * p->copy_h2d;
    costs->share.link_both = p->copy_both > 0 ? p->copy_both : 0; /* all ranks, both ways */
    costs->bw_d2h = p->copy_d2h_alone;
    costs->bw_h2d = p->copy_h2d_alone;
}

/* Partition S stages balancing the cost model into first[]; the per-stage costs in *costs
 * (owned by the caller on success). `placed`: the schedule when it is already made (a family,
 * a file), whose placement alone bounds what a --mem-limit must leave the rest; NULL while the
 * planner has still to choose (either placement). */
static zb_status_t plan_stages(const pl_t *pl, int S, int *first, zb_costs_t *costs,
                               const zb_schedule_t *placed, zb_err_t *err)
{
    if (S > ZB_TAG_MAX_STAGE + 1) /* also bounds first[] */
        return zb_err_set(err, ZB_EINVAL, "%d stages: at most %d are supported", S,
                          ZB_TAG_MAX_STAGE + 1);
    zb_status_t st = pl->prof ? zb_profile_partition(pl->prof, S, first, costs, err)
                              : flop_partition(pl, S, first, costs, err);
    if (st != ZB_OK)
        return st;
    pl_stage_memory(pl, S, first, costs); /* an offload moves m_f: the device's own figure */
    /* ranks in SM partitions of one GPU slow each other: the profile's factors, where every
     * rank of the run shares that GPU (the simulator's share is over all of the schedule's) */
    if (pl->prof && pl->prof->share.n == pl->P)
        costs->share = pl->prof->share;
    /* the copies timed by the GPU profile's measured bandwidths (seconds, as its costs); else
     * as long as the stage's F (the FLOP model has no time unit to set a bandwidth in) */
    if (pl->opts->offload != ZB_OFFLOAD_NONE && pl->prof && pl->prof->copy_d2h > 0 &&
        pl->prof->copy_h2d > 0 &&
        (st = zb_costs_set_offload(costs, -1, pl->prof->copy_d2h, pl->prof->copy_h2d, 0, err)) !=
            ZB_OK) {
        zb_costs_free(costs);
        return st;
    }
    if (pl->opts->offload != ZB_OFFLOAD_NONE && costs->share.n > 0)
        share_host_link(pl->prof, costs);
    if (has_limit(pl)) {
        /* the limit is on the whole rank: the activations get what the rest leaves, planned
         * with the tightest rank's share (each rank's own is set on the schedule later:
         * set_rank_budgets) */
        int tight = 0;
        double fixed = 0;
        costs->mem_limit = INFINITY;
        for (int r = 0; r < pl->P; r++) {
            double f = pl_static_bound_rank(pl, S, first, r, placed);
            if (rank_limit(pl, r) - f < costs->mem_limit)
                costs->mem_limit = rank_limit(pl, r) - f, tight = r, fixed = f;
        }
        if (costs->mem_limit <= 0) {
            zb_costs_free(costs);
            if (pl->opts->mem_limit_ranks)
                return zb_err_set(err, ZB_EMEMLIMIT,
                                  "rank %d's memory limit %.2f MiB is below the %.2f MiB that its "
                                  "parameters, gradients, optimizer state and message buffers "
                                  "need with %d stages (before any activations)",
                                  tight, rank_limit(pl, tight) / MIB, fixed / MIB, S);
            return zb_err_set(err, ZB_EMEMLIMIT,
                              "memory limit %.2f MiB per rank is below the %.2f MiB that a "
                              "rank's parameters, gradients, optimizer state and message buffers "
                              "need with %d stages (before any activations)",
                              pl->opts->mem_limit / MIB, fixed / MIB, S);
        }
    }
    return ZB_OK;
}

/* Cost and partition a schedule that was made without costs (a family, a file). */
static zb_status_t cost_candidate(const pl_t *pl, candidate_t *c, zb_err_t *err)
{
    zb_status_t st = plan_stages(pl, c->sched->stages, c->first, &c->costs, c->sched, err);
    if (st != ZB_OK) {
        zb_schedule_free(c->sched);
        c->sched = NULL;
    }
    return st;
}

/* Generate with a cost model at v chunks per rank; *makespan = its simulated makespan. */
static zb_status_t try_chunks(const pl_t *pl, const zb_gen_params_t *base, int v,
                              candidate_t *c, double *makespan, zb_err_t *err)
{
    if (v * pl->P > pl->mcfg.layers)
        return zb_err_set(err, ZB_EINVAL, "more stages (%d) than transformer blocks (%d)",
                          v * pl->P, pl->mcfg.layers);
    zb_status_t st = plan_stages(pl, v * pl->P, c->first, &c->costs, NULL, err);
    if (st != ZB_OK)
        return st;
    zb_gen_params_t gp = *base;
    gp.chunks = v;
    gp.costs = &c->costs;
    /* `auto` plans the recompute itself (which (stage, mb), where each R goes) */
    const zb_generator_info_t *fam = zb_generator_find(pl->opts->schedule);
    if (fam && !strcmp(fam->name, "auto"))
        gp.recompute = pl->opts->recompute;
    zb_sim_t sim;
    c->sched = NULL;
    zb_offload_t off = pl->opts->cuda ? pl->opts->offload : ZB_OFFLOAD_NONE;
    c->offload_planned = off != ZB_OFFLOAD_NONE && pl->opts->recompute == ZB_RECOMPUTE_NONE;
    if (c->offload_planned)
        st = zb_generate_offload(pl->opts->schedule, &gp, off, &c->sched, err); /* with its copies */
    else
        st = zb_generate(pl->opts->schedule, &gp, &c->sched, err);
    if (st == ZB_OK &&
        (st = zb_simulate(c->sched, &c->costs, &sim, err)) == ZB_OK) {
        *makespan = sim.makespan;
        zb_sim_free(&sim);
        return ZB_OK;
    }
    if (c->sched)
        zb_schedule_free(c->sched);
    c->sched = NULL;
    zb_costs_free(&c->costs);
    return st;
}

/* No schedule of the cost-planning family fits --mem-limit: say so in MiB (the planner's own
 * message counts the cost model's bytes without a unit), with the smallest activation peak any
 * schedule can reach at --chunks (or one chunk), recomputing when --recompute allows it. */
static zb_status_t below_any_schedule(const pl_t *pl, zb_err_t *err)
{
    const zb_pipeline_opts_t *o = pl->opts;
    int v = o->chunks ? o->chunks : 1;
    zb_costs_t c;
    int first[1025];
    zb_status_t st = plan_stages(pl, v * pl->P, first, &c, NULL, err);
    if (st != ZB_OK)
        return st;
    bool rc = o->recompute != ZB_RECOMPUTE_NONE;
    zb_placement_t place = v == 2 ? ZB_PLACE_V : ZB_PLACE_LOOP;
    double need_rc = zb_min_feasible_memory_recompute(pl->P, v, place, &c);
    double need = rc ? need_rc : zb_min_feasible_memory(pl->P, v, place, &c);
    char hint[96] = "";
    if (!rc && need_rc <= c.mem_limit)
        snprintf(hint, sizeof hint, "; with --recompute auto %.2f MiB", need_rc / MIB);
    char lim[96] = "the memory limits per rank";
    if (!o->mem_limit_ranks)
        limit_phrase(pl, 0, lim, sizeof lim);
    st = zb_err_set(err, ZB_EMEMLIMIT,
                    "schedule %s: %s leave%s the activations %.2f MiB, below the %.2f MiB that "
                    "any schedule needs with %d stage%s per rank (one microbatch at a time%s)%s",
                    o->schedule, lim, o->mem_limit_ranks ? "" : "s", c.mem_limit / MIB,
                    need / MIB, v, v > 1 ? "s" : "", rc ? ", recomputing" : "", hint);
    zb_costs_free(&c);
    return st;
}
/* --schedule-file: the file's schedule, its shape checked against the run's. */
static zb_status_t schedule_from_file(const pl_t *pl, zb_schedule_t **out, zb_err_t *err)
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
    if (zb_schedule_has_offload(s) && !o->cuda)
        st = zb_err_set(err, ZB_EUNSUPPORTED,
                        "schedule file %s has offload (O/L) actions: a CPU rank has no second "
                        "memory to offload activations to (GPU ranks: --device cuda)",
                        path);
    else if (s->ranks != pl->P)
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

/* The schedule before --recompute: from the file, the family, or planned with costs (each
 * chunking tried keeps its own partition; the winner's is the plan's). */
static zb_status_t make_plain(const pl_t *pl, candidate_t *out, zb_err_t *err)
{
    const zb_pipeline_opts_t *o = pl->opts;
    zb_status_t st;
    out->sched = NULL;
    if (o->schedule_file) {
        if ((st = schedule_from_file(pl, &out->sched, err)) != ZB_OK)
            return st;
        return cost_candidate(pl, out, err);
    }
    zb_gen_params_t gp = {.ranks = pl->P, .microbatches = pl->M, .chunks = o->chunks};
    zb_err_t first_err;
    if ((st = zb_generate(o->schedule, &gp, &out->sched, &first_err)) == ZB_OK)
        return cost_candidate(pl, out, err); /* a family that needs no costs */
    out->sched = NULL;
    if (!zb_generator_find(o->schedule)) {
        if (err)
            *err = first_err;
        return st;
    }
    /* A family that plans with costs (auto, optimal): with --chunks as given, else the chunking
     * (1 or 2 per rank) whose schedule the simulator finds faster under the same costs. */
    double best = INFINITY;
    zb_err_t last_err = first_err;
    candidate_t *c = calloc(1, sizeof *c);
    if (!c)
        return zb_err_set(err, ZB_ENOMEM, "out of memory planning the schedule");
    for (int v = o->chunks ? o->chunks : 1; v <= (o->chunks ? o->chunks : 2); v++) {
        double mk = INFINITY;
        if (try_chunks(pl, &gp, v, c, &mk, &last_err) != ZB_OK)
            continue;
        if (mk < best * (1 - 1e-9)) {
            candidate_free(out);
            *out = *c, best = mk;
        } else {
            candidate_free(c);
        }
    }
    free(c);
    if (out->sched)
        return ZB_OK;
    if (last_err.status == ZB_EMEMLIMIT && has_limit(pl))
        return below_any_schedule(pl, err);
    if (err)
        *err = last_err;
    return last_err.status != ZB_OK ? last_err.status : ZB_EINVAL;
}
/* Each rank's own activation budget for schedule s: --mem-limit less what the rank holds besides
 * its activations under s's placement (the planning budget, limit - pl_static_bound, is the
 * heaviest rank's; a lighter rank, e.g. one without the shared WTE, has more). Without
 * --mem-limit the costs keep no limit. */
static zb_status_t set_rank_budgets(const pl_t *pl, const zb_schedule_t *s, zb_costs_t *costs,
                                    zb_err_t *err)
{
    if (!has_limit(pl))
        return ZB_OK;
    double *budget = malloc(sizeof(double) * (size_t)s->ranks);
    if (!budget)
        return zb_err_set(err, ZB_ENOMEM, "out of memory planning the schedule");
    zb_status_t st = pl_ranks_fixed_bytes(pl, s, budget, err);
    for (int r = 0; r < s->ranks && st == ZB_OK; r++)
        budget[r] = rank_limit(pl, r) - budget[r];
    if (st == ZB_OK)
        st = zb_costs_set_rank_limits(costs, s->ranks, budget, err);
    free(budget);
    return st;
}

/* --recompute on the planned schedule. The runtime keeps a non-saving F's input in its receive
 * buffer (or the batch), which the whole-rank model already counts: the stash's kept memory is 0,
 * and an R takes an F's time (it is that forward again). `all` recomputes every microbatch;
 * `auto` keeps the schedule when it fits the limit, else recomputes every microbatch and drops
 * each R the limit does not need (zb_recompute_prune). A schedule that already has R's (a file,
 * or `auto` planned with recompute) is kept as it is. */
static zb_status_t apply_recompute(const pl_t *pl, zb_schedule_t **s, zb_costs_t *costs,
                                   zb_err_t *err)
{
    zb_recompute_t mode = pl->opts->recompute;
    if (mode == ZB_RECOMPUTE_NONE || zb_schedule_has_recompute(*s))
        return ZB_OK;
    zb_status_t st = set_rank_budgets(pl, *s, costs, err);
    if (st != ZB_OK)
        return st;
    if (mode == ZB_RECOMPUTE_AUTO) {
        zb_err_t fit;
        if (zb_validate(*s, costs, &fit) != ZB_EMEMLIMIT)
            return ZB_OK; /* fits (or fails for another reason the caller reports) */
    }
    zb_schedule_t *rc = NULL;
    st = zb_add_recompute(*s, NULL, &rc, err);
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

/* --offload on the planned schedule (GPU ranks; docs/offload.md): zb_plan_offload under the
 * costs and the ranks' limits (plan_stages set the copies' costs). A family planned with costs
 * (auto) has planned its offload already (try_chunks). */
static zb_status_t apply_offload(const pl_t *pl, candidate_t *c, zb_err_t *err)
{
    const zb_pipeline_opts_t *o = pl->opts;
    zb_schedule_t **s = &c->sched;
    zb_costs_t *costs = &c->costs;
    /* auto's own plan may recompute where offloading cannot fit, and offload nothing */
    if (o->offload == ZB_OFFLOAD_NONE || c->offload_planned || zb_schedule_has_offload(*s))
        return ZB_OK;
    if (o->recompute != ZB_RECOMPUTE_NONE || zb_schedule_has_recompute(*s))
        return zb_err_set(err, ZB_EINVAL, "--offload %s and --recompute exclude each other "
                                          "(--offload auto recomputes what offloading cannot fit)",
                          zb_offload_name(o->offload));
    if (!o->cuda)
        return zb_err_set(err, ZB_EUNSUPPORTED, "--offload %s: a CPU rank has no second memory "
                                                "to offload activations to (GPU ranks: --device "
                                                "cuda)",
                          zb_offload_name(o->offload));
    zb_status_t st = set_rank_budgets(pl, *s, costs, err);
    zb_schedule_t *out = NULL;
    char note[96] = "";
    /* the copies timed on the host link the GPU's ranks share, where the profile measured it */
    const zb_profile_t *p = pl->prof;
    pl_link_t link = {0};
    if (p)
        link = (pl_link_t){p->copy_d2h_alone, p->copy_h2d_alone, p->copy_d2h, p->copy_h2d,
                           p->threads, p->threads > 0 ? (pl->P + p->threads - 1) / p->threads : 1};
    if (st == ZB_OK) /* predicted on the simulated link where share_host_link set it */
        st = pl_plan_offload_on_link(*s, o->offload, costs, &link, &out, note, err);
    if (st != ZB_OK)
        return st;
    if (zb_schedule_has_offload(out) && strlen(out->name) + 3 < sizeof out->name)
        strcat(out->name, "+O");
    zb_schedule_free(*s);
    *s = out;
    return ZB_OK;
}

/* Every rank's whole footprint within --mem-limit (the planner kept the activations within
 * what the heaviest rank leaves; this is the exact check, rank by rank). */
static zb_status_t check_mem_limit(const pl_t *pl, const zb_pipeline_report_t *rep, zb_err_t *err)
{
    const double MiB = 1048576.0;
    char lim[96];
    for (int r = 0; has_limit(pl) && r < pl->P && r < rep->ranks; r++) {
        const zb_rank_mem_t *m = &rep->mem_predicted[r];
        if (m->total > rank_limit(pl, r))
            return zb_err_set(err, ZB_EMEMLIMIT,
                              "rank %d needs %.2f MiB (parameters %.2f, gradients %.2f, optimizer "
                              "%.2f, backup %.2f, messages %.2f, activations %.2f), over %s",
                              r, m->total / MiB, m->params / MiB, m->grads / MiB,
                              m->optimizer / MiB, m->backup / MiB, m->messages / MiB,
                              m->activations / MiB, limit_phrase(pl, r, lim, sizeof lim));
    }
    return ZB_OK;
}

/* The schedule's activations do not fit what --mem-limit leaves them: say so in MiB for the
 * first rank whose own fixed memory plus activation peak is over (the validator's message
 * counts bytes without a unit, and the scalar budget is the heaviest rank's). */
static zb_status_t activations_over_limit(const pl_t *pl, const zb_schedule_t *s,
                                          const zb_costs_t *costs, zb_err_t *err)
{
    const double MiB = 1048576.0;
    zb_costs_t free_run = *costs; /* same arrays, no limit: only to find the peaks */
    free_run.mem_limit = INFINITY;
    zb_sim_t sim;
    zb_status_t st = zb_simulate(s, &free_run, &sim, err);
    if (st != ZB_OK)
        return st;
    double *fixed_of = malloc(sizeof(double) * (size_t)sim.ranks);
    if (!fixed_of || (st = pl_ranks_fixed_bytes(pl, s, fixed_of, err)) != ZB_OK) {
        free(fixed_of);
        zb_sim_free(&sim);
        return fixed_of ? st : zb_err_set(err, ZB_ENOMEM, "out of memory planning the schedule");
    }
    int worst = 0;
    double fixed = 0, over = -INFINITY;
    for (int r = 0; r < sim.ranks; r++) {
        double f = fixed_of[r];
        if (f + sim.peak_mem[r] - rank_limit(pl, r) > over)
            worst = r, fixed = f, over = f + sim.peak_mem[r] - rank_limit(pl, r);
    }
    free(fixed_of);
    char lim[96];
    st = zb_err_set(err, ZB_EMEMLIMIT,
                    "schedule %s: rank %d's activations peak at %.2f MiB, but %s leaves them "
                    "%.2f MiB after its parameters, gradients, optimizer state and message "
                    "buffers%s",
                    s->name, worst, sim.peak_mem[worst] / MiB,
                    limit_phrase(pl, worst, lim, sizeof lim), (rank_limit(pl, worst) - fixed) / MiB,
                    pl->opts->recompute == ZB_RECOMPUTE_NONE ? " (--recompute auto may fit)" : "");
    zb_sim_free(&sim);
    return st;
}

/* The note that heads the run's report: schedule, shape, replicas, recompute, cost source (and
 * the shared GPU's factors the simulator used). */
static void plan_note(const pl_t *pl, const zb_schedule_t *plain, const zb_costs_t *costs,
                      zb_pipeline_report_t *rep)
{
    char dp_note[48] = "", rc_note[64] = "";
    if (pl->N > 1)
        snprintf(dp_note, sizeof dp_note, " x %d data-parallel replicas", pl->N);
    int n_r = 0;
    for (int r = 0; r < plain->ranks; r++)
        for (int i = 0; i < plain->rank[r].len; i++)
            n_r += plain->rank[r].actions[i].type == ZB_ACT_R;
    if (n_r > 0)
        snprintf(rc_note, sizeof rc_note, ", %d of %d forwards recomputed", n_r,
                 plain->stages * pl->M);
    snprintf(rep->note, sizeof rep->note, "%s, P=%d v=%d M=%d%s%s, stage costs %s", plain->name,
             pl->P, plain->chunks, pl->M, dp_note, rc_note,
             !pl->prof ? "from the FLOP model"
             : pl->opts->transport
                 ? (pl->opts->cuda ? "measured on rank 0 (zbpp profile on its GPU), shared with "
                                     "every rank"
                                   : "measured on rank 0 (zbpp profile, one core), shared with "
                                     "every rank")
             : pl->opts->cuda ? "measured (zbpp profile on the GPU, on the SMs a rank gets)"
                              : "measured (zbpp profile, one core)");
    const zb_share_t *sh = &costs->share;
    size_t len = strlen(rep->note);
    if (sh->n > 0 && len < sizeof rep->note) /* the simulator's model of the shared GPU */
        snprintf(rep->note + len, sizeof rep->note - len,
                 "; ranks sharing the GPU as profiled (a block alone: F %.2f, B %.2f, W %.2f "
                 "of its time beside %d busy)",
                 sh->f[0][0], sh->f[1][0], sh->f[2][0], sh->n - 1);
    len = strlen(rep->note);
    if (sh->n > 0 && zb_share_has_mix(sh) && len < sizeof rep->note)
        snprintf(rep->note + len, sizeof rep->note - len,
                 " and what they run (beside all F / B / W: F %.2f/%.2f/%.2f, B %.2f/%.2f/%.2f, "
                 "W %.2f/%.2f/%.2f)",
                 sh->mix[0][0], sh->mix[0][1], sh->mix[0][2], sh->mix[1][0], sh->mix[1][1],
                 sh->mix[1][2], sh->mix[2][0], sh->mix[2][1], sh->mix[2][2]);
    len = strlen(rep->note);
    if (sh->n > 0 && sh->bw > 0 && len < sizeof rep->note)
        snprintf(rep->note + len, sizeof rep->note - len, "; a fused BW %.2f of its B + W",
                 sh->bw);
}

/* A schedule with offload: how many stashes move, and what the simulator took a copy to cost
 * (the profile's bandwidths, the largest stash), so a span that misses shows why. */
static void offload_note(const zb_schedule_t *s, const zb_costs_t *c, zb_pipeline_report_t *rep)
{
    rep->offload_note[0] = '\0';
    int n_o = 0;
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++)
            n_o += s->rank[r].actions[i].type == ZB_ACT_O;
    if (n_o == 0)
        return;
    /* a stage's stash bytes as the simulator takes them: the profile's per-stage figure, else
     * the stage's F memory (zb_costs_t_copy) */
    int big = 0;
    for (int k = 1; k < s->stages; k++)
        big = zb_costs_t_copy(c, ZB_ACT_O, k) > zb_costs_t_copy(c, ZB_ACT_O, big) ? k : big;
    const double bytes = c->stash_bytes ? c->stash_bytes[big] : fabs(c->m_f[big]);
    const double *slow = c->share.copy_slow;
    if (c->bw_d2h > 0 && c->bw_h2d > 0 && c->share.link[0] > 0)
        snprintf(rep->offload_note, sizeof rep->offload_note,
                 "%d of %d stashes offloaded; a copy at %.1f GB/s to the host, %.1f back, the "
                 "ranks' copies sharing a host link of %.1f / %.1f GB/s, %.1f both ways (the "
                 "profiled host link: docs/offload.md), compute beside copies F %.2f, B %.2f, "
                 "W %.2f of its time; stage %d's stash %.1f MiB: O %.3f, L %.3f ms alone",
                 n_o, s->stages * s->microbatches, c->bw_d2h / 1e9, c->bw_h2d / 1e9,
                 c->share.link[0] / 1e9, c->share.link[1] / 1e9, c->share.link_both / 1e9,
                 slow[0] > 0 ? slow[0] : 1, slow[1] > 0 ? slow[1] : 1, slow[2] > 0 ? slow[2] : 1,
                 big, bytes / MIB, 1e3 * zb_costs_t_copy(c, ZB_ACT_O, big),
                 1e3 * zb_costs_t_copy(c, ZB_ACT_L, big));
    else if (c->bw_d2h > 0 && c->bw_h2d > 0)
        snprintf(rep->offload_note, sizeof rep->offload_note,
                 "%d of %d stashes offloaded; copies per rank at %.1f GB/s to the host, %.1f back "
                 "(the profiled host link: docs/offload.md); stage %d's stash "
                 "%.1f MiB: O %.3f, L %.3f ms",
                 n_o, s->stages * s->microbatches, c->bw_d2h / 1e9, c->bw_h2d / 1e9, big,
                 bytes / MIB, 1e3 * zb_costs_t_copy(c, ZB_ACT_O, big),
                 1e3 * zb_costs_t_copy(c, ZB_ACT_L, big));
    else
        snprintf(rep->offload_note, sizeof rep->offload_note,
                 "%d of %d stashes offloaded; a copy costs its stage's F (no measured bandwidth)",
                 n_o, s->stages * s->microbatches);
}

/* Who updates each norm unit: the embedding's rank, the head's, and each block's stage's. */
static zb_status_t assign_units(const pl_t *pl, pl_plan_t *plan, zb_err_t *err)
{
    plan->n_units = zb_gpt2_num_units(&pl->mcfg);
    plan->unit_owner = malloc((size_t)plan->n_units * sizeof *plan->unit_owner);
    if (!plan->unit_owner)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the pipeline");
    plan->embed_rank = zb_stage_rank(plan->sched, 0);
    plan->head_rank = zb_stage_rank(plan->sched, plan->S - 1);
    plan->unit_owner[0] = plan->embed_rank;
    plan->unit_owner[plan->n_units - 1] = plan->head_rank;
    for (int s = 0; s < plan->S; s++)
        for (int l = plan->first[s]; l < plan->first[s + 1]; l++)
            plan->unit_owner[1 + l] = zb_stage_rank(plan->sched, s);
    return ZB_OK;
}

/* Where each O's device slots go back (pl_plan_t.o_release): before the first compute action
 * of its stage, after it in its rank's program, that starts once the download has ended in
 * the simulation (the simulator frees the memory when the copy ends); after none, at the
 * step's end. Nothing (at the O) when s offloads nothing, and for --offload all, whose point
 * is the stashes off the device: there the next forward takes an O's slots at once and its
 * stream waits for the download (the least memory; the simulator does not see those waits). */
static zb_status_t plan_o_release(const pl_t *pl, const zb_schedule_t *s, const zb_sim_t *sim,
                                  pl_plan_t *plan, zb_err_t *err)
{
    if (!zb_schedule_has_offload(s) || pl->opts->offload == ZB_OFFLOAD_ALL)
        return ZB_OK;
    const size_t n = (size_t)s->stages * (size_t)s->microbatches;
    if (!(plan->o_release = malloc(n * sizeof *plan->o_release)))
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the plan");
    for (size_t k = 0; k < n; k++)
        plan->o_release[k] = PL_RELEASE_AT_O;
    for (int r = 0; r < s->ranks; r++) {
        const zb_rank_program_t *prog = &s->rank[r];
        for (int i = 0; i < prog->len; i++) {
            const zb_action_t *o = &prog->actions[i];
            if (o->type != ZB_ACT_O)
                continue;
            int key = PL_RELEASE_AT_END;
            for (int j = i + 1; j < prog->len && key == PL_RELEASE_AT_END; j++) {
                const zb_action_t *a = &prog->actions[j];
                if (a->stage == o->stage && zb_action_is_compute(a->type) &&
                    sim->start[r][j] >= sim->end[r][i])
                    key = pl_release_key(a->type, a->mb);
            }
            plan->o_release[(size_t)o->stage * (size_t)s->microbatches + (size_t)o->mb] = key;
        }
    }
    return ZB_OK;
}

/* The chosen schedule checked (sizes, memory) and simulated for the prediction, then lowered
 * into plan->sched (a lowered file keeps its own message order). */
static zb_status_t predict_and_lower(const pl_t *pl, candidate_t *c, pl_plan_t *plan,
                                     zb_pipeline_report_t *rep, zb_err_t *err)
{
    const zb_schedule_t *plain = c->sched;
    zb_status_t st = zb_transport_check_sizes(plan->S, pl->M, err);
    if (st != ZB_OK)
        return st;
    /* every rank against what the whole-rank limit leaves its own activations */
    if ((st = set_rank_budgets(pl, plain, &c->costs, err)) == ZB_OK)
        st = zb_validate(plain, &c->costs, err);
    if (st != ZB_OK)
        return st == ZB_EMEMLIMIT ? activations_over_limit(pl, plain, &c->costs, err) : st;
    zb_sim_t sim;
    if ((st = zb_simulate(plain, &c->costs, &sim, err)) != ZB_OK)
        return st;
    rep->bubble_predicted = zb_sim_span_idle(&sim);
    rep->span_predicted = sim.span_max;
    rep->makespan_predicted = sim.makespan;
    rep->busy_predicted = sim.busy_max;
    if (!(plan->tail = calloc((size_t)sim.ranks, 1))) {
        zb_sim_free(&sim);
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the plan");
    }
    zb_sim_last_ranks(&sim, 0.01, plan->tail);
    if ((st = plan_o_release(pl, plain, &sim, plan, err)) != ZB_OK) {
        zb_sim_free(&sim);
        return st;
    }
    for (int r = 0; r < pl->P && r < rep->ranks; r++)
        rep->predicted_stash_bytes[r] = sim.peak_mem[r];
    if (!zb_schedule_has_comms(plain))
        st = zb_insert_comms(plain, &plan->sched, err);
    else if (!(plan->sched = zb_schedule_clone(plain)))
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for the schedule");
    for (int r = 0; st == ZB_OK && r < pl->P && r < rep->ranks; r++)
        pl_mem_predict(pl, plan, r, sim.peak_mem[r], &rep->mem_predicted[r]);
    rep->mem_on_device = pl->opts->cuda != NULL;
    zb_sim_free(&sim);
    return st;
}

zb_status_t pl_plan_build(const pl_t *pl, pl_plan_t *plan, zb_pipeline_report_t *rep,
                          zb_err_t *err)
{
    memset(plan, 0, sizeof *plan);
    candidate_t *c = calloc(1, sizeof *c);
    if (!c)
        return zb_err_set(err, ZB_ENOMEM, "out of memory planning the schedule");
    zb_status_t st = make_plain(pl, c, err);
    if (st != ZB_OK) {
        free(c);
        return st;
    }
    plan->S = c->sched->stages;
    memcpy(plan->first, c->first, (size_t)(plan->S + 1) * sizeof *plan->first);
    if ((st = apply_recompute(pl, &c->sched, &c->costs, err)) == ZB_OK &&
        (st = apply_offload(pl, c, err)) == ZB_OK &&
        (st = predict_and_lower(pl, c, plan, rep, err)) == ZB_OK &&
        (st = check_mem_limit(pl, rep, err)) == ZB_OK &&
        (st = assign_units(pl, plan, err)) == ZB_OK) {
        plan_note(pl, c->sched, &c->costs, rep);
        offload_note(c->sched, &c->costs, rep);
        rep->stages = plan->S;
        memcpy(rep->first, plan->first, (size_t)(plan->S + 1) * sizeof *plan->first);
        plan->costs = c->costs; /* kept for the predicted trace */
        zb_schedule_free(c->sched);
    } else {
        candidate_free(c);
        zb_schedule_free(plan->sched);
        free(plan->unit_owner);
        free(plan->tail);
        free(plan->o_release);
        memset(plan, 0, sizeof *plan);
    }
    free(c);
    return st;
}
