/* zbpp — a stage's message buffers sized by the microbatches in flight (msg_buffers.c) */
#ifndef ZBPP_PL_MSG_BUFFERS_H
#define ZBPP_PL_MSG_BUFFERS_H

#include "pipeline/pipeline_types.h"

/* msg_buffers.c: the slots buffer `kind` of `stage` needs in a rank's program (neighbour_here:
 * the neighbour stage that writes it is on the same rank), and each microbatch's slot into
 * slot[M] when not NULL; -1 when out of memory. pl_msgbuf_init plans and allocates one;
 * pl_msgbuf_at: microbatch mb's B/M·T·C floats, NULL when the buffer has none for it. */
int pl_msgbuf_plan(const zb_rank_program_t *prog, int stage, pl_buf_kind_t kind,
                   bool neighbour_here, int M, int *slot);
/* pl_msgbuf_plan_spread: every kind by its intervals (x_in and a same-rank gradient too, which
 * pl_msgbuf_plan keeps one per microbatch for the CPU's planner), over at least `least` slots
 * (at most M), each interval taking the free slot freed longest ago, so that a slot's next writer
 * comes as late in the program as it can (a GPU rank's sent slot is read by a copy that may
 * still be running after its SEND; docs/cuda.md "Message slots"). */
int pl_msgbuf_plan_spread(const zb_rank_program_t *prog, int stage, pl_buf_kind_t kind,
                          bool neighbour_here, int M, int least, int *slot);
zb_status_t pl_msgbuf_init(pl_msgbuf_t *b, const zb_rank_program_t *prog, int stage,
                           pl_buf_kind_t kind, bool neighbour_here, int M, size_t NC);
void pl_msgbuf_free(pl_msgbuf_t *b);
float *pl_msgbuf_at(const pl_msgbuf_t *b, int mb, size_t NC);

#endif
