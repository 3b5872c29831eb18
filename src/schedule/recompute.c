/* The recompute pass: turn chosen (stage, mb) pairs into non-saving F + R before the backward.
 *
 * The R goes immediately before the B/BW, or before the RECV_B feeding it in a lowered program:
 * the rank then recomputes while the gradient is on its way, which is where the simulator (R
 * ready when its F is done) and the runtime (RECV_B blocks) place the idle time anyway. */
#include "zbpp/schedule.h"

#include <stdlib.h>
#include <string.h>

const char *zb_recompute_name(zb_recompute_t r)
{
    switch (r) {
    case ZB_RECOMPUTE_NONE: return "none";
    case ZB_RECOMPUTE_ALL: return "all";
    case ZB_RECOMPUTE_AUTO: return "auto";
    }
    return "?";
}

zb_status_t zb_recompute_parse(const char *s, zb_recompute_t *out, zb_err_t *err)
{
    for (int r = ZB_RECOMPUTE_NONE; r <= ZB_RECOMPUTE_AUTO; r++)
        if (s && !strcmp(s, zb_recompute_name((zb_recompute_t)r))) {
            *out = (zb_recompute_t)r;
            return ZB_OK;
        }
    return zb_err_set(err, ZB_EINVAL, "--recompute expects none, all or auto, got '%s'",
                      s ? s : "(null)");
}

/* Index of the compute action before i on the rank (comms skipped), -1 if none. */
static int prev_compute(const zb_rank_program_t *p, int i)
{
    while (--i >= 0)
        if (zb_action_is_compute(p->actions[i].type))
            return i;
    return -1;
}

/* Whether (stage, mb), whose backward is action i of rank program p, gets an R. Chosen
 * explicitly by `which`; with which == NULL every pair except one whose backward directly follows
 * its own F (nothing would run in between, so recomputing would only cost time). */
static bool chosen(const zb_schedule_t *s, const zb_rank_program_t *p, int i, const bool *which)
{
    const zb_action_t *a = &p->actions[i];
    if (which)
        return which[(size_t)a->stage * (size_t)s->microbatches + (size_t)a->mb];
    int j = prev_compute(p, i);
    return !(j >= 0 && p->actions[j].type == ZB_ACT_F && p->actions[j].stage == a->stage &&
             p->actions[j].mb == a->mb);
}

zb_status_t zb_add_recompute(const zb_schedule_t *in, const bool *which, zb_schedule_t **out,
                             zb_err_t *err)
{
    *out = NULL;
    if (!in)
        return zb_err_set(err, ZB_EINVAL, "recompute: NULL schedule");
    if (zb_schedule_has_recompute(in))
        return zb_err_set(err, ZB_EINVAL, "recompute: the schedule already has R actions");
    zb_schedule_t *o = zb_schedule_new(in->name, in->ranks, in->chunks, in->placement,
                                       in->microbatches);
    if (!o)
        return zb_err_set(err, ZB_ENOMEM, "recompute: out of memory");
    for (int r = 0; r < in->ranks; r++) {
        const zb_rank_program_t *p = &in->rank[r];
        for (int i = 0; i < p->len; i++) {
            const zb_action_t *a = &p->actions[i];
            bool back = a->type == ZB_ACT_B || a->type == ZB_ACT_BW;
            /* a RECV_B feeding the next action's backward takes the R in front of it */
            bool recv_before_back = a->type == ZB_ACT_RECV_B && i + 1 < p->len &&
                                    (p->actions[i + 1].type == ZB_ACT_B ||
                                     p->actions[i + 1].type == ZB_ACT_BW) &&
                                    p->actions[i + 1].stage == a->stage &&
                                    p->actions[i + 1].mb == a->mb;
            bool after_recv = back && i > 0 && p->actions[i - 1].type == ZB_ACT_RECV_B &&
                              p->actions[i - 1].stage == a->stage &&
                              p->actions[i - 1].mb == a->mb;
            int bi = recv_before_back ? i + 1 : i; /* the backward's index */
            if (((back && !after_recv) || recv_before_back) && a->stage >= 0 &&
                a->stage < in->stages && a->mb >= 0 && a->mb < in->microbatches &&
                chosen(in, p, bi, which)) {
                zb_action_t rc = {.type = ZB_ACT_R, .stage = a->stage, .mb = a->mb};
                if (zb_schedule_push(o, r, rc) != ZB_OK)
                    goto oom;
            }
            if (zb_schedule_push(o, r, *a) != ZB_OK)
                goto oom;
        }
    }
    zb_status_t st = zb_schedule_mark_recompute(o, err);
    if (st != ZB_OK) {
        zb_schedule_free(o);
        return st;
    }
    *out = o;
    return ZB_OK;
oom:
    zb_schedule_free(o);
    return zb_err_set(err, ZB_ENOMEM, "recompute: out of memory");
}
