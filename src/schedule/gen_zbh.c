/* ZB-H1 / ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024), one chunk, split
 * backward. Both are one rule with two parameters per rank r (stage r):
 *
 *   warm:  forwards before the first step (each step is F if any is left, then B, then W)
 *   delay: how many W's the rank keeps owing before it starts paying them (a W after a B only
 *          when more than `delay` are owed); the owed W's fill the tail.
 *
 *   ZB-H1: warm = P-1-r (1F1B's warm-up), delay = r. In-flight activations peak at P on every
 *          rank (1F1B's P·M_F); bubble time (P-1)(F+B-W) at zero comm cost.
 *   ZB-H2: warm = 2(P-1-r), delay = 2r: rank r runs 2(P-1-r)+1 forwards before its first B,
 *          filling the head bubble; peak 2P-1 on every rank; bubble (P-1)(F+B-2W), clamped at 0.
 *
 * The closed forms are exact (checked over a grid by tests/test_schedule_gen.c) for M >= P (H1)
 * and M >= 2P-1 (H2) whenever W <= F. If W > F no order can reach them under these memory
 * caps: rank 0 sits idle before its first B for at least (P-1)·B (H1) or (P-1)(B-F) (H2).
 * Smaller M is supported and valid; peaks are then capped at M. The order never depends on
 * costs. */
#include "schedule/generators.h"

/* One rank's program for a split-backward 1F1B-like schedule on stage r:
 * `warm` forwards, then steps of (F if any left, B, W if more than `delay` W's are owed),
 * then the owed W's. */
static zb_status_t emit_rank(zb_schedule_t *s, int r, int warm, int delay, zb_err_t *err)
{
    const int M = s->microbatches;
    int f = 0, b = 0, w = 0;
    zb_status_t st = ZB_OK;
    if (warm > M)
        warm = M;
    while (f < warm && st == ZB_OK)
        st = zb_gen_push(s, r, ZB_ACT_F, r, f++, err);
    while (b < M && st == ZB_OK) {
        if (f < M)
            st = zb_gen_push(s, r, ZB_ACT_F, r, f++, err);
        if (st == ZB_OK)
            st = zb_gen_push(s, r, ZB_ACT_B, r, b++, err);
        if (st == ZB_OK && b - w > delay)
            st = zb_gen_push(s, r, ZB_ACT_W, r, w++, err);
    }
    while (w < M && st == ZB_OK)
        st = zb_gen_push(s, r, ZB_ACT_W, r, w++, err);
    return st;
}

static zb_status_t build(const char *family, zb_gen_params_t *p, bool h2, zb_schedule_t **out,
                         zb_err_t *err)
{
    zb_schedule_t *s;
    zb_status_t st = zb_gen_begin(family, p, 1, 1, 1, ZB_PLACE_LOOP, &s, err);
    if (st != ZB_OK)
        return st;
    const int P = p->ranks;
    for (int r = 0; r < P && st == ZB_OK; r++) {
        int warm = h2 ? 2 * (P - 1 - r) : P - 1 - r;
        int delay = h2 ? 2 * r : r;
        st = emit_rank(s, r, warm, delay, err);
    }
    if (st != ZB_OK) {
        zb_schedule_free(s);
        return st;
    }
    *out = s;
    return ZB_OK;
}

zb_status_t zb_gen_zbh1(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    return build("zb-h1", p, false, out, err);
}

zb_status_t zb_gen_zbh2(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    return build("zb-h2", p, true, out, err);
}
