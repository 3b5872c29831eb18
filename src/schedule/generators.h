/* Internal: one function per schedule family plus the helpers they share.
 * To add a family: declare its function here, implement it in gen_<family>.c, and add one line to
 * the table in generate.c. */
#ifndef ZBPP_SCHEDULE_GENERATORS_H
#define ZBPP_SCHEDULE_GENERATORS_H

#include "zbpp/schedule.h"

/* Families (each fills *out with a compute-only schedule, or returns ZB_EINVAL with a message). */
zb_status_t zb_gen_gpipe(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_1f1b(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_interleaved(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_looped_bfs(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_zbh1(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);
zb_status_t zb_gen_zbh2(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);

/* Upper bounds that keep every index inside int and memory sane. */
#define ZB_GEN_MAX_RANKS 4096
#define ZB_GEN_MAX_MICROBATCHES (1 << 20)
#define ZB_GEN_MAX_ACTIONS (1LL << 26) /* compute actions over all ranks */

/* Shared preamble: checks P and M against the limits, resolves p->chunks (0 -> default_chunks,
 * must lie in [min_chunks, max_chunks]), checks p->costs->stages == v·P when costs are given, and
 * allocates an empty schedule named `family`. Every failure is ZB_EINVAL/ZB_ENOMEM with a message
 * starting with the family name. */
zb_status_t zb_gen_begin(const char *family, zb_gen_params_t *p, int default_chunks,
                         int min_chunks, int max_chunks, zb_placement_t placement,
                         zb_schedule_t **out, zb_err_t *err);

/* Append one compute action; on ZB_ENOMEM fills err. */
zb_status_t zb_gen_push(zb_schedule_t *s, int rank, zb_action_type_t type, int stage, int mb,
                        zb_err_t *err);

#endif
