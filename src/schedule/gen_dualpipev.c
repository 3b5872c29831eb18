/* DualPipeV (DeepSeek-V3's DualPipe folded into a V): V placement, 2 chunks per rank.
 *
 * Rank r holds stage r ("chunk 0") and stage 2P-1-r ("chunk 1"). Its program, for M >= 2P:
 *   1. F0 x 2(P-r-1)                      warm-up on chunk 0
 *   2. (F0 F1) x (r+1)                    the first microbatches turn the V
 *   3. (B1 W1 F1) x (P-r-1)               first backwards, W right away (memory)
 *   4. (F0 B1W1 F1 B0W0) x (M-2P+r+1)     steady state: forward of one chunk paired with the
 *                                         backward of the other (DualPipe overlaps each pair)
 *   5. (B1W1 F1 B0W0) x (P-r-1)           forwards run out
 *   6. (B1 B0) x (r+1)                    cool-down: W's deferred ("zero bubble" half)
 *   7. (W B0) x (P-r-1)                   one deferred W before each remaining B0
 *   8. remaining W's, oldest first
 * Steps 1-5 keep 1F1B-V memory; 6-8 split B/W so the deferred W's fill the cool-down bubbles.
 * The F/B order alone (W's dropped) is also the template of zb-v (gen_v.c). */
#include "schedule/gen_v.h"

#include "schedule/generators.h"

typedef struct {
    zb_schedule_t *s;
    int r, P, M;
    int next[4];       /* next mb of F0, F1, B0, B1 on this rank */
    int wq[4096 * 2];  /* deferred W's: (chunk, mb) packed as mb*2+chunk */
    int wq_head, wq_tail;
    bool with_w;
    bool bfirst; /* steady state B1 F0 B0 F1 instead of F0 B1 F1 B0 */
    zb_err_t *err;
} vbuild_t;

static int stage_of(const vbuild_t *b, int chunk) { return chunk == 0 ? b->r : 2 * b->P - 1 - b->r; }

static zb_status_t emit_f(vbuild_t *b, int chunk)
{
    int m = b->next[chunk]++;
    return zb_gen_push(b->s, b->r, ZB_ACT_F, stage_of(b, chunk), m, b->err);
}

/* B of a chunk; W right after it (now_w), or deferred to the queue. */
static zb_status_t emit_b(vbuild_t *b, int chunk, bool now_w)
{
    int m = b->next[2 + chunk]++;
    zb_status_t st = zb_gen_push(b->s, b->r, ZB_ACT_B, stage_of(b, chunk), m, b->err);
    if (st != ZB_OK || !b->with_w)
        return st;
    if (now_w)
        return zb_gen_push(b->s, b->r, ZB_ACT_W, stage_of(b, chunk), m, b->err);
    b->wq[b->wq_tail++] = m * 2 + chunk;
    return ZB_OK;
}

static zb_status_t emit_deferred_w(vbuild_t *b)
{
    if (!b->with_w || b->wq_head == b->wq_tail)
        return ZB_OK;
    int item = b->wq[b->wq_head++];
    return zb_gen_push(b->s, b->r, ZB_ACT_W, stage_of(b, item % 2), item / 2, b->err);
}

#define TRY(x)                                                                                    \
    do {                                                                                          \
        zb_status_t st_ = (x);                                                                    \
        if (st_ != ZB_OK)                                                                         \
            return st_;                                                                           \
    } while (0)

static zb_status_t build_rank(vbuild_t *b, int cut)
{
    const int P = b->P, r = b->r, M = b->M;
    /* `cut` warm-up F0's fewer move into the steady state (one fewer pass of step 5) */
    int warm = 2 * (P - r - 1), removed = cut < warm ? cut : warm;
    for (int i = 0; i < warm - removed; i++)
        TRY(emit_f(b, 0));
    for (int i = 0; i < r + 1; i++) {
        TRY(emit_f(b, 0));
        TRY(emit_f(b, 1));
    }
    for (int i = 0; i < P - r - 1; i++) {
        TRY(emit_b(b, 1, true));
        TRY(emit_f(b, 1));
    }
    for (int i = 0; i < M - 2 * P + r + 1 + removed; i++) {
        if (b->bfirst) {
            TRY(emit_b(b, 1, true));
            TRY(emit_f(b, 0));
            TRY(emit_b(b, 0, true));
            TRY(emit_f(b, 1));
        } else {
            TRY(emit_f(b, 0));
            TRY(emit_b(b, 1, true));
            TRY(emit_f(b, 1));
            TRY(emit_b(b, 0, true));
        }
    }
    for (int i = 0; i < P - r - 1 - removed; i++) {
        TRY(emit_b(b, 1, true));
        TRY(emit_f(b, 1));
        TRY(emit_b(b, 0, true));
    }
    for (int i = 0; i < r + 1; i++) {
        TRY(emit_b(b, 1, false));
        TRY(emit_b(b, 0, false));
    }
    for (int i = 0; i < P - r - 1; i++) {
        TRY(emit_deferred_w(b));
        TRY(emit_b(b, 0, false));
    }
    while (b->wq_head < b->wq_tail)
        TRY(emit_deferred_w(b));
    return ZB_OK;
}

zb_status_t zb_v_template(zb_schedule_t *s, bool with_w, int cut, zb_err_t *err)
{
    if (s->placement != ZB_PLACE_V || s->microbatches < 2 * s->ranks)
        return zb_err_set(err, ZB_EINVAL, "%s: needs V placement and M >= 2P (P=%d, M=%d)",
                          s->name, s->ranks, s->microbatches);
    for (int r = 0; r < s->ranks; r++) {
        vbuild_t b = {.s = s, .r = r, .P = s->ranks, .M = s->microbatches, .with_w = with_w,
                      .bfirst = cut < 0, .err = err};
        TRY(build_rank(&b, cut < 0 ? -cut - 1 : cut));
    }
    return ZB_OK;
}

zb_status_t zb_gen_dualpipev(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    if (p->microbatches < 2 * p->ranks)
        return zb_err_set(err, ZB_EINVAL, "dualpipev: needs M >= 2P (P=%d, M=%d)", p->ranks,
                          p->microbatches);
    TRY(zb_gen_begin("dualpipev", p, 2, 2, 2, ZB_PLACE_V, out, err));
    if (p->ranks > 4096)
        return zb_err_set(err, ZB_EINVAL, "dualpipev: P=%d too large (max 4096)", p->ranks);
    return zb_v_template(*out, true, 0, err);
}
