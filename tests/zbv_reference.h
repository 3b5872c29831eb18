/* Reference: the zero-bubble authors' ZB-V scheduler (sail-sg/zero-bubble-pipeline-parallelism,
 * megatron/core/pipeline_parallel/v_schedule.py), re-derived in plain C from its published
 * algorithm, for uniform per-chunk costs. It is the yardstick of zbpp's zb-v (tests/test_zbv.c,
 * bench/bench_zbv.c), kept apart from the library on purpose: a different code path to the same
 * figures.
 *
 * The algorithm, as the authors describe and publish it (P ranks, each with chunk 0 going down
 * the V and chunk 1 coming back up; times in the units of the costs):
 *  1. one chunk-0 forward per rank, rank by rank;
 *  2. from rank P-1 down: rank i adds chunk-0 forwards on ranks 0..i while its memory leaves
 *     room for the 2i+2 it still needs and they end before its first chunk-1 input arrives,
 *     then runs its first chunk-1 forward;
 *  3. ranks 1..P-1 catch up with the rank above them (forwards of both chunks alternately, from
 *     rank P-1 down) until each has as many forwards as its predecessor and more chunk-1 ones;
 *  4. 2M rounds: W's where a B would not fit in memory; one backward per rank (the chunk whose
 *     gradient came back up the V, from the last rank down, first; then the other, from rank 0
 *     up), each preceded by the W's that end before its input arrives and by one more when the
 *     wait would exceed the largest bubble so far (always before a chunk-0 backward, and before
 *     the other when fill_b); then one forward per rank (chunk 1 when its input is there), with
 *     W's first where memory or the wait asks for them (the extra one when fill_f);
 *  5. the remaining W's.
 * Every action starts when the rank is free and its cross-rank input has arrived (its end plus
 * comm). The bubble of a rank is its idle time after its first forward; the variant with the
 * smallest largest bubble wins. Each variant is rerun with the per-rank bubbles of its last run
 * as an "approved" allowance (a rank may idle up to the largest bubble minus its own) for as long
 * as the largest bubble falls. The four (fill_b, fill_f) variants are tried; the figure is
 * max bubble / (2M(F+B+W) + max bubble), which is zbpp's bubble rate for the same timeline.
 *
 * Labels: a rank's six kinds of actions are F0 F1 (forwards of chunk 0/1), G1 G0 (backwards in
 * the order they arrive: G1 = chunk 1, whose gradient starts at rank 0 and goes up; G0 =
 * chunk 0, from rank P-1 down), W1 W0. In zbpp's V placement chunk 0 of rank i is stage i,
 * chunk 1 stage 2P-1-i. Header-only. */
#ifndef ZBPP_TESTS_ZBV_REFERENCE_H
#define ZBPP_TESTS_ZBV_REFERENCE_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double f, b, w, c;   /* per chunk: forward, input backward, weight backward, comm latency */
    double mf, mb, mw;   /* per chunk memory deltas (sum 0) */
    double cap;          /* per-rank memory limit (the authors' default: 2P·mf) */
} zbv_ref_costs_t;

enum { ZR_F0, ZR_F1, ZR_G1, ZR_G0, ZR_W1, ZR_W0, ZR_KINDS };

typedef struct {
    unsigned char kind; /* ZR_* */
    int mb;
} zbv_ref_op_t;

typedef struct {
    int P, M;
    zbv_ref_costs_t k;
    double *end;       /* [kind][rank][mb], -1 = not yet */
    double *clock, *mem, *idle;
    int *done;         /* [rank][kind] actions of that kind run so far */
    int *wq, *wq_head, *wq_tail; /* pending W kinds per rank, FIFO */
    zbv_ref_op_t *ops; /* [rank][6M] the order */
    int *nops;
    const double *allow; /* approved bubble per rank (NULL = none) */
    double allow_max;
    bool fill_b, fill_f, broken;
} zbv_ref_t;

static inline double *zr_end(zbv_ref_t *z, int kind, int r, int mb)
{
    return &z->end[((size_t)kind * z->P + r) * z->M + mb];
}

