/* The comparison behind `zbpp plan`: every registered family under one cost model and limit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schedule/auto_greedy.h"
#include "schedule/family_pool.h"
#include "zbpp/plan.h"

void zb_plan_free(zb_plan_t *plan)
{
    if (!plan)
        return;
    for (int i = 0; i < plan->count; i++)
        free(plan->rows[i].peak);
    free(plan->rows);
    free(plan->mem_limit_ranks);
    memset(plan, 0, sizeof *plan);
}

static int row_cmp(const void *a, const void *b)
{
    const zb_plan_row_t *x = a, *y = b;
    if (x->fits != y->fits)
        return x->fits ? -1 : 1;
    if (!x->fits)
        return strcmp(x->family, y->family);
    double tol = 1e-9 * fmax(1.0, fmax(x->makespan, y->makespan));
    if (fabs(x->makespan - y->makespan) > tol)
        return x->makespan < y->makespan ? -1 : 1;
    if (fabs(x->bubble_rate - y->bubble_rate) > 1e-12)
        return x->bubble_rate < y->bubble_rate ? -1 : 1;
    return x->peak_max < y->peak_max ? -1 : x->peak_max > y->peak_max;
}

/* The family's own schedule at its default chunking. Most handcrafted families do not read the
 * costs: generated once without them, the plan's row is judged on this schedule with the costs
 * of its chunking. One that reads them (zb-v) is generated again with those costs. */
static zb_schedule_t *family_schedule(const zb_generator_info_t *fam, int P, int M,
                                      const zb_costs_t *costs, char *why, size_t why_len,
                                      char *note, size_t note_len, zb_status_t *st)
{
    zb_gen_params_t q = {.ranks = P, .microbatches = M};
    zb_schedule_t *s = NULL;
    zb_err_t e;
    zb_err_clear(&e);
    *st = zb_generate(fam->name, &q, &s, &e);
    if (*st == ZB_OK && fam->reads_costs) {
        zb_costs_t c;
        if ((*st = zb_costs_rechunk(costs, P, s->chunks, s->placement, &c, &e)) == ZB_OK) {
            zb_gen_params_t qc = {.ranks = P, .microbatches = M, .chunks = s->chunks, .costs = &c};
            zb_schedule_t *with = NULL;
            if ((*st = zb_generate(fam->name, &qc, &with, &e)) == ZB_OK) {
                zb_schedule_free(s);
                s = with;
                q = qc;
            }
            zb_costs_free(&c);
        }
        if (*st != ZB_OK) {
            zb_schedule_free(s);
            s = NULL;
        }
    }
    if (*st != ZB_OK) {
        snprintf(why, why_len, "%s", e.msg);
        return NULL;
    }
    snprintf(note, note_len, "%s", q.note);
    return s;
}

