/* Interleaved 1F1B (Narayanan et al., Megatron-LM, SC'21; PyTorch's ScheduleInterleaved1F1B):
 * each rank holds v >= 2 chunks under loop placement (stage c·P + r on rank r), fused backward.
 *
 * Microbatches go through a rank's chunks in rounds: a round of g microbatches runs chunk 0 for
 * all g, then chunk 1 for all g, ..., and the backwards of a round visit the chunks in reverse.
 * There are R = max(1, floor(M / P)) rounds of g = M / R microbatches each, as PyTorch does; when
 * R does not divide M (PyTorch refuses those M) the first M mod R rounds take one microbatch more,
 * so every round holds between P and 2P-1 microbatches. For M a multiple of P this is Megatron's
 * original order (rounds of exactly P).
 *
 * Rank r runs (v-1)·g0 + 2(P-1-r) warm-up forwards (g0 = the first, largest round), then
 * alternates one forward and one backward, then drains the backwards. Why it cannot deadlock:
 * the last rank's backward of (chunk v-1, mb) needs only its own forward of it, (v-1)·g steps
 * earlier in its forward order, which the warm-up covers; and rank 0, waiting for the chunk
 * before it on rank P-1, is never waited on in return, because every round holds at least P
 * microbatches, more than the 2(P-1) steps by which rank 0 runs ahead of rank P-1. The
 * validator checks the lowered program for every shape the tests cover.
 *
 * Bubble time at zero comm cost with M a multiple of P is (P-1)(F+B+W)/v with F, B, W the costs
 * of one whole rank's model (per-chunk costs × v). */
#include "schedule/generators.h"

/* The round structure: R rounds, the first `big` of them of g+1 microbatches, the rest of g. */
typedef struct {
    int P, v, R, g, big;
} rounds_t;

static rounds_t make_rounds(int P, int v, int M)
{
    rounds_t x = {.P = P, .v = v, .R = M / P > 1 ? M / P : 1};
    x.g = M / x.R;
    x.big = M % x.R;
    return x;
}

/* Chunk and microbatch of the k-th forward (or backward) of a rank. */
static void virtual_mb(const rounds_t *x, int k, bool backward, int *chunk, int *mb)
{
    /* the first `big` rounds span v·(g+1) virtual steps each */
    long long big_span = (long long)x->big * x->v * (x->g + 1);
    int round, size, mb0;
    long long q;
    if (k < big_span) {
        size = x->g + 1;
        round = (int)(k / ((long long)x->v * size));
        q = k - (long long)round * x->v * size;
        mb0 = round * size;
    } else {
        size = x->g;
        long long k2 = k - big_span;
        int r2 = (int)(k2 / ((long long)x->v * size));
        round = x->big + r2;
        q = k2 - (long long)r2 * x->v * size;
        mb0 = x->big * (x->g + 1) + r2 * size;
    }
    (void)round;
    int c = (int)(q / size);
    *chunk = backward ? x->v - 1 - c : c;
    *mb = mb0 + (int)(q % size);
}

static zb_status_t push_virtual(zb_schedule_t *s, const rounds_t *x, int r, int k, bool backward,
                                zb_err_t *err)
{
    int chunk, mb;
    virtual_mb(x, k, backward, &chunk, &mb);
    return zb_gen_push(s, r, backward ? ZB_ACT_BW : ZB_ACT_F, chunk * s->ranks + r, mb, err);
}

zb_status_t zb_gen_interleaved(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    if (p->chunks == 1)
        return zb_err_set(err, ZB_EINVAL,
                          "interleaved-1f1b: chunks per rank (v) must be >= 2 (use 1f1b for v=1)");
    zb_schedule_t *s;
    zb_status_t st = zb_gen_begin("interleaved-1f1b", p, 2, 2, 64, ZB_PLACE_LOOP, &s, err);
    if (st != ZB_OK)
        return st;
    const int P = p->ranks, M = p->microbatches, v = s->chunks;
    if (M < P) {
        zb_schedule_free(s);
        return zb_err_set(err, ZB_EINVAL,
                          "interleaved-1f1b: microbatches (M) = %d must be at least ranks (P) = %d",
                          M, P);
    }
    const rounds_t x = make_rounds(P, v, M);
    const int g0 = x.big ? x.g + 1 : x.g;
    const int total = M * v;
    for (int r = 0; r < P && st == ZB_OK; r++) {
        long long warm = (long long)(v - 1) * g0 + 2LL * (P - 1 - r);
        if (warm > total)
            warm = total;
        int f = 0, b = 0;
        while (f < warm && st == ZB_OK)
            st = push_virtual(s, &x, r, f++, false, err);
        while (f < total && st == ZB_OK) {
            st = push_virtual(s, &x, r, f++, false, err);
            if (st == ZB_OK)
                st = push_virtual(s, &x, r, b++, true, err);
        }
        while (b < total && st == ZB_OK)
            st = push_virtual(s, &x, r, b++, true, err);
    }
    if (st != ZB_OK) {
        zb_schedule_free(s);
        return st;
    }
    *out = s;
    return ZB_OK;
}
