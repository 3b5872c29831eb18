/* zbpp — the flat planner facade (include/zbpp/planner_api.h): thin wrappers that move values in
 * and out of the library's structs, so bindings need no struct layouts. */

#include "zbpp/planner_api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/schedule_io.h"

zb_status_t zb_api_costs_new(int stages, double f, double b, double w, double comm, double mf,
                             double mb, double mw, double mem_limit, zb_costs_t **out,
                             zb_err_t *err)
{
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "costs: no output");
    *out = NULL;
    if (isnan(mem_limit))
        return zb_err_set(err, ZB_EINVAL, "costs: memory limit is NaN");
    zb_costs_t *c = calloc(1, sizeof *c);
    if (!c)
        return zb_err_set(err, ZB_ENOMEM, "costs: out of memory");
    zb_status_t st = zb_costs_init_uniform(c, stages, f, b, w, comm, mf, mb, mw, err);
    if (st != ZB_OK) {
        free(c);
        return st;
    }
    c->mem_limit = mem_limit;
    *out = c;
    return ZB_OK;
}

zb_status_t zb_api_costs_set_stage(zb_costs_t *c, int stage, double f, double b, double w,
                                   double comm, double mf, double mb, double mw, zb_err_t *err)
{
    if (!c || stage < 0 || stage >= c->stages)
        return zb_err_set(err, ZB_EINVAL, "costs: stage %d out of range 0..%d", stage,
                          c ? c->stages - 1 : -1);
    /* Check the one stage through the library's own rules. */
    zb_costs_t one;
    zb_err_t e = {0};
    zb_status_t st = zb_costs_init_uniform(&one, 1, f, b, w, comm, mf, mb, mw, &e);
    if (st != ZB_OK)
        return zb_err_set(err, st, "costs: stage %d: %s", stage, e.msg);
    zb_costs_free(&one);
    c->t_f[stage] = f;
    c->t_b[stage] = b;
    c->t_w[stage] = w;
    c->comm[stage] = comm;
    c->m_f[stage] = mf;
    c->m_b[stage] = mb;
    c->m_w[stage] = mw;
    return ZB_OK;
}

zb_status_t zb_api_costs_set_rank_limits(zb_costs_t *c, int ranks, const double *limits,
                                         zb_err_t *err)
{
    if (!c || !limits || ranks < 1)
        return zb_err_set(err, ZB_EINVAL, "costs: per-rank limits need a cost model and at "
                                          "least one rank (ranks %d)", ranks);
    for (int r = 0; r < ranks; r++)
        if (!(limits[r] >= 0))
            return zb_err_set(err, ZB_EINVAL, "costs: memory limit of rank %d is %g, need >= 0",
                              r, limits[r]);
    return zb_costs_set_rank_limits(c, ranks, limits, err);
}

zb_status_t zb_api_costs_set_recompute(zb_costs_t *c, double t_r, double m_keep, zb_err_t *err)
{
    if (!c)
        return zb_err_set(err, ZB_EINVAL, "costs: no cost model");
    for (int s = 0; s < c->stages; s++)
        if (!(m_keep >= 0 && m_keep <= c->m_f[s]))
            return zb_err_set(err, ZB_EINVAL,
                              "costs: a non-saving F keeps %g, need 0 <= keep <= M_F = %g "
                              "(stage %d)",
                              m_keep, c->m_f[s], s);
    zb_costs_t probe;
    zb_status_t st = zb_costs_clone(&probe, c, err);
    if (st != ZB_OK)
        return st;
    st = zb_costs_set_recompute(&probe, isnan(t_r) ? 0 : t_r, m_keep, err);
    zb_costs_free(&probe);
    if (st != ZB_OK)
        return st;
    st = zb_costs_set_recompute(c, isnan(t_r) ? 0 : t_r, m_keep, err);
    if (st == ZB_OK && isnan(t_r))
        for (int s = 0; s < c->stages; s++)
            c->t_r[s] = c->t_f[s];
    return st;
}

