/* `auto` with activation recomputation: which stages recompute, and where each R goes.
 *
 * The search works on sets of stages: every microbatch of a chosen stage has a non-saving F and
 * an R. For the greedy list scheduler the R is folded into the B that follows it: on a chosen
 * stage the F adds only m_keep, the B takes t_r + t_b and adds (m_f - m_keep) + m_b, with the
 * R's allocation (m_f - m_keep) counted as a moment before the B's own delta (opts.b_pre), so
 * the greedy's memory checks see the true peak. Each greedy result then gets the R's back with
 * zb_add_recompute (an R right before its B; the simulator lets it start as soon as its F is
 * done and the rank is free, so the folded estimate is never optimistic) and is judged with the
 * real costs. With every stage recomputed, the handcrafted families of the chunking and the
 * minimal-memory schedule compete too (with R's added). Which sets: ALL only every stage; AUTO
 * also the stages of ranks 0..k-1 (early ranks hold the most microbatches in flight, so they
 * gain most from dropping activations) for up to seven k spread over 1..P-1, and with two
 * chunks per rank the first chunk (whose F-to-B lifetime is the longest). The local-improvement
 * pass later moves R's into idle gaps (auto_improve.c). The sets share about twice one plain
 * sweep's budget of greedy builds, so the whole search stays bounded. */
#include "schedule/auto_recompute.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/generators.h"
#include "schedule/sched_index.h"

double zb_min_memory_recompute(int P, int v, zb_placement_t pl, const zb_costs_t *c)
{
    if (!c || P < 1 || v < 1 || c->stages != P * v || (pl == ZB_PLACE_V && v != 2))
        return NAN;
    zb_schedule_t *one = NULL, *rc = NULL;
    double y = NAN;
    if (zb_min_memory_schedule("min", P, v, pl, 1, &one, NULL) == ZB_OK &&
        zb_add_recompute(one, NULL, &rc, NULL) == ZB_OK)
        y = zb_schedule_peak_memory(rc, c, NULL);
    zb_schedule_free(one);
    zb_schedule_free(rc);
    return y;
}

/* Costs with the R of every stage in `sel` folded into its B (see the top of the file). */
static zb_status_t fold(const zb_costs_t *c, const bool *sel, zb_costs_t *out, double *pre,
                        zb_err_t *err)
{
    zb_status_t st = zb_costs_clone(out, c, err);
    if (st != ZB_OK)
        return st;
    for (int s = 0; s < c->stages; s++) {
        pre[s] = 0;
        if (!sel[s])
            continue;
        double keep = zb_costs_m_keep(c, s);
        pre[s] = c->m_f[s] - keep;
        out->m_f[s] = keep;
        out->m_b[s] = c->m_b[s] + pre[s];
        out->t_b[s] = c->t_b[s] + zb_costs_t_r(c, s);
    }
    return ZB_OK;
}

static bool skip_family(const char *name)
{
    return !strcmp(name, "auto") || !strcmp(name, "optimal");
}