static inline double zr_cost(const zbv_ref_t *z, int kind)
{
    return kind <= ZR_F1 ? z->k.f : kind <= ZR_G0 ? z->k.b : z->k.w;
}

static inline double zr_memd(const zbv_ref_t *z, int kind)
{
    return kind <= ZR_F1 ? z->k.mf : kind <= ZR_G0 ? z->k.mb : z->k.mw;
}

/* The cross-rank input of the next action of `kind` on rank r: its end time, or -1 when none
 * exists (first/last rank, W) or it has not run. *has = whether the action has such an input. */
static inline double zr_input(zbv_ref_t *z, int kind, int r, bool *has)
{
    const int n = z->done[r * ZR_KINDS + kind];
    int from = -1;
    if ((kind == ZR_F0 || kind == ZR_G1) && r > 0)
        from = r - 1;
    if ((kind == ZR_F1 || kind == ZR_G0) && r < z->P - 1)
        from = r + 1;
    *has = from >= 0 && n < z->M;
    return *has ? *zr_end(z, kind, from, n) : -1;
}

static inline double zr_max_idle(const zbv_ref_t *z, int r)
{
    double m = 0;
    for (int i = 0; i < z->P; i++)
        m = fmax(m, z->idle[i]);
    if (z->allow && r >= 0)
        m = fmax(m, z->allow_max - z->allow[r]);
    return m;
}

static inline void zr_put(zbv_ref_t *z, int kind, int r)
{
    int *n = &z->done[r * ZR_KINDS + kind];
    if (z->broken || *n >= z->M || z->mem[r] + zr_memd(z, kind) > z->k.cap + 1e-9) {
        z->broken = true;
        return;
    }
    bool has;
    double in = zr_input(z, kind, r, &has);
    if (has && in < 0) { /* its input has not run: the construction failed */
        z->broken = true;
        return;
    }
    const double free_at = z->clock[r] + zr_cost(z, kind);
    double end = free_at;
    if (has)
        end = fmax(end, in + z->k.c + zr_cost(z, kind));
    if (z->done[r * ZR_KINDS + ZR_F0] > 0)
        z->idle[r] += end - free_at;
    *zr_end(z, kind, r, *n) = end;
    z->clock[r] = end;
    z->mem[r] += zr_memd(z, kind);
    z->ops[(size_t)r * 6 * z->M + z->nops[r]++] = (zbv_ref_op_t){(unsigned char)kind, *n};
    if (kind == ZR_G1 || kind == ZR_G0)
        z->wq[(size_t)r * 2 * z->M + z->wq_tail[r]++] = kind == ZR_G1 ? ZR_W1 : ZR_W0;
    (*n)++;
}

static inline bool zr_have_w(const zbv_ref_t *z, int r)
{
    return z->wq_head[r] < z->wq_tail[r];
}

static inline void zr_put_w(zbv_ref_t *z, int r)
{
    if (!zr_have_w(z, r)) {
        z->broken = true;
        return;
    }
    zr_put(z, z->wq[(size_t)r * 2 * z->M + z->wq_head[r]++], r);
}

/* W's before an action of `kind` on rank r: every one that ends before its input arrives, then
 * one more if the wait is longer than the bubble allowance and `extra`. */
static inline void zr_fill(zbv_ref_t *z, int kind, int r, bool extra)
{
    bool has;
    double in = zr_input(z, kind, r, &has);
    while (!z->broken && zr_have_w(z, r) && has && in + z->k.c >= z->clock[r] + z->k.w)
        zr_put_w(z, r);
    /* without an input the authors' test reads an unset end time (-1) */
    double arrive = (has ? in : -1) + z->k.c;
    if (zr_have_w(z, r) && arrive - z->clock[r] > zr_max_idle(z, r) - z->idle[r] && extra)
        zr_put_w(z, r);
}

static inline int zr_count(const zbv_ref_t *z, int r, int kind)
{
    return z->done[r * ZR_KINDS + kind];
}