zb_status_t zb_api_costs_rechunk(const zb_costs_t *src, int ranks, int chunks, int placement,
                                 zb_costs_t **out, zb_err_t *err)
{
    if (!src || !out)
        return zb_err_set(err, ZB_EINVAL, "rechunk: no costs");
    *out = NULL;
    if (placement != ZB_PLACE_LOOP && placement != ZB_PLACE_V)
        return zb_err_set(err, ZB_EINVAL, "rechunk: unknown placement %d", placement);
    zb_costs_t *c = calloc(1, sizeof *c);
    if (!c)
        return zb_err_set(err, ZB_ENOMEM, "rechunk: out of memory");
    zb_status_t st = zb_costs_rechunk(src, ranks, chunks, (zb_placement_t)placement, c, err);
    if (st != ZB_OK) {
        free(c);
        return st;
    }
    *out = c;
    return ZB_OK;
}

void zb_api_costs_free(zb_costs_t *c)
{
    if (!c)
        return;
    zb_costs_free(c);
    free(c);
}

const char *zb_api_family(int i)
{
    size_t n;
    const zb_generator_info_t *g = zb_generators(&n);
    return i >= 0 && (size_t)i < n ? g[i].name : NULL;
}

int zb_api_default_chunks(const char *family, int ranks, int microbatches)
{
    zb_gen_params_t p = {.ranks = ranks, .microbatches = microbatches, .time_limit = 1e-3};
    zb_schedule_t *s = NULL;
    int v = 1;
    if (family && zb_generate(family, &p, &s, NULL) == ZB_OK)
        v = s->chunks;
    zb_schedule_free(s);
    return v;
}

zb_status_t zb_api_generate(const char *family, int ranks, int microbatches, int chunks,
                            const zb_costs_t *costs, int any_placement, double time_limit,
                            zb_schedule_t **out, char *note, size_t note_len, zb_err_t *err)
{
    return zb_api_generate_rc(family, ranks, microbatches, chunks, costs, any_placement,
                              time_limit, ZB_RECOMPUTE_NONE, out, note, note_len, err);
}

zb_status_t zb_api_generate_rc(const char *family, int ranks, int microbatches, int chunks,
                               const zb_costs_t *costs, int any_placement, double time_limit,
                               int recompute, zb_schedule_t **out, char *note, size_t note_len,
                               zb_err_t *err)
{
    if (!family || !out)
        return zb_err_set(err, ZB_EINVAL, "generate: no family or output");
    if (note && note_len)
        note[0] = '\0';
    zb_gen_params_t p = {.ranks = ranks, .microbatches = microbatches, .chunks = chunks,
                         .costs = costs, .any_placement = any_placement != 0,
                         .time_limit = time_limit, .recompute = (zb_recompute_t)recompute};
    zb_status_t st = zb_generate(family, &p, out, err);
    if (st == ZB_OK && note && note_len)
        snprintf(note, note_len, "%s", p.note);
    return st;
}

void zb_api_schedule_shape(const zb_schedule_t *s, int shape[5])
{
    shape[0] = s->ranks;
    shape[1] = s->chunks;
    shape[2] = s->stages;
    shape[3] = s->microbatches;
    shape[4] = (int)s->placement;
}

const char *zb_api_schedule_name(const zb_schedule_t *s) { return s->name; }

int zb_api_schedule_len(const zb_schedule_t *s, int rank)
{
    return s && rank >= 0 && rank < s->ranks ? s->rank[rank].len : -1;
}

zb_status_t zb_api_schedule_actions(const zb_schedule_t *s, int rank, int *types, int *stages,
                                    int *mbs, zb_err_t *err)
{
    if (zb_api_schedule_len(s, rank) < 0)
        return zb_err_set(err, ZB_EINVAL, "schedule: rank %d out of range", rank);
    for (int i = 0; i < s->rank[rank].len; i++) {
        const zb_action_t *a = &s->rank[rank].actions[i];
        types[i] = a->type;
        stages[i] = a->stage;
        mbs[i] = a->mb;
    }
    return ZB_OK;
}

