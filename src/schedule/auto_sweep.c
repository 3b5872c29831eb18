/* Strategy sweep: run the greedy list scheduler with several settings and keep the schedule with
 * the smallest simulated makespan that fits the memory cap (ties: smaller span, then lower peak
 * memory; span and makespan swap roles with by_span). */
#include "schedule/auto_sweep.h"
#include "schedule/offload_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
    /* The same actions judged the same way cannot be better: no need to time them again (the
     * greedy's settings often agree, and a simulation is the dearest step of an offer). */
    if (b->s && b->costs == c && b->cap == cap && zb_schedule_equal(s, b->s)) {
        zb_schedule_free(s);
        return false;
    }
    double peak = 0;
    const bool copies = zb_schedule_has_offload(s);
    if (!copies && !zb_fits_limits(s, c, cap, &peak)) {
        zb_schedule_free(s);
        return false;
    }
    zb_sim_t sim;
    if (zb_simulate(s, c, &sim, NULL) != ZB_OK) {
        zb_schedule_free(s);
        return false;
    }
    double mk = sim.makespan, span = sim.span_max;
    /* With copies the program order frees a stash at its O, the timeline only when the O ends
     * (and an L takes it back when it starts): the timed peaks are the ones to fit. */
    bool fits = true;
    if (copies) {
        peak = 0;
        for (int r = 0; r < sim.ranks && fits; r++) {
            double lim = fmin(cap, zb_costs_limit(c, r));
            fits = sim.peak_mem[r] <= lim + 1e-9 * fmax(1.0, fabs(lim));
            peak = fmax(peak, sim.peak_mem[r]);
        }
    }
    zb_sim_free(&sim);
    if (!fits) {
        zb_schedule_free(s);
        return false;
    }
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
    b->costs = c;
    b->cap = cap;
    snprintf(b->label, sizeof b->label, "%s", label);
    return true;
}

/* One greedy setting of the sweep. */
typedef struct {
    double k, slope; /* in-flight cap max(1, k - slope*r); k = 0: only memory limits it */
    zb_wmode_t w_mode;
    int order;       /* 0 B-first, 1 F-first, 2 oldest-first */
    bool lookahead;
    bool deep;       /* f_deep_first */
    double keep, keep_slope;
} setting_t;

/* What the setting does, in words a user can act on (shown by `auto` and `plan`). */
static void describe(const setting_t *x, int P, char *out, size_t cap)
{
    char inflight[80];
    if (x->k <= 0)
        snprintf(inflight, sizeof inflight, "in flight: as memory allows");
    else if (x->slope == 0)
        snprintf(inflight, sizeof inflight, "in flight <= %g per rank", x->k);
    else
        snprintf(inflight, sizeof inflight, "in flight <= %g-%g*r on rank r%s", x->k, x->slope,
                 x->k == 2 * P && x->slope == 2 ? " (like ZB-H2)"
                 : x->k == P && x->slope == 1   ? " (like ZB-H1)"
                                                : "");
    snprintf(out, cap, "greedy, %s, W %s, %s first", inflight,
             x->w_mode == ZB_WMODE_EAGER ? "after its B"
             : x->w_mode == ZB_WMODE_TIGHT ? "in gaps, early near the limit"
                                           : "in gaps",
             x->order == 0 ? "B" : x->order == 1 ? "F" : "oldest");
}

int zb_sweep_budget(int P, int v, int M)
{
    /* Sized when one greedy build cost about actions x (P + 16) (each step scanned the ranks);
     * allow about 3e6 such units for the whole sweep, and never fewer than 8 builds. A build now
     * costs about actions x log P (docs/auto.md), but the formula stays: it decides which
     * settings are tried, hence the schedule auto returns. */
    double work = 3.0 * v * (double)P * (double)M * (double)(P + 16);
    double n = 3e6 / fmax(1.0, work);
    return n < 8 ? 8 : n > 100000 ? 100000 : (int)n;
}

/* The settings, most promising first: a short list that wins on the cost models measured so far
 * (docs/auto.md), then the full grid (duplicates are skipped when building). `compact` leaves
 * out of the grid the lookahead and W-keeping variants, so the in-flight caps and W modes come
 * sooner (the offload fold's search, whose winners differ in those). */
enum { LEAD = 14 }; /* entries of the lead list */

