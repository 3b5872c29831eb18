/* GPipe: every rank runs all M forwards, then all M fused backwards (mb order).
 * Peak activation memory is M·M_F; bubble time (P-1)(F+B+W) at zero comm cost. */
#include "schedule/generators.h"

zb_status_t zb_gen_gpipe(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    zb_schedule_t *s;
    zb_status_t st = zb_gen_begin("gpipe", p, 1, 1, 1, ZB_PLACE_LOOP, &s, err);
    if (st != ZB_OK)
        return st;
    for (int r = 0; r < p->ranks && st == ZB_OK; r++) {
        for (int m = 0; m < p->microbatches && st == ZB_OK; m++)
            st = zb_gen_push(s, r, ZB_ACT_F, r, m, err);
        for (int m = 0; m < p->microbatches && st == ZB_OK; m++)
            st = zb_gen_push(s, r, ZB_ACT_BW, r, m, err);
    }
    if (st != ZB_OK) {
        zb_schedule_free(s);
        return st;
    }
    *out = s;
    return ZB_OK;
}
