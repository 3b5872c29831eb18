/* A family's schedule with offload planned in (zbpp schedule/plan --offload, the Python
 * generate(offload=...)).
 *
 * The offload step needs a schedule to start from. A fixed family is generated as it is (no
 * family reads the memory limit) and the step fits it to the limit. auto reads the limit, and a
 * schedule it searched under the limit with every stash on the device would keep microbatches
 * out of flight that offload could have let in; searched without a limit it may defer W's whose
 * memory no offload can free (what only W reads stays until W). So auto gets two starts, and
 * the faster fitting result wins: (1) searched without the limit; (2) searched under it with
 * every stash taken as free between its F and its backward (recompute "all" at no time, keeping
 * nothing: the view in which offload copies cost nothing), its R's then dropped; (3) auto's own
 * recompute search under the limit (recompute only is one of the choices offload auto has, and
 * auto's search places W's and R's better than the greedy offload step can); (4) every fixed
 * family at the same chunking with offload planned in (the rows `zbpp plan --offload` shows as
 * <family>+O): the schedules whose stashes wait longest between F and B (interleaved, looped)
 * hide their copies best, which no start from auto's own search reaches; (5) auto's list
 * scheduler with the offload of a set of stages folded into its costs (auto_offload.c), which
 * lets the last ranks keep their stashes while the first ones send theirs out, in a schedule
 * made for it. */
#include "zbpp/schedule.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "schedule/auto_offload.h"
#include "schedule/offload_internal.h"

/* `s` without its R's, every F saving again. */
static zb_status_t drop_recompute(zb_schedule_t *s, zb_err_t *err)
{
    for (int r = 0; r < s->ranks; r++) {
        zb_rank_program_t *p = &s->rank[r];
        int n = 0;
        for (int i = 0; i < p->len; i++)
            if (p->actions[i].type != ZB_ACT_R)
                p->actions[n++] = p->actions[i];
        p->len = n;
    }
    return zb_schedule_mark_recompute(s, err);
}

/* Generate `family` with costs `c` (its limit as given), then plan offload under p->costs; an
 * auto plan simulates at most max_evals schedules (<= 0: no bound). */
static zb_status_t one_start(const char *family, const zb_gen_params_t *p, const zb_costs_t *c,
                             zb_offload_t mode, long long max_evals, zb_schedule_t **out,
                             char *note, zb_err_t *err)
{
    zb_gen_params_t q = *p;
    q.costs = c;
    zb_schedule_t *s = NULL;
    zb_status_t st = zb_generate(family, &q, &s, err);
    if (st == ZB_OK && q.recompute != ZB_RECOMPUTE_NONE)
        st = drop_recompute(s, err);
    q.recompute = ZB_RECOMPUTE_NONE;
    if (st == ZB_OK && s->stages != p->costs->stages)
        st = zb_err_set(err, ZB_EINVAL, "offload: %s has %d stages, its cost model %d", family,
                        s->stages, p->costs->stages);
    if (st == ZB_OK)
        st = mode == ZB_OFFLOAD_AUTO
                 ? zb_plan_offload_from(s, NULL, p->costs, max_evals, out, note, err)
                 : zb_plan_offload(s, mode, p->costs, out, note, err);
    zb_schedule_free(s);
    return st;
}

static double makespan(const zb_schedule_t *s, const zb_costs_t *c)
{
    zb_sim_t sim;
    if (zb_simulate(s, c, &sim, NULL) != ZB_OK)
        return INFINITY;
    double m = sim.makespan;
    zb_sim_free(&sim);
    return m;
}

/* Simulated actions one offload descent of auto's starts (1), (2), (4) may spend: it tries
 * every pair alive at a rank's peak at each step, so at P=16 M=64 an unbounded one ran minutes
 * per family; the bound leaves every size up to P=8 M=16 unbounded in practice. */
#define FAMILY_DESCENT_WORK 2e7

static long long family_evals(int stages, int M)
{
    /* tests/test_offload.c lowers the bound (ZB_TEST_DESCENT_WORK_ENV) to run out of it on a
     * small size */
    const char *w = getenv(ZB_TEST_DESCENT_WORK_ENV);
    double work = w && atof(w) > 0 ? atof(w) : FAMILY_DESCENT_WORK;
    return (long long)fmax(16.0, work / (3.0 * stages * M));
}

/* Start (4): each fixed family at q's chunking with offload planned under q's costs; *best
 * (NULL: none yet) is replaced by a faster one that fits, and note names it. ZB_OK when *best
 * holds a schedule afterwards. */
static zb_status_t try_families(const zb_gen_params_t *q, zb_offload_t mode, zb_schedule_t **best,
                                char *note)
{
    size_t n = 0;
    const zb_generator_info_t *fam = zb_generators(&n);
    double best_mk = *best ? makespan(*best, q->costs) : INFINITY;
    const long long evals = family_evals(q->costs->stages, q->microbatches);
    for (size_t i = 0; i < n; i++) {
        if (fam[i].reads_costs && strcmp(fam[i].name, "zb-v") != 0)
            continue; /* auto and optimal: the starts above, or too slow to try here */
        zb_gen_params_t f = *q;
        f.recompute = ZB_RECOMPUTE_NONE;
        f.note[0] = '\0';
        zb_schedule_t *s = NULL;
        char fnote[96] = "";
        zb_err_t e;
        zb_err_clear(&e);
        if (one_start(fam[i].name, &f, q->costs, mode, evals, &s, fnote, &e) != ZB_OK)
            continue; /* the family refuses the shape, or cannot fit the limit */
        double mk = makespan(s, q->costs);
        if (mk < best_mk * (1 - 1e-9) && zb_validate(s, q->costs, NULL) == ZB_OK) {
            zb_schedule_free(*best);
            *best = s;
            s = NULL;
            best_mk = mk;
            /* "offload auto: the zb-v+O plan: 308 kept, ...", not the family's note nested */
            const char *what = strncmp(fnote, "offload auto: ", 14) ? fnote : fnote + 14;
            snprintf(note, 96, "offload auto: the %s+O plan: %.60s", fam[i].name, what);
        }
        zb_schedule_free(s);
    }
    return *best ? ZB_OK : ZB_EMEMLIMIT;
}

