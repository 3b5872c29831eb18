/* `auto`: the best schedule under a memory limit.
 *
 * Candidates, all judged by zb_simulate (makespan, then max span, then peak): the greedy list
 * scheduler over a grid of settings, every handcrafted family of the same chunking that fits the
 * limit, and the minimal-memory schedule. With any_placement a one-stage-per-rank cost model is
 * also split over 2 chunks per rank (loop and V placement) and those chunkings compete too.
 * The winner then goes through the local-improvement pass. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "schedule/auto_heuristic.h"
#include "schedule/auto_recompute.h"
#include "schedule/auto_sweep.h"
#include "schedule/family_pool.h"
#include "schedule/gen_v.h"
#include "schedule/generators.h"
#include "zbpp/plan.h"

zb_status_t zb_costs_rechunk(const zb_costs_t *src, int P, int v, zb_placement_t pl,
                             zb_costs_t *dst, zb_err_t *err)
{
    if (!src || !dst || P < 1 || v < 1 || src->stages != P)
        return zb_err_set(err, ZB_EINVAL, "rechunk: need a cost model with one stage per rank "
                                          "(stages %d, ranks %d)",
                          src ? src->stages : 0, P);
    if (pl == ZB_PLACE_V && v != 2)
        return zb_err_set(err, ZB_EINVAL, "rechunk: V placement needs 2 chunks, not %d", v);
    zb_status_t st = zb_costs_init_uniform(dst, v * P, 0, 0, 0, 0, 0, 0, 0, err);
    if (st != ZB_OK)
        return st;
    for (int s = 0; s < v * P; s++) {
        int r = zb_stage_rank_of(P, v, pl, s);
        dst->t_f[s] = src->t_f[r] / v;
        dst->t_b[s] = src->t_b[r] / v;
        dst->t_w[s] = src->t_w[r] / v;
        dst->comm[s] = src->comm[r];
        dst->m_f[s] = src->m_f[r] / v;
        dst->m_b[s] = src->m_b[r] / v;
        dst->m_w[s] = src->m_w[r] / v;
    }
    dst->mem_limit = src->mem_limit;
    dst->share = src->share; /* per rank: its chunks still share the device (and its link) */
    if (src->rank_limit &&
        (st = zb_costs_set_rank_limits(dst, src->limit_ranks, src->rank_limit, err)) != ZB_OK) {
        zb_costs_free(dst);
        return st;
    }
    if (src->t_r || src->m_keep) {
        /* the recompute costs split like the others (defaults filled in per rank) */
        st = zb_costs_set_recompute(dst, 0, 0, err);
        if (st != ZB_OK) {
            zb_costs_free(dst);
            return st;
        }
        for (int s = 0; s < v * P; s++) {
            int r = zb_stage_rank_of(P, v, pl, s);
            dst->t_r[s] = zb_costs_t_r(src, r) / v;
            dst->m_keep[s] = zb_costs_m_keep(src, r) / v;
        }
    }
    if ((st = zb_costs_copy_offload(dst, src, v, pl, err)) != ZB_OK)
        zb_costs_free(dst);
    return st;
}

double zb_min_feasible_memory(int ranks, int chunks, zb_placement_t pl, const zb_costs_t *c)
{
    return zb_min_memory_needed(ranks, chunks, pl, c);
}

double zb_min_feasible_memory_recompute(int ranks, int chunks, zb_placement_t pl,
                                        const zb_costs_t *c)
{
    return zb_min_memory_recompute(ranks, chunks, pl, c);
}

/* Families auto never calls (itself, the solver that calls it). */
static bool skip_family(const char *name)
{
    return !strcmp(name, "auto") || !strcmp(name, "optimal");
}

