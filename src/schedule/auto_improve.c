/* Local improvement: adjacent swaps within a rank, judged by zb_simulate.
 *
 * Two kinds of move, both found from the simulated timeline so the work stays bounded:
 *  - a W that an F/B had to wait for (the F/B starts exactly when the W ends) goes after it;
 *  - a W that follows an idle gap moves one slot earlier, into the gap (never before its own B);
 *  - the same two moves for an R (recompute), never past its own F or B.
 * The F/B order of a rank never changes, so a move cannot create a deadlock; memory is checked
 * on the rank after each move. A move is kept when (max span, makespan) drops. */
#include "schedule/auto_greedy.h"

#include <math.h>
#include <stdlib.h>

#include "schedule/sched_index.h"

typedef struct {
    double mk, span;
    double fb_starts; /* sum of the start times of F's and B's: moves that only pull the
                         critical actions earlier still count, so plateaus can be crossed */
} score_t;

static score_t score_of(const zb_schedule_t *s, const zb_sim_t *sim)
{
    score_t sc = {sim->makespan, sim->span_max, 0};
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            int t = s->rank[r].actions[i].type;
            if (t == ZB_ACT_F || t == ZB_ACT_B || t == ZB_ACT_BW)
                sc.fb_starts += sim->start[r][i];
        }
    return sc;
}

/* Same order as auto's judge: max span T (bubble rate) first, then makespan. */
static bool better(score_t a, score_t b)
{
    double tol = 1e-9 * fmax(1.0, b.mk);
    if (a.span < b.span - tol)
        return true;
    if (a.span > b.span + tol)
        return false;
    if (a.mk < b.mk - tol)
        return true;
    if (a.mk > b.mk + tol)
        return false;
    return a.fb_starts < b.fb_starts - tol;
}

static double rank_peak(const zb_rank_program_t *p, const zb_costs_t *c)
{
    double cur = 0, peak = 0;
    for (int i = 0; i < p->len; i++) {
        const zb_action_t *a = &p->actions[i];
        cur += zb_sched_mem_delta(c, a->type, a->flags, a->stage);
        peak = fmax(peak, cur);
    }
    return peak;
}

static void swap(zb_rank_program_t *p, int i)
{
    zb_action_t t = p->actions[i];
    p->actions[i] = p->actions[i + 1];
    p->actions[i + 1] = t;
}

static bool is_fb(const zb_action_t *a)
{
    return a->type == ZB_ACT_F || a->type == ZB_ACT_B || a->type == ZB_ACT_BW;
}

zb_status_t zb_improve_local(zb_schedule_t **sp, const zb_costs_t *c, int max_evals,
                             double *makespan, zb_err_t *err)
{
    zb_schedule_t *s = *sp;
    zb_sim_t sim;
    zb_status_t st = zb_simulate(s, c, &sim, err);
    if (st != ZB_OK)
        return st;
    score_t cur = score_of(s, &sim);
    int evals = 0;
    bool improved = true;
    while (improved && evals < max_evals) {
        improved = false;
        for (int r = 0; r < s->ranks && !improved && evals < max_evals; r++) {
            zb_rank_program_t *p = &s->rank[r];
            for (int i = 0; i + 1 < p->len && !improved && evals < max_evals; i++) {
                zb_action_t *a = &p->actions[i], *b = &p->actions[i + 1];
                bool same = a->stage == b->stage && a->mb == b->mb;
                bool later = (a->type == ZB_ACT_W || a->type == ZB_ACT_R) && is_fb(b) && !same &&
                             fabs(sim.start[r][i + 1] - sim.end[r][i]) < 1e-12;
                bool earlier = (b->type == ZB_ACT_W || b->type == ZB_ACT_R) && is_fb(a) &&
                               !same && i > 0 && sim.start[r][i] > sim.end[r][i - 1] + 1e-12;
                if (!later && !earlier)
                    continue;
                swap(p, i);
                const double limit = zb_costs_limit(c, r);
                if (isfinite(limit) && rank_peak(p, c) > limit + 1e-9 * fmax(1.0, fabs(limit))) {
                    swap(p, i);
                    continue;
                }
                zb_sim_t trial;
                evals++;
                zb_status_t ts = zb_simulate(s, c, &trial, NULL);
                if (ts == ZB_OK && better(score_of(s, &trial), cur)) {
                    zb_sim_free(&sim);
                    sim = trial;
                    cur = score_of(s, &sim);
                    improved = true;
                } else {
                    if (ts == ZB_OK)
                        zb_sim_free(&trial);
                    swap(p, i);
                }
            }
        }
    }
    zb_sim_free(&sim);
    if (makespan)
        *makespan = cur.mk;
    return ZB_OK;
}
