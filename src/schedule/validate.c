/* The validator: structure, completeness, placement, memory, and deadlock freedom.
 *
 * Deadlock freedom is a pure ordering question: on the lowered program (sends buffered, receives
 * blocking) ranks are advanced whenever their next action's inputs exist, with the same readiness
 * rules as the simulator, so the two always agree on whether a schedule can finish. */
#include "zbpp/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/sched_index.h"

/* Per-(stage, mb) bookkeeping, indexed s*M + m. */
typedef struct {
    const zb_schedule_t *s;
    int S, M;
    unsigned char *cnt[ZB_ACT_COUNT]; /* occurrences, saturating at 255 */
    int *pos[ZB_ACT_COUNT];           /* program index of the (last) occurrence */
} index_t;

static void index_free(index_t *ix)
{
    for (int t = 0; t < ZB_ACT_COUNT; t++) {
        free(ix->cnt[t]);
        free(ix->pos[t]);
    }
}

static zb_status_t index_build(index_t *ix, const zb_schedule_t *s, zb_err_t *err)
{
    memset(ix, 0, sizeof *ix);
    ix->s = s;
    ix->S = s->stages;
    ix->M = s->microbatches;
    const size_t n = (size_t)ix->S * ix->M;
    for (int t = 0; t < ZB_ACT_COUNT; t++) {
        ix->cnt[t] = calloc(n, 1);
        ix->pos[t] = malloc(n * sizeof(int));
        if (!ix->cnt[t] || !ix->pos[t]) {
            index_free(ix);
            return zb_err_set(err, ZB_ENOMEM, "validate: out of memory");
        }
    }
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            size_t k = (size_t)a->stage * ix->M + a->mb;
            if (ix->cnt[a->type][k] < 255)
                ix->cnt[a->type][k]++;
            ix->pos[a->type][k] = i;
        }
    return ZB_OK;
}

static zb_status_t bad(zb_err_t *err, const char *what, zb_action_type_t t, int st, int mb)
{
    return zb_err_set(err, ZB_ESCHEDULE, "validate: %s(stage %d, mb %d) %s",
                      zb_action_type_name(t), st, mb, what);
}

/* Exactly one F and one backward per (stage, mb): either BW, or B followed by W on the rank. */
static zb_status_t check_compute(const index_t *ix, zb_err_t *err)
{
    for (int st = 0; st < ix->S; st++)
        for (int m = 0; m < ix->M; m++) {
            size_t k = (size_t)st * ix->M + m;
            int f = ix->cnt[ZB_ACT_F][k], b = ix->cnt[ZB_ACT_B][k], w = ix->cnt[ZB_ACT_W][k],
                bw = ix->cnt[ZB_ACT_BW][k];
            if (f != 1)
                return bad(err, f ? "appears more than once" : "is missing", ZB_ACT_F, st, m);
            if (bw && (b || w))
                return bad(err, "is mixed with a split B/W of the same stage and microbatch",
                           ZB_ACT_BW, st, m);
            if (bw > 1)
                return bad(err, "appears more than once", ZB_ACT_BW, st, m);
            if (bw == 1)
                continue;
            if (b != 1)
                return bad(err, b ? "appears more than once" : "is missing (no B or BW)",
                           ZB_ACT_B, st, m);
            if (w != 1)
                return bad(err, w ? "appears more than once" : "is missing (B without W)",
                           ZB_ACT_W, st, m);
            if (ix->pos[ZB_ACT_W][k] < ix->pos[ZB_ACT_B][k])
                return bad(err, "comes before its B in the rank's program", ZB_ACT_W, st, m);
        }
    return ZB_OK;
}

/* An R rebuilds what its non-saving F dropped: at most one per (stage, mb), after that F and
 * before the backward that reads what it rebuilds, and the F carries ZB_ACT_NOSAVE exactly when
 * it has an R (so the memory model and the runtime agree on what F keeps). */