/* Every candidate for one chunking (v, pl) with its per-stage costs c. */
static zb_status_t search_chunking(const zb_gen_params_t *p, int v, zb_placement_t pl,
                                   const zb_costs_t *c, zb_family_pool_t *pool,
                                   zb_sweep_best_t *best, zb_err_t *err)
{
    const int P = p->ranks, M = p->microbatches;
    const double cap = zb_costs_limit_max(c, P);
    zb_err_t e;
    zb_sweep_best_t local;
    zb_sweep_init(&local);
    local.by_span = true;
    zb_status_t st = ZB_OK;
    if (p->recompute != ZB_RECOMPUTE_NONE) {
        st = zb_auto_recompute_chunking(p, v, pl, c, p->recompute, &local, err);
        if (st != ZB_OK || p->recompute == ZB_RECOMPUTE_ALL)
            goto done; /* ALL: only schedules that recompute everything */
    }
    st = zb_greedy_sweep("auto", P, v, pl, M, c, cap, zb_sweep_budget(P, v, M), &local, &e);
    if (st == ZB_ENOMEM) {
        zb_sweep_clear(&local);
        return zb_err_set(err, st, "%s", e.msg);
    }
    st = ZB_OK;
    /* The zero-bubble paper's own heuristic (one stage per rank): its variants time themselves
     * as the simulator would, so only the best (span, then makespan) is offered. */
    if (v == 1 && pl == ZB_PLACE_LOOP) {
        zb_schedule_t *keep = NULL;
        double keep_span = INFINITY, keep_mk = INFINITY;
        int keep_k = 0;
        for (int k = 0; k < ZB_HEURISTIC_VARIANTS; k++) {
            zb_schedule_t *s = NULL;
            double span, mk;
            zb_status_t hs = zb_zb_heuristic(P, M, c, k, &s, &span, &mk, &e);
            if (hs == ZB_ENOMEM) {
                zb_schedule_free(keep);
                zb_sweep_clear(&local);
                return zb_err_set(err, hs, "%s", e.msg);
            }
            if (hs != ZB_OK)
                continue;
            const double tol = 1e-9 * fmax(1.0, span);
            if (span < keep_span - tol || (span <= keep_span + tol && mk < keep_mk - tol)) {
                zb_schedule_free(keep);
                keep = s, keep_span = span, keep_mk = mk, keep_k = k;
            } else {
                zb_schedule_free(s);
            }
        }
        if (keep)
            zb_sweep_offer(&local, keep, c, cap, zb_zb_heuristic_label(keep_k));
    }
    /* Handcrafted families of this chunking: from the pool when generated already (a family
     * asked for v chunks may give another placement: it waits there for that chunking). */
    size_t nf;
    const zb_generator_info_t *fam = zb_generators(&nf);
    for (size_t i = 0; i < nf; i++) {
        if (skip_family(fam[i].name))
            continue;
        zb_schedule_t *s = NULL;
        zb_family_entry_t *got = zb_family_pool_find(pool, fam[i].name, v);
        if (got && (got->failed || !got->s || got->s->placement != pl))
            continue; /* refused, taken by its chunking, or for the other placement */
        if (got) {
            s = got->s;
            got->s = NULL;
        } else {
            zb_gen_params_t q = {.ranks = P, .microbatches = M, .chunks = v, .costs = c};
            zb_status_t gs = zb_generate(fam[i].name, &q, &s, NULL);
            if (gs == ZB_OK && (s->placement != pl || s->chunks != v)) {
                gs = zb_family_pool_put(pool, fam[i].name, v, s, false);
                s = NULL;
            } else if (gs != ZB_OK && gs != ZB_ENOMEM) {
                gs = zb_family_pool_put(pool, fam[i].name, v, NULL, true);
            }
            if (gs == ZB_ENOMEM) {
                zb_sweep_clear(&local);
                return zb_err_set(err, gs, "auto: out of memory");
            }
            if (!s)
                continue;
        }
        zb_sweep_offer(&local, s, c, cap, fam[i].name);
    }
    zb_schedule_t *minmem = NULL;
    if (zb_min_memory_schedule("auto", P, v, pl, M, &minmem, NULL) == ZB_OK)
        zb_sweep_offer(&local, minmem, c, cap, "min-memory");
done:
    if (st == ZB_OK && local.s) {
        zb_schedule_t *s = local.s;
        local.s = NULL;
        /* re-offer into the overall best with the chunking in the label */
        char full[sizeof local.label];
        snprintf(full, sizeof full, "%.150s; %d chunk%s per rank%s", local.label, v,
                 v > 1 ? "s" : "", pl == ZB_PLACE_V ? " (V placement)" : "");
        zb_sweep_offer(best, s, c, cap, full);
    }
    zb_sweep_clear(&local);
    return st;
}

typedef struct {
    int v;
    zb_placement_t pl;
    zb_costs_t c;
    bool owned;
} chunking_t;

zb_status_t zb_gen_auto(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    zb_family_pool_t pool = {0};
    zb_status_t st = zb_gen_auto_pool(p, &pool, out, err);
    zb_family_pool_free(&pool);
    return st;
}