zb_status_t zb_api_schedule_push(zb_schedule_t *s, int rank, int type, int stage, int mb,
                                 zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "schedule: none");
    if (type < 0 || type >= ZB_ACT_COUNT)
        return zb_err_set(err, ZB_EINVAL, "schedule: unknown action type %d", type);
    if (zb_schedule_push(s, rank, (zb_action_t){.type = (uint8_t)type, .stage = stage, .mb = mb}) !=
        ZB_OK)
        return zb_err_set(err, ZB_EINVAL, "schedule: cannot add an action to rank %d of %d", rank,
                          s->ranks);
    return ZB_OK;
}

zb_status_t zb_api_simulate(const zb_schedule_t *s, const zb_costs_t *costs, zb_sim_t **out,
                            zb_err_t *err)
{
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "simulate: no output");
    *out = NULL;
    zb_sim_t *sim = calloc(1, sizeof *sim);
    if (!sim)
        return zb_err_set(err, ZB_ENOMEM, "simulate: out of memory");
    zb_status_t st = zb_simulate(s, costs, sim, err);
    if (st != ZB_OK) {
        free(sim);
        return st;
    }
    *out = sim;
    return ZB_OK;
}

void zb_api_sim_free(zb_sim_t *sim)
{
    if (!sim)
        return;
    zb_sim_free(sim);
    free(sim);
}

void zb_api_sim_totals(const zb_sim_t *sim, double totals[4])
{
    totals[0] = sim->makespan;
    totals[1] = sim->span_max;
    totals[2] = sim->busy_max;
    totals[3] = sim->bubble_rate;
}

zb_status_t zb_api_sim_rank(const zb_sim_t *sim, int rank, double per_rank[4], zb_err_t *err)
{
    if (!sim || rank < 0 || rank >= sim->ranks)
        return zb_err_set(err, ZB_EINVAL, "simulation: rank %d out of range", rank);
    per_rank[0] = sim->span[rank];
    per_rank[1] = sim->busy[rank];
    per_rank[2] = sim->peak_mem[rank];
    per_rank[3] = sim->peak_time[rank];
    return ZB_OK;
}

zb_status_t zb_api_sim_times(const zb_sim_t *sim, int rank, double *start, double *end,
                             zb_err_t *err)
{
    if (!sim || rank < 0 || rank >= sim->ranks)
        return zb_err_set(err, ZB_EINVAL, "simulation: rank %d out of range", rank);
    for (int i = 0; i < sim->len[rank]; i++) {
        start[i] = sim->start[rank][i];
        end[i] = sim->end[rank][i];
    }
    return ZB_OK;
}

/* Spans, busy times, makespan and bubble rate from the times (the definitions of schedule.h). */
static void sim_recompute(zb_sim_t *sim)
{
    const zb_schedule_t *s = sim->schedule;
    double first = INFINITY, last = -INFINITY;
    sim->span_max = sim->busy_max = 0;
    for (int r = 0; r < sim->ranks; r++) {
        double f0 = INFINITY, r0 = INFINITY, end = -INFINITY, busy = 0;
        for (int i = 0; i < sim->len[r]; i++) {
            zb_action_type_t t = (zb_action_type_t)s->rank[r].actions[i].type;
            first = fmin(first, sim->start[r][i]);
            r0 = fmin(r0, sim->start[r][i]);
            last = fmax(last, sim->end[r][i]);
            end = fmax(end, sim->end[r][i]);
            if (t == ZB_ACT_F)
                f0 = fmin(f0, sim->start[r][i]);
            if (zb_action_is_compute(t))
                busy += sim->end[r][i] - sim->start[r][i];
        }
        if (!isfinite(f0)) /* no F on this rank: from its first action, as zb_simulate does */
            f0 = r0;
        sim->span[r] = isfinite(f0) && end > f0 ? end - f0 : 0;
        sim->busy[r] = busy;
        sim->span_max = fmax(sim->span_max, sim->span[r]);
        sim->busy_max = fmax(sim->busy_max, busy);
    }
    sim->makespan = last > first ? last - first : 0;
    sim->bubble_rate = sim->span_max > 0 ? (sim->span_max - sim->busy_max) / sim->span_max : 0;
}

