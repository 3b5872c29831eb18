/* zbpp — the planner behind a flat, FFI-friendly facade (used by the Python module python/zbpp
 * through ctypes; usable from any language that can call C).
 *
 * Only ints, doubles, strings and opaque pointers cross this interface: no struct layouts, so a
 * binding does not have to mirror zb_schedule_t, zb_costs_t, zb_sim_t or zb_plan_t. Objects made
 * here (costs, simulations, plans, texts) are freed with the matching zb_api_*_free; schedules
 * with zb_schedule_free (schedule.h). Every function that can fail returns a zb_status_t and fills
 * err (may be NULL) with a one-line message. See docs/python.md. */
#ifndef ZBPP_PLANNER_API_H
#define ZBPP_PLANNER_API_H

#include <stddef.h>

#include "zbpp/error.h"
#include "zbpp/plan.h"
#include "zbpp/schedule.h"
#include "zbpp/svg.h"

/* ---- cost models ---- */

/* A cost model of `stages` stages, every stage with F/B/W times f, b, w, message latency comm,
 * memory deltas mf, mb, mw (summing to 0) and a per-rank memory limit mem_limit (INFINITY =
 * none; NaN is rejected). Same checks as zb_costs_init_uniform. Free with zb_api_costs_free. */
zb_status_t zb_api_costs_new(int stages, double f, double b, double w, double comm, double mf,
                             double mb, double mw, double mem_limit, zb_costs_t **out,
                             zb_err_t *err);
/* Set stage `stage`'s values; ZB_EINVAL for a bad stage or value (the model is unchanged). */
zb_status_t zb_api_costs_set_stage(zb_costs_t *c, int stage, double f, double b, double w,
                                   double comm, double mf, double mb, double mw, zb_err_t *err);
/* Recompute costs of every stage: an R takes t_r (NaN = each stage's F time) and a non-saving
 * F keeps m_keep (in [0, M_F]). ZB_EINVAL for a negative or too large value (unchanged then). */
zb_status_t zb_api_costs_set_recompute(zb_costs_t *c, double t_r, double m_keep, zb_err_t *err);
/* One memory limit per rank (INFINITY = none), replacing mem_limit (zb_costs_set_rank_limits):
 * `ranks` must be the P of the schedules the model is used with. ZB_EINVAL for a NaN or negative
 * limit or ranks < 1 (unchanged then). */
zb_status_t zb_api_costs_set_rank_limits(zb_costs_t *c, int ranks, const double *limits,
                                         zb_err_t *err);
/* zb_costs_rechunk (plan.h) into a new heap cost model. */
zb_status_t zb_api_costs_rechunk(const zb_costs_t *src, int ranks, int chunks, int placement,
                                 zb_costs_t **out, zb_err_t *err);
void zb_api_costs_free(zb_costs_t *c);

/* ---- schedules ---- */

/* Name of the i-th registered schedule family (display order), NULL past the end. */
const char *zb_api_family(int i);
/* The family's default chunks per rank for (ranks, microbatches), read off a cost-free
 * generation; 1 for families that need costs to say. */
int zb_api_default_chunks(const char *family, int ranks, int microbatches);
/* zb_generate with its parameters spelled out. chunks 0 = the family's default; costs may be NULL
 * for the handcrafted families; note (may be NULL, note_len bytes) receives the generator's
 * remark ("auto chose ..."). *out owned by the caller. */
zb_status_t zb_api_generate(const char *family, int ranks, int microbatches, int chunks,
                            const zb_costs_t *costs, int any_placement, double time_limit,
                            zb_schedule_t **out, char *note, size_t note_len, zb_err_t *err);
/* zb_api_generate with a recompute mode (zb_recompute_t: 0 none, 1 all, 2 auto; see
 * zb_gen_params_t.recompute). */
zb_status_t zb_api_generate_rc(const char *family, int ranks, int microbatches, int chunks,
                               const zb_costs_t *costs, int any_placement, double time_limit,
                               int recompute, zb_schedule_t **out, char *note, size_t note_len,
                               zb_err_t *err);
/* shape[0..4] = ranks, chunks, stages, microbatches, placement (zb_placement_t). */
void zb_api_schedule_shape(const zb_schedule_t *s, int shape[5]);
const char *zb_api_schedule_name(const zb_schedule_t *s);
/* Number of actions on `rank` (-1 for a bad rank). */
int zb_api_schedule_len(const zb_schedule_t *s, int rank);
/* Copy rank's actions into types/stages/mbs (each zb_api_schedule_len entries). */
zb_status_t zb_api_schedule_actions(const zb_schedule_t *s, int rank, int *types, int *stages,
                                    int *mbs, zb_err_t *err);
/* Append one action (type is a zb_action_type_t). After pushing R's, call
 * zb_schedule_mark_recompute (schedule.h) so their F's are marked non-saving. */
zb_status_t zb_api_schedule_push(zb_schedule_t *s, int rank, int type, int stage, int mb,
                                 zb_err_t *err);

/* ---- simulation ---- */

/* zb_simulate into a heap result; `s` must outlive it. Free with zb_api_sim_free. */
zb_status_t zb_api_simulate(const zb_schedule_t *s, const zb_costs_t *costs, zb_sim_t **out,
                            zb_err_t *err);
