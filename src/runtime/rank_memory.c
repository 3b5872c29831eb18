/* Whole-rank memory: what a pipeline rank holds besides its activations (stage-local parameters,
 * gradients, AdamW moments, the post-validation backup, message buffers), predicted from the
 * plan and counted from the rank's allocations, and the activation budget a --mem-limit leaves
 * for the schedule. The figures and their meaning: docs/runtime.md, "Whole-rank memory". */
#include <math.h>
#include <string.h>

#include "runtime/pipeline_internal.h"
#include "zbpp/util.h"

/* A placement of S stages partitioned by `first`: the rank of stage s is rank_of(this, s). */
typedef struct layout {
    const pl_t *pl;
    int S;
    const int *first;
    const zb_schedule_t *sched; /* sched_rank only */
    int (*rank_of)(const struct layout *lay, int s);
} layout_t;

static int loop_rank(const layout_t *lay, int s) { return s % lay->pl->P; }

static int v_rank(const layout_t *lay, int s)
{
    int P = lay->pl->P;
    return s < P ? s : 2 * P - 1 - s;
}

static int sched_rank(const layout_t *lay, int s) { return zb_stage_rank(lay->sched, s); }

bool pl_rank_backs_up(const pl_t *pl)
{
    /* with a single rank its own norm is the global one: nothing to validate */
    return pl->opts->opt_sync == ZB_OPT_SYNC_POST_VALIDATION && pl->P * pl->N > 1;
}

/* Parameters, gradients, optimizer, backup and messages of `rank` in layout `lay`. */
static void static_part(const layout_t *lay, int rank, zb_rank_mem_t *m)
{
    const pl_t *pl = lay->pl;
    const int S = lay->S;
    zb_gpt2_span_t spans[1025];
    int n = 0;
    bool embed = false, head = false;
    double msg_bufs = 0;
    for (int s = 0; s < S && n < 1025; s++) {
        if (lay->rank_of(lay, s) != rank)
            continue;
        zb_gpt2_span_t sp = zb_partition_span(lay->first, S, s);
        spans[n++] = sp;
        embed |= sp.embed;
        head |= sp.head;
        /* x_in, dx_out; x_out / dx_in unless the neighbour stage is on this rank */
        msg_bufs += !sp.embed + !sp.head;
        msg_bufs += !sp.head && lay->rank_of(lay, s + 1) != rank;
        msg_bufs += !sp.embed && lay->rank_of(lay, s - 1) != rank;
    }
    const double F = sizeof(float);
    double count = (double)zb_gpt2_params_part_count(&pl->mcfg, spans, n);
    double wte_n = (double)pl->mcfg.padded_vocab * pl->mcfg.channels;
    double upd = 0;
    size_t off[16], cnt[16];
    for (int u = 0; u < zb_gpt2_num_units(&pl->mcfg); u++) {
        int L = pl->mcfg.layers;
        bool mine = u == 0       ? embed
                    : u == L + 1 ? head
                                 : lay->rank_of(lay, zb_partition_stage_of(lay->first, S, u - 1)) ==
                                       rank;
        for (int i = 0, k = mine ? zb_gpt2_unit_ranges(&pl->mcfg, u, off, cnt) : 0; i < k; i++)
            upd += (double)cnt[i];
    }
    if (head && !embed)
        upd += wte_n;
    m->params = count * F;
    m->grads = (count + (head ? wte_n : 0)) * F; /* + the head's WTE accumulator */
    m->optimizer = 2 * count * F;
    m->backup = pl_rank_backs_up(pl) && upd > 0 ? 3 * upd * F : 0;
    m->messages = msg_bufs * (double)pl->M * (double)pl->NC * F;
    if (embed && !head) /* the tied gradient's exchange buffer */
        m->messages += (double)pl_wte_chunk((size_t)wte_n) * F;
}

static void add_total(zb_rank_mem_t *m)
{
    m->total = m->params + m->grads + m->optimizer + m->backup + m->messages + m->activations;
}

double pl_static_bound(const pl_t *pl, int S, const int *first)
{
    /* before the schedule is known, any stage of a rank may get an R output buffer */
    int stages_per_rank = (S + pl->P - 1) / pl->P;
    double r_out = pl->opts->recompute != ZB_RECOMPUTE_NONE
                       ? (double)stages_per_rank * (double)pl->NC * sizeof(float)
                       : 0;
    double most = 0;
    for (int r = 0; r < pl->P; r++) {
        zb_rank_mem_t a = {0}, b = {0};
        const layout_t loop = {pl, S, first, NULL, loop_rank}, v = {pl, S, first, NULL, v_rank};
        static_part(&loop, r, &a);
        if (S == 2 * pl->P)
            static_part(&v, r, &b);
        a.messages += r_out, b.messages += r_out;
        add_total(&a), add_total(&b);
        most = fmax(most, fmax(a.total, b.total));
    }
    return most;
}

