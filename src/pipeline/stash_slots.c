/* zbpp — a stage's stash slots by lifetime, the bookkeeping shared by the host and GPU pools.
 *
 * A (stage, microbatch)'s stash has three lifetime parts: FW (kept from F until W), FB (kept
 * from F until B only) and BW (written by B, read by W). One whole stash per microbatch in
 * flight (F..W) would give every microbatch between B and W room for FB it no longer needs,
 * and every microbatch between F and B room for BW it does not need yet. So each part has its
 * own slots, as many as the rank's program ever holds at once (pl_stash_plan):
 *   F / R : takes an FW and an FB slot       (a non-saving F gives both back after it)
 *   B     : takes a BW slot, gives FB back after it
 *   W     : gives FW and BW back after it
 *   BW    : takes a BW slot, gives all three back after it
 *   O     : gives FW and FB back after it (the stash is in host memory until its L), or
 *           later: before the action its release names (the first to start after the copy
 *           ends in the plan's simulation), or its own L's (stash_slots.h)
 *   L     : takes an FW and an FB slot again (the B after it finds the stash there)
 * A slot given back is taken by the next action that needs one, in program order: on a GPU the
 * rank's one stream runs its actions in that order, so the next user's writes follow the last
 * reads (and an O's, by an event). Giving an O's slots back at the O let the next forward take
 * them at once and wait on the device for the download (H100, 2026-11-28: zb-h1 --offload
 * all's forwards ran a copy apart); later, they are free when it comes, as the simulator
 * assumes. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/stash_slots.h"

/* How many slots of each region action a takes before it runs and gives back after it. */
static void action_slots(const zb_action_t *a, int take[3], int give[3])
{
    for (int k = 0; k < 3; k++)
        take[k] = give[k] = 0;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_F:
    case ZB_ACT_R:
        take[PL_FW] = take[PL_FB] = 1;
        if (a->type == ZB_ACT_F && (a->flags & ZB_ACT_NOSAVE))
            give[PL_FW] = give[PL_FB] = 1;
        break;
    case ZB_ACT_B: take[PL_BW] = 1, give[PL_FB] = 1; break;
    case ZB_ACT_W: give[PL_FW] = give[PL_BW] = 1; break;
    case ZB_ACT_BW: take[PL_BW] = 1, give[PL_FW] = give[PL_FB] = give[PL_BW] = 1; break;
    case ZB_ACT_O: give[PL_FW] = give[PL_FB] = 1; break;
    case ZB_ACT_L: take[PL_FW] = take[PL_FB] = 1; break;
    default: break;
    }
}

/* Whether microbatch mb's O gives its slots back later than at the O. */
static bool deferred(const int *release, int mb)
{
    return release && release[mb] != PL_RELEASE_AT_O;
}

/* Whether action a is where microbatch m's deferred O slots go back: the action its release
 * names, or m's own L. */
static bool releases(const int *release, int m, const zb_action_t *a)
{
    return release[m] == pl_release_key(a->type, a->mb) || (a->type == ZB_ACT_L && a->mb == m);
}

void pl_stash_plan(const zb_rank_program_t *prog, int stage, int M, const int *release,
                   int n[3])
{
    int now[3] = {0, 0, 0};
    n[PL_FW] = n[PL_FB] = n[PL_BW] = 0;
    unsigned char *pending = release ? calloc((size_t)M + 1, 1) : NULL;
    if (!pending)
        release = NULL; /* no room to follow them: every O's at the O */
    for (int i = 0; i < prog->len; i++) {
        const zb_action_t *a = &prog->actions[i];
        if (a->stage != stage || a->mb < 0 || a->mb >= M)
            continue;
        for (int m = 0; release && m < M; m++)
            if (pending[m] && releases(release, m, a)) {
                pending[m] = 0;
                now[PL_FW]--, now[PL_FB]--;
            }
        int take[3], give[3];
        action_slots(a, take, give);
        if (a->type == ZB_ACT_O && deferred(release, a->mb)) {
            give[PL_FW] = give[PL_FB] = 0;
            pending[a->mb] = 1;
        }
        for (int k = 0; k < 3; k++) {
            now[k] += take[k];
            if (now[k] > n[k])
                n[k] = now[k];
            now[k] -= give[k];
        }
    }
    free(pending);
    if (n[PL_FW] < 1)
        n[PL_FW] = 1;
    if (n[PL_FB] < 1)
        n[PL_FB] = 1;
}

zb_status_t pl_stash_slots_init(pl_stash_slots_t *s, const zb_rank_program_t *prog, int stage,
                                int M, const int *release, zb_err_t *err)
{
    memset(s, 0, sizeof *s);
    s->M = M;
    if (release) {
        if (!(s->release = malloc((size_t)M * sizeof(int) + 1)))
            return zb_err_set(err, ZB_ENOMEM, "out of memory for a stage's stash slots");
        memcpy(s->release, release, (size_t)M * sizeof(int));
        for (int k = 0; k < 2; k++)
            if (!(s->pending[k] = malloc((size_t)M * sizeof(int) + 1)))
                return zb_err_set(err, ZB_ENOMEM, "out of memory for a stage's stash slots");
    }
    pl_stash_plan(prog, stage, M, s->release, s->n);
    for (int k = 0; k < 3; k++) {
        s->owner[k] = malloc((size_t)s->n[k] * sizeof(int) + 1);
        s->slot[k] = malloc((size_t)M * sizeof(int) + 1);
        if (!s->owner[k] || !s->slot[k])
            return zb_err_set(err, ZB_ENOMEM, "out of memory for a stage's stash slots");
    }
    if (!(s->away = calloc((size_t)M + 1, 1)))
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a stage's stash slots");
    pl_stash_slots_reset(s);
    return ZB_OK;
}

