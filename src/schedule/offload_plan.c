/* The planner's offload step: keep, offload or recompute each (stage, mb) to fit a memory limit.
 *
 * AUTO is a greedy descent on the simulated timeline. While some rank's timed peak is over its
 * limit, every pair of that rank whose stash is alive at the peak (F started, backward not yet)
 * is tried in each later state along keep -> offload (reload in time) -> offload (reload right
 * before the backward, which may then wait) -> recompute; among the steps that lower that rank's memory at the peak's time without raising
 * its peak, the one with the smallest makespan wins (ties: the least compute, i.e. an offload
 * before a recompute, then the lower memory at that time). The peak's time and not the peak itself: a
 * peak is often a plateau several stashes long, which no single step lowers. A pair only ever
 * moves forward along that line, so there are at most three steps per pair. Each
 * try rebuilds the schedule from the plain one (zb_add_recompute, then zb_add_offload, whose
 * reloads are timed on the recomputed schedule) and simulates it. */
#include "zbpp/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/offload_internal.h"
#include "schedule/sched_index.h"
#include "zbpp/workers.h"

/* The states of a pair, in the only order a pair moves through them (the first three are the
 * pass's ZB_RELOAD_* values). */
enum { KEEP = ZB_RELOAD_NONE, OFFLOAD = ZB_RELOAD_IN_TIME, OFFLOAD_LATE = ZB_RELOAD_LATE,
       RECOMPUTE };

typedef struct {
    const zb_schedule_t *base;
    const zb_costs_t *c;
    unsigned char *state; /* [S*M] KEEP, OFFLOAD, OFFLOAD_LATE or RECOMPUTE */
    unsigned char *sel_o; /* [S*M] scratch for the passes */
    bool *sel_r;
    size_t n;
    long long evals_left; /* schedules the descent may still simulate; < 0: no bound */
} plan_t;

/* sel_o and sel_r of the pairs' states: each pair's reload choice, and whether it recomputes.
 * Returns whether any pair recomputes. */
static bool split_states(const unsigned char *state, unsigned char *sel_o, bool *sel_r, size_t n)
{
    bool any_r = false;
    for (size_t k = 0; k < n; k++) {
        sel_o[k] = state[k] == RECOMPUTE ? ZB_RELOAD_NONE : state[k];
        sel_r[k] = state[k] == RECOMPUTE;
        any_r |= sel_r[k];
    }
    return any_r;
}

/* What the schedules of one step share: the schedule of the current states without copies
 * (with the R's of the recompute set) and its timeline, from which the offload pass places the
 * L's. Any states with the same recompute set need only the pass (zb_add_offload_timed). */
typedef struct {
    zb_schedule_t *rc; /* NULL: the base schedule itself (nothing recomputed) */
    const zb_schedule_t *in;
    zb_sim_t sim;
    bool ok; /* false: each schedule is built whole (and meets the same failure) */
} shared_t;

static void shared_init(plan_t *p, shared_t *sh)
{
    *sh = (shared_t){.in = p->base};
    if (split_states(p->state, p->sel_o, p->sel_r, p->n) &&
        zb_add_recompute(p->base, p->sel_r, &sh->rc, NULL) != ZB_OK)
        return;
    if (sh->rc)
        sh->in = sh->rc;
    sh->ok = zb_simulate(sh->in, p->c, &sh->sim, NULL) == ZB_OK;
}

static void shared_free(shared_t *sh)
{
    if (sh->ok)
        zb_sim_free(&sh->sim);
    zb_schedule_free(sh->rc);
}

/* The schedule of the pairs' states `state`; sel_o and sel_r are the caller's scratch. `same_r`
 * (when ok) was made for a state with the same recompute set. */
static zb_status_t build_states(const zb_schedule_t *base, const zb_costs_t *c,
                                const unsigned char *state, unsigned char *sel_o, bool *sel_r,
                                size_t n, const shared_t *same_r, zb_schedule_t **out,
                                zb_err_t *err)
{
    const bool any_r = split_states(state, sel_o, sel_r, n);
    if (same_r && same_r->ok)
        return zb_add_offload_timed(same_r->in, &same_r->sim, sel_o, c, out, err);
    zb_schedule_t *rc = NULL;
    zb_status_t st = any_r ? zb_add_recompute(base, sel_r, &rc, err) : ZB_OK;
    if (st != ZB_OK)
        return st;
    st = zb_add_offload_how(rc ? rc : base, sel_o, c, out, err);
    zb_schedule_free(rc);
    return st;
}