zb_status_t zb_api_sim_set_times(zb_sim_t *sim, int rank, const double *start, const double *end,
                                 zb_err_t *err)
{
    if (!sim || rank < 0 || rank >= sim->ranks)
        return zb_err_set(err, ZB_EINVAL, "simulation: rank %d out of range", rank);
    for (int i = 0; i < sim->len[rank]; i++)
        if (!isfinite(start[i]) || !isfinite(end[i]) || end[i] < start[i])
            return zb_err_set(err, ZB_ENUMERIC, "simulation: rank %d action %d: bad interval "
                                                "[%g, %g]", rank, i, start[i], end[i]);
    for (int i = 0; i < sim->len[rank]; i++) {
        sim->start[rank][i] = start[i];
        sim->end[rank][i] = end[i];
    }
    sim_recompute(sim);
    return ZB_OK;
}

/* The CSV body: compute-only or lowered, converting the schedule as needed. */
static zb_status_t write_csv(const zb_schedule_t *s, bool comms, FILE *f, zb_err_t *err)
{
    if (!s)
        return zb_err_set(err, ZB_EINVAL, "csv: no schedule");
    if (zb_schedule_has_comms(s) == comms)
        return zb_csv_write(s, f, err);
    zb_schedule_t *conv = NULL;
    zb_status_t st = comms ? zb_insert_comms(s, &conv, err) : zb_strip_comms(s, &conv, err);
    if (st == ZB_OK)
        st = zb_csv_write(conv, f, err);
    zb_schedule_free(conv);
    return st;
}

static zb_status_t write_body(int format, const zb_schedule_t *s, const zb_costs_t *costs,
                              const zb_sim_t *sim, const char *title, double scale, FILE *f,
                              zb_err_t *err)
{
    if (format != ZB_API_CSV && format != ZB_API_CSV_COMMS && !sim)
        return zb_err_set(err, ZB_EINVAL, "write: this format needs a simulation");
    switch (format) {
    case ZB_API_CSV: return write_csv(s, false, f, err);
    case ZB_API_CSV_COMMS: return write_csv(s, true, f, err);
    case ZB_API_JSON:
        if (!s || !costs)
            return zb_err_set(err, ZB_EINVAL, "json: needs the schedule and costs");
        return zb_json_write_summary(s, costs, sim, f, err);
    case ZB_API_TRACE: return zb_trace_write(sim, scale, f, err);
    case ZB_API_SVG:
    case ZB_API_SVG_ARROWS: {
        zb_svg_opts_t o = {.title = title,
                           .arrows = format == ZB_API_SVG_ARROWS};
        return zb_svg_write_opts(sim, &o, f, err);
    }
    case ZB_API_ASCII: return zb_ascii_write(sim, (int)scale, f, err);
    default: return zb_err_set(err, ZB_EINVAL, "write: unknown format %d", format);
    }
}

/* Close the memory stream and hand its text over (or free it on failure). */
static zb_status_t to_text(FILE *f, char **buf, size_t *size, zb_status_t st, char **text,
                           size_t *len, zb_err_t *err)
{
    /* open_memstream publishes *buf and *size at fclose */
    if (fclose(f) != 0 && st == ZB_OK)
        st = zb_err_set(err, ZB_EIO, "write: cannot finish the text");
    if (st != ZB_OK) {
        free(*buf);
        return st;
    }
    *text = *buf;
    if (len)
        *len = *size;
    return ZB_OK;
}

