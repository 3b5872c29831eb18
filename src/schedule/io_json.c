/* JSON summary of a simulated schedule: one object, numbers with full precision, non-finite
 * values as null (JSON has no inf/nan). */
#include "zbpp/schedule_io.h"

#include <math.h>

#include "schedule/io_internal.h"

static void json_number(FILE *out, double v)
{
    if (isfinite(v))
        fprintf(out, "%.17g", v);
    else
        fputs("null", out);
}

static void json_array(FILE *out, const double *v, int n)
{
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        if (i)
            fputs(", ", out);
        json_number(out, v ? v[i] : NAN);
    }
    fputc(']', out);
}

static void field_num(FILE *out, const char *key, double v)
{
    fprintf(out, ",\n  \"%s\": ", key);
    json_number(out, v);
}

static void field_arr(FILE *out, const char *key, const double *v, int n)
{
    fprintf(out, ",\n  \"%s\": ", key);
    json_array(out, v, n);
}

zb_status_t zb_json_write_summary(const zb_schedule_t *s, const zb_costs_t *costs,
                                  const zb_sim_t *sim, FILE *out, zb_err_t *err)
{
    if (!s || !costs || !sim || !out)
        return zb_err_set(err, ZB_EINVAL, "json: missing schedule, costs, simulation or output");
    if (sim->ranks != s->ranks)
        return zb_err_set(err, ZB_EINVAL, "json: simulation has %d ranks, schedule %d",
                          sim->ranks, s->ranks);
    long actions = 0, recomputes = 0, offloads = 0;
    for (int r = 0; r < s->ranks; r++) {
        actions += s->rank[r].len;
        for (int i = 0; i < s->rank[r].len; i++) {
            recomputes += s->rank[r].actions[i].type == ZB_ACT_R;
            offloads += s->rank[r].actions[i].type == ZB_ACT_O;
        }
    }
    double peak_max = -INFINITY;
    for (int r = 0; r < sim->ranks; r++)
        if (sim->peak_mem[r] > peak_max)
            peak_max = sim->peak_mem[r];

    fputs("{\n  \"schedule\": ", out);
    zb_io_json_string(out, s->name);
    fprintf(out, ",\n  \"ranks\": %d,\n  \"chunks\": %d,\n  \"placement\": ", s->ranks,
            s->chunks);
    zb_io_json_string(out, zb_placement_name(s->placement));
    fprintf(out, ",\n  \"microbatches\": %d,\n  \"stages\": %d,\n  \"actions\": %ld", s->microbatches,
            s->stages, actions);
    fprintf(out, ",\n  \"split_backward\": %s,\n  \"lowered\": %s",
            zb_schedule_is_split(s) ? "true" : "false",
            zb_schedule_has_comms(s) ? "true" : "false");
    fprintf(out, ",\n  \"recomputes\": %ld,\n  \"offloads\": %ld", recomputes, offloads);
    field_num(out, "makespan", sim->makespan);
    field_num(out, "span", sim->span_max);
    field_arr(out, "spans", sim->span, sim->ranks);
    field_arr(out, "busy", sim->busy, sim->ranks);
    field_num(out, "busy_max", sim->busy_max);
    field_num(out, "bubble_rate", sim->bubble_rate);
    field_arr(out, "peak_memory", sim->peak_mem, sim->ranks);
    field_num(out, "peak_memory_max", peak_max);
    field_arr(out, "peak_memory_time", sim->peak_time, sim->ranks);
    field_num(out, "mem_limit", costs->mem_limit);
    if (costs->rank_limit && costs->limit_ranks == s->ranks)
        field_arr(out, "mem_limit_ranks", costs->rank_limit, s->ranks);
    else
        fputs(",\n  \"mem_limit_ranks\": null", out);
    fputs(",\n  \"costs\": {\n    \"per\": \"stage\",\n    \"stages\": ", out);
    fprintf(out, "%d", costs->stages);
    const struct {
        const char *key;
        const double *v;
    } arrays[] = {{"f", costs->t_f},  {"b", costs->t_b},  {"w", costs->t_w}, {"comm", costs->comm},
                  {"mem_f", costs->m_f}, {"mem_b", costs->m_b}, {"mem_w", costs->m_w}};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        fprintf(out, ",\n    \"%s\": ", arrays[i].key);
        json_array(out, arrays[i].v, costs->stages);
    }
    /* recompute time and kept memory, defaults applied (R's time = F's, a non-saving F keeps 0) */
    fputs(",\n    \"r\": [", out);
    for (int st = 0; st < costs->stages; st++) {
        fputs(st ? ", " : "", out);
        json_number(out, zb_costs_t_r(costs, st));
    }
    fputs("],\n    \"mem_keep\": [", out);
    for (int st = 0; st < costs->stages; st++) {
        fputs(st ? ", " : "", out);
        json_number(out, zb_costs_m_keep(costs, st));
    }
    /* the copy time of each stage's stash each way, defaults applied (see zb_costs_t) */
    for (int dir = ZB_ACT_O; dir <= ZB_ACT_L; dir++) {
        fputs(dir == ZB_ACT_O ? "],\n    \"offload\": [" : "],\n    \"reload\": [", out);
        for (int st = 0; st < costs->stages; st++) {
            fputs(st ? ", " : "", out);
            json_number(out, zb_costs_t_copy(costs, dir, st));
        }
    }
    fputs("]\n  }\n}\n", out);
    if (ferror(out))
        return zb_err_set(err, ZB_EIO, "json: write failed");
    return ZB_OK;
}
