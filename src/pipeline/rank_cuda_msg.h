/* zbpp — a GPU rank's messages (rank_cuda_msg.c) */
#ifndef ZBPP_PL_RANK_CUDA_MSG_H
#define ZBPP_PL_RANK_CUDA_MSG_H

#include "pipeline/rank_cuda_state.h"

/* A message buffer of stage ls (rank_cuda_state.h, cu_buf_t): its slots (pl_cuda_msg_slots),
 * device memory and the events its reuse waits for; pl_cu_buf_free frees one (zeroed or
 * initialised). pl_cu_before_write: the stream waits until the copy that last read m's slot is
 * done, before the compute that writes it; pl_cu_after_read: the B that read m's slot of a
 * staged dx_out records it for the next upload into that slot. */
zb_status_t pl_cu_buf_init(pl_rank_t *R, pl_stage_t *ls, cu_stage_t *cs, cu_buf_t *b,
                           pl_buf_kind_t kind, zb_err_t *err);
void pl_cu_buf_free(cu_buf_t *b);
zb_status_t pl_cu_before_write(cu_stage_t *cs, cu_buf_t *b, int m, zb_err_t *err);
zb_status_t pl_cu_after_read(cu_stage_t *cs, cu_buf_t *b, int m, zb_err_t *err);
/* Set-up of a stage's messages (after its device buffers): device messages' events and handle
 * arrays, or the staging's pinned slots and events; pl_cu_staging_free frees the latter. */
zb_status_t pl_cu_device_messages_init(pl_rank_t *R, cu_stage_t *cs, zb_err_t *err);
zb_status_t pl_cu_staging_init(pl_rank_t *R, pl_stage_t *ls, cu_stage_t *cs, zb_err_t *err);
void pl_cu_staging_free(const pl_rank_t *R, cu_stage_t *cs);
/* Staging: queue the upload of every message the transport put in a pinned slot since the last
 * call. */
zb_status_t pl_cu_upload_arrived(pl_rank_t *R, zb_err_t *err);
/* Microbatch m's message into the device slot dst of stage ls before the compute that reads it
 * (forward: the activation, else the gradient): the staged upload waited for, or the sender's
 * slot copied after its event. */
zb_status_t pl_cu_bring_in(pl_rank_t *R, pl_stage_t *ls, cu_stage_t *cs, bool forward, int m,
                           float *dst, zb_err_t *err);
/* The device's message hooks (rank_device.h): the bytes of a message action in host memory (a
 * pinned slot, or a device message's handle), and whether a queued SEND's bytes are there. */
zb_status_t pl_cu_message(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, void **host,
                          zb_err_t *err);
zb_status_t pl_cu_message_ready(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, bool wait,
                                bool *ready, zb_err_t *err);
/* The tied WTE's gradient folded on the device (rank_cuda_tied.c): *done = it was (one rank
 * holding both ends, or thread ranks on one GPU); else the caller takes the host path. Called
 * by the embedding's and the head's ranks (and a rank holding both), after their programs. */
zb_status_t pl_cu_tied_wte(zb_transport_t *t, pl_rank_t *R, bool *done, zb_err_t *err);

#endif