static inline bool zr_run_once(zbv_ref_t *z)
{
    const int P = z->P, M = z->M;
    const double f = z->k.f;
    for (int i = 0; i < P; i++)
        zr_put(z, ZR_F0, i);
    for (int i = P - 1; i >= 0; i--) {
        if (i < P - 1) {
            const double back = *zr_end(z, ZR_F1, i + 1, 0) + z->k.c;
            while (!z->broken && z->mem[i] + z->k.mf * (2 + 2 * i) <= z->k.cap + 1e-9 &&
                   z->clock[i] + f <= back && zr_count(z, i, ZR_F0) < M - i)
                for (int j = 0; j <= i; j++)
                    zr_put(z, ZR_F0, j);
        }
        zr_put(z, ZR_F1, i);
    }
    int turn = ZR_F0;
    for (int i = 1; i < P && !z->broken; i++) {
        while (!z->broken &&
               (zr_count(z, i, ZR_F0) + zr_count(z, i, ZR_F1) <
                    zr_count(z, i - 1, ZR_F0) + zr_count(z, i - 1, ZR_F1) ||
                (zr_count(z, i, ZR_F1) <= zr_count(z, i - 1, ZR_F1) &&
                 zr_count(z, i - 1, ZR_F1) < M))) {
            for (int j = P - 1; j >= i; j--)
                if (zr_count(z, j, turn) < M)
                    zr_put(z, turn, j);
            turn = turn == ZR_F0 ? ZR_F1 : ZR_F0;
        }
    }
    int *order = malloc(sizeof(int) * 2 * (size_t)P);
    if (!order)
        return false;
    for (int round = 0; round < 2 * M && !z->broken; round++) {
        for (int i = 0; i < P; i++)
            while (!z->broken && z->mem[i] + z->k.mb > z->k.cap + 1e-9)
                zr_put_w(z, i);
        /* which backward each rank runs: G0 when its gradient is there (or G1 is done) */
        int n0 = 0, n1 = 0;
        for (int i = 0; i < P; i++) {
            bool g0 = false;
            if (zr_count(z, i, ZR_G0) < zr_count(z, i, ZR_G1)) {
                g0 = i == P - 1 || *zr_end(z, ZR_G0, i + 1, zr_count(z, i, ZR_G0)) >= 0 ||
                     zr_count(z, i, ZR_G1) >= M;
            }
            order[g0 ? P + n0++ : n1++] = i;
        }
        /* G0 ranks from the last one down, then G1 ranks from rank 0 up */
        for (int k = n0 - 1; k >= 0 && !z->broken; k--) {
            zr_fill(z, ZR_G0, order[P + k], true);
            zr_put(z, ZR_G0, order[P + k]);
        }
        for (int k = 0; k < n1 && !z->broken; k++) {
            zr_fill(z, ZR_G1, order[k], z->fill_b);
            zr_put(z, ZR_G1, order[k]);
        }
        for (int i = 0; i < P && !z->broken; i++) {
            const int n0f = zr_count(z, i, ZR_F0), n1f = zr_count(z, i, ZR_F1);
            if (n1f >= M)
                continue;
            int kind = -1;
            if (n1f >= n0f)
                kind = ZR_F0;
            else if (i == P - 1 || *zr_end(z, ZR_F1, i + 1, n1f) >= 0)
                kind = ZR_F1;
            else if (n0f < M && (i == 0 || *zr_end(z, ZR_F0, i - 1, n0f) >= 0))
                kind = ZR_F0;
            if (kind < 0)
                continue;
            while (!z->broken && z->mem[i] + z->k.mf > z->k.cap + 1e-9)
                zr_put_w(z, i);
            zr_fill(z, kind, i, z->fill_f);
            zr_put(z, kind, i);
        }
    }
    free(order);
    for (int i = 0; i < P && !z->broken; i++)
        while (!z->broken && zr_have_w(z, i))
            zr_put_w(z, i);
    for (int i = 0; i < P && !z->broken; i++)
        z->broken = z->nops[i] != 6 * M;
    return !z->broken;
}

