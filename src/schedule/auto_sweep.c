/* Strategy sweep: run the greedy list scheduler with several settings and keep the schedule with
 * the smallest simulated makespan that fits the memory cap (ties: smaller span, then lower peak
 * memory; span and makespan swap roles with by_span). */
#include "schedule/auto_sweep.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void zb_sweep_init(zb_sweep_best_t *b)
{
    memset(b, 0, sizeof *b);
    b->makespan = INFINITY;
    b->peak = INFINITY;
    b->span = INFINITY;
}

void zb_sweep_clear(zb_sweep_best_t *b)
{
    zb_schedule_free(b->s);
    zb_sweep_init(b);
}

bool zb_sweep_offer(zb_sweep_best_t *b, zb_schedule_t *s, const zb_costs_t *c, double cap,
                    const char *label)
{
    double peak = zb_schedule_peak_memory(s, c, NULL);
    if (peak > cap + 1e-9 * fmax(1.0, fabs(cap))) {
        zb_schedule_free(s);
        return false;
    }
    zb_sim_t sim;
    if (zb_simulate(s, c, &sim, NULL) != ZB_OK) {
        zb_schedule_free(s);
        return false;
    }
    double mk = sim.makespan, span = sim.span_max;
    zb_sim_free(&sim);
    /* Lexicographic: makespan, then span (span first with by_span), then peak memory. */
    const double tol = 1e-9 * fmax(1.0, mk);
    const int lead = b->by_span ? 1 : 0; /* index of the leading key */
    const double key[2] = {mk, span}, held[2] = {b->makespan, b->span};
    bool better;
    if (key[lead] < held[lead] - tol)
        better = true;
    else if (key[lead] > held[lead] + tol)
        better = false;
    else if (key[!lead] < held[!lead] - tol)
        better = true;
    else if (key[!lead] > held[!lead] + tol)
        better = false;
    else
        better = peak < b->peak - 1e-12;
    if (!better) {
        zb_schedule_free(s);
        return false;
    }
    zb_schedule_free(b->s);
    b->s = s;
    b->makespan = mk;
    b->span = span;
    b->peak = peak;
    snprintf(b->label, sizeof b->label, "%s", label);
    return true;
}

/* The settings tried. In-flight caps: none, 1F1B-like (P - r), ZB-H2-like (2P - 1 - 2r... via
 * slope 2), flat P and 2P; W modes; B-first / F-first; lookahead on/off. */
zb_status_t zb_greedy_sweep(const char *name, int P, int v, zb_placement_t pl, int M,
                            const zb_costs_t *c, double cap, int effort, zb_sweep_best_t *best,
                            zb_err_t *err)
{
    struct {
        double k, slope;
    } caps[] = {{0, 0}, {P, 1}, {2 * P, 2}, {2 * P, 1}, {P, 0}, {2 * P, 0},
                {1.5 * P, 1}, {P + 1, 1}, {2 * P - 1, 2}, {3 * P, 2}, {2 * P - 2, 2}, {2 * P - 3, 2}, {1.25 * P, 0}, {1.5 * P, 0}, {1.75 * P, 0}};
    int ncaps = effort > 0 ? (int)(sizeof caps / sizeof caps[0]) : 4;
    const zb_wmode_t modes[] = {ZB_WMODE_FILL, ZB_WMODE_TIGHT, ZB_WMODE_EAGER};
    const int nwm = effort > 0 ? 3 : 2, nfb = effort > 0 ? 3 : 2, nla = effort > 0 ? 2 : 1;
    const int ndeep = v > 1 && effort > 0 ? 2 : 1, nkeep = effort > 0 ? 3 : 1;
    int tried = 0, ok = 0;
    zb_status_t last = ZB_OK;
    zb_err_t e;
    for (int ci = 0; ci < ncaps; ci++)
        for (int wi = 0; wi < nwm; wi++)
            for (int fb = 0; fb < nfb; fb++)
                for (int la = 0; la < nla; la++)
                    for (int deep = 0; deep < ndeep; deep++)
                    for (int keep = 0; keep < nkeep; keep++) {
                        const zb_wmode_t wm = modes[wi];
                        if (wm == ZB_WMODE_TIGHT && !isfinite(cap))
                            continue;
                        zb_greedy_opts_t o = zb_greedy_defaults();
                        o.max_inflight = (int)ceil(caps[ci].k);
                        o.inflight_slope = caps[ci].slope;
                        o.w_mode = modes[wm];
                        o.w_tight = 0.75;
                        o.f_over_b = fb == 1;
                        o.oldest_first = fb == 2;
                        o.lookahead = la == 0;
                        o.f_deep_first = deep == 0;
                        o.mem_cap = cap;
                        /* W's held for the cool-down: none, or 2r (later ranks finish later:
                           the last microbatch's B chain reaches them first) */
                        o.w_keep = keep == 2 ? 1 : 0;
                        o.w_keep_slope = keep == 0 ? 0 : keep == 1 ? 1 : 2;
                        zb_schedule_t *s = NULL;
                        tried++;
                        zb_status_t st = zb_greedy_build(name, P, v, pl, M, c, &o, &s, NULL, &e);
                        if (st == ZB_ENOMEM)
                            return zb_err_set(err, st, "%s", e.msg);
                        if (st != ZB_OK) {
                            last = st;
                            continue;
                        }
                        ok++;
                        char label[96];
                        snprintf(label, sizeof label, "greedy(w=%s,%s,%s,inflight=%g-%g*r)",
                                 wm == 0 ? "fill" : wm == 1 ? "eager" : "tight",
                                 fb == 0 ? "B-first" : fb == 1 ? "F-first" : "oldest-first", la == 0 ? "lookahead" : "no-look",
                                 caps[ci].k, caps[ci].slope);
                        zb_sweep_offer(best, s, c, cap, label);
                    }
    (void)tried;
    if (!best->s && ok == 0)
        return zb_err_set(err, last ? last : ZB_EMEMLIMIT,
                          "%s: no greedy setting fits memory cap %g", name, cap);
    return ZB_OK;
}
