/* zbpp — one pipeline rank: its state, its step and the host paths every device shares
 * (pipeline_rank.c) */
#ifndef ZBPP_PL_RANK_H
#define ZBPP_PL_RANK_H

#include "pipeline/pipeline_types.h"

/* Where a rank's initial state comes from: each rank builds only its own units from it, never
 * the whole model. Nothing set (a sharded resume, restored afterwards): zeros. */
typedef struct {
    const char *model_file; /* llm.c model file (--init-from) */
    const char *checkpoint; /* single-file training checkpoint (--resume): params and moments */
    bool fresh;             /* random weights from `seed` (the bits of a whole-model init) */
    uint64_t seed;
    uint64_t file_hash;     /* out: zb_hash_bytes of the model file (the MPI handshake's) */
} pl_init_t;

/* Rank state pl->ranks[global] (pipeline rank global % P of replica global / P). */
zb_status_t pl_rank_init(pl_t *pl, int global, pl_init_t *init, long skipped, zb_err_t *err);
void pl_rank_free(pl_rank_t *R);
/* Post-validation keeps a backup (more than one rank: with one, its own norm is the global). */
bool pl_rank_backs_up(const pl_t *pl);
/* The zb_rank_fn of one training step (compute, tied exchange, norm, optimizer). */
zb_status_t pl_rank_step(zb_transport_t *t, void *arg, zb_err_t *err);

/* The tied WTE gradient crosses between the embedding and the head rank in chunks of this many
 * floats (1 MiB): the embedding rank then needs no second WTE-sized buffer. */
#define PL_WTE_CHUNK ((size_t)1 << 18)
size_t pl_wte_chunk(size_t wte_elems);

/* The host paths every device shares. pl_tied_embedding: the tied WTE fold and exchange on
 * R->grads (wte_shared: meet, fold on the embedding rank). pl_ranks_state: every local rank's
 * params and moments to the host (or back), a no-op on the CPU. */
zb_status_t pl_tied_embedding(zb_transport_t *t, pl_rank_t *R, zb_err_t *err);
zb_status_t pl_ranks_state(pl_t *pl, bool to_host, zb_err_t *err);

/* The local stage of `stage` (ZB_ESCHEDULE naming it when not here); the first
 * token of microbatch m in the step's batch; the host bytes of message action a (checked): a
 * SEND's are there when it returns unless `queue` (then the device's message_ready says
 * when). */
pl_stage_t *pl_rank_stage(pl_rank_t *R, int stage, zb_err_t *err);
size_t pl_rank_tok(const pl_rank_t *R, int m);
zb_status_t pl_rank_payload(pl_rank_t *R, const zb_action_t *a, bool queue, void **at,
                            zb_err_t *err);

#endif
