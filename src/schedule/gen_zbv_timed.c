/* zb-v on real costs: the V schedule built over simulated time (gen_zbv.c keeps the better of
 * this and the unit-slot construction, judged by zb_simulate).
 *
 * The rules are the zero-bubble authors' ZB-V scheduler (v_schedule.py in
 * sail-sg/zero-bubble-pipeline-parallelism), re-derived for zbpp's per-stage cost model:
 *  warm-up   one chunk-0 forward per rank; then, from rank P-1 down, rank i adds chunk-0
 *            forwards on ranks 0..i while they end before its first chunk-1 input arrives and
 *            its memory keeps room for the 2i+2 forwards it still needs; then ranks 1..P-1 catch
 *            up with the rank above (both chunks' forwards in turn, from rank P-1 down).
 *  steady    2M rounds: W's where a backward would not fit; one backward per rank (chunk 0's,
 *            whose gradient comes down the V from rank P-1, when it is there, else chunk 1's);
 *            one forward per rank (chunk 1 when its input is there). Before each, the W's that
 *            end before its input arrives, and one more when the wait is longer than the
 *            rank's bubble allowance: the largest idle time of any rank so far (on the second
 *            and later runs at least the previous run's largest minus this rank's own).
 *  cool-down the W's still pending.
 * Each action starts when its rank is free and its cross-rank input has arrived (end + comm of
 * the sending stage), exactly the simulator's compute-only rule, and memory stays within P times
 * the rank's two chunks' m_f (1F1B's peak, 2P chunk units). Variants: an extra W before a
 * chunk-1 backward or not, before a forward or not (the authors' four), times three ways of
 * deciding near ties (as computed, as the authors do; towards the W; against it), each rerun
 * with its bubbles as allowance while its span falls; the shortest span wins. A variant that
 * could only repeat a run already made (its knobs never mattered there) is skipped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/gen_v.h"
#include "schedule/generators.h"

/* A rank's action kinds. DOWN = chunk 0 (stage r, the V going down), UP = chunk 1 (stage
 * 2P-1-r). UP_B comes before DOWN_B: the backward starts at rank 0's UP stage. */
enum { DOWN_F, UP_F, UP_B, DOWN_B, UP_W, DOWN_W, NKIND };

#define TIMED_VARIANTS 12 /* extra W before a chunk-1 backward, before a forward; tie lean */
#define TIMED_RERUNS 16  /* allowance reruns per variant (they stop as soon as T stops falling) */

typedef struct {
    int P, M;
    const zb_costs_t *c;
    bool extra_before_up_b, extra_before_f;
    double lean; /* near ties (within rounding): +1 count as room for a W, -1 not, 0 as computed */
    double *end;         /* [mb][kind < UP_W][rank] end time; -1 = not run */
    double *clock, *mem, *idle, *cap, *first;
    double worst;        /* largest idle of any rank so far (idle only grows) */
    const double *grant; /* previous run's idle per rank, or NULL */
    double grant_max;
    int *count;          /* [rank][NKIND] */
    int *wq, *wq_head, *wq_tail; /* pending W kinds per rank, FIFO */
    int *op, *nop;       /* [rank][6M] kind + NKIND * mb */
    unsigned fired;      /* FIRED_*: which knobs' conditions held (whether a knob mattered) */
    bool failed;
} vrun_t;

/* The knobs of a variant, and what a run records about them: a knob whose condition never held
 * in a variant's runs cannot change them, so a variant differing only in such knobs is the
 * same run and is skipped. */
enum { FIRED_UP_B = 1, FIRED_F = 2, FIRED_TIE = 4 };

static int stage_of(const vrun_t *z, int kind, int r)
{
    return kind == DOWN_F || kind == DOWN_B || kind == DOWN_W ? r : 2 * z->P - 1 - r;
}

static double duration(const vrun_t *z, int kind, int r)
{
    const int s = stage_of(z, kind, r);
    return kind <= UP_F ? z->c->t_f[s] : kind <= DOWN_B ? z->c->t_b[s] : z->c->t_w[s];
}

static double delta(const vrun_t *z, int kind, int r)
{
    const int s = stage_of(z, kind, r);
    return kind <= UP_F ? z->c->m_f[s] : kind <= DOWN_B ? z->c->m_b[s] : z->c->m_w[s];
}

static int *count(vrun_t *z, int r, int kind)
{
    return &z->count[r * NKIND + kind];
}

static double *end_of(vrun_t *z, int kind, int r, int mb)
{
    /* a round of the construction visits the ranks in turn at about the same microbatch */
    return &z->end[((size_t)mb * UP_W + kind) * z->P + r];
}

