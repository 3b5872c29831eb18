/* zbpp — what the pipeline trainer needs beyond one process: the start-up handshake's items,
 * checkpoints gathered over the transport, and sharded checkpoints (save and resume) written by
 * each rank for itself. Threads (opts->transport == NULL: every rank local) and MPI (one local
 * rank) go through the same functions, so either can resume the other's checkpoints. */
#ifndef ZBPP_PIPELINE_DIST_H
#define ZBPP_PIPELINE_DIST_H

#include "pipeline/pipeline_types.h"
#include "zbpp/train.h"

/* Every process learns whether all succeeded (`local` = this one's status); a failed rank keeps
 * its own message, the others get "rank K could not <what>". Without a transport: `local`. */
zb_status_t pl_agree(pl_t *pl, zb_status_t local, const char *what, zb_err_t *err);

/* Collective start-up check (zb_handshake) over the run's settings, schedule, model, initial
 * state and binary. `local` is this process's start-up status (err holds its message). */
zb_status_t pl_handshake(pl_t *pl, const zb_trainer_t *t, zb_status_t local, zb_err_t *err);

/* Start-up, before planning (collective over every process of the run, whatever `local`, this
 * process's status so far): rank 0 sends each other rank, in rank order, one fixed-size message
 * holding the figures of its profile (pl->prof, or "none" when it did not profile or failed);
 * a rank that wants measured costs (opts->profile) and is fine so far adopts them as its
 * pl->prof, so every rank partitions and plans from identical numbers. The receive waits up to
 * the transport's timeout (rank 0 profiles meanwhile). Returns `local` if it failed, else the
 * transport's status. Without a transport: returns `local`. */
zb_status_t pl_share_profile(pl_t *pl, zb_status_t local, zb_err_t *err);

/* After the last step of a distributed run (collective): replica 0's ranks send their timeline
 * of the last step and their stash peak to rank 0, which fills the measured figures of `rep`
 * (pl_report_measured) and writes the --trace files. Every rank learns whether that worked
 * (then rep->failed_together). */
zb_status_t pl_gather_report(pl_t *pl, zb_pipeline_report_t *rep, zb_err_t *err);

/* Single-file checkpoint (zb_train_save format) of a distributed run: every unit's params and
 * moments go to rank 0, which writes cfg->save_path; all ranks return the same status. */
zb_status_t pl_save_gathered(pl_t *pl, zb_trainer_t *t, zb_err_t *err);

/* Sharded checkpoint at cfg->save_path (see zbpp/checkpoint_sharded.h). Collective. */
zb_status_t pl_save_sharded(pl_t *pl, zb_trainer_t *t, zb_err_t *err);

/* After setup: restore the sharded checkpoint `path` into the local ranks and `t` (step, skipped,
 * data position). Same layout (P, stage->rank map, partition): each rank reads only its own
 * shard; otherwise every shard is read and the full state assembled (all shard files must be
 * readable here). */
zb_status_t pl_resume_sharded(pl_t *pl, zb_trainer_t *t, const char *path, zb_err_t *err);

#endif
