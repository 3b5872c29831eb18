/* zbpp — the host link a GPU's ranks share, as the planner times offload's copies.
 *
 * The profile times a copy with every rank of the GPU copying at once (a rank's share of a busy
 * link) and one copying alone. The simulator gives each rank its own copy channel at a fixed
 * bandwidth; with the busy-link share every copy is timed as if all ranks copied at that
 * moment, which on the H100 predicted --offload all's span 27-38 % too long. So the planner
 * plans with the share, measures in its own simulation how many copies overlap on average, and
 * plans again with the link split that many ways (pl_link_bandwidth), a few rounds
 * (pl_plan_offload_on_link, called by pipeline_plan.c's apply_offload). */
#include <math.h>
#include <stdlib.h>

#include "pipeline/offload_link.h"

typedef struct {
    double a, b;
} span_t;

static int by_start(const void *x, const void *y)
{
    const span_t *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

double pl_copy_overlap(const zb_sim_t *sim, int type, int group, int groups)
{
    const zb_schedule_t *s = sim->schedule;
    size_t n = 0;
    for (int r = 0; r < sim->ranks; r++)
        for (int i = 0; r % groups == group && i < sim->len[r]; i++)
            n += s->rank[r].actions[i].type == type;
    if (n == 0)
        return 0;
    span_t *v = malloc(n * sizeof *v);
    if (!v)
        return 0;
    n = 0;
    for (int r = 0; r < sim->ranks; r++)
        for (int i = 0; r % groups == group && i < sim->len[r]; i++)
            if (s->rank[r].actions[i].type == type)
                v[n++] = (span_t){sim->start[r][i], sim->end[r][i]};
    qsort(v, n, sizeof *v, by_start);
    double busy = 0, covered = 0, lo = v[0].a, hi = v[0].b;
    for (size_t k = 0; k < n; k++) {
        busy += v[k].b - v[k].a;
        if (v[k].a > hi) { /* a gap: close the merged interval */
            covered += hi - lo;
            lo = v[k].a, hi = v[k].b;
        } else if (v[k].b > hi) {
            hi = v[k].b;
        }
    }
    covered += hi - lo;
    free(v);
    return covered > 0 ? busy / covered : 0;
}

double pl_link_bandwidth(double alone, double shared, int sharers, double k)
{
    if (!(alone > 0) || !(shared > 0) || sharers < 2)
        return shared;
    double bw = shared * sharers / (k > 1 ? k : 1);
    return bw < alone ? bw : alone;
}

/* The rounds above, with the costs as they are. */
static zb_status_t plan_in_rounds(const zb_schedule_t *plain, zb_offload_t mode,
                                  zb_costs_t *costs, const pl_link_t *link, zb_schedule_t **out,
                                  char *note, zb_err_t *err)
{
    zb_status_t st = zb_plan_offload(plain, mode, costs, out, note, err);
    if (st != ZB_OK || link->sharers < 2 || !(link->alone_d2h > 0) || !(link->alone_h2d > 0) ||
        !(costs->bw_d2h > 0) || !(costs->bw_h2d > 0))
        return st;
    const int groups = link->groups > 0 ? link->groups : 1;
    for (int round = 0; round < 4; round++) {
        zb_sim_t sim;
        if ((st = zb_simulate(*out, costs, &sim, err)) != ZB_OK)
            return st;
        double k_o = 0, k_l = 0;
        for (int g = 0; g < groups; g++) {
            k_o = fmax(k_o, pl_copy_overlap(&sim, ZB_ACT_O, g, groups));
            k_l = fmax(k_l, pl_copy_overlap(&sim, ZB_ACT_L, g, groups));
        }
        zb_sim_free(&sim);
        const double d2h = pl_link_bandwidth(link->alone_d2h, link->shared_d2h, link->sharers, k_o),
                     h2d = pl_link_bandwidth(link->alone_h2d, link->shared_h2d, link->sharers, k_l);
        if (fabs(d2h / costs->bw_d2h - 1) < 0.02 && fabs(h2d / costs->bw_h2d - 1) < 0.02)
            break;
        const double was[2] = {costs->bw_d2h, costs->bw_h2d};
        costs->bw_d2h = d2h, costs->bw_h2d = h2d;
        zb_schedule_t *next = NULL;
        zb_err_t ignored;
        if (zb_plan_offload(plain, mode, costs, &next, note, &ignored) != ZB_OK) {
            costs->bw_d2h = was[0], costs->bw_h2d = was[1];
            break;
        }
        zb_schedule_free(*out);
        *out = next;
    }
    return ZB_OK;
}

zb_status_t pl_plan_offload_on_link(const zb_schedule_t *plain, zb_offload_t mode,
                                    zb_costs_t *costs, const pl_link_t *link, zb_schedule_t **out,
                                    char *note, zb_err_t *err)
{
    const zb_share_t shared = costs->share;
    if (!(shared.link[0] > 0) && !(shared.link[1] > 0))
        return plan_in_rounds(plain, mode, costs, link, out, note, err);
    if (mode == ZB_OFFLOAD_AUTO) /* its choices are simulated makespans: on the link itself */
        return zb_plan_offload(plain, mode, costs, out, note, err);
    /* ALL places each reload by a copy's time: the rounds, with the link out of the simulation
     * and the busy share as the bandwidths; then the link and the alone bandwidths back */
    const double own[2] = {costs->bw_d2h, costs->bw_h2d};
    costs->share.link[0] = costs->share.link[1] = 0;
    costs->bw_d2h = link->shared_d2h, costs->bw_h2d = link->shared_h2d;
    zb_status_t st = plan_in_rounds(plain, mode, costs, link, out, note, err);
    costs->share = shared;
    costs->bw_d2h = own[0], costs->bw_h2d = own[1];
    return st;
}
