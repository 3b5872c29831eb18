/* Internal: V-shaped families: zb-v, v-half, v-min (gen_v.c), dualpipev
 * (gen_dualpipev.c), interleaved-zb (gen_interleaved_zb.c). */
#ifndef ZBPP_GEN_V_H
#define ZBPP_GEN_V_H

#include "zbpp/schedule.h"

/* Append the DualPipeV program to every rank of the empty V-placed schedule s (M >= 2P). With
 * with_w false only its F/B order is written (the template zb-v places W's into). cut > 0 moves
 * that many chunk-0 warm-up forwards of each rank into the steady state (less memory). */
zb_status_t zb_v_template(zb_schedule_t *s, bool with_w, int cut, zb_err_t *err);

/* Append the periodic V construction (v-half when half, else v-min; see gen_v_pattern.c) to
 * every rank of the empty V-placed schedule s. ZB_ENOMEM, or ZB_ESCHEDULE if the building block
 * does not fit this P. */
zb_status_t zb_v_pattern(zb_schedule_t *s, bool half, zb_err_t *err);

/* Append zb-v's timed construction on the per-chunk costs c (2P stages; gen_zbv_timed.c) to
 * every rank of the empty V-placed schedule s (M >= 2P). ZB_ENOMEM, or ZB_ESCHEDULE if none of
 * its variants completes (then the unit-slot construction stands alone). */
zb_status_t zb_zbv_timed(zb_schedule_t *s, const zb_costs_t *c, zb_err_t *err);

/* Registered families (see gen_zbv.c, gen_v.c, gen_dualpipev.c, gen_interleaved_zb.c, auto_search.c,
 * optimal_glpk.c). */
zb_status_t zb_gen_zbv(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_vhalf(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_vmin(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_dualpipev(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_interleaved_zb(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_auto(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_optimal(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);

#endif
