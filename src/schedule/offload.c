/* The offload pass: turn chosen (stage, mb) pairs into F, O ... L, B.
 *
 * The O goes right after its F: the stash leaves as soon as it exists. The L is placed by the
 * timeline of the schedule without copies, which copies cannot change while no backward waits
 * for its L (they run on the copy channels, not on the rank's compute). An L issued before
 * action p starts when the rank reaches it (the end of action p-1), its O has ended and the
 * host->device channel is free; it must end before its B starts. Going through a rank's reloads
 * latest B first, each takes the latest place that meets its deadline, and its start becomes the
 * deadline of the one before it on the channel: every stash comes back as late as possible, so
 * it holds device memory for the shortest time. A pair may instead ask for its L right before
 * its backward (ZB_RELOAD_LATE): the backward then waits for the copy, but the stash stays off
 * the device through everything the rank runs before it (the planner weighs that wait against a
 * recompute). */
#include "schedule/offload_internal.h"
#include "schedule/sched_index.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *zb_offload_name(zb_offload_t o)
{
    switch (o) {
    case ZB_OFFLOAD_NONE: return "none";
    case ZB_OFFLOAD_ALL: return "all";
    case ZB_OFFLOAD_AUTO: return "auto";
    }
    return "?";
}

zb_status_t zb_offload_parse(const char *s, zb_offload_t *out, zb_err_t *err)
{
    for (int o = ZB_OFFLOAD_NONE; o <= ZB_OFFLOAD_AUTO; o++)
        if (s && !strcmp(s, zb_offload_name((zb_offload_t)o))) {
            *out = (zb_offload_t)o;
            return ZB_OK;
        }
    return zb_err_set(err, ZB_EINVAL, "--offload expects none, all or auto, got '%s'",
                      s ? s : "(null)");
}

/* One offloaded pair of a rank: where its F and backward are, where its L goes. */
typedef struct {
    int f, back; /* action indices in the input program */
    int l_pos;   /* the L is inserted right before this action */
    bool late;   /* ZB_RELOAD_LATE */
    bool or_late; /* ZB_RELOAD_IN_TIME_OR_LATE: late where no place is in time */
    double o_end;
} pair_t;

static bool is_back(int t) { return t == ZB_ACT_B || t == ZB_ACT_BW; }

/* Index of the backward of the pair of F at index f, or -1. back_at[stage * M + mb] is the
 * first backward of each pair in the program (-1: none): a lookup instead of a scan, which made
 * the pass quadratic in the program's length (the offload planner runs it once per try). The
 * pass works on simulated programs, where a backward never comes before its own F (the rank
 * would wait for itself). */
static int find_back(const zb_rank_program_t *p, int M, const int *back_at, int f)
{
    const zb_action_t *a = &p->actions[f];
    int b = back_at[(size_t)a->stage * (size_t)M + (size_t)a->mb];
    return b > f ? b : -1;
}

/* Fill (set) or clear (!set) back_at for rank program p. */
static void index_backs(const zb_rank_program_t *p, int M, int *back_at, bool set)
{
    for (int i = p->len - 1; i >= 0; i--) {
        const zb_action_t *a = &p->actions[i];
        if (is_back(a->type))
            back_at[(size_t)a->stage * (size_t)M + (size_t)a->mb] = set ? i : -1;
    }
}

/* Whether the pair gets offloaded: chosen by `which`, or (NULL) as `dflt` when some compute
 * action of the rank runs between its F and its backward. */
static int chosen(const zb_schedule_t *s, const zb_rank_program_t *p, int f, int back,
                  const unsigned char *which, int dflt)
{
    const zb_action_t *a = &p->actions[f];
    if (a->flags & ZB_ACT_NOSAVE)
        return ZB_RELOAD_NONE;
    if (which)
        return which[(size_t)a->stage * (size_t)s->microbatches + (size_t)a->mb];
    for (int i = f + 1; i < back; i++)
        if (zb_action_is_compute(p->actions[i].type))
            return dflt;
    return ZB_RELOAD_NONE;
}

/* The pairs of rank r, in program order of their F, with the O's end times (the device->host
 * channel takes them one at a time, each when its F has ended). */