/* The schedule of the current states (sh: shared_init of them) and its simulation (*sim owns
 * nothing of *s's but points at it: free the simulation first). */
static zb_status_t evaluate(plan_t *p, const shared_t *sh, zb_schedule_t **s, zb_sim_t *sim,
                            zb_err_t *err)
{
    if (p->evals_left == 0)
        return zb_err_set(err, ZB_EMEMLIMIT, "offload auto: gave up (search budget spent)");
    if (p->evals_left > 0)
        p->evals_left--;
    zb_status_t st = build_states(p->base, p->c, p->state, p->sel_o, p->sel_r, p->n, sh, s, err);
    if (st != ZB_OK)
        return st;
    if ((st = zb_simulate(*s, p->c, sim, err)) != ZB_OK) {
        zb_schedule_free(*s);
        *s = NULL;
    }
    return st;
}

/* The rank furthest over its limit, or -1 when every rank fits. */
static int worst_rank(const zb_costs_t *c, const zb_sim_t *sim)
{
    int worst = -1;
    double most = 0;
    for (int r = 0; r < sim->ranks; r++) {
        double lim = zb_costs_limit(c, r);
        double over = sim->peak_mem[r] - lim;
        if (isfinite(lim) && over > 1e-9 * fmax(1.0, fabs(lim)) && over > most) {
            most = over;
            worst = r;
        }
    }
    return worst;
}

/* Mark in `alive` the pairs of rank r whose F started at or before t and whose backward did
 * not start before t. */
static void alive_at(const zb_schedule_t *s, const zb_sim_t *sim, int r, double t,
                     unsigned char *alive, size_t n)
{
    memset(alive, 0, n);
    const zb_rank_program_t *p = &s->rank[r];
    for (int i = 0; i < p->len; i++) {
        const zb_action_t *a = &p->actions[i];
        size_t k = (size_t)a->stage * (size_t)s->microbatches + (size_t)a->mb;
        if (a->type == ZB_ACT_F && sim->start[r][i] <= t)
            alive[k] = 1;
        else if ((a->type == ZB_ACT_B || a->type == ZB_ACT_BW) && sim->start[r][i] < t)
            alive[k] = 0;
    }
}

/* Rank r's memory at time t, by the simulator's rules: an action's change when it starts, an
 * O's release when it ends (at t itself, a release counts and so does a start). */
static double mem_at(const zb_schedule_t *s, const zb_sim_t *sim, const zb_costs_t *c, int r,
                     double t)
{
    double m = 0;
    const zb_rank_program_t *p = &s->rank[r];
    for (int i = 0; i < p->len; i++) {
        const zb_action_t *a = &p->actions[i];
        if (a->type == ZB_ACT_O)
            m -= sim->end[r][i] <= t ? c->m_f[a->stage] : 0;
        else if (a->type == ZB_ACT_L)
            m += sim->start[r][i] <= t ? c->m_f[a->stage] : 0;
        else if (sim->start[r][i] <= t)
            m += zb_sched_mem_delta(c, a->type, a->flags, a->stage);
    }
    return m;
}

typedef struct {
    size_t k;
    unsigned char to;
    double makespan, busy, at; /* the step's makespan, compute over all ranks, and memory at
                                  the peak's time */
} step_t;

typedef struct {
    int rank;
    double peak, t, at; /* the rank's peak, its time, the memory then */
} target_t;

static bool below(double a, double b) { return a < b - 1e-12 * fmax(1.0, fabs(b)); }

/* One try of a step: pair k moved to state `to`, and what came of it. */
typedef struct {
    size_t k;
    unsigned char to;
    zb_status_t st;            /* ZB_OK: it ran; ZB_ENOMEM; anything else: not a candidate */
    double np, mk, busy, at;   /* the target rank's peak, makespan, compute, memory at g->t */
} try_t;

typedef struct {
    const plan_t *p;
    const target_t *g;
    try_t *tries;
    const shared_t *shared;
} tries_ctx_t;

