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
#include "schedule/gen_v.h"
#include "schedule/generators.h"

typedef struct {
    int type, stage, mb, rank;
    double dur, mem;
} act_t;

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

static int act_index(int S, int M, int type, int stage, int mb)
{
    return (type * S + stage) * M + mb; /* type 0 F, 1 B, 2 W */
}

/* Is a known to precede b (same rank)? Chain of one microbatch, or FIFO per (type, stage). */
static bool implied_before(const act_t *a, const act_t *b)
{
    if (a->type == b->type && a->stage == b->stage)
        return a->mb < b->mb;
    if (a->mb != b->mb)
        return false;
    /* same microbatch, same rank */
    if (a->type == 0 && b->type == 0)
        return a->stage < b->stage;
    if (a->type == 0)
        return true; /* every F of the mb on this rank precedes its B's and W's */
    if (a->type == 1 && b->type == 1)
        return a->stage > b->stage;
    if (a->type == 1 && b->type == 2)
        return a->stage == b->stage || a->stage > b->stage;
    return false;
}

/* Everything the phases share. Arrays indexed by action are over n = 3·S·M (act_index). */
typedef struct {
    zb_gen_params_t *p;
    const zb_costs_t *c;
    zb_schedule_t *warm; /* auto's schedule: incumbent and shape */
    int P, S, M, n;
    act_t *acts;
    int *rank_cnt;   /* [P] actions per rank */
    int **rank_acts; /* [P][rank_cnt] action indices per rank */
    zb_sim_t wsim;   /* the warm start simulated */
    bool have_wsim;
    double *wend;    /* [n] warm start end times */
    int *wpos;       /* [n] warm start position on its rank */
    bool warm_ok;    /* the warm start keeps the orders the model fixes */
    double *head, *tail; /* [n] earliest end; least time still needed after the end */
    double c_lb;     /* lower bound on C from heads, tails and per-rank work */
    double H;        /* big-M: everything in series, or ub when known */
    double ub;       /* auto's makespan when its schedule is a point of the model, else INF */
    glp_prob *lp;
    int ncol;
    int npairs;
    int *pair_a, *pair_b; /* [npairs] the pair of each order binary */
    int *pair_col;        /* [n*n] column of y_ab at a*n+b, 0 = none */
    int *ia, *ja;         /* constraint matrix triplets, 1-based */
    double *ar;
    size_t nz, nz_cap;
    double *x;            /* [ncol+1] warm start vector */
} opt_t;

static zb_status_t oom(zb_err_t *err) { return zb_err_set(err, ZB_ENOMEM, "optimal: out of memory"); }

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
        return oom(err);
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
            return oom(err);
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
        return oom(err);
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
    double rel, dur, tail;
} job_t;

static int by_rel_desc(const void *x, const void *y)
{
    double a = ((const job_t *)x)->rel, b = ((const job_t *)y)->rel;
    return a < b ? 1 : a > b ? -1 : 0;
}