static int collect(const zb_schedule_t *s, int r, const unsigned char *which, int dflt,
                   const zb_costs_t *c, const zb_sim_t *sim, const int *back_at, pair_t *pairs)
{
    const zb_rank_program_t *p = &s->rank[r];
    int n = 0;
    double chan = 0;
    for (int i = 0; i < p->len; i++) {
        if (p->actions[i].type != ZB_ACT_F)
            continue;
        int b = find_back(p, s->microbatches, back_at, i);
        int how = b < 0 ? ZB_RELOAD_NONE : chosen(s, p, i, b, which, dflt);
        if (how == ZB_RELOAD_NONE)
            continue;
        double start = zb_later(sim->end[r][i], chan);
        chan = start + zb_sched_copy_time(c, ZB_ACT_O, p->actions[i].stage);
        pairs[n++] = (pair_t){.f = i, .back = b, .late = how == ZB_RELOAD_LATE,
                              .or_late = how == ZB_RELOAD_IN_TIME_OR_LATE, .o_end = chan};
    }
    return n;
}

static int by_back(const void *x, const void *y)
{
    const pair_t *a = x, *b = y;
    return (a->back > b->back) - (a->back < b->back);
}

/* Program order of the L's: by place, then by backward. */
static int by_place(const void *x, const void *y)
{
    const pair_t *a = x, *b = y;
    if (a->l_pos != b->l_pos)
        return (a->l_pos > b->l_pos) - (a->l_pos < b->l_pos);
    return by_back(x, y);
}

/* Sort by cmp, which orders pairs totally (backwards are distinct): the pairs come nearly in
 * order (F order against backward order, L places against backward order), so an insertion sort
 * costs about a step per pair, where qsort's merge sort was 5 % of the offload planner. */
static void sort_pairs(pair_t *pairs, int n, int (*cmp)(const void *, const void *))
{
    for (int i = 1; i < n; i++) {
        pair_t q = pairs[i];
        int j = i;
        for (; j > 0 && cmp(&pairs[j - 1], &q) > 0; j--)
            pairs[j] = pairs[j - 1];
        pairs[j] = q;
    }
}

/* Place the L of every pair of rank r (pairs sorted by backward). */
static void place_reloads(const zb_schedule_t *s, int r, const zb_costs_t *c,
                          const zb_sim_t *sim, pair_t *pairs, int n)
{
    const zb_rank_program_t *p = &s->rank[r];
    double deadline_next = INFINITY;
    int pos_next = p->len;
    for (int k = n - 1; k >= 0; k--) {
        pair_t *q = &pairs[k];
        const double d = zb_sched_copy_time(c, ZB_ACT_L, p->actions[q->f].stage);
        const double deadline = zb_earlier(sim->start[r][q->back], deadline_next);
        const int latest = q->back < pos_next ? q->back : pos_next;
        int best = -1;
        double start = 0;
        if (q->late && latest > q->f) {
            best = latest;
            start = zb_later(sim->end[r][latest - 1], q->o_end);
        }
        for (int pos = latest; best < 0 && pos > q->f; pos--) {
            start = zb_later(sim->end[r][pos - 1], q->o_end);
            if (start + d <= deadline)
                best = pos;
        }
        if (best < 0 && q->or_late && latest > q->f) { /* too late wherever it goes: where it
                                                         * keeps the stash off the longest */
            best = latest;
            start = zb_later(sim->end[r][latest - 1], q->o_end);
        } else if (best < 0) { /* too late wherever it goes: as early as it can start (the
                                * backward waits least; the stash hardly leaves) */
            best = q->f + 1;
            start = zb_later(sim->end[r][q->f], q->o_end);
        }
        q->l_pos = best;
        deadline_next = start;
        pos_next = best;
    }
}

/* Rank r's new program: the input with each pair's O after its F and its L before l_pos. */
static zb_status_t emit(const zb_schedule_t *in, int r, const pair_t *pairs, int n,
                        zb_schedule_t *o)
{
    const zb_rank_program_t *p = &in->rank[r];
    int next_l = 0; /* pairs sorted by_place */
    bool *offloaded = calloc((size_t)p->len + 1, 1);
    if (!offloaded)
        return ZB_ENOMEM;
    for (int k = 0; k < n; k++)
        offloaded[pairs[k].f] = true;
    zb_status_t st = ZB_OK;
    for (int i = 0; i < p->len && st == ZB_OK; i++) {
        for (; next_l < n && pairs[next_l].l_pos == i && st == ZB_OK; next_l++) {
            const zb_action_t *f = &p->actions[pairs[next_l].f];
            st = zb_schedule_push(o, r, (zb_action_t){.type = ZB_ACT_L, .stage = f->stage,
                                                      .mb = f->mb});
        }
        if (st == ZB_OK)
            st = zb_schedule_push(o, r, p->actions[i]);
        if (st == ZB_OK && offloaded[i])
            st = zb_schedule_push(o, r, (zb_action_t){.type = ZB_ACT_O,
                                                      .stage = p->actions[i].stage,
                                                      .mb = p->actions[i].mb});
    }
    free(offloaded);
    return st;
}

