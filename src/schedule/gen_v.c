/* V-shaped schedules with controllable memory (V placement, 2 chunks): v-half, v-min here,
 * zb-v in gen_zbv.c.
 *
 * Units: one "chunk unit" is the activation memory of one F of one chunk (M_F of a stage here);
 * 1F1B over the same model (one stage per rank = 2 chunks) peaks at P microbatches = 2P chunk
 * units. The constructions use the unit model F = B = W = 1, no comm, memory F +1, B 0, W -1
 * (activations held until W, the most conservative split) and are then just action orders: any
 * cost model can simulate them.
 *
 *  zb-v   : see gen_zbv.c (exactly zero bubble at 2P chunk units).
 *  v-half : the periodic building block of gen_v_pattern.c, one microbatch per 6 slots with
 *           offsets that keep about P + 2 chunk units alive (at most ceil(P/2)+1 microbatches,
 *           about half of 1F1B's memory), squeezed at both ends.
 *  v-min  : the same with the tighter block (about 2P/3 + 2 chunk units, a third of 1F1B's).
 * Both reproduce the Controllable-Memory paper's own V-Half/V-Min greedy slot for slot (checked
 * against it on P 4..16, M P..8P: same order, same bubble, same peak); below 2P microbatches the
 * greedy sweep is tried as well under the same peak and kept when better. */
#include <stdio.h>

#include "schedule/auto_sweep.h"
#include "schedule/gen_v.h"
#include "schedule/generators.h"

static zb_status_t pick_sized(const char *family, zb_gen_params_t *p, zb_schedule_t **out,
                              zb_err_t *err)
{
    zb_status_t st = zb_gen_begin(family, p, 2, 2, 2, ZB_PLACE_V, out, err);
    if (st == ZB_OK) {
        zb_schedule_free(*out); /* only the checks were wanted; the builders allocate */
        *out = NULL;
    }
    return st;
}

/* Keep the best (unit-cost) schedule under `cap`; rename it `family`. */
static zb_status_t finish(const char *family, zb_sweep_best_t *best, zb_schedule_t **out,
                          zb_err_t *err)
{
    if (!best->s)
        return zb_err_set(err, ZB_ESCHEDULE, "%s: no construction met its memory budget",
                          family);
    *out = best->s;
    best->s = NULL;
    snprintf((*out)->name, sizeof (*out)->name, "%s", family);
    return ZB_OK;
}

/* The periodic construction, peak memory of its order under the unit model (chunk units). */
static zb_status_t build_pattern(const char *family, bool half, zb_gen_params_t *p,
                                 const zb_costs_t *unit, zb_schedule_t **out, double *peak,
                                 zb_err_t *err)
{
    zb_status_t st = zb_gen_begin(family, p, 2, 2, 2, ZB_PLACE_V, out, err);
    if (st == ZB_OK)
        st = zb_v_pattern(*out, half, err);
    if (st != ZB_OK) {
        zb_schedule_free(*out);
        *out = NULL;
        return st;
    }
    *peak = zb_schedule_peak_memory(*out, unit, NULL);
    return ZB_OK;
}

/* v-half and v-min: the periodic construction. With fewer than 2P microbatches its warm-up and
 * cool-down dominate and the greedy sweep, run under the construction's own peak, sometimes
 * does better (P=4 M=4 v-half: 0.226 against 0.294); the smaller bubble (max span, unit costs)
 * is kept. From 2P on the sweep never won on P 4..16, M up to 8P, and would cost up to a second. */
static zb_status_t gen_controllable(const char *family, bool half, zb_gen_params_t *p,
                                    zb_schedule_t **out, zb_err_t *err)
{
    zb_status_t st = pick_sized(family, p, out, err);
    if (st != ZB_OK)
        return st;
    const int P = p->ranks, M = p->microbatches;
    zb_costs_t c;
    if ((st = zb_unit_costs(&c, 2 * P, err)) != ZB_OK)
        return st;
    zb_schedule_t *pattern = NULL;
    double cap = 0;
    zb_sweep_best_t best;
    zb_sweep_init(&best);
    best.by_span = true;
    st = build_pattern(family, half, p, &c, &pattern, &cap, err);
    if (st == ZB_OK) {
        c.mem_limit = cap;
        zb_sweep_offer(&best, pattern, &c, cap, "periodic building block, squeezed");
        if (M < 2 * P) {
            zb_err_t e;
            st = zb_greedy_sweep(family, P, 2, ZB_PLACE_V, M, &c, cap,
                                 zb_sweep_budget(P, 2, M), &best, &e);
            if (st != ZB_OK && st != ZB_ENOMEM)
                st = ZB_OK; /* the construction stands on its own */
            else if (st == ZB_ENOMEM)
                zb_err_set(err, st, "%s: %s", family, e.msg);
        }
    }
    zb_costs_free(&c);
    if (st == ZB_OK)
        st = finish(family, &best, out, err);
    zb_sweep_clear(&best);
    return st;
}

zb_status_t zb_gen_vhalf(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    return gen_controllable("v-half", true, p, out, err);
}

zb_status_t zb_gen_vmin(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    return gen_controllable("v-min", false, p, out, err);
}