/* Every candidate for one set of recomputed stages. */
static zb_status_t try_set(const zb_gen_params_t *p, int v, zb_placement_t pl,
                           const zb_costs_t *c, const bool *sel, const char *what, int builds,
                           bool with_fixed, zb_sweep_best_t *best, zb_err_t *err)
{
    const int P = p->ranks, M = p->microbatches, S = v * P;
    const double cap = zb_costs_limit_max(c, P);
    zb_costs_t folded;
    double *pre = malloc(sizeof(double) * (size_t)S);
    bool *which = malloc(sizeof(bool) * (size_t)S * (size_t)M);
    if (!pre || !which) {
        free(pre);
        free(which);
        return zb_err_set(err, ZB_ENOMEM, "auto: out of memory");
    }
    for (int s = 0; s < S; s++)
        for (int m = 0; m < M; m++)
            which[(size_t)s * M + m] = sel[s];
    zb_status_t st = fold(c, sel, &folded, pre, err);
    if (st != ZB_OK)
        goto out;
    const bool prune = p->recompute == ZB_RECOMPUTE_AUTO;
    char what_used[96];
    snprintf(what_used, sizeof what_used, "%s%s", what, prune ? " where memory needs it" : "");
    what = what_used;
    /* every stage: NULL, i.e. zb_add_recompute's "all" (pairs whose backward directly follows
     * their F stay saving: an R there would save nothing and cost an F) */
    bool every = true;
    for (int s = 0; s < S; s++)
        every &= sel[s];
    const bool *use = every ? NULL : which;
    zb_sweep_rc_t rc = {.folded = &folded, .b_pre = pre, .which = use, .what = what,
                        .prune = prune};
    zb_err_t e;
    st = zb_greedy_sweep_rc("auto", P, v, pl, M, c, cap, builds, &rc, best, &e);
    if (st == ZB_ENOMEM) {
        st = zb_err_set(err, st, "%s", e.msg);
        goto out_costs;
    }
    st = ZB_OK; /* no greedy setting fitting is not an error: other candidates may */
    size_t nf;
    const zb_generator_info_t *fam = zb_generators(&nf);
    char label[192];
    for (size_t i = 0; i < nf && with_fixed; i++) {
        if (skip_family(fam[i].name))
            continue;
        zb_gen_params_t q = {.ranks = P, .microbatches = M, .chunks = v, .costs = c};
        zb_schedule_t *s = NULL, *r = NULL;
        if (zb_generate(fam[i].name, &q, &s, NULL) != ZB_OK)
            continue;
        if (s->placement == pl && s->chunks == v && zb_add_recompute(s, use, &r, NULL) == ZB_OK &&
            (!prune || zb_recompute_prune(r, c, 20LL * 3 * S * M, NULL, NULL) == ZB_OK)) {
            snprintf(label, sizeof label, "%s, %s", fam[i].name, what);
            zb_sweep_offer(best, r, c, cap, label);
        }
        zb_schedule_free(s);
    }
    if (with_fixed) {
        zb_schedule_t *s = NULL, *r = NULL;
        if (zb_min_memory_schedule("auto", P, v, pl, M, &s, NULL) == ZB_OK &&
            zb_add_recompute(s, use, &r, NULL) == ZB_OK &&
            (!prune || zb_recompute_prune(r, c, 20LL * 3 * S * M, NULL, NULL) == ZB_OK)) {
            snprintf(label, sizeof label, "min-memory, %s", what);
            zb_sweep_offer(best, r, c, cap, label);
        }
        zb_schedule_free(s);
    }
out_costs:
    zb_costs_free(&folded);
out:
    free(pre);
    free(which);
    return st;
}

int zb_auto_stage_sets(int P, int v, bool partial, int *sets)
{
    int n = 0;
    sets[n++] = 0;
    if (!partial)
        return n;
    for (int q = 1; q <= 7; q++) {
        int k = (int)lround(q * P / 8.0);
        k = k < 1 ? 1 : k > P - 1 ? P - 1 : k;
        if (P > 1 && sets[n - 1] != k)
            sets[n++] = k;
    }
    if (v > 1)
        sets[n++] = P;
    return n;
}

void zb_auto_stage_set(int P, int v, zb_placement_t pl, int k, bool *sel)
{
    for (int s = 0; s < v * P; s++) {
        int r = zb_stage_rank_of(P, v, pl, s);
        sel[s] = k == 0 ? true : k < P ? r < k : s < P;
    }
}

void zb_auto_stage_set_name(const char *verb, int k, int P, char *out, size_t n)
{
    if (k == 0)
        snprintf(out, n, "%s all", verb);
    else if (k == 1)
        snprintf(out, n, "%s on rank 0", verb);
    else if (k < P)
        snprintf(out, n, "%s on ranks 0-%d", verb, k - 1);
    else
        snprintf(out, n, "%s the first chunk", verb);
}

