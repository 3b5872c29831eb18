/* `optimal`: an exact MILP for small pipelines, solved with GLPK, warm-started from auto.
 *
 * Variables: C (makespan), e_a (end time of every F/B/W a, e_a >= d_a), and for every pair of
 * actions on the same rank whose order is not already implied a binary y_ab (1: a before b).
 * Implied orders (fixed, no binary): the chain of one microbatch on a rank (F's by stage, then
 * B's backwards, each W after its B) and, to break symmetry, microbatch order among actions of
 * the same type and stage (every generator in zbpp keeps it). Constraints:
 *   dependencies   e_b - d_b >= e_a + latency   (F(s-1)->F(s), F(s)->B(s), B(s+1)->B(s), B->W)
 *   disjunctions   big-M pair: a before b or b before a
 *   memory         for each a that allocates: sum of deltas of the actions before a + delta_a
 *                  <= limit (the running sum at a, as the validator counts it)
 *   C >= e_a; minimise C.
 * Bounds: e_a in [head_a, ub - tail_a] and C in [lb, ub], with ub = auto's makespan (its
 * schedule is the incumbent, so nothing worse is needed) and lb the larger of the per-rank
 * one-machine bounds (heads, work, tails); each pair's big-M is the widest gap those bounds
 * allow, not the whole horizon.
 * glp_intopt runs without presolve so that auto's schedule can be handed over as the first
 * incumbent (glp_ios_heur_sol in the callback); the callback also records the best bound of the
 * open nodes, so a run stopped by the time limit reports a proven lower bound and the gap.
 *
 * zb_gen_optimal runs in phases over one context (opt_t), each a function that fills its part
 * or fails with a message: index the actions, take auto's schedule as the warm start, compute
 * heads/tails/bounds, build the model (orders, dependencies, makespan, memory), the warm start
 * vector, solve, extract the schedule. Whatever a phase allocated is freed in one place,
 * opt_free, on every path. GLPK's process-wide environment is left alone (no glp_free_env:
 * another caller, thread or the embedding program may be using it). */
#include <glpk.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/auto_greedy.h"
#include "schedule/optimal_glpk.h"
#include "schedule/gen_v.h"
#include "schedule/generators.h"

/* State of the branch-and-bound callback. */
typedef struct {
    double *x;     /* warm start, 1-based over columns; NULL = none */
    bool given;
    double bound;  /* best proven lower bound seen */
} cb_t;

static void callback(glp_tree *T, void *info)
{
    cb_t *cb = info;
    int node = glp_ios_best_node(T);
    if (node)
        cb->bound = fmax(cb->bound, glp_ios_node_bound(T, node));
    if (glp_ios_reason(T) == GLP_IHEUR && cb->x && !cb->given) {
        glp_ios_heur_sol(T, cb->x);
        cb->given = true;
    }
}

static void opt_free(opt_t *o)
{
    if (o->lp)
        glp_delete_prob(o->lp);
    if (o->have_wsim)
        zb_sim_free(&o->wsim);
    zb_schedule_free(o->warm);
    if (o->rank_acts)
        for (int r = 0; r < o->P; r++)
            free(o->rank_acts[r]);
    free(o->rank_acts);
    free(o->rank_cnt);
    free(o->acts);
    free(o->wend);
    free(o->wpos);
    free(o->head);
    free(o->tail);
    free(o->pair_a);
    free(o->pair_b);
    free(o->pair_col);
    free(o->ia);
    free(o->ja);
    free(o->ar);
    free(o->x);
}

/* Phase 1: one act_t per F/B/W with its rank, duration and memory; per-rank lists. */
static zb_status_t opt_index_actions(opt_t *o, zb_err_t *err)
{
    const int P = o->P, S = o->S, M = o->M, n = o->n;
    const zb_costs_t *c = o->c;
    o->acts = calloc((size_t)n, sizeof *o->acts);
    o->rank_cnt = calloc((size_t)P, sizeof(int));
    o->rank_acts = calloc((size_t)P, sizeof(int *));
    if (!o->acts || !o->rank_cnt || !o->rank_acts)
        return zb_opt_oom(err);
    for (int t = 0; t < 3; t++)
        for (int s = 0; s < S; s++)
            for (int m = 0; m < M; m++) {
                act_t *a = &o->acts[act_index(S, M, t, s, m)];
                a->type = t;
                a->stage = s;
                a->mb = m;
                a->rank = zb_stage_rank(o->warm, s);
                a->dur = t == 0 ? c->t_f[s] : t == 1 ? c->t_b[s] : c->t_w[s];
                a->mem = t == 0 ? c->m_f[s] : t == 1 ? c->m_b[s] : c->m_w[s];
                o->rank_cnt[a->rank]++;
            }
    for (int r = 0; r < P; r++) {
        o->rank_acts[r] = malloc(sizeof(int) * (size_t)(o->rank_cnt[r] > 0 ? o->rank_cnt[r] : 1));
        if (!o->rank_acts[r])
            return zb_opt_oom(err);
        o->rank_cnt[r] = 0;
    }
    for (int i = 0; i < n; i++)
        o->rank_acts[o->acts[i].rank][o->rank_cnt[o->acts[i].rank]++] = i;
    return ZB_OK;
}

