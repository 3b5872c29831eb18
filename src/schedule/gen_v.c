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
 *  v-half : the greedy list scheduler under a cap of 2*floor((P+2)/2) chunk units (about half
 *           of 1F1B's 2P), the Controllable-Memory paper's V-Half budget.
 *  v-min  : a periodic construction. Microbatch m's forward chain runs without waiting, F of
 *           stage s at 6m + s; its backward chain starts delta later (delta = 0, or 2 when 3
 *           divides P, so that on every rank F0, F1, B1, B0 fall on four distinct slots mod 6);
 *           the two W's take the first free slots after their B's. Every rank repeats one
 *           microbatch per 6 slots, so a microbatch lives about 4P slots on rank 0 and the peak
 *           is about 2P/3 + 2 chunk units (1/3 of 1F1B), bubble about 2/3 of 1F1B's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

zb_status_t zb_gen_vhalf(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    zb_status_t st = pick_sized("v-half", p, out, err);
    if (st != ZB_OK)
        return st;
    const int P = p->ranks, M = p->microbatches;
    zb_costs_t c;
    if ((st = zb_unit_costs(&c, 2 * P, err)) != ZB_OK)
        return st;
    const double cap = 2.0 * ((P + 2) / 2);
    c.mem_limit = cap;
    zb_sweep_best_t best;
    zb_sweep_init(&best);
    best.by_span = true;
    zb_err_t e;
    st = zb_greedy_sweep("v-half", P, 2, ZB_PLACE_V, M, &c, cap, zb_sweep_budget(P, 2, M),
                         &best, &e);
    if (st != ZB_OK)
        zb_err_set(err, st, "v-half: %s", e.msg);
    zb_costs_free(&c);
    if (st == ZB_OK)
        st = finish("v-half", &best, out, err);
    zb_sweep_clear(&best);
    return st;
}

/* ---- v-min: the periodic construction ---- */

typedef struct {
    long t;   /* slot */
    int type; /* zb_action_type_t */
    int stage, mb;
} slot_t;

static int slot_cmp(const void *a, const void *b)
{
    const slot_t *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->type - y->type;
}

zb_status_t zb_gen_vmin(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    zb_status_t st = zb_gen_begin("v-min", p, 2, 2, 2, ZB_PLACE_V, out, err);
    if (st != ZB_OK)
        return st;
    const int P = p->ranks, M = p->microbatches;
    const long delta = (2 * P) % 6 == 0 ? 2 : 0;
    const long horizon = 6L * M + 4L * P + delta + 64;
    slot_t *acts = malloc(sizeof(slot_t) * 6 * (size_t)M);
    unsigned char *used = malloc((size_t)horizon);
    if (!acts || !used) {
        free(acts);
        free(used);
        return zb_err_set(err, ZB_ENOMEM, "v-min: out of memory");
    }
    for (int r = 0; r < P && st == ZB_OK; r++) {
        const int s0 = r, s1 = 2 * P - 1 - r;
        memset(used, 0, (size_t)horizon);
        int n = 0;
        for (int m = 0; m < M; m++) {
            long base = 6L * m;
            long tf0 = base + s0, tf1 = base + s1;
            long tb1 = base + 2L * P + delta + (2L * P - 1 - s1);
            long tb0 = base + 2L * P + delta + (2L * P - 1 - s0);
            acts[n++] = (slot_t){tf0, ZB_ACT_F, s0, m};
            acts[n++] = (slot_t){tf1, ZB_ACT_F, s1, m};
            acts[n++] = (slot_t){tb1, ZB_ACT_B, s1, m};
            acts[n++] = (slot_t){tb0, ZB_ACT_B, s0, m};
            used[tf0] = used[tf1] = used[tb1] = used[tb0] = 1;
        }
        /* W's: first free slot after their B (B1's W first: it is older). */
        for (int m = 0; m < M; m++) {
            long tb[2] = {acts[4 * m + 2].t, acts[4 * m + 3].t};
            int st_[2] = {s1, s0};
            for (int k = 0; k < 2; k++) {
                long t = tb[k] + 1;
                while (t < horizon - 1 && used[t])
                    t++;
                used[t] = 1;
                acts[n++] = (slot_t){t, ZB_ACT_W, st_[k], m};
            }
        }
        qsort(acts, (size_t)n, sizeof *acts, slot_cmp);
        for (int i = 0; i < n && st == ZB_OK; i++)
            st = zb_gen_push(*out, r, (zb_action_type_t)acts[i].type, acts[i].stage, acts[i].mb,
                             err);
    }
    free(acts);
    free(used);
    return st;
}
