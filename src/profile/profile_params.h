/* The weights a profiler times: the caller's, or random weights of one block when it gives none
 * (every block has the same shapes, so one block timed as each is enough and holds one block's
 * memory). Shared by the CPU and the GPU profiler. */
#ifndef ZB_PROFILE_PARAMS_H
#define ZB_PROFILE_PARAMS_H

#include "zbpp/gpt2.h"

/* *use = params when non-NULL; otherwise fills own (zeroed first; the caller frees it with
 * zb_gpt2_params_free) with one random block of cfg's shape and points *use at it. */
zb_status_t zb_profile_params(const zb_gpt2_config_t *cfg, const zb_gpt2_params_t *params,
                              zb_gpt2_params_t *own, const zb_gpt2_params_t **use, zb_err_t *err);

#endif
