/* zbpp — reloads pulled earlier where their backward waited on a shared host link.
 *
 * zb_add_offload places each L as late as its B allows by the copy's own time. Where the ranks
 * share a host link (costs->share.link) a copy runs slower while others are in flight, so a B
 * can wait for its L. This pass simulates the plan on the link and tries each L whose B started
 * the moment the L ended 1, 2, 4, 8 or 16 actions earlier in its rank's program (never before
 * its O), keeping a move only when the makespan drops and every rank stays within its memory
 * limit (an L takes its stash back when it starts) and, for --offload all, within the peak it
 * had (taking stashes off the device is that mode's point); it repeats until no move helps or
 * its budget of simulations is spent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/offload_internal.h"

enum { PULL_SIMS = 4000 }; /* simulations the pass may spend */

typedef struct {
    const zb_costs_t *c;
    double *cap; /* [ranks] each rank's memory bound: its limit, or its starting peak if lower */
    int sims;    /* simulations spent */
} pull_t;

/* Whether each rank's peak is within its bound. */
static bool within_caps(const pull_t *q, int ranks, const double *peaks)
{
    bool fits = true;
    for (int r = 0; r < ranks; r++)
        fits &= !isfinite(q->cap[r]) || peaks[r] <= q->cap[r] + 1e-9 * fmax(1.0, fabs(q->cap[r]));
    return fits;
}

/* The simulated makespan of s, INFINITY when a rank goes over its bound or the simulation
 * fails; peaks (may be NULL) gets each rank's peak. */
static double evaluate(const zb_schedule_t *s, pull_t *q, double *peaks)
{
    zb_sim_t sim;
    zb_err_t e;
    q->sims++;
    if (zb_simulate(s, q->c, &sim, &e) != ZB_OK)
        return INFINITY;
    if (peaks)
        memcpy(peaks, sim.peak_mem, (size_t)s->ranks * sizeof *peaks);
    const double m = within_caps(q, s->ranks, sim.peak_mem) ? sim.makespan : INFINITY;
    zb_sim_free(&sim);
    return m;
}

/* The action at `from` moves to `to` (to < from), the ones between one place later. */
static void move_earlier(zb_rank_program_t *p, int from, int to)
{
    zb_action_t a = p->actions[from];
    memmove(&p->actions[to + 1], &p->actions[to], (size_t)(from - to) * sizeof a);
    p->actions[to] = a;
}

/* ... and back */
static void move_later(zb_rank_program_t *p, int from, int to)
{
    zb_action_t a = p->actions[from];
    memmove(&p->actions[from], &p->actions[from + 1], (size_t)(to - from) * sizeof a);
    p->actions[to] = a;
}

/* Index on program p of the action of `type` for (stage, mb), or -1; the backward: B or BW. */
static int find(const zb_rank_program_t *p, int type, int stage, int mb)
{
    for (int i = 0; i < p->len; i++) {
        const zb_action_t *a = &p->actions[i];
        bool kind = type == ZB_ACT_B ? a->type == ZB_ACT_B || a->type == ZB_ACT_BW
                                     : a->type == type;
        if (kind && a->stage == stage && a->mb == mb)
            return i;
    }
    return -1;
}

/* One scan: the first move that helps, applied (true), or none (false). */
static bool pull_one(zb_schedule_t *s, pull_t *q, double *best)
{
    zb_sim_t sim;
    zb_err_t e;
    if (zb_simulate(s, q->c, &sim, &e) != ZB_OK)
        return false;
    q->sims++;
    bool moved = false;
    for (int r = 0; r < s->ranks && !moved; r++) {
        zb_rank_program_t *p = &s->rank[r];
        for (int i = 0; i < p->len && !moved && q->sims < PULL_SIMS; i++) {
            const zb_action_t *l = &p->actions[i];
            if (l->type != ZB_ACT_L)
                continue;
            const int b = find(p, ZB_ACT_B, l->stage, l->mb);
            const int o = find(p, ZB_ACT_O, l->stage, l->mb);
            const double end = sim.end[r][i];
            if (b < 0 || o < 0 || fabs(sim.start[r][b] - end) > 1e-9 * fmax(1.0, fabs(end)))
                continue; /* its backward did not wait for it */
            for (int d = 1; d <= 16 && !moved && q->sims < PULL_SIMS; d *= 2) {
                const int to = i - d > o + 1 ? i - d : o + 1;
                if (to >= i)
                    break;
                move_earlier(p, i, to);
                const double m = evaluate(s, q, NULL);
                if (m < *best * (1 - 1e-9)) {
                    *best = m;
                    moved = true;
                } else {
                    move_later(p, to, i);
                }
                if (to == o + 1)
                    break;
            }
        }
    }
    zb_sim_free(&sim);
    return moved;
}

void zb_offload_pull_reloads(zb_schedule_t *s, const zb_costs_t *c, bool keep_peaks)
{
    if (!(c->share.n > 0) || !(c->share.link[0] > 0 || c->share.link[1] > 0))
        return;
    pull_t q = {.c = c, .cap = malloc((size_t)s->ranks * sizeof(double))};
    double *peaks = malloc((size_t)s->ranks * sizeof(double));
    if (q.cap && peaks) {
        for (int r = 0; r < s->ranks; r++)
            q.cap[r] = INFINITY;
        double best = evaluate(s, &q, peaks); /* the start: its own peaks are within reach */
        for (int r = 0; r < s->ranks; r++)
            q.cap[r] = keep_peaks ? fmin(zb_costs_limit(c, r), peaks[r]) : zb_costs_limit(c, r);
        if (isfinite(best) && within_caps(&q, s->ranks, peaks)) /* a start over a limit stays */
            while (q.sims < PULL_SIMS && pull_one(s, &q, &best)) {
            }
    }
    free(q.cap);
    free(peaks);
}