/* One try, on its own copy of the states (tries run on the current worker group at once). */
static void run_try(void *ctx, size_t i, int worker)
{
    (void)worker;
    const tries_ctx_t *x = ctx;
    const plan_t *p = x->p;
    try_t *t = &x->tries[i];
    unsigned char *state = malloc(p->n), *sel_o = malloc(p->n);
    bool *sel_r = malloc(p->n * sizeof *sel_r);
    zb_schedule_t *s = NULL;
    zb_sim_t sim;
    zb_err_t e;
    zb_err_clear(&e);
    t->st = state && sel_o && sel_r ? ZB_OK : ZB_ENOMEM;
    if (t->st == ZB_OK) {
        memcpy(state, p->state, p->n);
        state[t->k] = t->to;
        /* a try that does not recompute keeps the step's recompute set: share its timeline */
        t->st = build_states(p->base, p->c, state, sel_o, sel_r, p->n,
                             t->to != RECOMPUTE ? x->shared : NULL, &s, &e);
    }
    if (t->st == ZB_OK && (t->st = zb_simulate(s, p->c, &sim, &e)) == ZB_OK) {
        t->np = sim.peak_mem[x->g->rank];
        t->mk = sim.makespan;
        t->busy = 0;
        for (int r = 0; r < sim.ranks; r++)
            t->busy += sim.busy[r];
        t->at = mem_at(s, &sim, p->c, x->g->rank, x->g->t);
        zb_sim_free(&sim);
    }
    zb_schedule_free(s);
    free(state);
    free(sel_o);
    free(sel_r);
}

/* Every try of one step (each alive pair one state further, and to recompute), run over the
 * calling thread's worker group; *best gets the one that lowers the target rank's memory at the
 * target time without raising its peak, at the smallest makespan (then least compute, then
 * lowest memory then; ties: the first in pair order, whatever the thread count). */
static zb_status_t best_step(plan_t *p, const target_t *g, const unsigned char *alive,
                             const shared_t *sh, try_t *tries, step_t *best, zb_err_t *err)
{
    size_t n = 0;
    for (size_t k = 0; k < p->n; k++) {
        if (!alive[k] || p->state[k] == RECOMPUTE)
            continue;
        for (unsigned char to = p->state[k] + 1; to <= RECOMPUTE; to++)
            tries[n++] = (try_t){.k = k, .to = to};
    }
    if (p->evals_left >= 0 && (long long)n > p->evals_left) {
        p->evals_left = 0;
        return zb_err_set(err, ZB_EMEMLIMIT, "offload auto: gave up (search budget spent)");
    }
    if (p->evals_left > 0)
        p->evals_left -= (long long)n;
    zb_parallel_for(n, run_try, &(tries_ctx_t){.p = p, .g = g, .tries = tries, .shared = sh});
    *best = (step_t){.to = KEEP};
    for (size_t i = 0; i < n; i++) {
        const try_t *t = &tries[i];
        if (t->st == ZB_ENOMEM)
            return zb_err_set(err, ZB_ENOMEM, "offload: out of memory");
        if (t->st != ZB_OK || below(g->peak, t->np) || !below(t->at, g->at))
            continue;
        bool same_time = !below(best->makespan, t->mk),
             same_work = same_time && !below(best->busy, t->busy);
        bool better = best->to == KEEP || below(t->mk, best->makespan) ||
                      (same_time && below(t->busy, best->busy)) ||
                      (same_work && below(t->at, best->at));
        if (better)
            *best = (step_t){.k = t->k, .to = t->to, .makespan = t->mk, .busy = t->busy,
                             .at = t->at};
    }
    return ZB_OK;
}

static void describe(const plan_t *p, char *note)
{
    size_t n[4] = {0, 0, 0, 0};
    for (size_t k = 0; k < p->n; k++)
        n[p->state[k]]++;
    snprintf(note, 96, "offload auto: %zu kept, %zu offloaded, %zu recomputed", n[KEEP],
             n[OFFLOAD] + n[OFFLOAD_LATE], n[RECOMPUTE]);
}