zb_status_t zb_gen_auto_pool(zb_gen_params_t *p, zb_family_pool_t *pool, zb_schedule_t **out,
                             zb_err_t *err)
{
    *out = NULL;
    if (!p->costs)
        return zb_err_set(err, ZB_EINVAL, "auto: needs a cost model (times and memory)");
    zb_status_t st = zb_costs_check(p->costs, err);
    if (st != ZB_OK)
        return st;
    const int P = p->ranks;
    if (P < 1 || p->microbatches < 1)
        return zb_err_set(err, ZB_EINVAL, "auto: ranks %d and microbatches %d must be >= 1", P,
                          p->microbatches);
    int v = p->chunks ? p->chunks : (p->costs->stages % P == 0 ? p->costs->stages / P : 0);
    if (v < 1 || p->costs->stages != v * P)
        return zb_err_set(err, ZB_EINVAL, "auto: cost model has %d stages, need v*P with P=%d",
                          p->costs->stages, P);
    long long actions = 3LL * v * P * p->microbatches;
    if (actions > 4000000)
        return zb_err_set(err, ZB_EINVAL, "auto: P=%d v=%d M=%d is too large (%lld actions)", P,
                          v, p->microbatches, actions);

    chunking_t ch[4];
    int nch = 0;
    ch[nch++] = (chunking_t){v, ZB_PLACE_LOOP, *p->costs, false};
    if (v == 2)
        ch[nch++] = (chunking_t){2, ZB_PLACE_V, *p->costs, false};
    if (p->any_placement && v == 1) {
        const zb_placement_t pls[2] = {ZB_PLACE_LOOP, ZB_PLACE_V};
        for (int k = 0; k < 2; k++) {
            ch[nch] = (chunking_t){2, pls[k], {0}, true};
            if ((st = zb_costs_rechunk(p->costs, P, 2, pls[k], &ch[nch].c, err)) != ZB_OK)
                goto out;
            nch++;
        }
    }
    /* The limit must be reachable by some chunking. */
    double ymin = INFINITY;
    for (int k = 0; k < nch; k++) {
        if (p->recompute != ZB_RECOMPUTE_ALL)
            ymin = fmin(ymin, zb_min_memory_needed(P, ch[k].v, ch[k].pl, &ch[k].c));
        if (p->recompute != ZB_RECOMPUTE_NONE)
            ymin = fmin(ymin, zb_min_memory_recompute(P, ch[k].v, ch[k].pl, &ch[k].c));
    }
    if (p->costs->rank_limit && p->costs->limit_ranks != P) {
        st = zb_err_set(err, ZB_EINVAL, "auto: the cost model has memory limits for %d ranks, "
                                        "P is %d", p->costs->limit_ranks, P);
        goto out;
    }
    /* a necessary condition: the loosest rank's limit (each rank's own is checked in the end) */
    double limit = zb_costs_limit_max(p->costs, P);
    if (limit < ymin - 1e-9 * fmax(1.0, fabs(ymin))) {
        st = zb_err_set(err, ZB_EMEMLIMIT,
                        "auto: memory limit %g is below the minimum %g that any schedule needs "
                        "(memory units of the cost model; one microbatch at a time%s)",
                        limit, ymin,
                        p->recompute == ZB_RECOMPUTE_NONE ? "; --recompute may lower it"
                                                          : ", recomputing");
        goto out;
    }
    zb_sweep_best_t best;
    zb_sweep_init(&best);
    best.by_span = true;
    for (int k = 0; k < nch && st == ZB_OK; k++)
        st = search_chunking(p, ch[k].v, ch[k].pl, &ch[k].c, pool, &best, err);
    if (st == ZB_OK && !best.s)
        st = zb_err_set(err, ZB_EMEMLIMIT,
                        "auto: no schedule fits memory limit %g (memory units of the cost model)",
                        limit);
    if (st == ZB_OK) {
        /* local improvement with the costs of the winner's chunking */
        const zb_costs_t *wc = p->costs;
        for (int k = 0; k < nch; k++)
            if (ch[k].v == best.s->chunks && ch[k].pl == best.s->placement)
                wc = &ch[k].c;
        double before = best.makespan, after = before;
        /* about 1e6 simulated actions in all (at least 2 runs: at P=128 M=1024 each is about
         * 3% of the search) */
        int evals = (int)fmin(300.0, 1e6 / (double)(3LL * best.s->chunks * P * p->microbatches));
        zb_err_t e;
        int dropped = 0;
        char pruned[64] = "";
        if (p->recompute == ZB_RECOMPUTE_AUTO && zb_schedule_has_recompute(best.s)) {
            /* per (stage, mb): keep the activations wherever the limit allows after all */
            if ((st = zb_recompute_prune(best.s, wc, 20000000LL, &dropped, err)) != ZB_OK) {
                zb_sweep_clear(&best);
                goto out;
            }
            if (dropped)
                snprintf(pruned, sizeof pruned, "; %d recompute%s dropped where memory allows",
                         dropped, dropped == 1 ? "" : "s");
        }
        if (zb_improve_local(&best.s, wc, evals < 2 ? 2 : evals, &after, &e) != ZB_OK)
            after = before;
        snprintf(best.s->name, sizeof best.s->name, "auto");
        snprintf(p->note, sizeof p->note, "auto chose %s%s; makespan %g%s", best.label, pruned,
                 after, after < before - 1e-12 ? " after local improvement" : "");
        *out = best.s;
        best.s = NULL;
    }
    zb_sweep_clear(&best);
out:
    for (int k = 0; k < nch; k++)
        if (ch[k].owned)
            zb_costs_free(&ch[k].c);
    return st;
}

#ifndef ZB_HAVE_GLPK
zb_status_t zb_gen_optimal(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    (void)p;
    *out = NULL;
    return zb_err_set(err, ZB_EUNSUPPORTED,
                      "optimal: this build has no GLPK (install libglpk-dev and rebuild)");
}
#endif
