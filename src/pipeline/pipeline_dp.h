/* zbpp — data-parallel replicas of the pipeline (pipeline_dp.c) */
#ifndef ZBPP_PL_DP_H
#define ZBPP_PL_DP_H

#include "pipeline/pipeline_types.h"

/* pipeline_dp.c: pl_dp_views: this step's views of the world transport t: the replica's
 * pipeline (*pipe; the world itself with one replica) and the replicas of R's pipeline rank
 * (*dp; NULL with one replica). pl_dp_alloc: the views and buffers of the replica reduction
 * (dp > 1); the reduction of the gradients of
 * R's update ranges over the N replicas of its pipeline rank (group `dp`): every replica ends
 * with g_0 + g_1 + ... + g_{N-1}, added in that order (reduce-scatter then all-gather, each
 * replica summing one chunk); and the mean of the replicas' losses (head ranks). */
zb_status_t pl_dp_views(zb_transport_t *t, pl_rank_t *R, zb_transport_t **pipe,
                        zb_transport_t **dp, zb_err_t *err);
zb_status_t pl_dp_alloc(pl_rank_t *R, zb_err_t *err);
void pl_dp_free(pl_rank_t *R);
zb_status_t pl_dp_reduce(zb_transport_t *dp, pl_rank_t *R, zb_err_t *err);
zb_status_t pl_dp_mean_loss(zb_transport_t *dp, double *loss, zb_err_t *err);
/* After the run (collective with a transport): hash each rank's params + moments and count the
 * ranks that differ from replica 0's (rep->replicas_checked, replicas_differ). */
zb_status_t pl_dp_check(pl_t *pl, zb_pipeline_report_t *rep, zb_err_t *err);

#endif