static int by_tail_desc(const void *x, const void *y)
{
    double a = ((const job_t *)x)->tail, b = ((const job_t *)y)->tail;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Rank r as one machine with release times (earliest starts) and tails: any set of its actions
 * runs after the set's earliest release, takes its summed work, and is followed by the set's
 * smallest tail. The sets worth trying are those released from some time on, and those with
 * tails from some length up. NAN on out of memory. */
static double one_machine_bound(const opt_t *o, int r)
{
    const int k = o->rank_cnt[r];
    job_t *j = malloc(sizeof *j * (size_t)(k ? k : 1));
    if (!j)
        return NAN;
    for (int i = 0; i < k; i++) {
        int a = o->rank_acts[r][i];
        j[i] = (job_t){o->head[a] - o->acts[a].dur, o->acts[a].dur, o->tail[a]};
    }
    double lb = 0, work = 0, low = INFINITY;
    qsort(j, (size_t)k, sizeof *j, by_rel_desc);
    for (int i = 0; i < k; i++) {
        work += j[i].dur;
        low = fmin(low, j[i].tail);
        lb = fmax(lb, j[i].rel + work + low);
    }
    work = 0, low = INFINITY;
    qsort(j, (size_t)k, sizeof *j, by_tail_desc);
    for (int i = 0; i < k; i++) {
        work += j[i].dur;
        low = fmin(low, j[i].rel);
        lb = fmax(lb, low + work + j[i].tail);
    }
    free(j);
    return lb;
}

/* Memory arcs into F(s, m) when each rank holds one stage and B, W only free memory: with
 * limit L on the rank, F(s, m) (the (m+1)-th F) fits only after enough B's and W's of earlier
 * microbatches: (m+1) m_f + nb m_b + nw m_w <= L with nw <= nb <= m gives
 * nb >= m + 1 - L/m_f and nw >= ((m+1) m_f + m m_b - L)/|m_w|. *kb, *kw: the microbatch whose B,
 * W must have ended before F(s, m) starts (microbatch order per stage makes it the last needed),
 * or -1. */
static void mem_arcs(const opt_t *o, int s, int m, int *kb, int *kw)
{
    *kb = *kw = -1;
    const zb_costs_t *c = o->c;
    if (o->S != o->P || !(c->m_f[s] > 0) || c->m_b[s] > 0 || c->m_w[s] > 0)
        return;
    const double L0 = zb_costs_limit(c, o->acts[act_index(o->S, o->M, 0, s, 0)].rank);
    if (!isfinite(L0))
        return;
    const double L = L0 + 1e-9 * fmax(1.0, fabs(L0)), eps = 1e-9;
    double nb = ceil(m + 1 - L / c->m_f[s] - eps);
    if (nb >= 1)
        *kb = (int)nb - 1;
    if (c->m_w[s] < 0) {
        double nw = ceil(((m + 1) * c->m_f[s] + m * c->m_b[s] - L) / -c->m_w[s] - eps);
        if (nw >= 1)
            *kw = (int)fmin(nw, m) - 1;
    }
    if (*kb >= m)
        *kb = m - 1;
}

/* Phase 3: heads (earliest end along the dependency chain) and tails (least time still needed
 * after an action ends) tighten the big-M relaxation; a rank cannot finish before its earliest
 * start + all its work + its smallest tail, which bounds C from below. Also the big-M H. */
static zb_status_t opt_bounds(opt_t *o, zb_err_t *err)
{
    const int S = o->S, M = o->M, n = o->n;
    const zb_costs_t *c = o->c;
    const act_t *acts = o->acts;
    double H = 0;
    for (int i = 0; i < n; i++)
        H += acts[i].dur;
    for (int s = 0; s < S; s++)
        H += 2 * c->comm[s] * M;
    o->H = fmin(fmax(H, 1.0) * 1.01 + 1.0, o->ub);
    double *head = o->head = calloc((size_t)n, sizeof(double));
    double *tail = o->tail = calloc((size_t)n, sizeof(double));
    if (!head || !tail)
        return oom(err);
    /* heads, microbatch by microbatch: chains across stages, microbatch order per (type,
     * stage), and the memory arcs into each F */
    for (int m = 0; m < M; m++) {
        for (int s = 0; s < S; s++) {
            int f = act_index(S, M, 0, s, m);
            double rdy = 0;
            if (s > 0) {
                int pf = act_index(S, M, 0, s - 1, m);
                rdy = head[pf] + (acts[pf].rank != acts[f].rank ? c->comm[s - 1] : 0);
            }
            if (m > 0)
                rdy = fmax(rdy, head[f - 1]);
            int kb, kw;
            mem_arcs(o, s, m, &kb, &kw);
            if (kb >= 0)
                rdy = fmax(rdy, head[act_index(S, M, 1, s, kb)]);
            if (kw >= 0)
                rdy = fmax(rdy, head[act_index(S, M, 2, s, kw)]);
            head[f] = rdy + acts[f].dur;
        }
        for (int s = S - 1; s >= 0; s--) {
            int b = act_index(S, M, 1, s, m), f = act_index(S, M, 0, s, m);
            int w = act_index(S, M, 2, s, m);
            double rdy = head[f];
            if (s < S - 1) {
                int nb = act_index(S, M, 1, s + 1, m);
                rdy = fmax(rdy, head[nb] + (acts[nb].rank != acts[b].rank ? c->comm[s + 1] : 0));
            }
            if (m > 0)
                rdy = fmax(rdy, head[b - 1]);
            head[b] = rdy + acts[b].dur;
            head[w] = fmax(head[b], m > 0 ? head[w - 1] : 0) + acts[w].dur;
        }
    }
    /* tails, last microbatch first (the same arcs backwards; a memory arc into F(s, m) gives
     * the B or W it waits for a tail through that F) */
    for (int m = M - 1; m >= 0; m--) {
        for (int s = 0; s < S; s++) {
            int w = act_index(S, M, 2, s, m), b = act_index(S, M, 1, s, m);
            if (m < M - 1)
                tail[w] = fmax(tail[w], acts[w + 1].dur + tail[w + 1]);
            double t = fmax(tail[b], acts[w].dur + tail[w]);
            if (s > 0) {
                int pb = act_index(S, M, 1, s - 1, m);
                t = fmax(t, (acts[pb].rank != acts[b].rank ? c->comm[s] : 0) + acts[pb].dur +
                                tail[pb]);
            }
            if (m < M - 1)
                t = fmax(t, acts[b + 1].dur + tail[b + 1]);
            tail[b] = t;
        }
        for (int s = S - 1; s >= 0; s--) {
            int f = act_index(S, M, 0, s, m), b = act_index(S, M, 1, s, m);
            double t = acts[b].dur + tail[b];
            if (s < S - 1) {
                int nf = act_index(S, M, 0, s + 1, m);
                t = fmax(t, (acts[nf].rank != acts[f].rank ? c->comm[s] : 0) + acts[nf].dur +
                                tail[nf]);
            }
            if (m < M - 1)
                t = fmax(t, acts[f + 1].dur + tail[f + 1]);
            tail[f] = t;
            int kb, kw;
            mem_arcs(o, s, m, &kb, &kw);
            if (kb >= 0) {
                int x = act_index(S, M, 1, s, kb);
                tail[x] = fmax(tail[x], acts[f].dur + t);
            }
            if (kw >= 0) {
                int x = act_index(S, M, 2, s, kw);
                tail[x] = fmax(tail[x], acts[f].dur + t);
            }
        }
    }
    o->c_lb = 0;
    for (int r = 0; r < o->P; r++) {
        double lb = one_machine_bound(o, r);
        if (isnan(lb))
            return oom(err);
        o->c_lb = fmax(o->c_lb, lb);
    }
    return ZB_OK;
}

/* One coefficient of the constraint matrix (GLPK's triplets are 1-based). */
static void nz_add(opt_t *o, int row, int col, double val)
{
    o->nz++;
    o->ia[o->nz] = row;
    o->ja[o->nz] = col;
    o->ar[o->nz] = val;
}

/* Columns C and e_a; room for the matrix and the pair table. */
static zb_status_t opt_alloc_model(opt_t *o, zb_err_t *err)
{
    const int n = o->n;
    int npairs_max = 0;
    for (int r = 0; r < o->P; r++)
        npairs_max += o->rank_cnt[r] * (o->rank_cnt[r] - 1) / 2;
    o->pair_a = malloc(sizeof(int) * (size_t)(npairs_max + 1));
    o->pair_b = malloc(sizeof(int) * (size_t)(npairs_max + 1));
    o->pair_col = calloc((size_t)n * n > 0 ? (size_t)n * n : 1, sizeof(int)); /* a*n+b */
    o->nz_cap = 64 + (size_t)n * 8 + (size_t)npairs_max * 8 + (size_t)n * (size_t)(n > 0 ? n : 1);
    o->ia = malloc(sizeof(int) * o->nz_cap);
    o->ja = malloc(sizeof(int) * o->nz_cap);
    o->ar = malloc(sizeof(double) * o->nz_cap);
    if (!o->pair_a || !o->pair_b || !o->pair_col || !o->ia || !o->ja || !o->ar)
        return oom(err);
    o->lp = glp_create_prob();
    glp_set_obj_dir(o->lp, GLP_MIN);
    o->ncol = 1 + n;
    glp_add_cols(o->lp, o->ncol);
    if (isfinite(o->ub))
        glp_set_col_bnds(o->lp, 1, GLP_DB, o->c_lb, fmax(o->c_lb, o->ub));
    else
        glp_set_col_bnds(o->lp, 1, GLP_LO, o->c_lb, 0);
    glp_set_obj_coef(o->lp, 1, 1.0);
    for (int i = 0; i < n; i++)
        glp_set_col_bnds(o->lp, 2 + i, GLP_DB, o->head[i],
                         fmax(o->head[i], fmin(o->H, o->ub - o->tail[i])));
    return ZB_OK;
}

/* Every pair of actions on one rank: a fixed order when implied (one row), else a binary y_ab
 * with two big-M rows (a before b, or b before a). */
static void opt_add_orders(opt_t *o)
{
    const act_t *acts = o->acts;
    const int n = o->n;
    const double H = o->H;
    for (int r = 0; r < o->P; r++)
        for (int i = 0; i < o->rank_cnt[r]; i++)
            for (int j = i + 1; j < o->rank_cnt[r]; j++) {
                int a = o->rank_acts[r][i], b = o->rank_acts[r][j];
                bool ab = implied_before(&acts[a], &acts[b]);
                if (ab || implied_before(&acts[b], &acts[a])) {
                    int f = ab ? a : b, s2 = ab ? b : a;
                    /* e_s2 - d_s2 - e_f >= 0 */
                    int row = glp_add_rows(o->lp, 1);
                    glp_set_row_bnds(o->lp, row, GLP_LO, acts[s2].dur, 0);
                    nz_add(o, row, 2 + s2, 1.0);
                    nz_add(o, row, 2 + f, -1.0);
                    continue;
                }
                int col = glp_add_cols(o->lp, 1);
                o->ncol++;
                glp_set_col_kind(o->lp, col, GLP_BV);
                o->pair_a[o->npairs] = a;
                o->pair_b[o->npairs] = b;
                o->npairs++;
                o->pair_col[(size_t)a * n + b] = col;
                /* the widest e_a - e_b (and e_b - e_a) the column bounds allow */
                const double ha = fmin(H, o->ub - o->tail[a] - o->head[b] + acts[b].dur);
                const double hb = fmin(H, o->ub - o->tail[b] - o->head[a] + acts[a].dur);
                /* y=1: a before b: e_a - e_b + ha y <= ha - d_b */
                int row = glp_add_rows(o->lp, 2);
                glp_set_row_bnds(o->lp, row, GLP_UP, 0, ha - acts[b].dur);
                nz_add(o, row, 2 + a, 1.0);
                nz_add(o, row, 2 + b, -1.0);
                nz_add(o, row, col, ha);
                /* y=0: b before a: e_b - e_a - hb y <= -d_a */
                glp_set_row_bnds(o->lp, row + 1, GLP_UP, 0, -acts[a].dur);
                nz_add(o, row + 1, 2 + b, 1.0);
                nz_add(o, row + 1, 2 + a, -1.0);
                nz_add(o, row + 1, col, -hb);
            }
}

/* Dependencies across stages, F(s-1)->F(s) and B(s+1)->B(s), with the message latency when the
 * two stages sit on different ranks (same-rank ones are also implied orders). */
static void opt_add_dependencies(opt_t *o)
{
    const int S = o->S, M = o->M;
    for (int s = 0; s < S; s++)
        for (int m = 0; m < M; m++) {
            int deps[2][2];
            int nd = 0;
            if (s > 0) {
                deps[nd][0] = act_index(S, M, 0, s - 1, m);
                deps[nd++][1] = act_index(S, M, 0, s, m);
            }
            if (s < S - 1) {
                deps[nd][0] = act_index(S, M, 1, s + 1, m);
                deps[nd++][1] = act_index(S, M, 1, s, m);
            }
            for (int k = 0; k < nd; k++) {
                const act_t *a = &o->acts[deps[k][0]], *b = &o->acts[deps[k][1]];
                double lat = a->rank != b->rank ? o->c->comm[a->stage] : 0;
                int row = glp_add_rows(o->lp, 1);
                glp_set_row_bnds(o->lp, row, GLP_LO, b->dur + lat, 0);
                nz_add(o, row, 2 + deps[k][1], 1.0);
                nz_add(o, row, 2 + deps[k][0], -1.0);
            }
        }
}

/* The memory arcs as rows: e_F - d_F >= e_X for the B or W an F must wait for (implied by the
 * memory rows for integral orders, but the LP relaxation does not see it). */
static void opt_add_memory_arcs(opt_t *o)
{
    const int S = o->S, M = o->M;
    for (int s = 0; s < S; s++)
        for (int m = 0; m < M; m++) {
            int kb, kw, f = act_index(S, M, 0, s, m);
            mem_arcs(o, s, m, &kb, &kw);
            const int pre[2] = {kb >= 0 ? act_index(S, M, 1, s, kb) : -1,
                                kw >= 0 ? act_index(S, M, 2, s, kw) : -1};
            for (int k = 0; k < 2; k++) {
                if (pre[k] < 0)
                    continue;
                int row = glp_add_rows(o->lp, 1);
                glp_set_row_bnds(o->lp, row, GLP_LO, o->acts[f].dur, 0);
                nz_add(o, row, 2 + f, 1.0);
                nz_add(o, row, 2 + pre[k], -1.0);
            }
        }
}

/* C >= e_a + tail_a for every action. */
static void opt_add_makespan(opt_t *o)
{
    for (int i = 0; i < o->n; i++) {
        int row = glp_add_rows(o->lp, 1);
        glp_set_row_bnds(o->lp, row, GLP_LO, o->tail[i], 0);
        nz_add(o, row, 1, 1.0);
        nz_add(o, row, 2 + i, -1.0);
    }
}

/* For each action a that allocates: the deltas of the actions before it plus its own stay
 * within the limit (the running sum at a, as the validator counts it). */
static void opt_add_memory(opt_t *o)
{
    const act_t *acts = o->acts;
    const size_t n = (size_t)o->n;
    for (int r = 0; r < o->P; r++) {
        const double L = zb_costs_limit(o->c, r);
        if (!isfinite(L))
            continue;
        for (int i = 0; i < o->rank_cnt[r]; i++) {
            int a = o->rank_acts[r][i];
            if (acts[a].mem <= 0)
                continue;
            double rhs = L - acts[a].mem;
            int row = glp_add_rows(o->lp, 1);
            for (int j = 0; j < o->rank_cnt[r]; j++) {
                int b = o->rank_acts[r][j];
                if (b == a || acts[b].mem == 0)
                    continue;
                if (implied_before(&acts[b], &acts[a])) {
                    rhs -= acts[b].mem;
                } else if (implied_before(&acts[a], &acts[b])) {
                    /* after a: does not count */
                } else if (o->pair_col[(size_t)b * n + a]) { /* y_ba = 1: b before a */
                    nz_add(o, row, o->pair_col[(size_t)b * n + a], acts[b].mem);
                } else { /* y_ab: b before a when y_ab = 0 -> mem_b (1 - y_ab) */
                    rhs -= acts[b].mem;
                    nz_add(o, row, o->pair_col[(size_t)a * n + b], -acts[b].mem);
                }
            }
            glp_set_row_bnds(o->lp, row, GLP_UP, 0, rhs);
        }
    }
}

/* Phase 4: the whole model, loaded into GLPK. */
static zb_status_t opt_build_model(opt_t *o, zb_err_t *err)
{
    zb_status_t st = opt_alloc_model(o, err);
    if (st != ZB_OK)
        return st;
    opt_add_orders(o);
    opt_add_dependencies(o);
    opt_add_memory_arcs(o);
    opt_add_makespan(o);
    opt_add_memory(o);
    glp_load_matrix(o->lp, (int)o->nz, o->ia, o->ja, o->ar);
    return ZB_OK;
}

/* Phase 5: auto's schedule as a point of the model (handed to GLPK when warm_ok). */
static zb_status_t opt_warm_vector(opt_t *o, zb_err_t *err)
{
    o->x = calloc((size_t)o->ncol + 1, sizeof(double));
    if (!o->x)
        return oom(err);
    o->x[1] = o->wsim.makespan;
    for (int i = 0; i < o->n; i++)
        o->x[2 + i] = o->wend[i];
    for (int k = 0; k < o->npairs; k++)
        o->x[o->pair_col[(size_t)o->pair_a[k] * o->n + o->pair_b[k]]] =
            o->wpos[o->pair_a[k]] < o->wpos[o->pair_b[k]];
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
        return oom(err);
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
                return oom(err);
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
        (st = opt_bounds(&o, err)) != ZB_OK || (st = opt_build_model(&o, err)) != ZB_OK ||
        (st = opt_warm_vector(&o, err)) != ZB_OK)
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