static inline void zr_free(zbv_ref_t *z)
{
    free(z->end);
    free(z->clock);
    free(z->done);
    free(z->wq);
    free(z->ops);
    memset(z, 0, sizeof *z);
}

static inline bool zr_init(zbv_ref_t *z, int P, int M, const zbv_ref_costs_t *k, bool fill_b,
                           bool fill_f, const double *allow)
{
    memset(z, 0, sizeof *z);
    z->P = P, z->M = M, z->k = *k, z->fill_b = fill_b, z->fill_f = fill_f, z->allow = allow;
    const size_t n = (size_t)ZR_KINDS * P * M;
    z->end = malloc(sizeof(double) * n);
    z->clock = calloc(3 * (size_t)P, sizeof(double));
    z->done = calloc((size_t)P * (ZR_KINDS + 3), sizeof(int));
    z->wq = malloc(sizeof(int) * 2 * (size_t)P * M);
    z->ops = malloc(sizeof(zbv_ref_op_t) * 6 * (size_t)P * M);
    if (!z->end || !z->clock || !z->done || !z->wq || !z->ops) {
        zr_free(z);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        z->end[i] = -1;
    z->mem = z->clock + P;
    z->idle = z->clock + 2 * P;
    z->wq_head = z->done + (size_t)P * ZR_KINDS;
    z->wq_tail = z->wq_head + P;
    z->nops = z->wq_tail + P;
    if (allow)
        for (int i = 0; i < P; i++)
            z->allow_max = i ? fmax(z->allow_max, allow[i]) : allow[i];
    return true;
}

static inline double zr_max_bubble(const zbv_ref_t *z)
{
    return zr_max_idle(z, -1);
}

/* One variant with its approved-bubble refinements: the best run is left in *best (owned by the
 * caller, free with zr_free); false when the first run fails (or out of memory). */
static inline bool zr_variant(int P, int M, const zbv_ref_costs_t *k, bool fill_b, bool fill_f,
                              zbv_ref_t *best)
{
    if (!zr_init(best, P, M, k, fill_b, fill_f, NULL) || !zr_run_once(best)) {
        zr_free(best);
        return false;
    }
    /* rerun with the last run's bubbles approved while the largest bubble falls */
    double *allow = malloc(sizeof(double) * (size_t)P);
    if (!allow)
        return true;
    memcpy(allow, best->idle, sizeof(double) * (size_t)P);
    for (int guard = 0; guard < 1000; guard++) {
        const double approved_max = zr_max_bubble(best);
        zbv_ref_t next;
        if (!zr_init(&next, P, M, k, fill_b, fill_f, allow))
            break;
        if (!zr_run_once(&next) || !(zr_max_bubble(&next) < zr_max_bubble(best))) {
            zr_free(&next);
            break;
        }
        zr_free(best);
        *best = next;
        best->allow = NULL; /* the allowance it ran with is about to be replaced */
        memcpy(allow, best->idle, sizeof(double) * (size_t)P);
        if (!(zr_max_bubble(best) < approved_max))
            break;
    }
    free(allow);
    return true;
}

/* The authors' ZB-V: best of the four variants. Returns the bubble rate (NAN if every variant
 * fails); with keep non-NULL the winning run is left there (free with zr_free). */
static inline double zbv_reference(int P, int M, const zbv_ref_costs_t *k, zbv_ref_t *keep)
{
    zbv_ref_t best = {0};
    bool have = false;
    for (int v = 0; v < 4; v++) {
        zbv_ref_t run;
        if (!zr_variant(P, M, k, v < 2, v % 2 == 0, &run))
            continue;
        if (!have || zr_max_bubble(&run) < zr_max_bubble(&best)) {
            if (have)
                zr_free(&best);
            best = run;
            have = true;
        } else {
            zr_free(&run);
        }
    }
    if (!have)
        return NAN;
    const double busy = 2.0 * M * (k->f + k->b + k->w), bub = zr_max_bubble(&best);
    if (keep)
        *keep = best;
    else
        zr_free(&best);
    return bub / (busy + bub);
}

#endif
