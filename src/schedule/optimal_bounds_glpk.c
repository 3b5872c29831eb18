/* `optimal`, phase 3: what bounds the model (heads, tails, one-machine bounds, memory arcs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/optimal_glpk.h"

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
void zb_opt_mem_arcs(const opt_t *o, int s, int m, int *kb, int *kw)
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
zb_status_t zb_opt_bounds(opt_t *o, zb_err_t *err)
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
        return zb_opt_oom(err);
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
            zb_opt_mem_arcs(o, s, m, &kb, &kw);
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
            zb_opt_mem_arcs(o, s, m, &kb, &kw);
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
            return zb_opt_oom(err);
        o->c_lb = fmax(o->c_lb, lb);
    }
    return ZB_OK;
}
