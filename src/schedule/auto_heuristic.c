/* The zero-bubble paper's own one-chunk heuristic (ZB-1p / ZB-2p at 1P / 2P memory), one more
 * candidate family for auto: microbatch by microbatch, every rank places at most one F (ranks
 * whose F would only widen the bubble hold back) and then the B's run up from the last rank,
 * with W's pulled in to free memory or to fill the wait for the next F or B.
 *
 *  warm-up   (microbatch 0): each rank, from the last up, takes as many F's as fit its memory
 *            and the time until the first B reaches it (or, with allow_bubble, as long as the
 *            next F still ends before that B can start); depths are then made decreasing
 *            along the pipeline.
 *  steady    per microbatch: rank j takes its next F unless (prioritize_b) it is two F's ahead of
 *            rank j+1 and the F would delay its B beyond what j+1 needs, or its waiting would be
 *            within the largest bubble seen so far; a rank that skips forces every rank before
 *            it to skip too. Before each F and B a rank frees memory with W's as needed, then
 *            runs W's that end before the input arrives; a W that does not fit the wait is run
 *            anyway unless (no_bubble_greedy off) the wait is already within the largest bubble.
 *  cool-down rank 0 drains its W's once it has run all F's; every rank ends with its W's.
 * The three switches give 8 variants; each is an action order the simulator then times with the
 * real costs. Times here follow the same rules (comm on every cross-rank edge). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/auto_heuristic.h"
#include "schedule/generators.h"

typedef struct {
    int P, M;
    const zb_costs_t *c;
    int *n[3];       /* [P] F, B, W placed per rank */
    double *end;     /* [P] time the rank's last action ends */
    double *mem;     /* [P] running memory */
    double *bubble;  /* [P] idle time since the rank's first F */
    double most;     /* the largest of them (they only grow) */
    double *t[3];    /* [P*M] end time of F, B, W of (rank, mb) */
    zb_schedule_t *s;
} heur_t;

static const zb_action_type_t kind_type[3] = {ZB_ACT_F, ZB_ACT_B, ZB_ACT_W};

static double cost_of(const heur_t *h, int k, int j)
{
    return k == 0 ? h->c->t_f[j] : k == 1 ? h->c->t_b[j] : h->c->t_w[j];
}

static double mem_of(const heur_t *h, int k, int j)
{
    return k == 0 ? h->c->m_f[j] : k == 1 ? h->c->m_b[j] : h->c->m_w[j];
}

static double limit_of(const heur_t *h, int j) { return zb_costs_limit(h->c, j); }

static double max_bubble(const heur_t *h) { return h->most; }

/* When the input of rank j's next F (k = 0) or of its B of microbatch i (k = 1) arrives. */
static double input_ready(const heur_t *h, int k, int j, int i)
{
    if (k == 0)
        return h->t[0][(j - 1) * h->M + i] + h->c->comm[j - 1];
    return h->t[1][(j + 1) * h->M + i] + h->c->comm[j + 1];
}

static zb_status_t put(heur_t *h, int j, int k, zb_err_t *err)
{
    const int i = h->n[k][j];
    const double cost = cost_of(h, k, j);
    double at = h->end[j] + cost;
    const double unblocked = at;
    if (k == 0 && j > 0)
        at = fmax(at, input_ready(h, 0, j, i) + cost);
    if (k == 1 && j < h->P - 1)
        at = fmax(at, input_ready(h, 1, j, i) + cost);
    if (h->n[0][j] > 0) {
        h->bubble[j] += at - unblocked;
        h->most = fmax(h->most, h->bubble[j]);
    }
    h->end[j] = at;
    h->t[k][j * h->M + i] = at;
    h->mem[j] += mem_of(h, k, j);
    h->n[k][j]++;
    return zb_gen_push(h->s, j, kind_type[k], j, i, err);
}

/* W's until rank j can afford an action adding `need`; false if it cannot. */
static zb_status_t free_memory(heur_t *h, int j, double need, bool *ok, zb_err_t *err)
{
    *ok = true;
    const double limit = limit_of(h, j);
    while (h->mem[j] + need > limit + 1e-9 * fmax(1.0, fabs(limit))) {
        if (h->n[2][j] >= h->n[1][j]) {
            *ok = false;
            return ZB_OK;
        }
        zb_status_t st = put(h, j, 2, err);
        if (st != ZB_OK)
            return st;
    }
    return ZB_OK;
}