zb_status_t zb_add_offload(const zb_schedule_t *in, const bool *which, const zb_costs_t *c,
                           zb_schedule_t **out, zb_err_t *err)
{
    unsigned char *how = NULL;
    const size_t n = in ? (size_t)in->stages * (size_t)in->microbatches : 0;
    if (which && !(how = malloc(n ? n : 1)))
        return zb_err_set(err, ZB_ENOMEM, "offload: out of memory");
    for (size_t k = 0; which && k < n; k++)
        how[k] = which[k] ? ZB_RELOAD_IN_TIME : ZB_RELOAD_NONE;
    zb_status_t st = zb_add_offload_how(in, how, c, out, err);
    free(how);
    return st;
}

static zb_status_t add_timed(const zb_schedule_t *in, const zb_sim_t *timeline,
                             const unsigned char *which, int dflt, const zb_costs_t *c,
                             zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    zb_status_t st;
    int most = 1;
    for (int r = 0; r < in->ranks; r++)
        most = in->rank[r].len > most ? in->rank[r].len : most;
    pair_t *pairs = malloc((size_t)most * sizeof *pairs);
    const size_t npairs = (size_t)in->stages * (size_t)in->microbatches;
    int *back_at = malloc((npairs ? npairs : 1) * sizeof *back_at);
    zb_schedule_t *o = zb_schedule_new(in->name, in->ranks, in->chunks, in->placement,
                                       in->microbatches);
    st = pairs && back_at && o ? ZB_OK : ZB_ENOMEM;
    for (size_t k = 0; back_at && k < npairs; k++)
        back_at[k] = -1;
    for (int r = 0; r < in->ranks && st == ZB_OK; r++) {
        index_backs(&in->rank[r], in->microbatches, back_at, true);
        int n = collect(in, r, which, dflt, c, timeline, back_at, pairs);
        index_backs(&in->rank[r], in->microbatches, back_at, false);
        sort_pairs(pairs, n, by_back);
        place_reloads(in, r, c, timeline, pairs, n);
        sort_pairs(pairs, n, by_place);
        st = emit(in, r, pairs, n, o);
    }
    free(pairs);
    free(back_at);
    if (st != ZB_OK) {
        zb_schedule_free(o);
        return zb_err_set(err, st, "offload: out of memory");
    }
    *out = o;
    return ZB_OK;
}

/* The pass under `in`'s own simulation; which == NULL offloads every pair with compute between
 * its F and its backward, as `dflt`. */
static zb_status_t add_simulated(const zb_schedule_t *in, const unsigned char *which, int dflt,
                                 const zb_costs_t *c, zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    if (!in || !c)
        return zb_err_set(err, ZB_EINVAL, "offload: NULL schedule or cost model");
    if (zb_schedule_has_offload(in))
        return zb_err_set(err, ZB_EINVAL, "offload: the schedule already has O/L actions");
    zb_sim_t sim;
    zb_status_t st = zb_simulate(in, c, &sim, err);
    if (st != ZB_OK)
        return st;
    st = add_timed(in, &sim, which, dflt, c, out, err);
    zb_sim_free(&sim);
    return st;
}

zb_status_t zb_add_offload_how(const zb_schedule_t *in, const unsigned char *which,
                               const zb_costs_t *c, zb_schedule_t **out, zb_err_t *err)
{
    return add_simulated(in, which, ZB_RELOAD_IN_TIME, c, out, err);
}

zb_status_t zb_add_offload_all(const zb_schedule_t *in, const zb_costs_t *c, zb_schedule_t **out,
                               zb_err_t *err)
{
    return add_simulated(in, NULL, ZB_RELOAD_IN_TIME_OR_LATE, c, out, err);
}

zb_status_t zb_add_offload_timed(const zb_schedule_t *in, const zb_sim_t *timeline,
                                 const unsigned char *which, const zb_costs_t *c,
                                 zb_schedule_t **out, zb_err_t *err)
{
    return add_timed(in, timeline, which, ZB_RELOAD_IN_TIME, c, out, err);
}