/* Start (5): auto's list scheduler with offload folded in, at q's chunking (both placements
 * with two chunks per rank); *best is replaced by a faster schedule that fits. */
static zb_status_t try_folded(const zb_gen_params_t *q, zb_schedule_t **best, char *note,
                              zb_err_t *err)
{
    const int P = q->ranks, M = q->microbatches, S = q->costs->stages;
    const int v = q->chunks ? q->chunks : S % P == 0 ? S / P : 0;
    if (v < 1 || v * P != S)
        return ZB_OK; /* auto itself refuses the sizes; the other starts said why */
    zb_sweep_best_t found;
    zb_sweep_init(&found);
    zb_status_t st = ZB_OK;
    for (int k = 0; k < (v == 2 ? 2 : 1) && st == ZB_OK; k++)
        st = zb_auto_offload_chunking(P, v, k ? ZB_PLACE_V : ZB_PLACE_LOOP, M, q->costs, &found,
                                      err);
    if (st == ZB_OK && found.s && zb_validate(found.s, q->costs, NULL) == ZB_OK &&
        (!*best || found.makespan < makespan(*best, q->costs) * (1 - 1e-9))) {
        zb_schedule_free(*best);
        *best = found.s;
        found.s = NULL;
        snprintf((*best)->name, sizeof (*best)->name, "auto");
        snprintf(note, 96, "offload auto: auto's greedy, %.60s", found.label);
    }
    zb_sweep_clear(&found);
    return st;
}

zb_status_t zb_generate_offload(const char *family, zb_gen_params_t *p, zb_offload_t mode,
                                zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    if (!p || !p->costs)
        return zb_err_set(err, ZB_EINVAL, "offload: a cost model is needed");
    if (p->recompute != ZB_RECOMPUTE_NONE)
        return zb_err_set(err, ZB_EINVAL, "offload: a stash is kept, offloaded or recomputed; "
                                          "ask for offload or recompute, not both");
    zb_costs_t free_c;
    zb_status_t st = zb_costs_clone(&free_c, p->costs, err);
    if (st != ZB_OK)
        return st;
    free_c.mem_limit = INFINITY;
    zb_costs_set_rank_limits(&free_c, 0, NULL, NULL);
    char note[96] = "";
    zb_gen_params_t q = *p;
    q.any_placement = false; /* the offload step's costs are those of p->chunks */
    /* auto's starts share the bound of start (4)'s descents; a family asked for by name gets
     * its one descent unbounded */
    const bool is_auto = zb_generator_find(family) == zb_generator_find("auto");
    const bool starts = is_auto && mode == ZB_OFFLOAD_AUTO && zb_costs_limited(p->costs);
    const long long evals = starts ? family_evals(p->costs->stages, p->microbatches) : 0;
    st = one_start(family, &q, &free_c, mode, evals, out, note, err);
    zb_costs_free(&free_c);
    if (starts && st != ZB_ENOMEM) {
        zb_costs_t folded;
        zb_schedule_t *other = NULL;
        char other_note[96] = "";
        zb_err_t e2;
        zb_err_clear(&e2);
        zb_status_t st2 = zb_costs_clone(&folded, p->costs, &e2);
        if (st2 == ZB_OK && (st2 = zb_costs_set_recompute(&folded, 0, 0, &e2)) == ZB_OK) {
            q.recompute = ZB_RECOMPUTE_ALL;
            st2 = one_start(family, &q, &folded, mode, evals, &other, other_note, &e2);
        }
        zb_costs_free(&folded);
        if (st2 == ZB_OK &&
            (st != ZB_OK || makespan(other, p->costs) < makespan(*out, p->costs))) {
            zb_schedule_free(*out);
            *out = other;
            other = NULL;
            memcpy(note, other_note, sizeof note);
            st = ZB_OK;
        }
        zb_schedule_free(other);
        q.recompute = ZB_RECOMPUTE_AUTO;
        zb_err_clear(&e2);
        if (zb_generate(family, &q, &other, &e2) == ZB_OK &&
            zb_validate(other, p->costs, NULL) == ZB_OK &&
            (st != ZB_OK || makespan(other, p->costs) < makespan(*out, p->costs))) {
            zb_schedule_free(*out);
            *out = other;
            other = NULL;
            snprintf(note, sizeof note, "offload auto: recompute only (auto's search)");
            st = ZB_OK;
        }
        zb_schedule_free(other);
        if (try_families(&q, mode, out, note) == ZB_OK)
            st = ZB_OK;
        zb_status_t st5 = try_folded(&q, out, note, err);
        if (st5 != ZB_OK)
            return st5; /* out of memory */
        if (*out)
            st = ZB_OK;
    }
    if (st == ZB_OK)
        snprintf(p->note, sizeof p->note, "%s", note);
    return st;
}