zb_status_t zb_auto_recompute_chunking(const zb_gen_params_t *p, int v, zb_placement_t pl,
                                       const zb_costs_t *c, zb_recompute_t mode,
                                       zb_sweep_best_t *best, zb_err_t *err)
{
    const int P = p->ranks, S = v * P;
    int sets[ZB_AUTO_MAX_SETS];
    const int nsets = zb_auto_stage_sets(P, v, mode == ZB_RECOMPUTE_AUTO, sets);
    /* About twice one plain sweep's greedy builds in all, at least two per set. */
    int base = zb_sweep_budget(P, v, p->microbatches);
    int builds = 2 * base / nsets;
    if (builds < 2)
        builds = 2;
    if (builds > base)
        builds = base;
    bool *sel = malloc(sizeof(bool) * (size_t)S);
    if (!sel)
        return zb_err_set(err, ZB_ENOMEM, "auto: out of memory");
    zb_status_t st = ZB_OK;
    char what[64];
    for (int i = 0; i < nsets && st == ZB_OK; i++) {
        const int k = sets[i];
        zb_auto_stage_set(P, v, pl, k, sel);
        zb_auto_stage_set_name("recompute", k, P, what, sizeof what);
        /* the families and the minimal-memory schedule only with every stage recomputed (the
         * partial sets are the greedy's: a family's order was not made for them) */
        st = try_set(p, v, pl, c, sel, what, builds, k == 0, best, err);
    }
    free(sel);
    return st;
}

zb_status_t zb_recompute_prune(zb_schedule_t *s, const zb_costs_t *c, long long work,
                               int *dropped, zb_err_t *err)
{
    if (dropped)
        *dropped = 0;
    for (int r = 0; r < s->ranks && work > 0; r++) {
        const double limit = zb_costs_limit(c, r), tol = 1e-9 * fmax(1.0, fabs(limit));
        zb_rank_program_t *p = &s->rank[r];
        double *cur = malloc(sizeof(double) * (size_t)(p->len ? p->len : 1));
        bool *gone = calloc((size_t)(p->len ? p->len : 1), sizeof(bool));
        if (!cur || !gone) {
            free(cur);
            free(gone);
            return zb_err_set(err, ZB_ENOMEM, "auto: out of memory");
        }
        double m = 0;
        for (int i = 0; i < p->len; i++) {
            const zb_action_t *a = &p->actions[i];
            m += zb_sched_mem_delta(c, a->type, a->flags, a->stage);
            cur[i] = m;
        }
        /* latest first: a late microbatch's F-to-R stretch is the shortest */
        for (int i = p->len - 1; i >= 0 && work > 0; i--) {
            const zb_action_t *a = &p->actions[i];
            if (a->type != ZB_ACT_R)
                continue;
            int j = i - 1;
            while (j >= 0 && !(p->actions[j].type == ZB_ACT_F &&
                               p->actions[j].stage == a->stage && p->actions[j].mb == a->mb))
                j--;
            work -= i - j;
            if (j < 0)
                continue; /* not a valid schedule: leave it alone */
            /* dropping the R makes the F save: its memory is held from j on, d more until i */
            double d = c->m_f[a->stage] - zb_costs_m_keep(c, a->stage), hi = -INFINITY;
            for (int k = j; k < i; k++)
                hi = fmax(hi, cur[k]);
            if (isfinite(limit) && hi + d > limit + tol)
                continue;
            for (int k = j; k < i; k++)
                cur[k] += d;
            gone[i] = true;
            p->actions[j].flags &= (uint8_t)~ZB_ACT_NOSAVE;
            if (dropped)
                (*dropped)++;
        }
        int n = 0;
        for (int i = 0; i < p->len; i++)
            if (!gone[i])
                p->actions[n++] = p->actions[i];
        p->len = n;
        free(cur);
        free(gone);
    }
    return zb_schedule_mark_recompute(s, err);
}