/* The rank the next `kind` action of rank r takes its input from, or -1 (none, or a W). */
static int source(const vrun_t *z, int kind, int r)
{
    if ((kind == DOWN_F || kind == UP_B) && r > 0)
        return r - 1;
    if ((kind == UP_F || kind == DOWN_B) && r < z->P - 1)
        return r + 1;
    return -1;
}

/* When the input of rank r's next `kind` action arrives: -1 when it has none, INFINITY when it
 * has not run yet. */
static double arrival(vrun_t *z, int kind, int r)
{
    const int from = source(z, kind, r), n = *count(z, r, kind);
    if (from < 0)
        return -1;
    if (n >= z->M)
        return INFINITY;
    const double e = *end_of(z, kind, from, n);
    return e < 0 ? INFINITY : e + z->c->comm[stage_of(z, kind, from)];
}

static bool fits(const vrun_t *z, int kind, int r)
{
    return z->mem[r] + delta(z, kind, r) <= z->cap[r] * (1 + 1e-12);
}

static void put(vrun_t *z, int kind, int r)
{
    int *n = count(z, r, kind);
    const double in = arrival(z, kind, r);
    if (z->failed || *n >= z->M || isinf(in) || !fits(z, kind, r)) {
        z->failed = true;
        return;
    }
    const double start = fmax(z->clock[r], in), dur = duration(z, kind, r);
    if (*count(z, r, DOWN_F) > 0) {
        /* the idle time as the end minus the end without a wait: rounded as the authors' */
        z->idle[r] += (start + dur) - (z->clock[r] + dur);
        z->worst = fmax(z->worst, z->idle[r]);
    } else {
        z->first[r] = start;
    }
    z->clock[r] = start + dur;
    if (kind < UP_W)
        *end_of(z, kind, r, *n) = z->clock[r];
    z->mem[r] += delta(z, kind, r);
    z->op[(size_t)r * 6 * z->M + z->nop[r]++] = kind + NKIND * *n;
    if (kind == UP_B || kind == DOWN_B)
        z->wq[(size_t)r * 2 * z->M + z->wq_tail[r]++] = kind == UP_B ? UP_W : DOWN_W;
    (*n)++;
}

static bool w_pending(const vrun_t *z, int r)
{
    return z->wq_head[r] < z->wq_tail[r];
}

static int next_w(const vrun_t *z, int r)
{
    return z->wq[(size_t)r * 2 * z->M + z->wq_head[r]];
}

static void put_w(vrun_t *z, int r)
{
    if (!w_pending(z, r)) {
        z->failed = true;
        return;
    }
    const int kind = next_w(z, r);
    z->wq_head[r]++;
    put(z, kind, r);
}

/* W's before rank r's next `kind`: those that end before its input arrives, then one more if
 * `extra` and the wait is longer than the rank's allowance. */
static void fill_wait(vrun_t *z, int kind, int r, bool extra)
{
    const double in = arrival(z, kind, r);
    if (source(z, kind, r) < 0 || isinf(in))
        return;
    /* times are sums of many costs: a tie can come out either way by rounding; two of the
     * three leans decide ties one way on purpose, the third compares as computed (the authors
     * do) */
    const double tie = 1e-9 * (1 + fabs(in)), slack = z->lean * tie;
    while (!z->failed && w_pending(z, r)) {
        const double done = z->clock[r] + duration(z, next_w(z, r), r);
        if (fabs(in - done) <= tie)
            z->fired |= FIRED_TIE;
        if (!(in + slack >= done))
            break;
        put_w(z, r);
    }
    if (!w_pending(z, r))
        return;
    double allow = z->worst;
    if (z->grant)
        allow = fmax(allow, z->grant_max - z->grant[r]);
    const double wait = in - z->clock[r], over = allow - z->idle[r];
    if (fabs(wait - over) <= tie)
        z->fired |= FIRED_TIE;
    if (wait + slack > over) {
        if (kind == UP_B)
            z->fired |= FIRED_UP_B;
        else if (kind <= UP_F)
            z->fired |= FIRED_F;
        if (extra)
            put_w(z, r);
    }
}

static int forwards(vrun_t *z, int r)
{
    return *count(z, r, DOWN_F) + *count(z, r, UP_F);
}

