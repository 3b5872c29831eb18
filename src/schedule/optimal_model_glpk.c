/* `optimal`, phases 4 and 5: the MILP rows and columns, and auto's schedule as its start. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/optimal_glpk.h"

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
        return zb_opt_oom(err);
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
            zb_opt_mem_arcs(o, s, m, &kb, &kw);
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
zb_status_t zb_opt_build_model(opt_t *o, zb_err_t *err)
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
zb_status_t zb_opt_warm_vector(opt_t *o, zb_err_t *err)
{
    o->x = calloc((size_t)o->ncol + 1, sizeof(double));
    if (!o->x)
        return zb_opt_oom(err);
    o->x[1] = o->wsim.makespan;
    for (int i = 0; i < o->n; i++)
        o->x[2 + i] = o->wend[i];
    for (int k = 0; k < o->npairs; k++)
        o->x[o->pair_col[(size_t)o->pair_a[k] * o->n + o->pair_b[k]]] =
            o->wpos[o->pair_a[k]] < o->wpos[o->pair_b[k]];
    return ZB_OK;
}
