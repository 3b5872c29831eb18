/* The periodic V construction of v-half and v-min (Controllable-Memory paper): every rank repeats
 * one building block of four actions (F of its first chunk, F of its second, then the second
 * chunk's B and the first's) every 6 slots, each rank with its own offsets, so the steady state
 * is bubble-free at F = B = W = 1 per chunk and the block's lifetime on a rank fixes its memory.
 * The warm-up and the cool-down of that repetition are loose; a squeeze pulls each of their
 * actions to the earliest free slot its dependencies allow, as long as the rank's peak memory
 * stays at or below the block's own peak, then times everything as soon as possible.
 *
 * Slots, unit model: F +1, B 0, W -1 per chunk; a W runs in the first idle slot after a B made
 * it pending. Lists per rank: 0 = F of chunk 0 (stage r), 1 = F of chunk 1 (stage 2P-1-r),
 * 2 = B of chunk 1, 3 = B of chunk 0, then the W's: one list (4, in B order) while squeezing,
 * two in the end (4 = W of chunk 1, 5 = W of chunk 0). Entry m of a list is microbatch m. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/gen_v.h"
#include "schedule/generators.h"

enum { L_F0, L_F1, L_B1, L_B0, L_W, L_W0, NLISTS };

typedef struct {
    int P, M;
    long H;     /* slots per rank (an upper bound on any time used) */
    bool split; /* W's in two lists by chunk (else one list of 2M in B order) */
    long *t;    /* [P][NLISTS][2M] slot of each action */
    int *occ;   /* [P][H] list+1 of the action in the slot, 0 = idle */
} vpat_t;

static long *T(vpat_t *v, int r, int k) { return v->t + ((size_t)r * NLISTS + k) * 2 * v->M; }
/* Entries of list k. */
static int len_of(const vpat_t *v, int k) { return k == L_W && !v->split ? 2 * v->M : v->M; }
static int *OCC(vpat_t *v, int r) { return v->occ + (size_t)r * v->H; }

static const int mem_delta[NLISTS] = {1, 1, 0, 0, -1, -1};

/* Rebuild every rank's slot map from the lists 0..nk-1; false on a collision. */
static bool index_slots(vpat_t *v, int nk)
{
    memset(v->occ, 0, sizeof(int) * (size_t)v->P * v->H);
    for (int r = 0; r < v->P; r++)
        for (int k = 0; k < nk; k++)
            for (int m = 0; m < len_of(v, k); m++) {
                long s = T(v, r, k)[m];
                if (s < 0 || s >= v->H || OCC(v, r)[s])
                    return false;
                OCC(v, r)[s] = k + 1;
            }
    return true;
}

/* Peak of rank r's running memory. With explicit W's (lists 4/5 in the slot map) each slot
 * counts its own delta; without, a pending W is assumed to run in each idle slot. */
static int rank_peak(vpat_t *v, int r, bool explicit_w)
{
    const int *occ = OCC(v, r);
    int cur = 0, peak = 0, pending = 0;
    for (long s = 0; s < v->H; s++) {
        int k = occ[s] - 1;
        if (k >= 0) {
            cur += mem_delta[k];
            pending += k == L_B1 || k == L_B0;
        } else if (!explicit_w && pending) {
            cur--;
            pending--;
        }
        if (cur > peak)
            peak = cur;
    }
    return peak;
}

static int max_peak(vpat_t *v, bool explicit_w)
{
    int peak = 0;
    for (int r = 0; r < v->P; r++) {
        int p = rank_peak(v, r, explicit_w);
        peak = p > peak ? p : peak;
    }
    return peak;
}

/* Place the W's: each B makes one pending; a pending W takes the next idle slot (one list in B
 * order, or split by chunk with chunk 1's first). Leftovers go after the last action. The slot
 * map must hold lists 0..3 only; it is updated. */
static void place_w(vpat_t *v, bool split)
{
    v->split = split;
    for (int r = 0; r < v->P; r++) {
        int *occ = OCC(v, r);
        long last = 0;
        for (long s = 0; s < v->H; s++)
            if (occ[s])
                last = s;
        int pending[2] = {0, 0}, placed[2] = {0, 0};
        long s = 0;
        for (; s <= last || pending[0] || pending[1]; s++) {
            int k = occ[s] - 1;
            if (k == L_B1 || k == L_B0) {
                pending[split && k == L_B0]++;
            } else if (k < 0) {
                for (int w = 0; w < 2; w++)
                    if (pending[w]) {
                        T(v, r, L_W + w)[placed[w]++] = s;
                        occ[s] = L_W + w + 1;
                        pending[w]--;
                        break;
                    }
            }
        }
    }
}

typedef struct {
    long t;
    int r, k, m;
} item_t;