static void warm_up(vrun_t *z)
{
    const int P = z->P, M = z->M;
    for (int r = 0; r < P; r++)
        put(z, DOWN_F, r);
    for (int r = P - 1; r >= 0 && !z->failed; r--) {
        if (r < P - 1) {
            const double back = arrival(z, UP_F, r), room = z->c->m_f[r] * (2 + 2 * r);
            while (!z->failed && z->mem[r] + room <= z->cap[r] * (1 + 1e-12) &&
                   z->clock[r] + duration(z, DOWN_F, r) <= back && *count(z, r, DOWN_F) < M - r)
                for (int j = 0; j <= r; j++)
                    put(z, DOWN_F, j);
        }
        put(z, UP_F, r);
    }
    int kind = DOWN_F;
    for (int r = 1; r < P && !z->failed; r++) {
        while (!z->failed && (forwards(z, r) < forwards(z, r - 1) ||
                              (*count(z, r, UP_F) <= *count(z, r - 1, UP_F) &&
                               *count(z, r - 1, UP_F) < M))) {
            for (int j = P - 1; j >= r; j--)
                if (*count(z, j, kind) < M)
                    put(z, kind, j);
            kind = kind == DOWN_F ? UP_F : DOWN_F;
        }
    }
}

/* Rank r's backward this round: DOWN_B when its gradient has come down (or UP_B is done). */
static int backward_kind(vrun_t *z, int r)
{
    const int nd = *count(z, r, DOWN_B), nu = *count(z, r, UP_B);
    if (nd >= nu)
        return UP_B;
    if (r == z->P - 1 || nu >= z->M || *end_of(z, DOWN_B, r + 1, nd) >= 0)
        return DOWN_B;
    return UP_B;
}

/* Rank r's forward this round, or -1: chunk 1 when its input is there. */
static int forward_kind(vrun_t *z, int r)
{
    const int nd = *count(z, r, DOWN_F), nu = *count(z, r, UP_F);
    if (nu >= z->M)
        return -1;
    if (nu >= nd)
        return DOWN_F;
    if (r == z->P - 1 || *end_of(z, UP_F, r + 1, nu) >= 0)
        return UP_F;
    if (nd < z->M && (r == 0 || *end_of(z, DOWN_F, r - 1, nd) >= 0))
        return DOWN_F;
    return -1;
}

static void steady(vrun_t *z, int *down_ranks)
{
    const int P = z->P;
    for (int round = 0; round < 2 * z->M && !z->failed; round++) {
        int nd = 0;
        for (int r = 0; r < P; r++) {
            while (!z->failed && (!fits(z, UP_B, r) || !fits(z, DOWN_B, r)))
                put_w(z, r);
            if (backward_kind(z, r) == DOWN_B)
                down_ranks[nd++] = r;
        }
        /* chunk 0's backwards from the last rank down (each feeds the next), then chunk 1's
         * from rank 0 up */
        for (int k = nd - 1; k >= 0 && !z->failed; k--) {
            fill_wait(z, DOWN_B, down_ranks[k], true);
            put(z, DOWN_B, down_ranks[k]);
        }
        for (int r = 0, k = 0; r < P && !z->failed; r++) {
            if (k < nd && down_ranks[k] == r) {
                k++;
                continue;
            }
            fill_wait(z, UP_B, r, z->extra_before_up_b);
            put(z, UP_B, r);
        }
        for (int r = 0; r < P && !z->failed; r++) {
            const int kind = forward_kind(z, r);
            if (kind < 0)
                continue;
            while (!z->failed && !fits(z, kind, r))
                put_w(z, r);
            fill_wait(z, kind, r, z->extra_before_f);
            put(z, kind, r);
        }
    }
    for (int r = 0; r < P; r++)
        while (!z->failed && w_pending(z, r))
            put_w(z, r);
}

static void vrun_free(vrun_t *z)
{
    free(z->end);
    free(z->clock);
    free(z->count);
    free(z->op);
    z->end = z->clock = NULL;
    z->count = z->op = NULL;
}

