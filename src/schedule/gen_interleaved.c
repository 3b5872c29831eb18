/* Interleaved 1F1B (Narayanan et al., Megatron-LM, SC'21): each rank holds v >= 2 chunks under
 * loop placement (stage c·P + r on rank r), fused backward.
 *
 * Virtual microbatch k on a rank (k = 0 .. v·M-1) walks groups of P microbatches through the
 * chunks: within a group of P·v, chunk = (k mod P·v) / P and microbatch = group·P + k mod P;
 * backwards visit the chunks in reverse. Rank r runs 2(P-1-r) + (v-1)P warm-up forwards, then
 * alternates one forward and one backward, then drains. Requires M to be a multiple of P (the
 * original Megatron constraint: groups of P microbatches). Bubble time at zero comm cost is
 * (P-1)(F+B+W)/v with F, B, W the costs of one whole rank's model (per-chunk costs × v). */
#include "schedule/generators.h"

static void virtual_mb(int k, int P, int v, bool backward, int *chunk, int *mb)
{
    int in_group = k % (P * v);
    int c = in_group / P;
    *chunk = backward ? v - 1 - c : c;
    *mb = (k / (P * v)) * P + in_group % P;
}

static zb_status_t push_virtual(zb_schedule_t *s, int r, int k, bool backward, zb_err_t *err)
{
    int chunk, mb;
    virtual_mb(k, s->ranks, s->chunks, backward, &chunk, &mb);
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
    if (M % P != 0) {
        zb_schedule_free(s);
        return zb_err_set(err, ZB_EINVAL,
                          "interleaved-1f1b: microbatches (M) = %d must be a multiple of ranks "
                          "(P) = %d",
                          M, P);
    }
    const int total = M * v;
    for (int r = 0; r < P && st == ZB_OK; r++) {
        int warm = 2 * (P - 1 - r) + (v - 1) * P;
        if (warm > total)
            warm = total;
        int f = 0, b = 0;
        while (f < warm && st == ZB_OK)
            st = push_virtual(s, r, f++, false, err);
        while (f < total && st == ZB_OK) {
            st = push_virtual(s, r, f++, false, err);
            if (st == ZB_OK)
                st = push_virtual(s, r, b++, true, err);
        }
        while (b < total && st == ZB_OK)
            st = push_virtual(s, r, b++, true, err);
    }
    if (st != ZB_OK) {
        zb_schedule_free(s);
        return st;
    }
    *out = s;
    return ZB_OK;
}