static int item_cmp(const void *a, const void *b)
{
    const item_t *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->r != y->r)
        return x->r - y->r;
    if (x->k != y->k)
        return x->k - y->k;
    return x->m - y->m;
}

/* All actions of lists 0..nk-1 in time order (ties: rank, list, microbatch). */
static item_t *sorted_items(vpat_t *v, int nk, size_t *n)
{
    *n = 0;
    for (int k = 0; k < nk; k++)
        *n += (size_t)v->P * len_of(v, k);
    item_t *it = malloc(sizeof *it * *n);
    if (!it)
        return NULL;
    size_t i = 0;
    for (int r = 0; r < v->P; r++)
        for (int k = 0; k < nk; k++)
            for (int m = 0; m < len_of(v, k); m++)
                it[i++] = (item_t){T(v, r, k)[m], r, k, m};
    qsort(it, *n, sizeof *it, item_cmp);
    return it;
}

/* Latest slot among what (r, k, m) waits for, in slot terms: the same list on the neighbouring
 * rank (forwards of chunk 0 and backwards of chunk 1 come from rank r-1, the others from r+1),
 * the previous list of the same microbatch on the rank (F0 -> F1 -> B1 -> B0), the previous
 * microbatch of the list; a W its B (the m-th B of the rank in time order). -1 = none. */
static long dep_slot(vpat_t *v, int r, int k, int m, const long *b_sorted)
{
    long d = -1;
#define DEP(x) do { long x_ = (x); if (x_ > d) d = x_; } while (0)
    if (k < L_W) {
        if ((k == L_F0 || k == L_B1) && r > 0)
            DEP(T(v, r - 1, k)[m]);
        if ((k == L_F1 || k == L_B0) && r < v->P - 1)
            DEP(T(v, r + 1, k)[m]);
        if (k > L_F0)
            DEP(T(v, r, k - 1)[m]);
    } else {
        DEP(b_sorted[m]);
    }
    if (m > 0)
        DEP(T(v, r, k)[m - 1]);
#undef DEP
    return d;
}

