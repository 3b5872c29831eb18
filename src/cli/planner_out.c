/* zbpp CLI — simulate and write a schedule in one of the planner formats. */
#include "cli/planner_out.h"

#include <stdlib.h>

#include "zbpp/schedule_io.h"
#include "zbpp/svg.h"
#include "zbpp/util.h"

static bool svg_arrows;

void zb_cli_set_svg_arrows(bool on) { svg_arrows = on; }

void zb_cli_summary_line(FILE *out, const zb_sim_t *sim)
{
    int peak_rank = 0;
    for (int r = 1; r < sim->ranks; r++)
        if (sim->peak_mem[r] > sim->peak_mem[peak_rank])
            peak_rank = r;
    fprintf(out, "makespan %.6g, span %.6g, bubble rate %.2f%%, peak memory %.6g (rank %d)\n",
            sim->makespan, sim->span_max, 100.0 * sim->bubble_rate,
            sim->ranks ? sim->peak_mem[peak_rank] : 0.0, peak_rank);
}

/* Write the format body; the simulation is already done. */
static zb_status_t write_body(const zb_schedule_t *s, const zb_costs_t *costs, const zb_sim_t *sim,
                              zb_cli_format_t fmt, int width, FILE *f, zb_err_t *err)
{
    switch (fmt) {
    case ZB_FMT_CSV:
        return zb_csv_write(s, f, err);
    case ZB_FMT_CSV_COMMS: {
        if (zb_schedule_has_comms(s))
            return zb_csv_write(s, f, err);
        zb_schedule_t *low = NULL;
        zb_status_t st = zb_insert_comms(s, &low, err);
        if (st == ZB_OK)
            st = zb_csv_write(low, f, err);
        zb_schedule_free(low);
        return st;
    }
    case ZB_FMT_JSON:
        return zb_json_write_summary(s, costs, sim, f, err);
    case ZB_FMT_TRACE:
        /* One cost unit shows as one millisecond in the trace viewer. */
        return zb_trace_write(sim, 1000.0, f, err);
    case ZB_FMT_SVG:
        return zb_svg_write_opts(sim, &(zb_svg_opts_t){.arrows = svg_arrows}, f, err);
    case ZB_FMT_ASCII: {
        zb_status_t st = zb_ascii_write(sim, width, f, err);
        if (st == ZB_OK)
            zb_cli_summary_line(f, sim);
        return st;
    }
    }
    return zb_err_set(err, ZB_EINVAL, "unknown format %d", (int)fmt);
}

int zb_cli_emit(const char *cmd, const zb_schedule_t *s, const zb_costs_t *costs,
                zb_cli_format_t fmt, const char *path, int width)
{
    zb_err_t err = {0};
    zb_sim_t sim;
    zb_status_t st = zb_simulate(s, costs, &sim, &err);
    if (st != ZB_OK) {
        zb_cli_error(cmd, "%s", err.msg);
        return ZB_EXIT_FAIL;
    }
    zb_cli_out_t out;
    st = zb_cli_out_open(&out, path, &err);
    if (st == ZB_OK) {
        st = write_body(s, costs, &sim, fmt, width, out.f, &err);
        if (st == ZB_OK)
            st = zb_cli_out_commit(&out, &err);
        else
            zb_cli_out_abort(&out);
    }
    zb_sim_free(&sim);
    if (st != ZB_OK) {
        zb_cli_error(cmd, "%s", err.msg);
        return ZB_EXIT_FAIL;
    }
    return ZB_EXIT_OK;
}

int zb_cli_load_csv(const char *cmd, const char *path, const zb_cli_costs_t *copt,
                    zb_schedule_t **out, zb_costs_t *costs)
{
    zb_err_t err = {0};
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    zb_status_t st = zb_read_file(path, ZB_CSV_MAX_BYTES, &data, &len, &err);
    if (st != ZB_OK) {
        zb_cli_error(cmd, "%s", err.msg);
        return ZB_EXIT_FAIL;
    }
    zb_csv_info_t info;
    st = zb_csv_read_info(data, len, out, &info, &err);
    free(data);
    if (st != ZB_OK) {
        zb_cli_error(cmd, "%s: %s", path, err.msg);
        return ZB_EXIT_FAIL;
    }
    /* a note, not an error: PyTorch's runtime-lowered dumps hold FSDP actions zbpp has no use for */
    if (info.ignored_fsdp > 0)
        fprintf(stderr, "zbpp %s: note: %s: ignored %d UNSHARD/RESHARD/REDUCE_GRAD action%s (FSDP)\n",
                cmd, path, info.ignored_fsdp, info.ignored_fsdp == 1 ? "" : "s");
    if (info.composite > 0)
        fprintf(stderr, "zbpp %s: note: %s: read %d OVERLAP_F_B cell%s as their actions in order\n",
                cmd, path, info.composite, info.composite == 1 ? "" : "s");
    if (copt->recompute == ZB_RECOMPUTE_AUTO) {
        zb_cli_error(cmd, "--recompute auto chooses recomputation while generating a schedule "
                          "(zbpp schedule -s auto); for a FILE.csv use none or all");
        zb_schedule_free(*out);
        *out = NULL;
        return ZB_EXIT_USAGE;
    }
    if (copt->recompute == ZB_RECOMPUTE_ALL) {
        zb_schedule_t *rc = NULL;
        if (zb_add_recompute(*out, NULL, &rc, &err) != ZB_OK) {
            zb_cli_error(cmd, "--recompute all: %s: %s", path, err.msg);
            zb_schedule_free(*out);
            *out = NULL;
            return ZB_EXIT_USAGE;
        }
        zb_schedule_free(*out);
        *out = rc;
    }
    if (zb_cli_costs_build(copt, (*out)->stages, (*out)->chunks, costs, &err) != ZB_OK) {
        zb_cli_error(cmd, "%s", err.msg);
        zb_schedule_free(*out);
        *out = NULL;
        return ZB_EXIT_USAGE;
    }
    int rc = zb_cli_apply_offload(cmd, copt, out, costs);
    if (rc != ZB_EXIT_OK) {
        zb_schedule_free(*out);
        *out = NULL;
        zb_costs_free(costs);
    }
    return rc;
}

int zb_cli_apply_offload(const char *cmd, const zb_cli_costs_t *copt, zb_schedule_t **s,
                         const zb_costs_t *costs)
{
    if (copt->offload == ZB_OFFLOAD_NONE)
        return ZB_EXIT_OK;
    if (copt->recompute != ZB_RECOMPUTE_NONE) {
        zb_cli_error(cmd, "--offload %s and --recompute %s cannot be combined: a stash is kept, "
                          "offloaded or recomputed (--offload auto weighs recompute too)",
                     zb_offload_name(copt->offload), zb_recompute_name(copt->recompute));
        return ZB_EXIT_USAGE;
    }
    zb_schedule_t *o = NULL;
    zb_err_t err = {0};
    char note[96];
    zb_status_t st = zb_plan_offload(*s, copt->offload, costs, &o, note, &err);
    if (st != ZB_OK) {
        zb_cli_error(cmd, "--offload %s: %s", zb_offload_name(copt->offload), err.msg);
        return zb_cli_exit_code(st);
    }
    if (note[0])
        fprintf(stderr, "zbpp %s: %s\n", cmd, note);
    zb_schedule_free(*s);
    *s = o;
    return ZB_EXIT_OK;
}