void pl_mem_predict(const pl_t *pl, const pl_plan_t *plan, int rank, double activations,
                    zb_rank_mem_t *m)
{
    memset(m, 0, sizeof *m);
    const layout_t lay = {pl, plan->S, plan->first, plan->sched, sched_rank};
    static_part(&lay, rank, m);
    m->activations = activations;
    for (int s = 0; s < plan->S; s++)
        if (zb_stage_rank(plan->sched, s) == rank) {
            zb_gpt2_span_t sp = zb_partition_span(plan->first, plan->S, s);
            m->stash_alloc += (double)pl_stash_slots(&plan->sched->rank[rank], s) *
                              (double)zb_gpt2_stash_capacity_keep(&pl->mcfg, &sp, pl->mbB, pl->T, pl->keep);
            if (!sp.head && pl_stage_recomputes(&plan->sched->rank[rank], s))
                m->messages += (double)pl->NC * sizeof(float); /* the R's output buffer */
        }
    add_total(m);
}

zb_status_t zb_pipeline_predict_memory(const zb_gpt2_config_t *cfg, const int *first,
                                       const zb_schedule_t *sched, const zb_costs_t *costs,
                                       int mbB, int T, zb_opt_sync_t sync, zb_gpt2_keep_t keep,
                                       zb_rank_mem_t *out, zb_err_t *err)
{
    if (!cfg || !first || !sched || !costs || !out || mbB < 1 || T < 1)
        return zb_err_set(err, ZB_EINVAL, "memory prediction: missing or bad arguments");
    if (sched->stages > 1024 || costs->stages != sched->stages)
        return zb_err_set(err, ZB_EINVAL, "memory prediction: %d stages, costs for %d",
                          sched->stages, costs->stages);
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = sched->ranks;
    o.opt_sync = sync;
    o.keep = keep;
    pl_t pl;
    memset(&pl, 0, sizeof pl);
    pl.opts = &o;
    pl.mcfg = *cfg;
    pl.P = sched->ranks, pl.N = 1, pl.M = sched->microbatches;
    pl.mbB = mbB, pl.T = T, pl.keep = keep;
    pl.NC = (size_t)mbB * (size_t)T * (size_t)cfg->channels;
    pl_plan_t plan = {.S = sched->stages, .sched = (zb_schedule_t *)sched}; /* read only */
    memcpy(plan.first, first, (size_t)(sched->stages + 1) * sizeof *first);
    zb_costs_t c;
    zb_status_t st = zb_costs_clone(&c, costs, err);
    if (st != ZB_OK)
        return st;
    pl_stage_memory(&pl, plan.S, plan.first, &c); /* the stash of this keep mode, in bytes */
    if (c.m_keep)
        memset(c.m_keep, 0, (size_t)plan.S * sizeof *c.m_keep); /* input stays in x_in */
    c.mem_limit = INFINITY;
    zb_sim_t sim;
    if ((st = zb_simulate(sched, &c, &sim, err)) == ZB_OK) {
        for (int r = 0; r < pl.P; r++)
            pl_mem_predict(&pl, &plan, r, sim.peak_mem[r], &out[r]);
        zb_sim_free(&sim);
    }
    zb_costs_free(&c);
    return st;
}

void pl_mem_measure(const pl_rank_t *R, zb_rank_mem_t *m)
{
    const pl_t *pl = R->pl;
    const double F = sizeof(float);
    memset(m, 0, sizeof *m);
    m->params = (double)R->params.count * F;
    m->grads = ((double)R->grads.g.count + (R->grads.wte_head ? (double)R->grads.g.sizes[ZB_WTE]
                                                              : 0)) * F;
    m->optimizer = ((double)R->opt.m.count + (double)R->opt.v.count) * F;
    m->backup = R->backup ? 3 * (double)R->upd_elems * F : 0;
    double buf = (double)pl->M * (double)pl->NC * F;
    for (int i = 0; i < R->n_local; i++) {
        const pl_stage_t *ls = &R->st[i];
        m->messages += buf * ((ls->x_in != NULL) + (ls->dx_out != NULL) + ls->own_x_out +
                              ls->own_dx_in);
        if (ls->r_out)
            m->messages += (double)pl->NC * F;
        for (int k = 0; k < ls->pool_n; k++)
            m->stash_alloc +=
                (double)zb_gpt2_stash_capacity_keep(&pl->mcfg, &ls->span, pl->mbB, pl->T, pl->keep);
    }
    if (R->wte_chunk)
        m->messages += (double)pl_wte_chunk(R->params.sizes[ZB_WTE]) * F;
    m->activations = (double)R->live_peak;
    add_total(m);
    m->rss_peak = zb_rss_peak_bytes();
}