void zb_api_sim_free(zb_sim_t *sim);
/* totals[0..3] = makespan, span_max (T), busy_max, bubble_rate. */
void zb_api_sim_totals(const zb_sim_t *sim, double totals[4]);
/* per_rank[0..3] for `rank` = span, busy, peak_mem, peak_time. ZB_EINVAL for a bad rank. */
zb_status_t zb_api_sim_rank(const zb_sim_t *sim, int rank, double per_rank[4], zb_err_t *err);
/* Start and end times of rank's actions, in the order of the simulated program (its length is
 * zb_api_schedule_len of the simulated schedule, which may be the lowered one). */
zb_status_t zb_api_sim_times(const zb_sim_t *sim, int rank, double *start, double *end,
                             zb_err_t *err);

/* Replace rank's start/end times (e.g. with measured ones, same action order) and recompute the
 * makespan, spans, busy times and bubble rate (peak memory is kept). ZB_EINVAL for a bad rank,
 * ZB_ENUMERIC for a non-finite time or end < start. */
zb_status_t zb_api_sim_set_times(zb_sim_t *sim, int rank, const double *start, const double *end,
                                 zb_err_t *err);

/* ---- text formats (schedule_io.h), written to a malloc'd NUL-terminated string ---- */

typedef enum {
    ZB_API_CSV,       /* PyTorch CSV, compute only (comms stripped if present) */
    ZB_API_CSV_COMMS, /* PyTorch CSV with SEND/RECV (inserted if absent) */
    ZB_API_JSON,      /* summary; needs costs and sim */
    ZB_API_TRACE,     /* Chrome/Perfetto trace; needs sim; 1 time unit = `scale` microseconds */
    ZB_API_SVG,       /* Gantt chart; needs sim; title may be NULL */
    ZB_API_SVG_ARROWS,/* the same with message arrows between ranks */
    ZB_API_ASCII      /* terminal grid; needs sim; `scale` = max width (0 = 200) */
} zb_api_format_t;

/* Write `s` (CSV formats) or `sim` (the others; JSON also needs s and costs) in `format` into a
 * new string *text (length *len, may be NULL). Free with zb_api_text_free. */
zb_status_t zb_api_write(int format, const zb_schedule_t *s, const zb_costs_t *costs,
                         const zb_sim_t *sim, const char *title, double scale, char **text,
                         size_t *len, zb_err_t *err);
/* The measured-vs-predicted overlay (zb_svg_write_overlay; time_unit NULL = cost units). */
zb_status_t zb_api_write_overlay(const zb_sim_t *measured, const zb_sim_t *predicted,
                                 const char *title, const char *time_unit, char **text, size_t *len, zb_err_t *err);
void zb_api_text_free(char *text);

/* ---- plan: every family compared (zb_plan_compare) ---- */

/* One row, copied out of a zb_plan_t. */
typedef struct {
    char family[48];
    char reason[512]; /* why it does not fit (empty when it fits) */
    char note[256];
    int chunks;
    int placement;    /* zb_placement_t */
    int fits;         /* 1 or 0 */
    double makespan, bubble_rate, peak_max;
    double messages;  /* cross-rank messages per step */
    double volume;
} zb_api_plan_row_t;

/* zb_plan_compare into a heap result (costs: one stage per rank). Free with zb_api_plan_free. */
zb_status_t zb_api_plan(int ranks, int microbatches, const zb_costs_t *costs, double time_limit,
                        zb_plan_t **out, zb_err_t *err);
/* zb_api_plan with a recompute mode (0 none, 1 all, 2 auto: zb_plan_opts_t.recompute). */
zb_status_t zb_api_plan_rc(int ranks, int microbatches, const zb_costs_t *costs,
                           double time_limit, int recompute, zb_plan_t **out, zb_err_t *err);
/* zb_api_plan_rc with an offload mode too (0 none, 1 all, 2 auto: zb_plan_opts_t.offload). */
zb_status_t zb_api_plan_ro(int ranks, int microbatches, const zb_costs_t *costs,
                           double time_limit, int recompute, int offload, zb_plan_t **out,
                           zb_err_t *err);
/* zb_costs_set_offload with stash_bytes NAN for the default (M_F as bytes). */
zb_status_t zb_api_costs_set_offload(zb_costs_t *c, double stash_bytes, double bw_d2h,
                                     double bw_h2d, double copy_latency, zb_err_t *err);
/* zb_plan_offload (schedule.h) of `s` with mode 0 none, 1 all, 2 auto; note (may be NULL,
 * note_len bytes) receives auto's choice. *out owned by the caller. */
zb_status_t zb_api_offload(const zb_schedule_t *s, int mode, const zb_costs_t *costs,
                           zb_schedule_t **out, char *note, size_t note_len, zb_err_t *err);
/* zb_generate_offload (schedule.h) with its parameters spelled out (mode 0 none, 1 all,
 * 2 auto); costs for chunks*ranks stages. */
zb_status_t zb_api_generate_offload(const char *family, int ranks, int microbatches, int chunks,
                                    const zb_costs_t *costs, double time_limit, int mode,
                                    zb_schedule_t **out, char *note, size_t note_len,
                                    zb_err_t *err);
int zb_api_plan_count(const zb_plan_t *plan);
zb_status_t zb_api_plan_row(const zb_plan_t *plan, int i, zb_api_plan_row_t *row, zb_err_t *err);
void zb_api_plan_free(zb_plan_t *plan);

#endif