static int settings(int P, int v, double cap, bool compact, setting_t *out, int max)
{
    const setting_t lead[] = {
        {2 * P, 2, ZB_WMODE_FILL, 0, false, true, 0, 0},
        {2 * P, 2, ZB_WMODE_FILL, 2, false, true, 0, 0},
        {0, 0, ZB_WMODE_FILL, 0, true, true, 0, 0},
        {P, 1, ZB_WMODE_FILL, 0, true, true, 0, 0},
        {2 * P + 1, 2, ZB_WMODE_TIGHT, 2, true, true, 0, 0.5},
        {2 * P, 2, ZB_WMODE_FILL, 0, true, true, 0, 0},
        {2 * P, 1, ZB_WMODE_FILL, 0, true, true, 0, 0},
        {0, 0, ZB_WMODE_FILL, 0, false, true, 0, 0},
        {P, 0, ZB_WMODE_FILL, 0, true, true, 0, 0},
        {P, 0, ZB_WMODE_FILL, 1, true, true, 0, 0},
        {2 * P, 2, ZB_WMODE_FILL, 1, false, true, 0, 0},
        {2 * P, 2, ZB_WMODE_FILL, 1, true, true, 0, 0},
        {P, 0, ZB_WMODE_FILL, 0, false, true, 0, 0},
        {P, 0, ZB_WMODE_FILL, 1, false, true, 0, 0},
    };
    const double caps[][2] = {{0, 0},          {P, 1},          {2 * P, 2},         {2 * P, 1},
                              {P, 0},          {2 * P, 0},      {1.5 * P, 1},       {P + 1, 1},
                              {2 * P - 1, 2},  {2 * P + 1, 2},  {3 * P, 2},         {2 * P - 2, 2},
                              {2 * P - 3, 2},  {2 * P, 1.5},    {2 * P + 2, 2.5},   {1.25 * P, 0},
                              {1.5 * P, 0},    {1.75 * P, 0}};
    const zb_wmode_t modes[] = {ZB_WMODE_FILL, ZB_WMODE_TIGHT, ZB_WMODE_EAGER};
    const double keeps[][2] = {{0, 0}, {0, 1}, {1, 2}, {0, 0.5}};
    _Static_assert(sizeof lead / sizeof lead[0] == LEAD, "LEAD counts the lead list");
    int n = 0;
    for (size_t i = 0; i < sizeof lead / sizeof lead[0] && n < max; i++)
        out[n++] = lead[i];
    for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++)
        for (int wi = 0; wi < 3; wi++)
            for (int fb = 0; fb < 3; fb++)
                for (int la = 0; la < 2; la++)
                    for (int deep = 0; deep < (v > 1 ? 2 : 1); deep++)
                        for (size_t ki = 0; ki < sizeof keeps / sizeof keeps[0]; ki++) {
                            if (modes[wi] == ZB_WMODE_TIGHT && !isfinite(cap))
                                continue; /* same as FILL without a cap */
                            if (compact && (la > 0 || ki > 0))
                                continue;
                            if (n >= max)
                                return n;
                            out[n++] = (setting_t){caps[ci][0], caps[ci][1], modes[wi], fb,
                                                   la == 0, deep == 0, keeps[ki][0],
                                                   keeps[ki][1]};
                        }
    return n;
}

static bool same_setting(const setting_t *a, const setting_t *b)
{
    return a->k == b->k && a->slope == b->slope && a->w_mode == b->w_mode &&
           a->order == b->order && a->lookahead == b->lookahead && a->deep == b->deep &&
           a->keep == b->keep && a->keep_slope == b->keep_slope;
}

zb_status_t zb_greedy_sweep(const char *name, int P, int v, zb_placement_t pl, int M,
                            const zb_costs_t *c, double cap, int max_builds,
                            zb_sweep_best_t *best, zb_err_t *err)
{
    return zb_greedy_sweep_rc(name, P, v, pl, M, c, cap, max_builds, NULL, best, err);
}

zb_status_t zb_greedy_sweep_rc(const char *name, int P, int v, zb_placement_t pl, int M,
                               const zb_costs_t *c, double cap, int max_builds,
                               const zb_sweep_rc_t *rc, zb_sweep_best_t *best, zb_err_t *err)
{
    enum { MAX_SETTINGS = 2048 };
    setting_t *set = malloc(sizeof *set * MAX_SETTINGS);
    if (!set)
        return zb_err_set(err, ZB_ENOMEM, "%s: out of memory", name);
    int n = settings(P, v, cap, rc && rc->compact, set, MAX_SETTINGS);
    int built = 0, ok = 0;
    zb_status_t last = ZB_OK;
    zb_err_t e;
    for (int i = 0; i < n && (max_builds <= 0 || built < max_builds); i++) {
        bool dup = false;
        for (int j = 0; j < i && j < LEAD && !dup; j++) /* only the lead list can repeat */
            dup = same_setting(&set[i], &set[j]);
        if (dup)
            continue;
        const setting_t *x = &set[i];
        zb_greedy_opts_t o = zb_greedy_defaults();
        o.max_inflight = (int)ceil(x->k);
        o.inflight_slope = x->slope;
        o.w_mode = x->w_mode;
        o.w_tight = 0.75;
        o.f_over_b = x->order == 1;
        o.oldest_first = x->order == 2;
        o.lookahead = x->lookahead;
        o.f_deep_first = x->deep;
        o.mem_cap = cap;
        o.w_keep = (int)x->keep;
        o.w_keep_slope = x->keep_slope;
        if (rc) {
            o.b_pre = rc->b_pre;
            o.b_gap = rc->b_gap;
        }
        zb_schedule_t *s = NULL;
        built++;
        zb_status_t st = zb_greedy_build(name, P, v, pl, M, rc ? rc->folded : c, &o, &s, NULL, &e);
        if (st == ZB_OK && rc && rc->offload) {
            zb_schedule_t *r = NULL;
            st = zb_plan_offload_from(s, rc->offload, c, rc->offload_evals, &r, NULL, &e);
            zb_schedule_free(s);
            s = r;
        } else if (st == ZB_OK && rc) {
            zb_schedule_t *r = NULL;
            st = zb_add_recompute(s, rc->which, &r, &e);
            zb_schedule_free(s);
            s = r;
            if (st == ZB_OK && rc->prune)
                st = zb_recompute_prune(s, c, 20LL * 3 * v * P * M, NULL, &e);
        }
        if (st == ZB_ENOMEM) {
            free(set);
            return zb_err_set(err, st, "%s", e.msg);
        }
        if (st != ZB_OK) {
            last = st;
            continue;
        }
        ok++;
        char label[192];
        describe(x, P, label, sizeof label);
        if (rc) {
            size_t used = strlen(label);
            snprintf(label + used, sizeof label - used, ", %s", rc->what);
        }
        zb_sweep_offer(best, s, c, cap, label);
    }
    free(set);
    if (!best->s && ok == 0)
        return zb_err_set(err, last ? last : ZB_EMEMLIMIT,
                          "%s: no greedy setting fits memory limit %g (memory units of the cost "
                          "model; tried %d)", name, cap,
                          built);
    return ZB_OK;
}
