/* `auto`'s list scheduler with offload folded in (zbpp schedule -s auto --offload auto).
 *
 * The offload step alone (offload_plan.c) only places copies into a schedule made without them:
 * where a stash's F and B follow each other closely (the last ranks of a one-chunk pipeline)
 * there is no room for the copies, so the rank keeps the stash, and a search under the limit
 * that never heard of offload keeps out of flight the microbatches offload could let in. Here
 * the greedy list scheduler sees the copies, as it sees a folded R (auto_recompute.c): on a
 * chosen stage the F keeps nothing (its stash goes to the host), the B takes the stash back for
 * a moment before its own delta (opts.b_pre = m_f, the reload's allocation) and cannot start
 * before the O and the L have run after its F (opts.b_gap = the two copies' times). The stage
 * sets are recompute's: every stage, the stages of ranks 0..k-1, the first chunk. Each greedy
 * result then goes through the offload descent, starting with the chosen stages offloaded
 * (zb_plan_offload_from: keeps what the copies cannot hide, offloads late or recomputes where
 * the limit still breaks), and is judged on the simulator's timed memory with the real costs.
 *
 * The copies' channel is not modelled in the greedy (two stashes may overlap their copies);
 * the descent and the judgement see it. Bounded: the sets share about one plain sweep's
 * builds (at most 32 per set), and the descents about 4e6 simulated actions in all. */
#include "schedule/auto_offload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "schedule/auto_recompute.h"
#include "schedule/offload_internal.h"

/* Simulated actions the descents of one search may spend in all, and the greedy settings each
 * set tries (the sweep's list starts with the settings that win most often). */
#define OFFLOAD_SEARCH_WORK 4e6
#define OFFLOAD_BUILDS_PER_SET 32

/* Costs with the offload of every stage in `sel` folded into its B (see the top). */
static zb_status_t fold(const zb_costs_t *c, const bool *sel, zb_costs_t *out, double *pre,
                        double *gap, zb_err_t *err)
{
    zb_status_t st = zb_costs_clone(out, c, err);
    if (st != ZB_OK)
        return st;
    for (int s = 0; s < c->stages; s++) {
        pre[s] = gap[s] = 0;
        if (!sel[s])
            continue;
        pre[s] = c->m_f[s];
        gap[s] = zb_costs_t_copy(c, ZB_ACT_O, s) + zb_costs_t_copy(c, ZB_ACT_L, s);
        out->m_f[s] = 0;
        out->m_b[s] = c->m_b[s] + pre[s];
    }
    return ZB_OK;
}

zb_status_t zb_auto_offload_chunking(int P, int v, zb_placement_t pl, int M, const zb_costs_t *c,
                                     zb_sweep_best_t *best, zb_err_t *err)
{
    const int S = v * P;
    int sets[ZB_AUTO_MAX_SETS];
    const int nsets = zb_auto_stage_sets(P, v, true, sets);
    const double cap = zb_costs_limit_max(c, P);
    int builds = zb_sweep_budget(P, v, M) / nsets;
    builds = builds < 2 ? 2 : builds > OFFLOAD_BUILDS_PER_SET ? OFFLOAD_BUILDS_PER_SET : builds;
    const double sim_actions = 3.0 * S * M; /* one simulation of a result, with copies */
    const long long evals =
        (long long)fmax(4.0, OFFLOAD_SEARCH_WORK / (nsets * (double)builds * sim_actions));
    bool *sel = malloc(sizeof(bool) * (size_t)S);
    double *pre = malloc(sizeof(double) * (size_t)S), *gap = malloc(sizeof(double) * (size_t)S);
    unsigned char *start = malloc((size_t)S * (size_t)M);
    zb_status_t st = sel && pre && gap && start
                         ? ZB_OK
                         : zb_err_set(err, ZB_ENOMEM, "auto: out of memory");
    char what[64];
    for (int i = 0; i < nsets && st == ZB_OK; i++) {
        zb_auto_stage_set(P, v, pl, sets[i], sel);
        zb_auto_stage_set_name("offload", sets[i], P, what, sizeof what);
        for (int s = 0; s < S; s++)
            for (int m = 0; m < M; m++)
                start[(size_t)s * M + m] = sel[s] ? ZB_RELOAD_IN_TIME : ZB_RELOAD_NONE;
        zb_costs_t folded;
        if ((st = fold(c, sel, &folded, pre, gap, err)) != ZB_OK)
            break;
        zb_sweep_rc_t rc = {.folded = &folded, .b_pre = pre, .b_gap = gap, .what = what,
                            .offload = start, .offload_evals = evals, .compact = true};
        zb_err_t e;
        st = zb_greedy_sweep_rc("auto", P, v, pl, M, c, cap, builds, &rc, best, &e);
        zb_costs_free(&folded);
        if (st == ZB_ENOMEM)
            st = zb_err_set(err, st, "%s", e.msg);
        else
            st = ZB_OK; /* no setting fitting is not an error: the other sets and starts remain */
    }
    free(sel);
    free(pre);
    free(gap);
    free(start);
    return st;
}