static zb_status_t check_recompute(const index_t *ix, zb_err_t *err)
{
    const zb_schedule_t *s = ix->s;
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            if (a->flags && (a->type != ZB_ACT_F || a->flags != ZB_ACT_NOSAVE))
                return bad(err, "carries a flag only an F may carry (non-saving)", a->type,
                           a->stage, a->mb);
        }
    for (int st = 0; st < ix->S; st++)
        for (int m = 0; m < ix->M; m++) {
            size_t k = (size_t)st * ix->M + m;
            int n = ix->cnt[ZB_ACT_R][k];
            const zb_action_t *f =
                &s->rank[zb_stage_rank(s, st)].actions[ix->pos[ZB_ACT_F][k]];
            bool nosave = f->flags & ZB_ACT_NOSAVE;
            if (n > 1)
                return bad(err, "appears more than once", ZB_ACT_R, st, m);
            if (n == 0 && nosave)
                return bad(err, "is non-saving but no R recomputes it", ZB_ACT_F, st, m);
            if (n == 0)
                continue;
            if (!nosave)
                return bad(err, "has an R but is not marked non-saving (it would keep its "
                                "activations twice)",
                           ZB_ACT_F, st, m);
            int back = ix->cnt[ZB_ACT_BW][k] ? ix->pos[ZB_ACT_BW][k] : ix->pos[ZB_ACT_B][k];
            if (ix->pos[ZB_ACT_R][k] < ix->pos[ZB_ACT_F][k])
                return bad(err, "comes before its F in the rank's program", ZB_ACT_R, st, m);
            if (ix->pos[ZB_ACT_R][k] > back)
                return bad(err, "comes after the backward that needs it", ZB_ACT_R, st, m);
        }
    return ZB_OK;
}

/* An O copies the stash of (stage, mb) to host memory and its L brings it back: at most one pair,
 * both or neither, O after the F that made the stash, L after its O and before the backward that
 * reads the stash. A recomputed pair has no stash to move (its F keeps only its input, which the
 * R needs on the device): O/L and R exclude each other, so each (stage, mb) is kept, offloaded or
 * recomputed. */
static zb_status_t check_offload(const index_t *ix, zb_err_t *err)
{
    for (int st = 0; st < ix->S; st++)
        for (int m = 0; m < ix->M; m++) {
            size_t k = (size_t)st * ix->M + m;
            int o = ix->cnt[ZB_ACT_O][k], l = ix->cnt[ZB_ACT_L][k];
            if (o > 1)
                return bad(err, "appears more than once", ZB_ACT_O, st, m);
            if (l > 1)
                return bad(err, "appears more than once", ZB_ACT_L, st, m);
            if (o != l)
                return bad(err, o ? "has no L to bring the stash back before its backward"
                                  : "reloads a stash no O offloaded",
                           o ? ZB_ACT_O : ZB_ACT_L, st, m);
            if (!o)
                continue;
            if (ix->cnt[ZB_ACT_R][k])
                return bad(err, "is offloaded but also recomputed (a pair is kept, offloaded or "
                                "recomputed, not two of them)",
                           ZB_ACT_O, st, m);
            int back = ix->cnt[ZB_ACT_BW][k] ? ix->pos[ZB_ACT_BW][k] : ix->pos[ZB_ACT_B][k];
            if (ix->pos[ZB_ACT_O][k] < ix->pos[ZB_ACT_F][k])
                return bad(err, "comes before the F that makes its stash", ZB_ACT_O, st, m);
            if (ix->pos[ZB_ACT_L][k] < ix->pos[ZB_ACT_O][k])
                return bad(err, "comes before its O in the rank's program", ZB_ACT_L, st, m);
            if (ix->pos[ZB_ACT_L][k] > back)
                return bad(err, "comes after the backward that needs it", ZB_ACT_L, st, m);
        }
    return ZB_OK;
}

/* A lowered schedule must carry exactly the messages its cross-rank edges need, each RECV
 * before the action that consumes it, and none between stages on the same rank. */