static int long_cmp(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* Squeeze: walk the actions in time order; in the warm-up (until rank 0 ran the first B of
 * chunk 0; only when the W's are explicit) and in the cool-down (after the first rank ran its
 * last F of chunk 0) move each to the earliest idle slot after its dependencies that keeps the
 * rank's peak within the schedule's present peak. nk = 5 (W's explicit) or 4. */
static zb_status_t squeeze(vpat_t *v, int nk)
{
    const bool explicit_w = nk > L_W;
    const int cap = max_peak(v, explicit_w);
    size_t n;
    item_t *it = sorted_items(v, nk, &n);
    long *b_sorted = malloc(sizeof(long) * 2 * (size_t)v->M);
    if (!it || !b_sorted) {
        free(it);
        free(b_sorted);
        return ZB_ENOMEM;
    }
    int b_rank = -1; /* rank whose B's b_sorted holds */
    int phase = 0;
    for (size_t i = 0; i < n; i++) {
        const int r = it[i].r, k = it[i].k, m = it[i].m;
        if (phase == 0 && k == L_B0 && r == 0)
            phase = 1;
        if (phase == 1) {
            if (k == L_F0 && m == v->M - 1)
                phase = 2;
            continue;
        }
        if (phase == 0 && !explicit_w)
            continue;
        if (k == L_W && b_rank != r) {
            memcpy(b_sorted, T(v, r, L_B1), sizeof(long) * v->M);
            memcpy(b_sorted + v->M, T(v, r, L_B0), sizeof(long) * v->M);
            qsort(b_sorted, 2 * (size_t)v->M, sizeof(long), long_cmp);
            b_rank = r;
        }
        long *slot = &T(v, r, k)[m];
        const long at = *slot;
        int *occ = OCC(v, r);
        for (long s = dep_slot(v, r, k, m, b_sorted) + 1; s < at; s++) {
            if (occ[s])
                continue;
            occ[*slot] = 0;
            occ[s] = k + 1;
            *slot = s;
            if (rank_peak(v, r, explicit_w) <= cap)
                break;
            occ[s] = 0;
            occ[at] = k + 1;
            *slot = at;
        }
        if (k == L_B1 || k == L_B0)
            b_rank = -1; /* a B moved: the W dependencies of this rank change */
    }
    free(it);
    free(b_sorted);
    return ZB_OK;
}

/* Re-time lists 0..nk-1 as soon as possible with unit durations and no latency, keeping each
 * rank's order and each list's microbatch order (a W waits only for the previous W: its B is
 * earlier on the rank already). */
static zb_status_t compact(vpat_t *v, int nk)
{
    size_t n;
    item_t *it = sorted_items(v, nk, &n);
    long *rank_free = calloc((size_t)v->P, sizeof(long));
    if (!it || !rank_free) {
        free(it);
        free(rank_free);
        return ZB_ENOMEM;
    }
    /* Every dependency is earlier in the walk, so its list entry is already re-timed. */
    for (size_t i = 0; i < n; i++) {
        const int r = it[i].r, k = it[i].k, m = it[i].m;
        long start = rank_free[r];
        long d = -1;
        if (k < L_W) {
            if ((k == L_F0 || k == L_B1) && r > 0)
                d = T(v, r - 1, k)[m];
            if ((k == L_F1 || k == L_B0) && r < v->P - 1 && T(v, r + 1, k)[m] > d)
                d = T(v, r + 1, k)[m];
            if (k > L_F0 && T(v, r, k - 1)[m] > d)
                d = T(v, r, k - 1)[m];
        }
        if (m > 0 && T(v, r, k)[m - 1] > d)
            d = T(v, r, k)[m - 1];
        if (d + 1 > start)
            start = d + 1;
        T(v, r, k)[m] = start;
        rank_free[r] = start + 1;
    }
    free(it);
    free(rank_free);
    return ZB_OK;
}

/* Steady-state offsets of rank i (slot of its first microbatch's F0, F1, B1, B0; period 6). */
static void block_offsets(bool half, int P, int i, long off[4])
{
    if (half) {
        const long gap = P % 2 == 0 ? 3 : 0;
        off[0] = 2L * i;
        off[1] = 3L * P - i - 2;
        off[2] = 3L * P + gap + 2L * i - 1;
        off[3] = 6L * P + gap - i - 2;
    } else {
        const long gap = P % 3 == 0 ? 2 : 0;
        off[0] = i;
        off[1] = 2L * P - i - 1;
        off[2] = 2L * P + gap + i;
        off[3] = 4L * P + gap - i - 1;
    }
}

zb_status_t zb_v_pattern(zb_schedule_t *s, bool half, zb_err_t *err)
{
    const int P = s->ranks, M = s->microbatches;
    vpat_t v = {.P = P, .M = M, .H = 6L * M + 6L * P + 4L * M + 16};
    v.t = malloc(sizeof(long) * (size_t)P * NLISTS * 2 * M);
    v.occ = malloc(sizeof(int) * (size_t)P * v.H);
    zb_status_t st = ZB_OK;
    if (!v.t || !v.occ) {
        st = zb_err_set(err, ZB_ENOMEM, "%s: out of memory", s->name);
        goto done;
    }
    for (int r = 0; r < P; r++) {
        long off[4];
        block_offsets(half, P, r, off);
        for (int k = 0; k < 4; k++)
            for (int m = 0; m < M; m++)
                T(&v, r, k)[m] = off[k] + 6L * m;
    }
    if (!index_slots(&v, 4)) {
        st = zb_err_set(err, ZB_ESCHEDULE, "%s: building block collides at P=%d", s->name, P);
        goto done;
    }
    /* Pass 1: W's explicit, squeeze warm-up and cool-down. Pass 2: W's implicit, squeeze the
     * cool-down again. Then the final W placement, split by chunk. */
    place_w(&v, false);
    if ((st = squeeze(&v, 5)) != ZB_OK || (st = compact(&v, 5)) != ZB_OK)
        goto oom;
    index_slots(&v, 4);
    if ((st = squeeze(&v, 4)) != ZB_OK)
        goto oom;
    place_w(&v, false);
    if ((st = compact(&v, 5)) != ZB_OK)
        goto oom;
    index_slots(&v, 4);
    place_w(&v, true);
    const int stage_of[NLISTS] = {0, 1, 1, 0, 1, 0}; /* chunk of each list */
    const zb_action_type_t type_of[NLISTS] = {ZB_ACT_F, ZB_ACT_F, ZB_ACT_B,
                                              ZB_ACT_B, ZB_ACT_W, ZB_ACT_W};
    for (int r = 0; r < P && st == ZB_OK; r++) {
        /* Walk the slot map: its order is the rank's program. The W lists are in slot order. */
        int next[NLISTS] = {0};
        const int *occ = OCC(&v, r);
        for (long x = 0; x < v.H && st == ZB_OK; x++) {
            int k = occ[x] - 1;
            if (k < 0)
                continue;
            int stage = stage_of[k] ? 2 * P - 1 - r : r;
            st = zb_gen_push(s, r, type_of[k], stage, next[k]++, err);
        }
    }
    goto done;
oom:
    st = zb_err_set(err, ZB_ENOMEM, "%s: out of memory", s->name);
done:
    free(v.t);
    free(v.occ);
    return st;
}