static void fill_row(zb_plan_row_t *row, const zb_schedule_t *s, const zb_costs_t *c, int P,
                     zb_err_t *e)
{
    zb_sim_t sim;
    row->chunks = s->chunks;
    row->placement = s->placement;
    if (zb_validate(s, c, e) != ZB_OK) {
        snprintf(row->reason, sizeof row->reason, "%s", e->msg);
        return;
    }
    if (zb_simulate(s, c, &sim, e) != ZB_OK) {
        snprintf(row->reason, sizeof row->reason, "%s", e->msg);
        return;
    }
    row->makespan = sim.makespan;
    row->bubble_rate = sim.bubble_rate;
    row->peak = calloc((size_t)P, sizeof(double));
    if (!row->peak) {
        zb_sim_free(&sim);
        snprintf(row->reason, sizeof row->reason, "out of memory");
        return;
    }
    row->peak_max = zb_schedule_peak_memory(s, c, row->peak);
    if (zb_schedule_has_offload(s)) { /* copies free memory when they end: the timed peaks */
        row->peak_max = -INFINITY;
        for (int r = 0; r < P; r++)
            row->peak_max = fmax(row->peak_max, row->peak[r] = sim.peak_mem[r]);
    }
    zb_sim_free(&sim);
    zb_schedule_t *low = NULL;
    row->messages = 0;
    if (zb_insert_comms(s, &low, NULL) == ZB_OK) {
        for (int r = 0; r < low->ranks; r++)
            for (int i = 0; i < low->rank[r].len; i++) {
                int t = low->rank[r].actions[i].type;
                if (t == ZB_ACT_SEND_F || t == ZB_ACT_SEND_B)
                    row->messages++;
            }
    }
    zb_schedule_free(low);
    row->volume = (double)row->messages; /* one activation-sized tensor per message */
    row->fits = true;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* As auto's plain row takes the families' schedules (zb_gen_auto_pool), the auto+O row is the
 * fastest fitting +O row: a family's own descent is unbounded and may beat auto's bounded one,
 * or use a chunking auto+O does not try (two chunks in a loop). Its note says so. */
static void auto_takes_best_row(zb_plan_t *out, int first)
{
    zb_plan_row_t *autorow = NULL, *best = NULL;
    for (int i = first; i < out->count; i++) {
        zb_plan_row_t *r = &out->rows[i];
        if (!strcmp(r->family, "auto+O"))
            autorow = r;
        else if (r->fits && (!best || r->makespan < best->makespan))
            best = r;
    }
    if (!autorow || !best || (autorow->fits && autorow->makespan <= best->makespan))
        return;
    double *peak = malloc((size_t)out->ranks * sizeof *peak);
    if (!peak)
        return; /* the row stays auto's own */
    char own[96];
    if (autorow->fits)
        snprintf(own, sizeof own, "its own search: %g", autorow->makespan);
    else
        snprintf(own, sizeof own, "its own search found none that fits");
    free(autorow->peak);
    zb_plan_row_t r = *best;
    memcpy(peak, best->peak, (size_t)out->ranks * sizeof *peak);
    r.peak = peak;
    snprintf(r.family, sizeof r.family, "auto+O");
    snprintf(r.note, sizeof r.note, "auto+O took %s's plan (%s)", best->family, own);
    *autorow = r;
}

/* The "<family>+O" rows: every family but optimal through zb_generate_offload, with the costs
 * of its chunking. */
static zb_status_t offload_rows(int P, int M, const zb_costs_t *costs, zb_offload_t mode,
                                double budget, double t0, zb_plan_t *out, zb_err_t *err)
{
    size_t nf;
    const zb_generator_info_t *fam = zb_generators(&nf);
    const int first = out->count;
    for (size_t i = 0; i < nf; i++) {
        if (!strcmp(fam[i].name, "optimal"))
            continue;
        zb_plan_row_t *row = &out->rows[out->count++];
        snprintf(row->family, sizeof row->family, "%s+O", fam[i].name);
        if (budget - (now_s() - t0) <= 0) {
            snprintf(row->reason, sizeof row->reason,
                     "skipped: the plan's time limit (%g s) was used up before this family",
                     budget);
            continue;
        }
        /* the family's own chunking, costs split to match; auto tries 1 and 2 (V) chunks per
         * rank and keeps the faster fitting row */
        zb_schedule_t *probe = NULL;
        zb_err_t e;
        zb_err_clear(&e);
        const bool is_auto = !strcmp(fam[i].name, "auto");
        zb_gen_params_t q0 = {.ranks = P, .microbatches = M};
        zb_status_t gs = is_auto ? ZB_OK : zb_generate(fam[i].name, &q0, &probe, &e);
        const int tries = is_auto ? 2 : 1;
        for (int k = 0; k < tries && gs != ZB_ENOMEM && (gs == ZB_OK || is_auto); k++) {
            const int v = probe ? probe->chunks : k + 1;
            const zb_placement_t pl = probe ? probe->placement : k ? ZB_PLACE_V : ZB_PLACE_LOOP;
            zb_plan_row_t cand = *row;
            zb_schedule_t *o = NULL;
            zb_gen_params_t q = {.ranks = P, .microbatches = M, .chunks = v};
            zb_costs_t c;
            zb_status_t ks = zb_costs_rechunk(costs, P, v, pl, &c, &e);
            if (ks == ZB_OK) {
                q.costs = &c;
                ks = zb_generate_offload(fam[i].name, &q, mode, &o, &e);
                snprintf(cand.note, sizeof cand.note, "%s", q.note);
                if (ks == ZB_OK)
                    fill_row(&cand, o, &c, P, &e);
                if (ks == ZB_OK && !cand.fits)
                    ks = ZB_EMEMLIMIT; /* its reason is in e */
                zb_costs_free(&c);
            }
            zb_schedule_free(o);
            if (ks == ZB_OK && (!row->fits || cand.makespan < row->makespan)) {
                free(row->peak);
                *row = cand;
            } else {
                free(cand.peak);
            }
            gs = row->fits ? ZB_OK : ks;
        }
        zb_schedule_free(probe);
        if (gs == ZB_ENOMEM)
            return zb_err_set(err, gs, "%s", e.msg);
        if (gs != ZB_OK)
            snprintf(row->reason, sizeof row->reason, "%s", e.msg);
    }
    auto_takes_best_row(out, first);
    return ZB_OK;
}

zb_status_t zb_plan_compare(int P, int M, const zb_costs_t *costs, double time_limit,
                            zb_plan_t *out, zb_err_t *err)
{
    zb_plan_opts_t o = {.solver_time_limit = time_limit};
    return zb_plan_compare_opts(P, M, costs, &o, out, err);
}

zb_status_t zb_plan_compare_opts(int P, int M, const zb_costs_t *costs, const zb_plan_opts_t *o,
                                 zb_plan_t *out, zb_err_t *err)
{
    const double t0 = now_s();
    zb_schedule_t *plain = NULL; /* a handcrafted family's schedule, kept for its +R row */
    zb_family_pool_t pool = {0}; /* the families' schedules, for auto */
    const double budget = o && o->time_limit > 0 ? o->time_limit : INFINITY;
    const double solver = o && o->solver_time_limit > 0 ? o->solver_time_limit : 10.0;
    memset(out, 0, sizeof *out);
    if (!costs || P < 1 || M < 1)
        return zb_err_set(err, ZB_EINVAL, "plan: need P >= 1, M >= 1 and a cost model");
    if (costs->stages != P)
        return zb_err_set(err, ZB_EINVAL,
                          "plan: the cost model must have one stage per rank (%d stages, P=%d)",
                          costs->stages, P);
    zb_status_t st = zb_costs_check(costs, err);
    if (st != ZB_OK)
        return st;
    size_t nf;
    const zb_generator_info_t *fam = zb_generators(&nf);
    const zb_recompute_t rmode = o ? o->recompute : ZB_RECOMPUTE_NONE;
    /* with recompute every family is tried twice: as it is, then with R's ("+R") */
    const size_t passes = rmode == ZB_RECOMPUTE_NONE ? 1 : 2;
    const zb_offload_t omode = o ? o->offload : ZB_OFFLOAD_NONE;
    out->rows = calloc(nf * passes + (omode != ZB_OFFLOAD_NONE ? nf : 0), sizeof *out->rows);
    if (!out->rows)
        return zb_err_set(err, ZB_ENOMEM, "plan: out of memory");
    out->ranks = P;
    out->microbatches = M;
    out->mem_limit = costs->mem_limit;
    if (costs->rank_limit) {
        out->mem_limit_ranks = malloc(sizeof(double) * (size_t)P);
        if (!out->mem_limit_ranks) {
            st = zb_err_set(err, ZB_ENOMEM, "plan: out of memory");
            goto fail;
        }
        for (int r = 0; r < P; r++)
            out->mem_limit_ranks[r] = zb_costs_limit(costs, r);
    }
    size_t plain_family = (size_t)-1;
    char plain_why[sizeof out->rows->reason] = "", plain_note[sizeof out->rows->note] = "";
    for (size_t j = 0; j < nf * passes; j++) {
        const size_t i = j / passes; /* each family, then its +R row */
        const bool with_r = j % passes == 1;
        bool is_auto = !strcmp(fam[i].name, "auto"), is_opt = !strcmp(fam[i].name, "optimal");
        if (with_r && is_opt)
            continue; /* the exact solver has no recompute */
        zb_plan_row_t *row = &out->rows[out->count++];
        snprintf(row->family, sizeof row->family, "%s%s", fam[i].name, with_r ? "+R" : "");
        int v = 1;
        zb_placement_t pl = ZB_PLACE_LOOP;
        if (is_opt && (long long)P * M > ZB_OPTIMAL_MAX_PM) {
            snprintf(row->reason, sizeof row->reason,
                     "skipped: P*M = %lld is too large for the exact solver (max %d)",
                     (long long)P * M, ZB_OPTIMAL_MAX_PM);
            continue;
        }
        double left = budget - (now_s() - t0);
        if (left <= 0) {
            snprintf(row->reason, sizeof row->reason,
                     "skipped: the plan's time limit (%g s) was used up before this family",
                     budget);
            continue;
        }
        zb_schedule_t *s = NULL, *park = NULL; /* park: into the pool for auto */
        zb_err_t e;
        zb_err_clear(&e);
        if (!is_auto && !is_opt) {
            if (plain_family != i) { /* the plain row generates it, +R reuses it */
                zb_schedule_free(plain);
                plain_family = i;
                plain = family_schedule(&fam[i], P, M, costs, plain_why, sizeof plain_why,
                                        plain_note, sizeof plain_note, &st);
                if (st == ZB_ENOMEM) {
                    st = zb_err_set(err, st, "%s", plain_why);
                    goto fail;
                }
            }
            if (!plain) {
                snprintf(row->reason, sizeof row->reason, "%s", plain_why);
                continue; /* does not apply: the reason says why */
            }
            snprintf(row->note, sizeof row->note, "%s", plain_note);
            if (!with_r) {
                s = plain;
                if (passes == 1)
                    plain = NULL, park = s;
            } else {
                zb_status_t rs = zb_add_recompute(plain, NULL, &s, &e);
                park = plain;
                plain = NULL;
                if (rs != ZB_OK)
                    zb_schedule_free(park);
                if (rs == ZB_ENOMEM) {
                    st = zb_err_set(err, rs, "%s", e.msg);
                    goto fail;
                }
                if (rs != ZB_OK) {
                    snprintf(row->reason, sizeof row->reason, "%s", e.msg);
                    continue;
                }
            }
            v = s->chunks;
            pl = s->placement;
        }
        zb_costs_t c;
        if ((st = zb_costs_rechunk(costs, P, v, pl, &c, err)) != ZB_OK) {
            if (s != plain && s != park)
                zb_schedule_free(s);
            zb_schedule_free(park);
            goto fail;
        }
        zb_status_t gs = ZB_OK;
        if (is_auto || is_opt) {
            zb_gen_params_t q = {.ranks = P, .microbatches = M, .chunks = v, .costs = &c,
                                 .any_placement = is_auto,
                                 .time_limit = fmin(solver, left),
                                 .recompute = with_r ? rmode : ZB_RECOMPUTE_NONE};
            /* auto takes the families' schedules generated above instead of its own */
            gs = is_auto && !with_r ? zb_gen_auto_pool(&q, &pool, &s, &e)
                                    : zb_generate(fam[i].name, &q, &s, &e);
            snprintf(row->note, sizeof row->note, "%s", q.note);
        }
        if (gs == ZB_ENOMEM) {
            zb_costs_free(&c);
            st = zb_err_set(err, gs, "%s", e.msg);
            goto fail;
        }
        if (gs != ZB_OK) {
            snprintf(row->reason, sizeof row->reason, "%s", e.msg);
        } else {
            /* auto may have picked another chunking: judge it with the matching costs */
            zb_costs_t sc;
            bool own = false;
            const zb_costs_t *use = &c;
            if (s->chunks != v || s->placement != pl) {
                if (zb_costs_rechunk(costs, P, s->chunks, s->placement, &sc, NULL) == ZB_OK) {
                    use = &sc;
                    own = true;
                }
            }
            fill_row(row, s, use, P, &e);
            if (own)
                zb_costs_free(&sc);
        }
        if (s != plain && s != park)
            zb_schedule_free(s);
        zb_costs_free(&c);
        if (park && zb_family_pool_put(&pool, fam[i].name, park->chunks, park, false) != ZB_OK) {
            st = zb_err_set(err, ZB_ENOMEM, "plan: out of memory");
            goto fail;
        }
    }
    zb_family_pool_free(&pool);
    zb_schedule_free(plain);
    plain = NULL;
    if (omode != ZB_OFFLOAD_NONE &&
        (st = offload_rows(P, M, costs, omode, budget, t0, out, err)) != ZB_OK)
        goto fail;
    qsort(out->rows, (size_t)out->count, sizeof *out->rows, row_cmp);
    for (int i = 0; i < out->count; i++)
        out->fitting += out->rows[i].fits;
    return ZB_OK;
fail:
    zb_schedule_free(plain);
    zb_family_pool_free(&pool);
    zb_plan_free(out);
    return st;
}