void pl_stash_slots_free(pl_stash_slots_t *s)
{
    for (int k = 0; k < 3; k++)
        free(s->owner[k]), free(s->slot[k]);
    free(s->away);
    free(s->release), free(s->pending[0]), free(s->pending[1]);
    memset(s, 0, sizeof *s);
}

void pl_stash_slots_reset(pl_stash_slots_t *s)
{
    for (int k = 0; k < 3; k++) {
        for (int i = 0; s->owner[k] && i < s->n[k]; i++)
            s->owner[k][i] = -1;
        for (int m = 0; s->slot[k] && m < s->M; m++)
            s->slot[k][m] = -1;
    }
    if (s->away)
        memset(s->away, 0, (size_t)s->M);
    for (int k = 0; k < 2; k++)
        for (int m = 0; s->pending[k] && m < s->M; m++)
            s->pending[k][m] = -1;
}

/* The deferred O slots due before action a go back (their owner -1). */
static void release_due(pl_stash_slots_t *s, const zb_action_t *a)
{
    for (int m = 0; s->release && m < s->M; m++)
        if (s->pending[PL_FW][m] >= 0 && releases(s->release, m, a))
            for (int k = 0; k < 2; k++) {
                s->owner[k][s->pending[k][m]] = -1;
                s->pending[k][m] = -1;
            }
}

static bool take(pl_stash_slots_t *s, int k, int mb)
{
    for (int i = 0; i < s->n[k]; i++)
        if (s->owner[k][i] < 0) {
            s->owner[k][i] = mb;
            s->slot[k][mb] = i;
            return true;
        }
    return false;
}

static void give(pl_stash_slots_t *s, int k, int mb)
{
    if (s->slot[k][mb] >= 0)
        s->owner[k][s->slot[k][mb]] = -1;
    s->slot[k][mb] = -1;
}

bool pl_stash_slots_begin(pl_stash_slots_t *s, const zb_action_t *a, zb_err_t *err)
{
    int mb = a->mb;
    if (mb < 0 || mb >= s->M) {
        zb_err_set(err, ZB_ESCHEDULE, "microbatch %d out of range (M = %d)", mb, s->M);
        return false;
    }
    release_due(s, a);
    bool held = s->slot[PL_FW][mb] >= 0;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_O:
        if (!held || s->slot[PL_FB][mb] < 0) {
            zb_err_set(err, ZB_ESCHEDULE, "O of microbatch %d without its forward's stash", mb);
            return false;
        }
        s->away[mb] = 1;
        return true;
    case ZB_ACT_L:
        if (!s->away[mb]) {
            zb_err_set(err, ZB_ESCHEDULE, "L of microbatch %d without an O before it", mb);
            return false;
        }
        if (!take(s, PL_FW, mb) || !take(s, PL_FB, mb)) {
            give(s, PL_FW, mb);
            zb_err_set(err, ZB_ESCHEDULE, "no free activation stash for the reload of microbatch %d",
                       mb);
            return false;
        }
        s->away[mb] = 0;
        return true;
    case ZB_ACT_F:
    case ZB_ACT_R:
        if (held || s->away[mb]) {
            zb_err_set(err, ZB_ESCHEDULE, "F of microbatch %d repeated before its W", mb);
            return false;
        }
        if (!take(s, PL_FW, mb) || !take(s, PL_FB, mb)) {
            give(s, PL_FW, mb);
            zb_err_set(err, ZB_ESCHEDULE, "no free activation stash (%d in flight)", s->n[PL_FW]);
            return false;
        }
        return true;
    case ZB_ACT_B:
    case ZB_ACT_BW:
    case ZB_ACT_W:
        if (!held || (a->type != ZB_ACT_W && s->slot[PL_FB][mb] < 0)) {
            zb_err_set(err, ZB_ESCHEDULE,
                       s->away[mb] ? "microbatch %d's stash is offloaded (no L before its B)"
                                   : "microbatch %d has no forward state (B/W before F?)",
                       mb);
            return false;
        }
        if (a->type == ZB_ACT_W ? s->slot[PL_BW][mb] < 0 : !take(s, PL_BW, mb)) {
            zb_err_set(err, ZB_ESCHEDULE,
                       a->type == ZB_ACT_W ? "W of microbatch %d before its B"
                                           : "no free backward stash for microbatch %d",
                       mb);
            return false;
        }
        return true;
    default: zb_err_set(err, ZB_EINVAL, "not a compute action"); return false;
    }
}

void pl_stash_slots_end(pl_stash_slots_t *s, const zb_action_t *a)
{
    int take_n[3], give_n[3];
    action_slots(a, take_n, give_n);
    if (a->type == ZB_ACT_O && deferred(s->release, a->mb)) { /* occupied until its release */
        for (int k = 0; k < 2; k++) {
            s->pending[k][a->mb] = s->slot[k][a->mb];
            s->slot[k][a->mb] = -1;
        }
        return;
    }
    for (int k = 0; k < 3; k++)
        if (give_n[k])
            give(s, k, a->mb);
}
