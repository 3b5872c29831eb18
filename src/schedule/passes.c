/* The comm pass: lower a compute-only schedule by inserting SEND/RECV actions, and its inverse.
 * RECVs are placed immediately before their consumer and SENDs immediately after their producer:
 * the simplest placement that is always deadlock-free when the compute order is. */
#include "zbpp/schedule.h"

#include <stdlib.h>

#include "schedule/sched_index.h"

/* Which comm actions surround compute action `a` on its rank: before (RECV) and after (SEND).
 * Writes up to one action to each; returns flags bit0 = before, bit1 = after. */
static int comms_for(const zb_schedule_t *s, const zb_action_t *a, zb_action_t *before,
                     zb_action_t *after)
{
    const int st = a->stage, r = zb_stage_rank(s, st);
    int flags = 0;
    switch (a->type) {
    case ZB_ACT_F:
        if (st > 0 && zb_stage_rank(s, st - 1) != r) {
            *before = (zb_action_t){.type = ZB_ACT_RECV_F, .stage = st, .mb = a->mb};
            flags |= 1;
        }
        if (st + 1 < s->stages && zb_stage_rank(s, st + 1) != r) {
            *after = (zb_action_t){.type = ZB_ACT_SEND_F, .stage = st, .mb = a->mb};
            flags |= 2;
        }
        break;
    case ZB_ACT_B:
    case ZB_ACT_BW:
        if (st + 1 < s->stages && zb_stage_rank(s, st + 1) != r) {
            *before = (zb_action_t){.type = ZB_ACT_RECV_B, .stage = st, .mb = a->mb};
            flags |= 1;
        }
        if (st > 0 && zb_stage_rank(s, st - 1) != r) {
            *after = (zb_action_t){.type = ZB_ACT_SEND_B, .stage = st, .mb = a->mb};
            flags |= 2;
        }
        break;
    default:
        break;
    }
    return flags;
}

static zb_status_t copy_filtered(const zb_schedule_t *in, zb_schedule_t **out, bool lower,
                                 const char *who, zb_err_t *err)
{
    *out = NULL;
    zb_schedule_t *o = zb_schedule_new(in->name, in->ranks, in->chunks, in->placement,
                                       in->microbatches);
    if (!o)
        return zb_err_set(err, ZB_ENOMEM, "%s: out of memory", who);
    for (int r = 0; r < in->ranks; r++) {
        const zb_rank_program_t *p = &in->rank[r];
        /* Size the output program exactly, then fill it: one allocation per rank. */
        size_t need = 0;
        zb_action_t before, after;
        for (int i = 0; i < p->len; i++) {
            const zb_action_t *a = &p->actions[i];
            if (zb_action_is_comm(a->type))
                continue;
            need++;
            if (lower) {
                int fl = comms_for(in, a, &before, &after);
                need += (size_t)(fl & 1) + (size_t)((fl >> 1) & 1);
            }
        }
        if (need > (size_t)1 << 30) {
            zb_schedule_free(o);
            return zb_err_set(err, ZB_EINVAL, "%s: rank %d would hold too many actions", who, r);
        }
        zb_rank_program_t *q = &o->rank[r];
        q->actions = malloc((need ? need : 1) * sizeof *q->actions);
        if (!q->actions) {
            zb_schedule_free(o);
            return zb_err_set(err, ZB_ENOMEM, "%s: out of memory", who);
        }
        q->cap = (int)(need ? need : 1);
        for (int i = 0; i < p->len; i++) {
            const zb_action_t *a = &p->actions[i];
            if (zb_action_is_comm(a->type))
                continue;
            int fl = lower ? comms_for(in, a, &before, &after) : 0;
            if (fl & 1)
                q->actions[q->len++] = before;
            q->actions[q->len++] = *a;
            if (fl & 2)
                q->actions[q->len++] = after;
        }
    }
    *out = o;
    return ZB_OK;
}

zb_status_t zb_insert_comms(const zb_schedule_t *in, zb_schedule_t **out, zb_err_t *err)
{
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "insert comms: NULL output");
    *out = NULL;
    if (!in)
        return zb_err_set(err, ZB_EINVAL, "insert comms: NULL schedule");
    zb_status_t st = zb_sched_check_actions(in, "insert comms", err);
    if (st != ZB_OK)
        return st;
    if (zb_schedule_has_comms(in))
        return zb_err_set(err, ZB_EINVAL,
                          "insert comms: schedule '%s' already has SEND/RECV actions (strip them "
                          "first)",
                          in->name);
    return copy_filtered(in, out, true, "insert comms", err);
}

zb_status_t zb_strip_comms(const zb_schedule_t *in, zb_schedule_t **out, zb_err_t *err)
{
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "strip comms: NULL output");
    *out = NULL;
    if (!in)
        return zb_err_set(err, ZB_EINVAL, "strip comms: NULL schedule");
    if (in->ranks < 1 || !in->rank)
        return zb_err_set(err, ZB_ESCHEDULE, "strip comms: malformed schedule header");
    return copy_filtered(in, out, false, "strip comms", err);
}
