/* Structural checks shared by the validator, simulator and comm pass. */
#include "schedule/sched_index.h"

/* zb_stage_rank for a stage known to be in range (the check runs on every action of every
 * schedule the planners simulate, so it is kept to a few instructions per action). */
static inline int owner_of(const zb_schedule_t *s, int stage)
{
    if (s->placement == ZB_PLACE_V)
        return stage < s->ranks ? stage : 2 * s->ranks - 1 - stage;
    return stage % s->ranks;
}

zb_status_t zb_sched_check_actions(const zb_schedule_t *s, const char *who, zb_err_t *err)
{
    if (!s || s->ranks < 1 || s->chunks < 1 || s->stages != s->ranks * s->chunks ||
        s->microbatches < 1 || !s->rank)
        return zb_err_set(err, ZB_ESCHEDULE, "%s: malformed schedule header", who);
    for (int r = 0; r < s->ranks; r++) {
        const zb_rank_program_t *p = &s->rank[r];
        if (p->len < 0 || (p->len > 0 && !p->actions))
            return zb_err_set(err, ZB_ESCHEDULE, "%s: rank %d: malformed action list", who, r);
        for (int i = 0; i < p->len; i++) {
            const zb_action_t *a = &p->actions[i];
            if (a->type >= ZB_ACT_COUNT)
                return zb_err_set(err, ZB_ESCHEDULE, "%s: rank %d action %d: unknown type %d",
                                  who, r, i, a->type);
            if (a->stage < 0 || a->stage >= s->stages)
                return zb_err_set(err, ZB_ESCHEDULE,
                                  "%s: rank %d action %d: %s stage %d out of range 0..%d", who, r,
                                  i, zb_action_type_name(a->type), a->stage, s->stages - 1);
            if (a->mb < 0 || a->mb >= s->microbatches)
                return zb_err_set(err, ZB_ESCHEDULE,
                                  "%s: rank %d action %d: %s(stage %d) microbatch %d out of range "
                                  "0..%d",
                                  who, r, i, zb_action_type_name(a->type), a->stage, a->mb, s->microbatches - 1);
            int owner = owner_of(s, a->stage);
            if (owner != r)
                return zb_err_set(err, ZB_ESCHEDULE,
                                  "%s: %s(stage %d, mb %d) is on rank %d but stage %d belongs to "
                                  "rank %d",
                                  who, zb_action_type_name(a->type), a->stage, a->mb, r, a->stage, owner);
            bool bad_end = (a->type == ZB_ACT_SEND_F && a->stage == s->stages - 1) ||
                           (a->type == ZB_ACT_RECV_B && a->stage == s->stages - 1) ||
                           (a->type == ZB_ACT_SEND_B && a->stage == 0) ||
                           (a->type == ZB_ACT_RECV_F && a->stage == 0);
            if (bad_end)
                return zb_err_set(err, ZB_ESCHEDULE,
                                  "%s: rank %d action %d: %s(stage %d, mb %d) has no peer stage",
                                  who, r, i, zb_action_type_name(a->type), a->stage, a->mb);
        }
    }
    return ZB_OK;
}