/* Phase 2: end times and positions of every action in auto's simulated schedule (BW split). */
static zb_status_t opt_warm_start(opt_t *o, zb_err_t *err)
{
    const int S = o->S, M = o->M;
    zb_status_t st = zb_simulate(o->warm, o->c, &o->wsim, err);
    if (st != ZB_OK)
        return st;
    o->have_wsim = true;
    o->wend = calloc((size_t)o->n, sizeof(double));
    o->wpos = calloc((size_t)o->n, sizeof(int));
    if (!o->wend || !o->wpos)
        return zb_opt_oom(err);
    for (int r = 0; r < o->P; r++) {
        int pos = 0;
        for (int i = 0; i < o->warm->rank[r].len; i++) {
            const zb_action_t *a = &o->warm->rank[r].actions[i];
            if (a->type == ZB_ACT_F || a->type == ZB_ACT_B || a->type == ZB_ACT_W) {
                int k = act_index(S, M, a->type == ZB_ACT_F ? 0 : a->type == ZB_ACT_B ? 1 : 2,
                                  a->stage, a->mb);
                o->wend[k] = o->wsim.end[r][i];
                o->wpos[k] = pos++;
            } else if (a->type == ZB_ACT_BW) {
                int kb = act_index(S, M, 1, a->stage, a->mb);
                int kw = act_index(S, M, 2, a->stage, a->mb);
                o->wend[kb] = o->wsim.start[r][i] + o->c->t_b[a->stage];
                o->wend[kw] = o->wsim.end[r][i];
                o->wpos[kb] = pos++;
                o->wpos[kw] = pos++;
            }
        }
    }
    /* auto's schedule is a point of the model unless it breaks an order the model fixes */
    o->warm_ok = true;
    for (int r = 0; r < o->P && o->warm_ok; r++)
        for (int i = 0; i < o->rank_cnt[r] && o->warm_ok; i++)
            for (int j = 0; j < o->rank_cnt[r] && o->warm_ok; j++) {
                int a = o->rank_acts[r][i], b = o->rank_acts[r][j];
                if (implied_before(&o->acts[a], &o->acts[b]) && o->wpos[a] > o->wpos[b])
                    o->warm_ok = false;
            }
    o->ub = o->warm_ok ? o->wsim.makespan * (1 + 1e-9) + 1e-9 : INFINITY;
    return ZB_OK;
}

typedef struct {
    bool proven;  /* optimality proven within the time limit */
    bool found;   /* the MIP has a feasible solution */
    double obj;   /* its objective */
    double bound; /* best lower bound seen (root LP, open nodes, c_lb) */
} opt_result_t;

/* Phase 6: LP relaxation, then branch and bound without presolve (so auto's schedule can be
 * the first incumbent), both within the time limit. */
static opt_result_t opt_solve(opt_t *o, double time_limit)
{
    glp_term_out(GLP_OFF);
    glp_smcp sp;
    glp_init_smcp(&sp);
    sp.msg_lev = GLP_MSG_OFF;
    sp.tm_lim = (int)fmin(time_limit * 1000.0, 2e9);
    int rc = glp_simplex(o->lp, &sp);
    double root = glp_get_status(o->lp) == GLP_OPT ? glp_get_obj_val(o->lp) : 0.0;
    cb_t cb = {.x = o->warm_ok ? o->x : NULL, .given = false, .bound = root};
    glp_iocp ip;
    glp_init_iocp(&ip);
    ip.msg_lev = GLP_MSG_OFF;
    ip.presolve = GLP_OFF;
    ip.tm_lim = (int)fmax(1.0, fmin(time_limit * 1000.0, 2e9));
    ip.cb_func = callback;
    ip.cb_info = &cb;
    if (rc == 0 && glp_get_status(o->lp) == GLP_OPT)
        rc = glp_intopt(o->lp, &ip);
    int ms = glp_mip_status(o->lp);
    opt_result_t res = {.proven = rc == 0 && ms == GLP_OPT,
                        .found = ms == GLP_OPT || ms == GLP_FEAS,
                        .obj = INFINITY};
    if (res.found)
        res.obj = glp_mip_obj_val(o->lp);
    res.bound = fmax(fmax(cb.bound, root), o->c_lb);
    return res;
}

/* Phase 7: the solution's per-rank order (by end time; ties by the implied orders) as a
 * schedule. *sol stays NULL when it does not simulate or is worse than auto's (it should be
 * neither); *makespan gets its simulated makespan. */