static zb_status_t plan_auto(plan_t *p, zb_schedule_t **out, char *note, zb_err_t *err)
{
    unsigned char *alive = malloc(p->n);
    try_t *tries = malloc(3 * p->n * sizeof *tries); /* at most three tries per pair */
    if (!alive || !tries) {
        free(alive);
        free(tries);
        return zb_err_set(err, ZB_ENOMEM, "offload: out of memory");
    }
    zb_status_t st;
    for (;;) {
        zb_schedule_t *s = NULL;
        zb_sim_t sim;
        shared_t sh;
        shared_init(p, &sh);
        if ((st = evaluate(p, &sh, &s, &sim, err)) != ZB_OK) {
            shared_free(&sh);
            break;
        }
        int r = worst_rank(p->c, &sim);
        if (r < 0) {
            zb_sim_free(&sim);
            shared_free(&sh);
            *out = s;
            if (note)
                describe(p, note);
            break;
        }
        const target_t g = {.rank = r, .peak = sim.peak_mem[r], .t = sim.peak_time[r],
                            .at = mem_at(s, &sim, p->c, r, sim.peak_time[r])};
        alive_at(s, &sim, r, g.t, alive, p->n);
        zb_sim_free(&sim);
        zb_schedule_free(s);
        step_t best = {.to = KEEP};
        st = best_step(p, &g, alive, &sh, tries, &best, err);
        shared_free(&sh);
        if (st != ZB_OK)
            break;
        if (best.to == KEEP) {
            st = zb_err_set(err, ZB_EMEMLIMIT,
                            "offload auto: rank %d still needs %g memory (limit %g) with every "
                            "stash alive at its peak offloaded or recomputed",
                            r, g.peak, zb_costs_limit(p->c, r));
            break;
        }
        p->state[best.k] = best.to;
    }
    free(alive);
    free(tries);
    return st;
}

/* The checks every entry point makes; ZB_OK to go on. */
static zb_status_t check_input(const zb_schedule_t *in, const zb_costs_t *c, zb_err_t *err)
{
    if (!in || !c)
        return zb_err_set(err, ZB_EINVAL, "offload: NULL schedule or cost model");
    if (zb_schedule_has_offload(in) || zb_schedule_has_recompute(in))
        return zb_err_set(err, ZB_EINVAL, "offload: the schedule already has O/L or R actions "
                                          "(the planner chooses them itself)");
    return ZB_OK;
}

zb_status_t zb_plan_offload_from(const zb_schedule_t *in, const unsigned char *start,
                                 const zb_costs_t *c, long long max_evals, zb_schedule_t **out,
                                 char *note, zb_err_t *err)
{
    *out = NULL;
    if (note)
        note[0] = '\0';
    zb_status_t st = check_input(in, c, err);
    if (st != ZB_OK)
        return st;
    plan_t p = {.base = in, .c = c, .n = (size_t)in->stages * (size_t)in->microbatches,
                .evals_left = max_evals > 0 ? max_evals : -1};
    p.state = calloc(p.n, 1);
    p.sel_o = calloc(p.n, 1);
    p.sel_r = calloc(p.n, sizeof *p.sel_r);
    if (p.state && p.sel_o && p.sel_r) {
        for (size_t k = 0; start && k < p.n; k++)
            p.state[k] = start[k] == ZB_RELOAD_NONE ? KEEP : OFFLOAD;
        st = plan_auto(&p, out, note, err);
    } else {
        st = zb_err_set(err, ZB_ENOMEM, "offload: out of memory");
    }
    free(p.state);
    free(p.sel_o);
    free(p.sel_r);
    return st;
}

zb_status_t zb_plan_offload(const zb_schedule_t *in, zb_offload_t mode, const zb_costs_t *c,
                            zb_schedule_t **out, char *note, zb_err_t *err)
{
    *out = NULL;
    if (note)
        note[0] = '\0';
    zb_status_t st = check_input(in, c, err);
    if (st != ZB_OK)
        return st;
    if (mode == ZB_OFFLOAD_NONE) {
        *out = zb_schedule_clone(in);
        return *out ? ZB_OK : zb_err_set(err, ZB_ENOMEM, "offload: out of memory");
    }
    if (mode != ZB_OFFLOAD_ALL && mode != ZB_OFFLOAD_AUTO)
        return zb_err_set(err, ZB_EINVAL, "offload: unknown mode %d", (int)mode);
    st = mode == ZB_OFFLOAD_ALL ? zb_add_offload_all(in, c, out, err) /* stashes off even when
                                                                       * copies are late */
                                : zb_plan_offload_from(in, NULL, c, 0, out, note, err);
    if (st == ZB_OK) /* a shared host link: reloads whose backward waited pulled earlier (all:
                      * never above the memory the placement left each rank) */
        zb_offload_pull_reloads(*out, c, mode == ZB_OFFLOAD_ALL);
    return st;
}