static zb_status_t check_comms(const index_t *ix, zb_err_t *err)
{
    const zb_schedule_t *s = ix->s;
    for (int st = 0; st < ix->S; st++) {
        bool fwd_cross = st + 1 < ix->S && zb_stage_rank(s, st + 1) != zb_stage_rank(s, st);
        for (int m = 0; m < ix->M; m++) {
            size_t k = (size_t)st * ix->M + m;
            /* Edge st -> st+1: SEND_F(st) and RECV_F(st+1); SEND_B(st+1) and RECV_B(st). */
            int want = fwd_cross ? 1 : 0;
            if (st + 1 < ix->S) {
                size_t k1 = k + (size_t)ix->M;
                const struct {
                    zb_action_type_t t;
                    int stage;
                    size_t key;
                } need[4] = {{ZB_ACT_SEND_F, st, k},
                             {ZB_ACT_RECV_F, st + 1, k1},
                             {ZB_ACT_SEND_B, st + 1, k1},
                             {ZB_ACT_RECV_B, st, k}};
                for (int i = 0; i < 4; i++) {
                    int c = ix->cnt[need[i].t][need[i].key];
                    if (c == want)
                        continue;
                    if (!want)
                        return bad(err, "links two stages on the same rank", need[i].t,
                                   need[i].stage, m);
                    return bad(err, c ? "appears more than once" : "is missing (unmatched "
                                                                   "message)",
                               need[i].t, need[i].stage, m);
                }
                if (want) {
                    int consumer_f = ix->pos[ZB_ACT_F][k1];
                    int consumer_b = ix->cnt[ZB_ACT_BW][k] ? ix->pos[ZB_ACT_BW][k]
                                                            : ix->pos[ZB_ACT_B][k];
                    if (ix->pos[ZB_ACT_RECV_F][k1] > consumer_f)
                        return bad(err, "comes after the F that needs it", ZB_ACT_RECV_F,
                                   st + 1, m);
                    if (ix->pos[ZB_ACT_RECV_B][k] > consumer_b)
                        return bad(err, "comes after the backward that needs it", ZB_ACT_RECV_B,
                                   st, m);
                }
            } else {
                if (ix->cnt[ZB_ACT_SEND_F][k] || ix->cnt[ZB_ACT_RECV_B][k])
                    return bad(err, "has no next stage", ix->cnt[ZB_ACT_SEND_F][k]
                                                              ? ZB_ACT_SEND_F
                                                              : ZB_ACT_RECV_B,
                               st, m);
            }
        }
    }
    return ZB_OK;
}

static zb_status_t check_limits_shape(const zb_schedule_t *s, const zb_costs_t *c, zb_err_t *err)
{
    if (c->rank_limit && c->limit_ranks != s->ranks)
        return zb_err_set(err, ZB_EINVAL,
                          "validate: the cost model has memory limits for %d ranks, the schedule "
                          "has %d", c->limit_ranks, s->ranks);
    return ZB_OK;
}

/* With copies the memory an O frees returns when the copy ends, not at the O's place in the
 * program: the check takes the simulator's timed peak of each rank. */
static zb_status_t check_memory_timed(const zb_schedule_t *s, const zb_costs_t *c, zb_err_t *err)
{
    zb_status_t st = check_limits_shape(s, c, err);
    if (st != ZB_OK || !zb_costs_limited(c))
        return st;
    zb_sim_t sim;
    if ((st = zb_simulate(s, c, &sim, err)) != ZB_OK)
        return st;
    for (int r = 0; r < s->ranks && st == ZB_OK; r++) {
        const double lim = zb_costs_limit(c, r);
        if (isfinite(lim) && sim.peak_mem[r] > lim + 1e-9 * fmax(1.0, fabs(lim)))
            st = zb_err_set(err, ZB_EMEMLIMIT,
                            "validate: rank %d needs %g memory at time %g (copies timed by the "
                            "simulator), limit %g (memory units of the cost model)",
                            r, sim.peak_mem[r], sim.peak_time[r], lim);
    }
    zb_sim_free(&sim);
    return st;
}

static zb_status_t check_memory(const zb_schedule_t *s, const zb_costs_t *c, zb_err_t *err)
{
    zb_status_t st0 = check_limits_shape(s, c, err);
    if (st0 != ZB_OK)
        return st0;
    for (int r = 0; r < s->ranks; r++) {
        const double lim = zb_costs_limit(c, r);
        if (!isfinite(lim))
            continue;
        /* Tolerate float noise from summing many deltas. */
        const double limit = lim + 1e-9 * fmax(1.0, fabs(lim));
        double sum = 0;
        for (int i = 0; i < s->rank[r].len; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            sum += zb_sched_mem_delta(c, a->type, a->flags, a->stage);
            if (sum > limit)
                return zb_err_set(err, ZB_EMEMLIMIT,
                                  "validate: rank %d needs %g memory after %s(stage %d, mb %d) "
                                  "(action %d), limit %g (memory units of the cost model)",
                                  r, sum, zb_action_type_name(a->type), a->stage, a->mb, i, lim);
        }
    }
    return ZB_OK;
}

/* ---- deadlock detection on the lowered program ---- */

typedef struct {
    const zb_schedule_t *s;
    int M;
    unsigned char *done; /* [S*M] bit per kind below */
    int *owner;          /* [S] rank of each stage */
    int *pos;            /* [ranks] */
} order_t;

