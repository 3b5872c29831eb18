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
 * glp_intopt runs without presolve so that auto's schedule can be handed over as the first
 * incumbent (glp_ios_heur_sol in the callback); the callback also records the best bound of the
 * open nodes, so a run stopped by the time limit reports a proven lower bound and the gap. */
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

zb_status_t zb_gen_optimal(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    if (!p->costs)
        return zb_err_set(err, ZB_EINVAL, "optimal: needs a cost model (times and memory)");
    if ((long long)p->ranks * p->microbatches > ZB_OPTIMAL_MAX_PM)
        return zb_err_set(err, ZB_EINVAL,
                          "optimal: P*M = %lld is too large for the exact solver (max 64)",
                          (long long)p->ranks * p->microbatches);
    /* 1. auto's schedule: the incumbent, and the chunking/placement to optimise over. */
    zb_gen_params_t q = *p;
    q.any_placement = false;
    zb_schedule_t *warm = NULL;
    zb_status_t st = zb_gen_auto(&q, &warm, err);
    if (st != ZB_OK)
        return st;
    const zb_costs_t *c = p->costs;
    const int P = warm->ranks, S = warm->stages, M = warm->microbatches;
    const int n = 3 * S * M;
    act_t *acts = calloc((size_t)n, sizeof *acts);
    int *rank_cnt = calloc((size_t)P, sizeof(int));
    int **rank_acts = calloc((size_t)P, sizeof(int *));
    zb_sim_t wsim;
    memset(&wsim, 0, sizeof wsim);
    glp_prob *lp = NULL;
    double *x = NULL, *wend = NULL;
    int *wpos = NULL, *ia = NULL, *ja = NULL;
    double *ar = NULL;
    if (!acts || !rank_cnt || !rank_acts) {
        st = zb_err_set(err, ZB_ENOMEM, "optimal: out of memory");
        goto done;
    }
    for (int t = 0; t < 3; t++)
        for (int s = 0; s < S; s++)
            for (int m = 0; m < M; m++) {
                act_t *a = &acts[act_index(S, M, t, s, m)];
                a->type = t;
                a->stage = s;
                a->mb = m;
                a->rank = zb_stage_rank(warm, s);
                a->dur = t == 0 ? c->t_f[s] : t == 1 ? c->t_b[s] : c->t_w[s];
                a->mem = t == 0 ? c->m_f[s] : t == 1 ? c->m_b[s] : c->m_w[s];
                rank_cnt[a->rank]++;
            }
    for (int r = 0; r < P; r++) {
        rank_acts[r] = malloc(sizeof(int) * (size_t)rank_cnt[r]);
        if (!rank_acts[r]) {
            st = zb_err_set(err, ZB_ENOMEM, "optimal: out of memory");
            goto done;
        }
        rank_cnt[r] = 0;
    }
    for (int i = 0; i < n; i++)
        rank_acts[acts[i].rank][rank_cnt[acts[i].rank]++] = i;

    /* Warm start: end times and positions from auto's simulated schedule (BW split). */
    if ((st = zb_simulate(warm, c, &wsim, err)) != ZB_OK)
        goto done;
    wend = calloc((size_t)n, sizeof(double));
    wpos = calloc((size_t)n, sizeof(int));
    if (!wend || !wpos) {
        st = zb_err_set(err, ZB_ENOMEM, "optimal: out of memory");
        goto done;
    }
    for (int r = 0; r < P; r++) {
        int pos = 0;
        for (int i = 0; i < warm->rank[r].len; i++) {
            const zb_action_t *a = &warm->rank[r].actions[i];
            if (a->type == ZB_ACT_F || a->type == ZB_ACT_B || a->type == ZB_ACT_W) {
                int k = act_index(S, M, a->type == ZB_ACT_F ? 0 : a->type == ZB_ACT_B ? 1 : 2,
                                  a->stage, a->mb);
                wend[k] = wsim.end[r][i];
                wpos[k] = pos++;
            } else if (a->type == ZB_ACT_BW) {
                int kb = act_index(S, M, 1, a->stage, a->mb), kw = act_index(S, M, 2, a->stage, a->mb);
                wend[kb] = wsim.start[r][i] + c->t_b[a->stage];
                wend[kw] = wsim.end[r][i];
                wpos[kb] = pos++;
                wpos[kw] = pos++;
            }
        }
    }
    bool warm_ok = true; /* the MILP fixes microbatch order: does auto's schedule keep it? */

    /* 2. The model. */
    lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    double H = 0; /* big-M: everything in series */
    for (int i = 0; i < n; i++)
        H += acts[i].dur;
    for (int s = 0; s < S; s++)
        H += 2 * c->comm[s] * M;
    H = fmax(H, 1.0) * 1.01 + 1.0;
    /* Heads (earliest end along the dependency chain) and tails (least time still needed after
     * an action ends) tighten the big-M relaxation; a rank cannot finish before its earliest
     * start + all its work + its smallest tail, which bounds C from below. */
    double *head = calloc((size_t)n, sizeof(double)), *tail = calloc((size_t)n, sizeof(double));
    if (!head || !tail) {
        free(head);
        free(tail);
        st = zb_err_set(err, ZB_ENOMEM, "optimal: out of memory");
        goto done;
    }
    for (int m = 0; m < M; m++) {
        for (int s = 0; s < S; s++) {
            int f = act_index(S, M, 0, s, m);
            double rdy = 0;
            if (s > 0) {
                int pf = act_index(S, M, 0, s - 1, m);
                rdy = head[pf] + (acts[pf].rank != acts[f].rank ? c->comm[s - 1] : 0);
            }
            head[f] = rdy + acts[f].dur;
        }
        for (int s = S - 1; s >= 0; s--) {
            int b = act_index(S, M, 1, s, m), f = act_index(S, M, 0, s, m);
            double rdy = head[f];
            if (s < S - 1) {
                int nb = act_index(S, M, 1, s + 1, m);
                rdy = fmax(rdy, head[nb] + (acts[nb].rank != acts[b].rank ? c->comm[s + 1] : 0));
            }
            head[b] = rdy + acts[b].dur;
            head[act_index(S, M, 2, s, m)] = head[b] + acts[act_index(S, M, 2, s, m)].dur;
        }
        for (int s = 0; s < S; s++) { /* tails of B: the rest of the B chain, or its W */
            int b = act_index(S, M, 1, s, m);
            double t = acts[act_index(S, M, 2, s, m)].dur;
            if (s > 0) {
                int pb = act_index(S, M, 1, s - 1, m);
                t = fmax(t, (acts[pb].rank != acts[b].rank ? c->comm[s] : 0) + acts[pb].dur +
                                tail[pb]);
            }
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
            tail[f] = t;
        }
    }
    double c_lb = 0;
    for (int r = 0; r < P; r++) {
        double first = INFINITY, busy = 0, last = INFINITY;
        for (int i = 0; i < rank_cnt[r]; i++) {
            int a = rank_acts[r][i];
            first = fmin(first, head[a] - acts[a].dur);
            last = fmin(last, tail[a]);
            busy += acts[a].dur;
        }
        c_lb = fmax(c_lb, first + busy + last);
    }
    int ncol = 1 + n, nrow = 0;
    glp_add_cols(lp, ncol);
    glp_set_col_bnds(lp, 1, GLP_LO, c_lb, 0);
    glp_set_obj_coef(lp, 1, 1.0);
    for (int i = 0; i < n; i++)
        glp_set_col_bnds(lp, 2 + i, GLP_DB, head[i], H);
    /* pair binaries */
    int npairs_max = 0;
    for (int r = 0; r < P; r++)
        npairs_max += rank_cnt[r] * (rank_cnt[r] - 1) / 2;
    int *pair_a = malloc(sizeof(int) * (size_t)(npairs_max + 1));
    int *pair_b = malloc(sizeof(int) * (size_t)(npairs_max + 1));
    int *pair_col = calloc((size_t)n * n > 0 ? (size_t)n * n : 1, sizeof(int)); /* a*n+b */
    size_t nz_cap = 64 + (size_t)n * 8 + (size_t)npairs_max * 8 +
                    (size_t)n * (size_t)(n > 0 ? n : 1);
    ia = malloc(sizeof(int) * nz_cap);
    ja = malloc(sizeof(int) * nz_cap);
    ar = malloc(sizeof(double) * nz_cap);
    if (!pair_a || !pair_b || !pair_col || !ia || !ja || !ar) {
        free(pair_a);
        free(pair_b);
        free(pair_col);
        free(head);
        free(tail);
        st = zb_err_set(err, ZB_ENOMEM, "optimal: out of memory");
        goto done;
    }
    size_t nz = 0;
#define NZ(row, col, val) (ia[++nz] = (row), ja[nz] = (col), ar[nz] = (val))
    int npairs = 0;
    for (int r = 0; r < P; r++)
        for (int i = 0; i < rank_cnt[r]; i++)
            for (int j = i + 1; j < rank_cnt[r]; j++) {
                int a = rank_acts[r][i], b = rank_acts[r][j];
                if (implied_before(&acts[a], &acts[b]) || implied_before(&acts[b], &acts[a])) {
                    int f = implied_before(&acts[a], &acts[b]) ? a : b, s2 = f == a ? b : a;
                    if (wpos[f] > wpos[s2])
                        warm_ok = false;
                    /* e_s2 - d_s2 - e_f >= 0 */
                    int row = glp_add_rows(lp, 1);
                    nrow++;
                    glp_set_row_bnds(lp, row, GLP_LO, acts[s2].dur, 0);
                    NZ(row, 2 + s2, 1.0);
                    NZ(row, 2 + f, -1.0);
                    continue;
                }
                int col = glp_add_cols(lp, 1);
                ncol++;
                glp_set_col_kind(lp, col, GLP_BV);
                pair_a[npairs] = a;
                pair_b[npairs] = b;
                npairs++;
                pair_col[(size_t)a * n + b] = col;
                /* y=1: a before b: e_a - e_b + H y <= H - d_b */
                int row = glp_add_rows(lp, 2);
                nrow += 2;
                glp_set_row_bnds(lp, row, GLP_UP, 0, H - acts[b].dur);
                NZ(row, 2 + a, 1.0);
                NZ(row, 2 + b, -1.0);
                NZ(row, col, H);
                /* y=0: b before a: e_b - e_a - H y <= -d_a */
                glp_set_row_bnds(lp, row + 1, GLP_UP, 0, -acts[a].dur);
                NZ(row + 1, 2 + b, 1.0);
                NZ(row + 1, 2 + a, -1.0);
                NZ(row + 1, col, -H);
            }
    /* dependencies across stages (same-rank ones are covered by implied pairs as well) */
    for (int s = 0; s < S; s++)
        for (int m = 0; m < M; m++) {
            int deps[2][2];
            int nd = 0;
            if (s > 0) { /* F(s-1) -> F(s) */
                deps[nd][0] = act_index(S, M, 0, s - 1, m);
                deps[nd++][1] = act_index(S, M, 0, s, m);
            }
            if (s < S - 1) { /* B(s+1) -> B(s) */
                deps[nd][0] = act_index(S, M, 1, s + 1, m);
                deps[nd++][1] = act_index(S, M, 1, s, m);
            }
            for (int k = 0; k < nd; k++) {
                int a = deps[k][0], b = deps[k][1];
                double lat = acts[a].rank != acts[b].rank ? c->comm[acts[a].stage] : 0;
                int row = glp_add_rows(lp, 1);
                nrow++;
                glp_set_row_bnds(lp, row, GLP_LO, acts[b].dur + lat, 0);
                NZ(row, 2 + b, 1.0);
                NZ(row, 2 + a, -1.0);
            }
        }
    /* makespan: C >= e_a + tail_a */
    for (int i = 0; i < n; i++) {
        int row = glp_add_rows(lp, 1);
        nrow++;
        glp_set_row_bnds(lp, row, GLP_LO, tail[i], 0);
        NZ(row, 1, 1.0);
        NZ(row, 2 + i, -1.0);
    }
    /* memory */
    double L = c->mem_limit;
    if (isfinite(L)) {
        for (int r = 0; r < P; r++)
            for (int i = 0; i < rank_cnt[r]; i++) {
                int a = rank_acts[r][i];
                if (acts[a].mem <= 0)
                    continue;
                double rhs = L - acts[a].mem;
                int row = glp_add_rows(lp, 1);
                nrow++;
                for (int j = 0; j < rank_cnt[r]; j++) {
                    int b = rank_acts[r][j];
                    if (b == a || acts[b].mem == 0)
                        continue;
                    if (implied_before(&acts[b], &acts[a])) {
                        rhs -= acts[b].mem;
                    } else if (implied_before(&acts[a], &acts[b])) {
                        /* after a: does not count */
                    } else if (pair_col[(size_t)b * n + a]) { /* y_ba = 1: b before a */
                        NZ(row, pair_col[(size_t)b * n + a], acts[b].mem);
                    } else { /* y_ab: b before a when y_ab = 0 -> mem_b (1 - y_ab) */
                        rhs -= acts[b].mem;
                        NZ(row, pair_col[(size_t)a * n + b], -acts[b].mem);
                    }
                }
                glp_set_row_bnds(lp, row, GLP_UP, 0, rhs);
            }
    }
#undef NZ
    free(head);
    free(tail);
    glp_load_matrix(lp, (int)nz, ia, ja, ar);

    /* 3. Warm start vector. */
    x = calloc((size_t)ncol + 1, sizeof(double));
    if (!x) {
        free(pair_a);
        free(pair_b);
        free(pair_col);
        st = zb_err_set(err, ZB_ENOMEM, "optimal: out of memory");
        goto done;
    }
    x[1] = wsim.makespan;
    for (int i = 0; i < n; i++)
        x[2 + i] = wend[i];
    for (int k = 0; k < npairs; k++)
        x[pair_col[(size_t)pair_a[k] * n + pair_b[k]]] = wpos[pair_a[k]] < wpos[pair_b[k]];
    free(pair_a);
    free(pair_b);
    free(pair_col);

    /* 4. Solve. */
    double tl = p->time_limit > 0 ? p->time_limit : 10.0;
    glp_term_out(GLP_OFF);
    glp_smcp sp;
    glp_init_smcp(&sp);
    sp.msg_lev = GLP_MSG_OFF;
    sp.tm_lim = (int)fmin(tl * 1000.0, 2e9);
    int rc = glp_simplex(lp, &sp);
    double root = glp_get_status(lp) == GLP_OPT ? glp_get_obj_val(lp) : 0.0;
    cb_t cb = {.x = warm_ok ? x : NULL, .given = false, .bound = root};
    glp_iocp ip;
    glp_init_iocp(&ip);
    ip.msg_lev = GLP_MSG_OFF;
    ip.presolve = GLP_OFF;
    ip.tm_lim = (int)fmax(1.0, fmin(tl * 1000.0, 2e9));
    ip.cb_func = callback;
    ip.cb_info = &cb;
    if (rc == 0 && glp_get_status(lp) == GLP_OPT)
        rc = glp_intopt(lp, &ip);
    int ms = glp_mip_status(lp);
    bool proven = rc == 0 && ms == GLP_OPT;
    double best_obj = INFINITY;
    zb_schedule_t *sol = NULL;
    if (ms == GLP_OPT || ms == GLP_FEAS) {
        best_obj = glp_mip_obj_val(lp);
        /* rank order from the solution's end times */
        sol = zb_schedule_new("optimal", P, warm->chunks, warm->placement, M);
        if (!sol) {
            st = zb_err_set(err, ZB_ENOMEM, "optimal: out of memory");
            goto done;
        }
        for (int r = 0; r < P && st == ZB_OK; r++) {
            int k = rank_cnt[r];
            /* insertion sort by (end, start) — k is small */
            int *ord = rank_acts[r];
            for (int i = 1; i < k; i++) {
                int v = ord[i], j = i;
                double ev = glp_mip_col_val(lp, 2 + v);
                while (j > 0) {
                    double eu = glp_mip_col_val(lp, 2 + ord[j - 1]);
                    if (eu < ev - 1e-7 || (fabs(eu - ev) <= 1e-7 && !implied_before(&acts[v], &acts[ord[j - 1]])))
                        break;
                    ord[j] = ord[j - 1];
                    j--;
                }
                ord[j] = v;
            }
            for (int i = 0; i < k && st == ZB_OK; i++) {
                const act_t *a = &acts[ord[i]];
                zb_action_t za = {(uint8_t)(a->type == 0 ? ZB_ACT_F : a->type == 1 ? ZB_ACT_B : ZB_ACT_W),
                                  a->stage, a->mb, 0};
                if (zb_schedule_push(sol, r, za) != ZB_OK)
                    st = zb_err_set(err, ZB_ENOMEM, "optimal: out of memory");
            }
        }
        if (st != ZB_OK) {
            zb_schedule_free(sol);
            goto done;
        }
        /* Keep it only if it simulates and is no worse than auto (it should not be). */
        zb_sim_t ssim;
        if (zb_simulate(sol, c, &ssim, NULL) == ZB_OK) {
            double mk = ssim.makespan;
            zb_sim_free(&ssim);
            if (mk <= wsim.makespan + 1e-9) {
                best_obj = fmin(best_obj, mk);
            } else {
                zb_schedule_free(sol);
                sol = NULL;
            }
        } else {
            zb_schedule_free(sol);
            sol = NULL;
        }
    }
    double bound = proven ? best_obj : fmax(fmax(cb.bound, root), c_lb);
    if (!sol) { /* solver found nothing better in time: auto's schedule stands */
        sol = warm;
        warm = NULL;
        best_obj = wsim.makespan;
        snprintf(sol->name, sizeof sol->name, "optimal");
    }
    double gap = best_obj > 0 ? (best_obj - bound) / best_obj : 0;
    if (proven)
        snprintf(p->note, sizeof p->note,
                 "optimal: proven optimal makespan %g (auto %g)", best_obj, wsim.makespan);
    else
        snprintf(p->note, sizeof p->note,
                 "optimal: NOT proven (time limit %gs): makespan %g, lower bound %g, gap %.1f%% "
                 "(auto %g)",
                 tl, best_obj, bound, 100 * gap, wsim.makespan);
    *out = sol;
done:
    if (lp)
        glp_delete_prob(lp);
    /* No glp_free_env() here: it tears down GLPK's process-wide state, which another caller
     * (another thread, or the embedding program) may be using. */
    if (wsim.start)
        zb_sim_free(&wsim);
    zb_schedule_free(warm);
    if (rank_acts)
        for (int r = 0; r < P; r++)
            free(rank_acts[r]);
    free(rank_acts);
    free(rank_cnt);
    free(acts);
    free(x);
    free(wend);
    free(wpos);
    free(ia);
    free(ja);
    free(ar);
    return st;
}