/* W's on rank j while waiting for an input that arrives at `ready`. */
static zb_status_t fill_wait(heur_t *h, int j, double ready, bool no_bubble_greedy, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    while (st == ZB_OK && h->n[2][j] < h->n[1][j] && h->end[j] + cost_of(h, 2, j) <= ready)
        st = put(h, j, 2, err);
    if (st == ZB_OK && h->n[2][j] < h->n[1][j] && h->end[j] < ready) {
        bool within = ready - h->end[j] <= max_bubble(h) - h->bubble[j];
        if (!within || no_bubble_greedy)
            st = put(h, j, 2, err);
    }
    return st;
}

/* Warm-up depth of every rank for microbatch 0 (F's after the first). */
static void warmup_depths(heur_t *h, bool allow_bubble, int *extra)
{
    const int P = h->P, M = h->M;
    double last = 0;
    for (int j = P - 1; j >= 0; j--) {
        extra[j] = 0;
        if (j == P - 1) {
            last = h->t[0][j * M] + cost_of(h, 1, j);
            continue;
        }
        const double arrive = last + h->c->comm[j + 1];
        double mem = h->mem[j], t = h->end[j];
        while (h->n[0][j] + extra[j] < M && mem + mem_of(h, 0, j) <= limit_of(h, j)) {
            if (allow_bubble ? t + cost_of(h, 0, j) > arrive : t >= arrive)
                break;
            mem += mem_of(h, 0, j);
            t += cost_of(h, 0, j);
            extra[j]++;
        }
        last = fmax(t, arrive) + cost_of(h, 1, j);
    }
    for (int j = 1; j < P; j++)
        while (extra[j] > 0 && extra[j] >= extra[j - 1] && h->n[0][j] + extra[j] < M)
            extra[j]--;
}

/* Whether rank j takes its next F in this round (before the backward of the round). */
static bool wants_f(const heur_t *h, int j, bool prioritize_b)
{
    const int P = h->P;
    if (h->n[0][j] >= h->M)
        return false;
    if (!(prioritize_b && j + 1 < P && h->n[0][j] >= h->n[0][j + 1] + 2))
        return true;
    const double next_fb = h->end[j + 1] + cost_of(h, 0, j + 1) + cost_of(h, 1, j + 1) +
                           h->c->comm[j + 1];
    if (h->end[j] >= next_fb)
        return false;
    /* the F, with the W's it needs to fit, still ends before j+1 can send the B */
    double w_cost = 0, mem = h->mem[j] + mem_of(h, 0, j);
    for (int w = h->n[2][j]; mem > limit_of(h, j) && w < h->n[1][j]; w++) {
        w_cost += cost_of(h, 2, j);
        mem += mem_of(h, 2, j);
    }
    if (h->end[j] + cost_of(h, 0, j) + w_cost <= next_fb)
        return true;
    return !(next_fb - h->end[j] <= max_bubble(h) - h->bubble[j]);
}