/* One run; false only when out of memory (a construction that fails sets z->failed). */
static bool vrun(vrun_t *z, const zb_costs_t *c, int P, int M, int variant, const double *grant)
{
    memset(z, 0, sizeof *z);
    z->P = P, z->M = M, z->c = c, z->grant = grant;
    z->extra_before_up_b = variant & FIRED_UP_B;
    z->extra_before_f = variant & FIRED_F;
    z->lean = (const double[]){0, -1, 1}[variant / 4]; /* as the authors compare first */
    const size_t n = (size_t)UP_W * P * M;
    z->end = malloc(sizeof(double) * n);
    z->clock = calloc(5 * (size_t)P, sizeof(double));
    z->count = calloc((size_t)P * (NKIND + 4) + 2 * (size_t)P * M, sizeof(int));
    z->op = malloc(sizeof(int) * 6 * (size_t)P * M);
    if (!z->end || !z->clock || !z->count || !z->op) {
        vrun_free(z);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        z->end[i] = -1;
    z->mem = z->clock + P;
    z->idle = z->clock + 2 * P;
    z->cap = z->clock + 3 * P;
    z->first = z->clock + 4 * P;
    z->wq_head = z->count + (size_t)P * NKIND;
    z->wq_tail = z->wq_head + P;
    z->nop = z->wq_tail + P;
    int *down_ranks = z->nop + P;
    z->wq = down_ranks + P;
    for (int r = 0; r < P; r++) {
        z->cap[r] = P * (c->m_f[r] + c->m_f[2 * P - 1 - r]);
        if (grant)
            z->grant_max = r ? fmax(z->grant_max, grant[r]) : grant[r];
    }
    warm_up(z);
    steady(z, down_ranks);
    for (int r = 0; r < P && !z->failed; r++)
        z->failed = z->nop[r] != 6 * M;
    return true;
}

/* T of a finished run: the longest span from a rank's first forward to its last action. */
static double vrun_span(const vrun_t *z)
{
    double t = 0;
    for (int r = 0; r < z->P; r++)
        t = fmax(t, z->clock[r] - z->first[r]);
    return t;
}

/* Whether `variant` would repeat one already run: it differs from it only in knobs whose
 * conditions never held in that one's runs (fired[u], or -1 = not run). */
static bool same_as_run(int variant, const int *fired)
{
    for (int u = 0; u < variant; u++) {
        if (fired[u] < 0)
            continue;
        const int knobs = (variant ^ u) & (FIRED_UP_B | FIRED_F);
        const bool lean_differs = variant / 4 != u / 4;
        if (!(knobs & fired[u]) && !(lean_differs && (fired[u] & FIRED_TIE)))
            return true;
    }
    return false;
}

zb_status_t zb_zbv_timed(zb_schedule_t *s, const zb_costs_t *c, zb_err_t *err)
{
    const int P = s->ranks, M = s->microbatches;
    vrun_t best = {0};
    double best_t = INFINITY;
    int fired[TIMED_VARIANTS];
    for (int variant = 0; variant < TIMED_VARIANTS; variant++) {
        fired[variant] = -1;
        if (same_as_run(variant, fired))
            continue;
        vrun_t cur;
        if (!vrun(&cur, c, P, M, variant, NULL))
            goto nomem;
        unsigned chain_fired = cur.fired;
        double cur_t = cur.failed ? INFINITY : vrun_span(&cur);
        for (int k = 0; k < TIMED_RERUNS && isfinite(cur_t); k++) {
            vrun_t next;
            if (!vrun(&next, c, P, M, variant, cur.idle))
                goto nomem_cur;
            chain_fired |= next.fired;
            const double next_t = next.failed ? INFINITY : vrun_span(&next);
            if (!(next.worst < cur.worst) || !isfinite(next_t)) {
                vrun_free(&next);
                break;
            }
            vrun_free(&cur);
            cur = next, cur_t = next_t;
            cur.grant = NULL; /* it pointed into the run just freed */
        }
        fired[variant] = (int)chain_fired;
        if (cur_t < best_t) {
            vrun_free(&best);
            best = cur, best_t = cur_t;
        } else {
            vrun_free(&cur);
        }
        continue;
    nomem_cur:
        vrun_free(&cur);
        goto nomem;
    }
    if (!isfinite(best_t))
        return zb_err_set(err, ZB_ESCHEDULE, "zb-v: the timed construction found no schedule "
                                             "(P=%d, M=%d)",
                          P, M);
    static const zb_action_type_t type[NKIND] = {ZB_ACT_F, ZB_ACT_F, ZB_ACT_B,
                                                 ZB_ACT_B, ZB_ACT_W, ZB_ACT_W};
    zb_status_t st = zb_schedule_reserve(s, 6 * M);
    if (st != ZB_OK)
        st = zb_err_set(err, st, "zb-v: out of memory");
    for (int r = 0; r < P && st == ZB_OK; r++)
        for (int i = 0; i < 6 * M && st == ZB_OK; i++) {
            const int code = best.op[(size_t)r * 6 * M + i], kind = code % NKIND;
            st = zb_gen_push(s, r, type[kind], stage_of(&best, kind, r), code / NKIND, err);
        }
    vrun_free(&best);
    return st;
nomem:
    vrun_free(&best);
    return zb_err_set(err, ZB_ENOMEM, "zb-v: out of memory");
}
