/* The planner API's offload entry points (the Python module's generate(offload=...), plan(...)
 * and Costs' copy costs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "zbpp/plan.h"
#include "zbpp/planner_api.h"

zb_status_t zb_api_costs_set_offload(zb_costs_t *c, double stash_bytes, double bw_d2h,
                                     double bw_h2d, double copy_latency, zb_err_t *err)
{
    return zb_costs_set_offload(c, isnan(stash_bytes) ? -1 : stash_bytes, bw_d2h, bw_h2d,
                                copy_latency, err);
}

zb_status_t zb_api_offload(const zb_schedule_t *s, int mode, const zb_costs_t *costs,
                           zb_schedule_t **out, char *note, size_t note_len, zb_err_t *err)
{
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "offload: no output");
    *out = NULL;
    if (mode < ZB_OFFLOAD_NONE || mode > ZB_OFFLOAD_AUTO)
        return zb_err_set(err, ZB_EINVAL, "offload: unknown mode %d", mode);
    char buf[96];
    zb_status_t st = zb_plan_offload(s, (zb_offload_t)mode, costs, out, buf, err);
    if (st == ZB_OK && note && note_len)
        snprintf(note, note_len, "%s", buf);
    return st;
}

zb_status_t zb_api_generate_offload(const char *family, int ranks, int microbatches, int chunks,
                                    const zb_costs_t *costs, double time_limit, int mode,
                                    zb_schedule_t **out, char *note, size_t note_len,
                                    zb_err_t *err)
{
    if (!family || !out)
        return zb_err_set(err, ZB_EINVAL, "generate: no family or output");
    *out = NULL;
    if (mode < ZB_OFFLOAD_NONE || mode > ZB_OFFLOAD_AUTO)
        return zb_err_set(err, ZB_EINVAL, "offload: unknown mode %d", mode);
    zb_gen_params_t p = {.ranks = ranks, .microbatches = microbatches, .chunks = chunks,
                         .costs = costs, .time_limit = time_limit};
    zb_status_t st = zb_generate_offload(family, &p, (zb_offload_t)mode, out, err);
    if (st == ZB_OK && note && note_len)
        snprintf(note, note_len, "%s", p.note);
    return st;
}

zb_status_t zb_api_plan_ro(int ranks, int microbatches, const zb_costs_t *costs,
                           double time_limit, int recompute, int offload, zb_plan_t **out,
                           zb_err_t *err)
{
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "plan: no output");
    *out = NULL;
    if (recompute < ZB_RECOMPUTE_NONE || recompute > ZB_RECOMPUTE_AUTO ||
        offload < ZB_OFFLOAD_NONE || offload > ZB_OFFLOAD_AUTO)
        return zb_err_set(err, ZB_EINVAL, "plan: unknown recompute mode %d or offload mode %d",
                          recompute, offload);
    zb_plan_t *plan = calloc(1, sizeof *plan);
    if (!plan)
        return zb_err_set(err, ZB_ENOMEM, "plan: out of memory");
    zb_plan_opts_t o = {.solver_time_limit = time_limit, .recompute = (zb_recompute_t)recompute,
                        .offload = (zb_offload_t)offload};
    zb_status_t st = zb_plan_compare_opts(ranks, microbatches, costs, &o, plan, err);
    if (st != ZB_OK) {
        free(plan);
        return st;
    }
    *out = plan;
    return ZB_OK;
}
