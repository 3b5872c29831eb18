/* ZB-H1 / ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024). */
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
