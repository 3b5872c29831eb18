/* interleaved-zb: interleaved 1F1B with the backward split into B and W (the idea of PyTorch's
 * ScheduleInterleavedZeroBubble / ZB-1P applied to Megatron's interleaving), loop placement,
 * v >= 2 chunks per rank.
 *
 * The F and B order is exactly interleaved-1f1b's (its fused BW becomes B); only the W's move.
 * The fixed-order greedy places them on the unit model (F = B = W = 1 per chunk, memory F +1,
 * B 0, W -1): a W fills an idle gap when it cannot delay the next F/B, and runs before an F
 * whenever that F would otherwise lift the rank above interleaved-1f1b's own peak. So the peak
 * equals interleaved 1F1B's and the W's deferred into the cool-down shrink its bubble. */
#include <stdio.h>
#include <string.h>

#include "schedule/auto_greedy.h"
#include "schedule/gen_v.h"
#include "schedule/generators.h"

zb_status_t zb_gen_interleaved_zb(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    zb_gen_params_t q = *p;
    q.costs = NULL;
    if (q.chunks == 0)
        q.chunks = 2;
    zb_schedule_t *base = NULL;
    zb_status_t st = zb_gen_interleaved(&q, &base, err);
    if (st != ZB_OK) {
        zb_schedule_free(base);
        /* keep the message, but name this family */
        if (err) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            zb_err_set(err, st, "interleaved-zb (from %s", msg);
            size_t n = strlen(err->msg);
            if (n + 1 < sizeof err->msg) {
                err->msg[n] = ')';
                err->msg[n + 1] = '\0';
            }
        }
        return st;
    }
    if (p->costs && p->costs->stages != base->stages) {
        zb_schedule_free(base);
        return zb_err_set(err, ZB_EINVAL,
                          "interleaved-zb: cost model has %d stages, schedule has v*P = %d",
                          p->costs->stages, base->stages);
    }
    zb_costs_t c;
    if ((st = zb_unit_costs(&c, base->stages, err)) != ZB_OK) {
        zb_schedule_free(base);
        return st;
    }
    zb_greedy_opts_t o = zb_greedy_defaults();
    o.fb_order = base;
    o.mem_cap = zb_schedule_peak_memory(base, &c, NULL);
    o.w_mode = ZB_WMODE_FILL;
    o.lookahead = true;
    st = zb_greedy_build("interleaved-zb", base->ranks, base->chunks, ZB_PLACE_LOOP,
                         base->microbatches, &c, &o, out, NULL, err);
    zb_costs_free(&c);
    zb_schedule_free(base);
    return st;
}
