/* zb-v: the ZB-V schedule (V placement, 2 chunks), exactly zero bubble at F = B = W, c = 0,
 * with peak activation memory 2P chunk units on every rank (= 1F1B's), for M >= 2P.
 *
 * Notation on rank r: F = forward of its first chunk (stage r), f = forward of its second chunk
 * (stage 2P-1-r), b = input-gradient backward of the second chunk (it comes first: the V turns
 * at rank P-1 going down and the backward starts at rank 0), B = that of the first chunk.
 *
 * The construction runs the unit model (every action one slot, no comm, memory +1 per F/f,
 * -1 per W, cap 2P) slot by slot; each rank decides with local rules only:
 *
 *  warm-up  until its first b is ready: f if ready, else F. Rank r runs 2P-1-2r F's back to
 *           back, then alternates f, F as the second-chunk forwards come back up the V; it
 *           reaches exactly 2P held activations at slot 2P+r, when b of microbatch 0 arrives.
 *  steady   strict alternation of one backward and one forward: backward = B if ready, else
 *           b; forward = f if ready, else F (memory permitting). When the one it wants is not
 *           ready it runs a pending W (oldest first) and still wants the same kind next; only
 *           with no W pending does it take the other kind. Once all its forwards are done it
 *           runs backwards only.
 *  cool-down what is left is B's chained back from rank P-1 and W's: the W's a rank skipped
 *           while it alternated fill exactly the slots the last B chain leaves open.
 *
 * The memory cap makes the alternation self-regulating: at 2P held, a forward must wait for a
 * W, which in turn needs a backward, so every rank settles into B/b, W, f/F triples. Verified
 * with the simulator (tests/test_vfamily.c): span == busy exactly for P in 2..8 and several
 * M >= 2P, peak <= 2P on every rank. The result is an action order; any cost model can simulate
 * it.
 *
 * Given costs (other than F = B = W with no comm) on which these slots leave a bubble, the timed
 * construction (gen_zbv_timed.c: the zero-bubble authors' ZB-V greedy on the real costs)
 * competes, and the faster by zb_simulate (T, then makespan) is returned. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "schedule/gen_v.h"
#include "schedule/generators.h"

enum { KIND_BACK, KIND_FWD };

typedef struct {
    int P, M, S;
    int *end_f, *end_b; /* [S*M] slot after the action ends; INT_MAX = not yet */
    int *next_f, *next_b; /* [S] next microbatch per stage (microbatch order) */
    int *wq;              /* [P*2M] pending W's per rank, FIFO of stage*M + mb */
    int *wq_head, *wq_tail, *mem, *want, *started, *left;
} zbv_t;

static bool f_ready(const zbv_t *z, int st, int t)
{
    int m = z->next_f[st];
    return m < z->M && (st == 0 || z->end_f[(st - 1) * z->M + m] <= t);
}

static bool b_ready(const zbv_t *z, int st, int t)
{
    int m = z->next_b[st];
    if (m >= z->next_f[st] || z->end_f[st * z->M + m] > t)
        return false;
    return st == z->S - 1 || z->end_b[(st + 1) * z->M + m] <= t;
}

/* Run action (type, st) on rank r in slot t. */
static zb_status_t run(zbv_t *z, zb_schedule_t *s, int r, int type, int st, int t, zb_err_t *err)
{
    int m;
    if (type == ZB_ACT_W) {
        int item = z->wq[r * 2 * z->M + z->wq_head[r]++];
        st = item / z->M;
        m = item % z->M;
        z->mem[r]--;
    } else if (type == ZB_ACT_F) {
        m = z->next_f[st]++;
        z->end_f[st * z->M + m] = t + 1;
        z->mem[r]++;
    } else {
        m = z->next_b[st]++;
        z->end_b[st * z->M + m] = t + 1;
        z->wq[r * 2 * z->M + z->wq_tail[r]++] = st * z->M + m;
    }
    z->left[r]--;
    return zb_gen_push(s, r, (zb_action_type_t)type, st, m, err);
}

/* Try one kind on rank r: returns the stage to run (type in *type) or -1. */
static int pick(const zbv_t *z, int r, int kind, int t, int *type)
{
    const int s0 = r, s1 = z->S - 1 - r;
    if (kind == KIND_BACK) {
        *type = ZB_ACT_B;
        if (b_ready(z, s0, t))
            return s0;
        return b_ready(z, s1, t) ? s1 : -1;
    }
    *type = ZB_ACT_F;
    if (z->mem[r] >= 2 * z->P)
        return -1;
    if (f_ready(z, s1, t))
        return s1;
    return f_ready(z, s0, t) ? s0 : -1;
}

/* One slot of rank r. */
static zb_status_t step(zbv_t *z, zb_schedule_t *s, int r, int t, zb_err_t *err)
{
    const int s0 = r, s1 = z->S - 1 - r;
    const bool have_w = z->wq_head[r] < z->wq_tail[r];
    int type, st;
    if (!z->started[r]) {
        if (!b_ready(z, s1, t)) { /* warm-up: forwards only */
            if ((st = pick(z, r, KIND_FWD, t, &type)) >= 0)
                return run(z, s, r, type, st, t, err);
            return ZB_OK;
        }
        z->started[r] = 1;
        z->want[r] = KIND_BACK;
    }
    const bool fwd_left = z->next_f[s0] < z->M || z->next_f[s1] < z->M;
    const int kind = fwd_left ? z->want[r] : KIND_BACK;
    if ((st = pick(z, r, kind, t, &type)) >= 0) {
        z->want[r] = kind == KIND_BACK ? KIND_FWD : KIND_BACK;
        return run(z, s, r, type, st, t, err);
    }
    if (have_w)
        return run(z, s, r, ZB_ACT_W, 0, t, err);
    if ((st = pick(z, r, 1 - kind, t, &type)) >= 0)
        return run(z, s, r, type, st, t, err);
    return ZB_OK; /* idle this slot */
}