enum { DONE_F = 1, DONE_B = 2, SENT_F = 4, SENT_B = 8 };

/* What action `a` on `rank` waits for: returns true if ready; otherwise sets *who to the rank
 * that must act first and *need to a short description of the missing input. */
static bool is_ready(const order_t *o, int rank, const zb_action_t *a, int *who,
                     zb_action_t *need)
{
    const zb_schedule_t *s = o->s;
    const int st = a->stage, M = o->M;
    const size_t k = (size_t)st * M + a->mb;
    int flag = 0, src = st;
    zb_action_type_t nt = ZB_ACT_F;
    switch (a->type) {
    case ZB_ACT_F:
        if (st == 0)
            return true;
        src = st - 1;
        if (o->owner[src] == rank)
            flag = DONE_F, nt = ZB_ACT_F;
        else
            flag = SENT_F, nt = ZB_ACT_SEND_F;
        break;
    case ZB_ACT_B:
    case ZB_ACT_BW:
        if (!(o->done[k] & DONE_F)) {
            flag = DONE_F, nt = ZB_ACT_F;
            break;
        }
        if (st + 1 == s->stages)
            return true;
        src = st + 1;
        if (o->owner[src] == rank)
            flag = DONE_B, nt = ZB_ACT_B;
        else
            flag = SENT_B, nt = ZB_ACT_SEND_B;
        break;
    case ZB_ACT_W: flag = DONE_B, nt = ZB_ACT_B; break;
    case ZB_ACT_SEND_F: flag = DONE_F, nt = ZB_ACT_F; break;
    case ZB_ACT_SEND_B: flag = DONE_B, nt = ZB_ACT_B; break;
    case ZB_ACT_RECV_F: src = st - 1, flag = SENT_F, nt = ZB_ACT_SEND_F; break;
    case ZB_ACT_RECV_B: src = st + 1, flag = SENT_B, nt = ZB_ACT_SEND_B; break;
    default: return true;
    }
    if (o->done[(size_t)src * M + a->mb] & flag)
        return true;
    *who = o->owner[src];
    *need = (zb_action_t){.type = (uint8_t)nt, .stage = src, .mb = a->mb};
    return false;
}

static void mark_done(order_t *o, const zb_action_t *a)
{
    unsigned char *d = &o->done[(size_t)a->stage * o->M + a->mb];
    switch (a->type) {
    case ZB_ACT_F: *d |= DONE_F; break;
    case ZB_ACT_B:
    case ZB_ACT_BW: *d |= DONE_B; break;
    case ZB_ACT_SEND_F: *d |= SENT_F; break;
    case ZB_ACT_SEND_B: *d |= SENT_B; break;
    default: break;
    }
}

/* Name the wait-for cycle reached from blocked rank `r0`. */
static zb_status_t report_deadlock(const order_t *o, int r0, zb_err_t *err)
{
    const zb_schedule_t *s = o->s;
    const int P = s->ranks;
    bool *seen = calloc((size_t)P, sizeof *seen);
    if (!seen)
        return zb_err_set(err, ZB_EDEADLOCK, "validate: deadlock (rank %d cannot proceed)", r0);
    /* Walk the wait-for graph until a rank repeats: that rank starts the cycle. */
    int r = r0;
    while (!seen[r]) {
        seen[r] = true;
        const zb_action_t *a = &s->rank[r].actions[o->pos[r]];
        int who = r;
        zb_action_t need;
        is_ready(o, r, a, &who, &need);
        if (who == r)
            break;
        r = who;
    }
    char msg[480];
    size_t n = 0;
    int start = r;
    for (int hops = 0; hops < P && n < sizeof msg; hops++) {
        const zb_action_t *a = &s->rank[r].actions[o->pos[r]];
        int who = r;
        zb_action_t need = {0};
        is_ready(o, r, a, &who, &need);
        if (who == r) {
            n += (size_t)snprintf(msg + n, sizeof msg - n,
                                  "%srank %d waits at %s(stage %d, mb %d) for its own %s(stage "
                                  "%d, mb %d), which comes later in its program",
                                  hops ? "; " : "", r, zb_action_type_name(a->type), a->stage,
                                  a->mb, zb_action_type_name(need.type), need.stage, need.mb);
            break;
        }
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%srank %d waits at %s(stage %d, mb %d) "
                                                       "for rank %d",
                              hops ? "; " : "", r, zb_action_type_name(a->type), a->stage, a->mb,
                              who);
        r = who;
        if (r == start)
            break;
    }
    free(seen);
    return zb_err_set(err, ZB_EDEADLOCK, "validate: deadlock: %s", msg);
}