zb_status_t zb_api_write(int format, const zb_schedule_t *s, const zb_costs_t *costs,
                         const zb_sim_t *sim, const char *title, double scale, char **text,
                         size_t *len, zb_err_t *err)
{
    if (!text)
        return zb_err_set(err, ZB_EINVAL, "write: no output");
    *text = NULL;
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return zb_err_set(err, ZB_ENOMEM, "write: cannot open a memory stream");
    zb_status_t st = write_body(format, s, costs, sim, title, scale, f, err);
    return to_text(f, &buf, &size, st, text, len, err);
}

zb_status_t zb_api_write_overlay(const zb_sim_t *measured, const zb_sim_t *predicted,
                                 const char *title, const char *time_unit, char **text, size_t *len, zb_err_t *err)
{
    if (!text)
        return zb_err_set(err, ZB_EINVAL, "overlay: no output");
    *text = NULL;
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return zb_err_set(err, ZB_ENOMEM, "overlay: cannot open a memory stream");
    zb_svg_opts_t o = {.title = title, .time_unit = time_unit};
    zb_status_t st = zb_svg_write_overlay(measured, predicted, &o, f, err);
    return to_text(f, &buf, &size, st, text, len, err);
}

void zb_api_text_free(char *text) { free(text); }

zb_status_t zb_api_plan(int ranks, int microbatches, const zb_costs_t *costs, double time_limit,
                        zb_plan_t **out, zb_err_t *err)
{
    return zb_api_plan_rc(ranks, microbatches, costs, time_limit, ZB_RECOMPUTE_NONE, out, err);
}

zb_status_t zb_api_plan_rc(int ranks, int microbatches, const zb_costs_t *costs,
                           double time_limit, int recompute, zb_plan_t **out, zb_err_t *err)
{
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "plan: no output");
    *out = NULL;
    zb_plan_t *plan = calloc(1, sizeof *plan);
    if (!plan)
        return zb_err_set(err, ZB_ENOMEM, "plan: out of memory");
    if (recompute < ZB_RECOMPUTE_NONE || recompute > ZB_RECOMPUTE_AUTO) {
        free(plan);
        return zb_err_set(err, ZB_EINVAL, "plan: unknown recompute mode %d", recompute);
    }
    zb_plan_opts_t o = {.solver_time_limit = time_limit, .recompute = (zb_recompute_t)recompute};
    zb_status_t st = zb_plan_compare_opts(ranks, microbatches, costs, &o, plan, err);
    if (st != ZB_OK) {
        free(plan);
        return st;
    }
    *out = plan;
    return ZB_OK;
}

int zb_api_plan_count(const zb_plan_t *plan) { return plan ? plan->count : 0; }

zb_status_t zb_api_plan_row(const zb_plan_t *plan, int i, zb_api_plan_row_t *row, zb_err_t *err)
{
    if (!plan || !row || i < 0 || i >= plan->count)
        return zb_err_set(err, ZB_EINVAL, "plan: row %d out of range", i);
    const zb_plan_row_t *r = &plan->rows[i];
    memset(row, 0, sizeof *row);
    snprintf(row->family, sizeof row->family, "%s", r->family);
    snprintf(row->reason, sizeof row->reason, "%s", r->fits ? "" : r->reason);
    snprintf(row->note, sizeof row->note, "%s", r->note);
    row->chunks = r->chunks;
    row->placement = (int)r->placement;
    row->fits = r->fits ? 1 : 0;
    row->makespan = r->makespan;
    row->bubble_rate = r->bubble_rate;
    row->peak_max = r->peak_max;
    row->messages = (double)r->messages;
    row->volume = r->volume;
    return ZB_OK;
}

void zb_api_plan_free(zb_plan_t *plan)
{
    if (!plan)
        return;
    zb_plan_free(plan);
    free(plan);
}