static zb_status_t opt_extract(opt_t *o, zb_schedule_t **sol, double *makespan, zb_err_t *err)
{
    *sol = NULL;
    zb_schedule_t *s = zb_schedule_new("optimal", o->P, o->warm->chunks, o->warm->placement, o->M);
    if (!s)
        return zb_opt_oom(err);
    for (int r = 0; r < o->P; r++) {
        int k = o->rank_cnt[r];
        int *ord = o->rank_acts[r];
        /* insertion sort by (end, implied order) — k is small */
        for (int i = 1; i < k; i++) {
            int v = ord[i], j = i;
            double ev = glp_mip_col_val(o->lp, 2 + v);
            while (j > 0) {
                double eu = glp_mip_col_val(o->lp, 2 + ord[j - 1]);
                if (eu < ev - 1e-7 ||
                    (fabs(eu - ev) <= 1e-7 && !implied_before(&o->acts[v], &o->acts[ord[j - 1]])))
                    break;
                ord[j] = ord[j - 1];
                j--;
            }
            ord[j] = v;
        }
        for (int i = 0; i < k; i++) {
            const act_t *a = &o->acts[ord[i]];
            zb_action_t za = {.type = (uint8_t)(a->type == 0   ? ZB_ACT_F
                                                : a->type == 1 ? ZB_ACT_B
                                                               : ZB_ACT_W),
                              .stage = a->stage,
                              .mb = a->mb};
            if (zb_schedule_push(s, r, za) != ZB_OK) {
                zb_schedule_free(s);
                return zb_opt_oom(err);
            }
        }
    }
    zb_sim_t ssim;
    if (zb_simulate(s, o->c, &ssim, NULL) != ZB_OK) {
        zb_schedule_free(s);
        return ZB_OK;
    }
    *makespan = ssim.makespan;
    zb_sim_free(&ssim);
    if (*makespan > o->wsim.makespan + 1e-9) {
        zb_schedule_free(s);
        return ZB_OK;
    }
    *sol = s;
    return ZB_OK;
}

zb_status_t zb_gen_optimal(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    if (!p->costs)
        return zb_err_set(err, ZB_EINVAL, "optimal: needs a cost model (times and memory)");
    if ((long long)p->ranks * p->microbatches > ZB_OPTIMAL_MAX_PM)
        return zb_err_set(err, ZB_EINVAL,
                          "optimal: P*M = %lld is too large for the exact solver (max %d)",
                          (long long)p->ranks * p->microbatches, ZB_OPTIMAL_MAX_PM);
    opt_t o;
    memset(&o, 0, sizeof o);
    o.p = p;
    o.c = p->costs;
    /* auto's schedule: the incumbent, and the chunking/placement to optimise over */
    zb_gen_params_t q = *p;
    q.any_placement = false;
    zb_status_t st = zb_gen_auto(&q, &o.warm, err);
    if (st != ZB_OK)
        return st;
    o.P = o.warm->ranks;
    o.S = o.warm->stages;
    o.M = o.warm->microbatches;
    o.n = 3 * o.S * o.M;
    if ((st = opt_index_actions(&o, err)) != ZB_OK || (st = opt_warm_start(&o, err)) != ZB_OK ||
        (st = zb_opt_bounds(&o, err)) != ZB_OK || (st = zb_opt_build_model(&o, err)) != ZB_OK ||
        (st = zb_opt_warm_vector(&o, err)) != ZB_OK)
        goto done;
    const double tl = p->time_limit > 0 ? p->time_limit : 10.0;
    opt_result_t res = opt_solve(&o, tl);
    zb_schedule_t *sol = NULL;
    double best = res.obj;
    if (res.found) {
        double mk = INFINITY;
        if ((st = opt_extract(&o, &sol, &mk, err)) != ZB_OK)
            goto done;
        if (sol)
            best = fmin(best, mk);
    }
    const double auto_mk = o.wsim.makespan;
    if (!sol) { /* the solver found nothing better in time: auto's schedule stands */
        sol = o.warm;
        o.warm = NULL;
        best = auto_mk;
        snprintf(sol->name, sizeof sol->name, "optimal");
    }
    double bound = res.proven ? best : res.bound;
    double gap = best > 0 ? (best - bound) / best : 0;
    if (res.proven)
        snprintf(p->note, sizeof p->note, "optimal: proven optimal makespan %g (auto %g)", best,
                 auto_mk);
    else
        snprintf(p->note, sizeof p->note,
                 "optimal: NOT proven (time limit %gs): makespan %g, lower bound %g, gap %.1f%% "
                 "(auto %g)",
                 tl, best, bound, 100 * gap, auto_mk);
    *out = sol;
done:
    opt_free(&o);
    return st;
}