static zb_status_t build(heur_t *h, bool allow_bubble, bool prioritize_b, bool no_bubble_greedy,
                         int *req, zb_err_t *err)
{
    const int P = h->P, M = h->M;
    zb_status_t st = ZB_OK;
    bool ok = true;
    for (int i = 0; i < M && st == ZB_OK && ok; i++) {
        if (i == 0) {
            for (int j = 0; j < P && st == ZB_OK; j++)
                st = put(h, j, 0, err);
            if (st != ZB_OK)
                break;
            warmup_depths(h, allow_bubble, req);
            for (int j = 0; j < P && st == ZB_OK; j++)
                for (int x = 0; x < req[j] && st == ZB_OK; x++)
                    st = put(h, j, 0, err);
            for (int j = P - 1; j >= 0 && st == ZB_OK; j--)
                st = put(h, j, 1, err);
            continue;
        }
        for (int j = 0; j < P; j++)
            req[j] = wants_f(h, j, prioritize_b);
        for (int j = P - 2; j >= 0; j--)
            req[j] = req[j] < req[j + 1] ? req[j] : req[j + 1];
        for (int j = 0; j < P && st == ZB_OK && ok; j++) {
            if (!req[j])
                continue;
            st = free_memory(h, j, mem_of(h, 0, j), &ok, err);
            if (st == ZB_OK && ok && j > 0)
                st = fill_wait(h, j, input_ready(h, 0, j, h->n[0][j]), no_bubble_greedy, err);
            if (st == ZB_OK && ok)
                st = put(h, j, 0, err);
        }
        for (int j = P - 1; j >= 0 && st == ZB_OK && ok; j--) {
            st = free_memory(h, j, mem_of(h, 1, j), &ok, err);
            if (st == ZB_OK && ok && j + 1 < P)
                st = fill_wait(h, j, input_ready(h, 1, j, i), no_bubble_greedy, err);
            while (st == ZB_OK && ok && j == 0 && h->n[0][0] == M && h->n[2][0] < h->n[1][0])
                st = put(h, 0, 2, err);
            if (st == ZB_OK && ok)
                st = put(h, j, 1, err);
        }
    }
    for (int j = 0; j < P && st == ZB_OK && ok; j++)
        while (st == ZB_OK && h->n[2][j] < M)
            st = put(h, j, 2, err);
    if (st == ZB_OK && !ok)
        st = zb_err_set(err, ZB_EMEMLIMIT, "heuristic: memory limit too small");
    return st;
}

zb_status_t zb_zb_heuristic(int P, int M, const zb_costs_t *c, int variant, zb_schedule_t **out,
                            double *span, double *makespan, zb_err_t *err)
{
    *out = NULL;
    if (P < 1 || M < 1 || c->stages != P)
        return zb_err_set(err, ZB_EINVAL, "heuristic: needs one stage per rank");
    heur_t h = {.P = P, .M = M, .c = c};
    h.s = zb_schedule_new("auto", P, 1, ZB_PLACE_LOOP, M);
    double *dbl = calloc((size_t)3 * P + 3 * (size_t)P * M, sizeof(double));
    int *ints = calloc((size_t)4 * P, sizeof(int));
    zb_status_t st = ZB_OK;
    if (!h.s || !dbl || !ints || zb_schedule_reserve(h.s, 3 * M) != ZB_OK) {
        st = zb_err_set(err, ZB_ENOMEM, "heuristic: out of memory");
        goto done;
    }
    h.end = dbl;
    h.mem = dbl + P;
    h.bubble = dbl + 2 * P;
    for (int k = 0; k < 3; k++) {
        h.t[k] = dbl + 3 * P + (size_t)k * P * M;
        h.n[k] = ints + k * P;
    }
    st = build(&h, variant & 1, variant & 2, variant & 4, ints + 3 * P, err);
    /* put() timed every action as soon as its rank and inputs allowed, which is what
     * zb_simulate does with this order: the span and makespan are the simulator's */
    double T = 0, last = 0;
    for (int j = 0; st == ZB_OK && j < P; j++) {
        T = fmax(T, h.end[j] - (h.t[0][(size_t)j * M] - c->t_f[j]));
        last = fmax(last, h.end[j]);
    }
    if (span)
        *span = T;
    if (makespan)
        *makespan = last;
done:
    free(dbl);
    free(ints);
    if (st == ZB_OK)
        *out = h.s;
    else
        zb_schedule_free(h.s);
    return st;
}

const char *zb_zb_heuristic_label(int variant)
{
    static const char *const labels[ZB_HEURISTIC_VARIANTS] = {
        "zero-bubble paper's heuristic",
        "zero-bubble paper's heuristic, deep warm-up",
        "zero-bubble paper's heuristic, B first",
        "zero-bubble paper's heuristic, deep warm-up, B first",
        "zero-bubble paper's heuristic, W in every wait",
        "zero-bubble paper's heuristic, deep warm-up, W in every wait",
        "zero-bubble paper's heuristic, B first, W in every wait",
        "zero-bubble paper's heuristic, deep warm-up, B first, W in every wait",
    };
    return variant >= 0 && variant < ZB_HEURISTIC_VARIANTS ? labels[variant] : "?";
}
