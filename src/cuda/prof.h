/* Internal: the per-kernel-class time breakdown of a stage (benchmarks: zb_cuda_stage_profile in
 * zbpp/cuda.h). Off by default: a context with no profile (ctx->prof NULL) pays one pointer test
 * per op. On, each op is bracketed by two CUDA events on the stage's stream and the elapsed
 * times are summed per class when read (or when the event pool is full). */
#ifndef ZBPP_CUDA_PROF_H
#define ZBPP_CUDA_PROF_H

#include "cuda/ctx.h"

typedef struct zb_cu_prof zb_cu_prof_t;

zb_status_t zb_cu_prof_new(zb_cu_prof_t **out, zb_err_t *err);
void zb_cu_prof_free(zb_cu_prof_t *p);
/* Bracket the ops queued on c->stream between begin and end as class `cls`
 * (zb_cuda_kclass_t). No-ops when c->prof is NULL or the context has failed. */
void zb_cu_prof_begin(zb_cu_ctx_t *c, int cls);
void zb_cu_prof_end(zb_cu_ctx_t *c);
/* Wait for the recorded events, add their times (ms) into ms[ZB_CUDA_KCLASSES], forget them. */
zb_status_t zb_cu_prof_collect(zb_cu_prof_t *p, double *ms, zb_err_t *err);

#define ZB_CU_PROF(c, cls, stmt)                                                                \
    do {                                                                                        \
        zb_cu_prof_begin((c), (cls));                                                           \
        stmt;                                                                                   \
        zb_cu_prof_end((c));                                                                    \
    } while (0)

#endif
