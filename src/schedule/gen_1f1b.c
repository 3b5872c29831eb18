/* 1F1B (PipeDream-flush): rank r runs min(P-1-r, M) warm-up forwards, then alternates one forward
 * and one fused backward, then drains the remaining backwards. At most P-r microbatches are in
 * flight on rank r, so the peak is min(P, M)·M_F on rank 0. */
#include "schedule/generators.h"

zb_status_t zb_gen_1f1b(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    zb_schedule_t *s;
    zb_status_t st = zb_gen_begin("1f1b", p, 1, 1, 1, ZB_PLACE_LOOP, &s, err);
    if (st != ZB_OK)
        return st;
    const int P = p->ranks, M = p->microbatches;
    for (int r = 0; r < P && st == ZB_OK; r++) {
        int warm = P - 1 - r < M ? P - 1 - r : M;
        int f = 0, b = 0;
        while (f < warm && st == ZB_OK)
            st = zb_gen_push(s, r, ZB_ACT_F, r, f++, err);
        while (f < M && st == ZB_OK) {
            st = zb_gen_push(s, r, ZB_ACT_F, r, f++, err);
            if (st == ZB_OK)
                st = zb_gen_push(s, r, ZB_ACT_BW, r, b++, err);
        }
        while (b < M && st == ZB_OK)
            st = zb_gen_push(s, r, ZB_ACT_BW, r, b++, err);
    }
    if (st != ZB_OK) {
        zb_schedule_free(s);
        return st;
    }
    *out = s;
    return ZB_OK;
}