/* The unit-slot construction into the empty V schedule s. */
static zb_status_t build_slots(zb_schedule_t *s, zb_err_t *err)
{
    const int P = s->ranks, M = s->microbatches;
    zb_status_t st = ZB_OK;
    zbv_t z = {.P = P, .M = M, .S = 2 * P};
    size_t SM = (size_t)z.S * M;
    z.end_f = malloc(sizeof(int) * SM);
    z.end_b = malloc(sizeof(int) * SM);
    z.next_f = calloc((size_t)z.S, sizeof(int));
    z.next_b = calloc((size_t)z.S, sizeof(int));
    z.wq = malloc(sizeof(int) * SM);
    int *per_rank = calloc((size_t)P * 6, sizeof(int));
    if (!z.end_f || !z.end_b || !z.next_f || !z.next_b || !z.wq || !per_rank) {
        st = zb_err_set(err, ZB_ENOMEM, "zb-v: out of memory");
        goto done;
    }
    z.wq_head = per_rank;
    z.wq_tail = per_rank + P;
    z.mem = per_rank + 2 * P;
    z.want = per_rank + 3 * P;
    z.started = per_rank + 4 * P;
    z.left = per_rank + 5 * P;
    for (size_t i = 0; i < SM; i++)
        z.end_f[i] = z.end_b[i] = INT_MAX;
    for (int r = 0; r < P; r++)
        z.left[r] = 6 * M;
    /* Zero bubble finishes by slot 6M + P - 1; the bound only guards against a stall. */
    const long long horizon = 12LL * M + 8LL * P;
    long long remaining = 6LL * M * P;
    for (long long t = 0; remaining > 0 && st == ZB_OK; t++) {
        if (t > horizon) {
            st = zb_err_set(err, ZB_ESCHEDULE, "zb-v: construction stalled at slot %lld (P=%d, "
                                               "M=%d)", t, P, M);
            break;
        }
        for (int r = 0; r < P && st == ZB_OK; r++) {
            if (z.left[r] == 0)
                continue;
            int before = z.left[r];
            st = step(&z, s, r, (int)t, err);
            remaining -= before - z.left[r];
        }
    }
done:
    free(z.end_f);
    free(z.end_b);
    free(z.next_f);
    free(z.next_b);
    free(z.wq);
    free(per_rank);
    return st;
}

/* T (the longest span), makespan and busy time of s under c; false if it cannot be simulated. */
static bool timing(const zb_schedule_t *s, const zb_costs_t *c, double *span, double *mk,
                   double *busy)
{
    zb_sim_t sim;
    if (zb_simulate(s, c, &sim, NULL) != ZB_OK)
        return false;
    *span = sim.span_max, *mk = sim.makespan, *busy = sim.busy_max;
    zb_sim_free(&sim);
    return true;
}

/* F = B = W, the same on every stage, and no comm: the model the slots are built for (zero
 * bubble there, tests/test_vfamily.c up to P = 8, by hand to 32, simulated at 128). */
static bool unit_like(const zb_costs_t *c)
{
    for (int s = 0; s < c->stages; s++)
        if (c->t_f[s] != c->t_f[0] || c->t_b[s] != c->t_f[0] || c->t_w[s] != c->t_f[0] ||
            c->comm[s] != 0)
            return false;
    return true;
}

/* With costs: the timed construction competes with the slots (already in *out) unless these
 * have no bubble on c; the faster (T, then makespan) by zb_simulate is kept. */
static zb_status_t keep_faster(zb_schedule_t **out, const zb_costs_t *c, zb_err_t *err)
{
    if (unit_like(c))
        return ZB_OK;
    double span = 0, mk = 0, busy = 0, t_span, t_mk, t_busy;
    const bool slots_ok = timing(*out, c, &span, &mk, &busy);
    const double tol = slots_ok ? 1e-9 * fmax(1.0, span) : 0;
    if (slots_ok && span <= busy + tol)
        return ZB_OK; /* no bubble on these costs: nothing is faster on T */
    zb_schedule_t *t = zb_schedule_new("zb-v", (*out)->ranks, 2, ZB_PLACE_V, (*out)->microbatches);
    zb_status_t ts = t ? zb_zbv_timed(t, c, NULL) : ZB_ENOMEM;
    if (ts == ZB_ENOMEM) {
        zb_schedule_free(t);
        return zb_err_set(err, ZB_ENOMEM, "zb-v: out of memory");
    }
    if (ts == ZB_OK && timing(t, c, &t_span, &t_mk, &t_busy) &&
        (!slots_ok || t_span < span - tol || (t_span <= span + tol && t_mk < mk - tol))) {
        zb_schedule_free(*out);
        *out = t;
        t = NULL;
    }
    zb_schedule_free(t);
    return ZB_OK;
}

zb_status_t zb_gen_zbv(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    const int P = p->ranks, M = p->microbatches;
    if (M < 2 * P) /* first: the most useful message when several things are wrong */
        return zb_err_set(err, ZB_EINVAL, "zb-v: needs M >= 2P (P=%d, M=%d)", P, M);
    zb_status_t st = zb_gen_begin("zb-v", p, 2, 2, 2, ZB_PLACE_V, out, err);
    if (st == ZB_OK)
        st = build_slots(*out, err);
    if (st == ZB_OK && p->costs)
        st = keep_faster(out, p->costs, err);
    if (st != ZB_OK) {
        zb_schedule_free(*out);
        *out = NULL;
    }
    return st;
}