static zb_status_t check_order(const zb_schedule_t *s, zb_err_t *err)
{
    const int P = s->ranks;
    order_t o = {.s = s, .M = s->microbatches};
    o.done = calloc((size_t)s->stages * s->microbatches, 1);
    o.pos = calloc((size_t)P, sizeof *o.pos);
    int *queue = malloc((size_t)P * sizeof *queue);
    bool *queued = calloc((size_t)P, sizeof *queued);
    o.owner = malloc((size_t)s->stages * sizeof *o.owner);
    zb_status_t st = ZB_OK;
    if (!o.done || !o.pos || !queue || !queued || !o.owner) {
        st = zb_err_set(err, ZB_ENOMEM, "validate: out of memory");
        goto out;
    }
    /* Worklist of ranks that may advance; a rank that blocks is re-queued by the rank that
     * produces what it waits for. */
    for (int i = 0; i < s->stages; i++)
        o.owner[i] = zb_stage_rank(s, i);
    int head = 0, len = 0;
    for (int r = 0; r < P; r++) {
        queue[len++] = r;
        queued[r] = true;
    }
    while (len > 0) {
        int r = queue[head];
        head = (head + 1) % P;
        len--;
        queued[r] = false;
        const zb_rank_program_t *p = &s->rank[r];
        while (o.pos[r] < p->len) {
            const zb_action_t *a = &p->actions[o.pos[r]];
            int who;
            zb_action_t need;
            if (!is_ready(&o, r, a, &who, &need))
                break;
            mark_done(&o, a);
            o.pos[r]++;
            /* Wake the neighbour that may consume this output. */
            int wake = -1;
            if (a->type == ZB_ACT_F || a->type == ZB_ACT_SEND_F)
                wake = a->stage + 1 < s->stages ? o.owner[a->stage + 1] : -1;
            else if (a->type == ZB_ACT_B || a->type == ZB_ACT_BW || a->type == ZB_ACT_SEND_B)
                wake = a->stage > 0 ? o.owner[a->stage - 1] : -1;
            if (wake >= 0 && wake != r && !queued[wake]) {
                queued[wake] = true;
                queue[(head + len) % P] = wake;
                len++;
            }
        }
    }
    for (int r = 0; r < P; r++)
        if (o.pos[r] < s->rank[r].len) {
            st = report_deadlock(&o, r, err);
            break;
        }
out:
    free(o.done);
    free(o.owner);
    free(o.pos);
    free(queue);
    free(queued);
    return st;
}

zb_status_t zb_validate(const zb_schedule_t *s, const zb_costs_t *costs, zb_err_t *err)
{
    zb_err_clear(err);
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "validate: NULL schedule");
    zb_status_t st = zb_sched_check_actions(s, "validate", err);
    if (st != ZB_OK)
        return st;
    if (costs) {
        st = zb_costs_check(costs, err);
        if (st != ZB_OK)
            return st;
        if (costs->stages != s->stages)
            return zb_err_set(err, ZB_EINVAL,
                              "validate: cost model has %d stages, schedule has %d", costs->stages,
                              s->stages);
    }
    index_t ix;
    st = index_build(&ix, s, err);
    if (st != ZB_OK)
        return st;
    bool lowered = zb_schedule_has_comms(s);
    st = check_compute(&ix, err);
    if (st == ZB_OK)
        st = check_recompute(&ix, err);
    if (st == ZB_OK)
        st = check_offload(&ix, err);
    if (st == ZB_OK && lowered)
        st = check_comms(&ix, err);
    index_free(&ix);
    const bool copies = zb_schedule_has_offload(s);
    if (st == ZB_OK && costs && !copies)
        st = check_memory(s, costs, err);
    if (st != ZB_OK)
        return st;
    if (lowered) {
        st = check_order(s, err);
    } else {
        zb_schedule_t *low;
        st = zb_insert_comms(s, &low, err);
        if (st != ZB_OK)
            return st;
        st = check_order(low, err);
        zb_schedule_free(low);
    }
    if (st == ZB_OK && costs && copies) /* timed, so only once the order is known to finish */
        st = check_memory_timed(s, costs, err);
    return st;
}
