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
    int *cur;   /* [P][H] running memory after each slot (while squeezing) */
    int *pend;  /* [P][H] W's pending after each slot (while squeezing) */
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

/* One slot of rank r's running memory. With explicit W's (lists 4/5 in the slot map) each slot
 * counts its own delta; without, a pending W is assumed to run in each idle slot. */
static void mem_step(int k, bool explicit_w, int *cur, int *pending)
{
    if (k >= 0) {
        *cur += mem_delta[k];
        *pending += k == L_B1 || k == L_B0;
    } else if (!explicit_w && *pending) {
        (*cur)--;
        (*pending)--;
    }
}

/* Fill rank r's running memory after each slot; returns its peak. */
static int rank_states(vpat_t *v, int r, bool explicit_w)
{
    const int *occ = OCC(v, r);
    int *cur_at = v->cur + (size_t)r * v->H, *pend_at = v->pend + (size_t)r * v->H;
    int cur = 0, peak = 0, pending = 0;
    for (long s = 0; s < v->H; s++) {
        mem_step(occ[s] - 1, explicit_w, &cur, &pending);
        cur_at[s] = cur;
        pend_at[s] = pending;
        if (cur > peak)
            peak = cur;
    }
    return peak;
}

/* After an action of rank r moved from slot at to the earlier slot s (slot map updated, the
 * stored states not yet): does the rank's memory stay within cap? Only the slots from s until
 * the running state meets the stored one again (at or after at) can change, and every stored
 * state is within cap. With commit, the stored states of those slots are rewritten. */
static bool move_fits(vpat_t *v, int r, long s, long at, int cap, bool explicit_w, bool commit)
{
    const int *occ = OCC(v, r);
    int *cur_at = v->cur + (size_t)r * v->H, *pend_at = v->pend + (size_t)r * v->H;
    int cur = s > 0 ? cur_at[s - 1] : 0, pending = s > 0 ? pend_at[s - 1] : 0;
    for (long x = s; x < v->H; x++) {
        mem_step(occ[x] - 1, explicit_w, &cur, &pending);
        if (cur > cap)
            return false;
        if (x >= at && cur == cur_at[x] && pending == pend_at[x])
            return true;
        if (commit) {
            cur_at[x] = cur;
            pend_at[x] = pending;
        }
    }
    return true;
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
    int r, k, m;
} item_t;

/* All actions of lists 0..nk-1 in time order (ties: rank, list, microbatch): a counting sort
 * on the slot, filled in tie order so that it stays stable. */
static item_t *sorted_items(vpat_t *v, int nk, size_t *n)
{
    *n = 0;
    for (int k = 0; k < nk; k++)
        *n += (size_t)v->P * len_of(v, k);
    item_t *it = malloc(sizeof *it * (*n ? *n : 1));
    size_t *start = calloc((size_t)v->H + 1, sizeof *start);
    if (!it || !start) {
        free(it);
        free(start);
        return NULL;
    }
    for (int r = 0; r < v->P; r++)
        for (int k = 0; k < nk; k++)
            for (int m = 0; m < len_of(v, k); m++)
                start[T(v, r, k)[m] + 1]++; /* every slot is in [0, H): see index_slots */
    for (long x = 0; x < v->H; x++)
        start[x + 1] += start[x];
    for (int r = 0; r < v->P; r++)
        for (int k = 0; k < nk; k++)
            for (int m = 0; m < len_of(v, k); m++)
                it[start[T(v, r, k)[m]]++] = (item_t){r, k, m};
    free(start);
    return it;
}

/* The slot of the m-th (from 0) of a rank's B's in time order: the m-th smallest of two
 * increasing lists of n distinct slots, found by bisecting how many come from a. */
static long nth_b(const long *a, const long *b, int n, int m)
{
    int lo = m + 1 - n > 0 ? m + 1 - n : 0, hi = m + 1 < n ? m + 1 : n;
    while (lo < hi) {
        const int i = (lo + hi) / 2, j = m + 1 - i;
        if (a[i] < b[j - 1])
            lo = i + 1;
        else
            hi = i;
    }
    const int j = m + 1 - lo;
    long last = lo > 0 ? a[lo - 1] : -1;
    return j > 0 && b[j - 1] > last ? b[j - 1] : last;
}

/* Latest slot among what (r, k, m) waits for, in slot terms: the same list on the neighbouring
 * rank (forwards of chunk 0 and backwards of chunk 1 come from rank r-1, the others from r+1),
 * the previous list of the same microbatch on the rank (F0 -> F1 -> B1 -> B0), the previous
 * microbatch of the list; a W its B (the m-th B of the rank in time order). -1 = none. */
static long dep_slot(vpat_t *v, int r, int k, int m)
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
        DEP(nth_b(T(v, r, L_B1), T(v, r, L_B0), v->M, m));
    }
    if (m > 0)
        DEP(T(v, r, k)[m - 1]);
#undef DEP
    return d;
}

/* Squeeze: walk the actions in time order; in the warm-up (until rank 0 ran the first B of
 * chunk 0; only when the W's are explicit) and in the cool-down (after the first rank ran its
 * last F of chunk 0) move each to the earliest idle slot after its dependencies that keeps the
 * rank's peak within the schedule's present peak. nk = 5 (W's explicit) or 4. */
static zb_status_t squeeze(vpat_t *v, int nk)
{
    const bool explicit_w = nk > L_W;
    int cap = 0;
    for (int r = 0; r < v->P; r++) {
        const int p = rank_states(v, r, explicit_w);
        cap = p > cap ? p : cap;
    }
    size_t n;
    item_t *it = sorted_items(v, nk, &n);
    if (!it)
        return ZB_ENOMEM;
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
        long *slot = &T(v, r, k)[m];
        const long at = *slot;
        int *occ = OCC(v, r);
        for (long s = dep_slot(v, r, k, m) + 1; s < at; s++) {
            if (occ[s])
                continue;
            occ[at] = 0;
            occ[s] = k + 1;
            if (move_fits(v, r, s, at, cap, explicit_w, false)) {
                move_fits(v, r, s, at, cap, explicit_w, true);
                *slot = s;
                break;
            }
            occ[s] = 0;
            occ[at] = k + 1;
        }
    }
    free(it);
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
    v.cur = malloc(sizeof(int) * (size_t)P * v.H);
    v.pend = malloc(sizeof(int) * (size_t)P * v.H);
    zb_status_t st = ZB_OK;
    if (!v.t || !v.occ || !v.cur || !v.pend) {
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
    free(v.cur);
    free(v.pend);
    return st;
}
