/* zbpp — the private state of a pipeline rank on a GPU (R->devst of pl_rank_cuda): its stages
 * on the device, their message slots and events, the timer. Only the rank_cuda*.c files include
 * it. */
#ifndef ZBPP_PL_RANK_CUDA_STATE_H
#define ZBPP_PL_RANK_CUDA_STATE_H

#include "cuda/stream.h"
#include "pipeline/pipeline_types.h"
#include "pipeline/rank_cuda_stash.h"
#include "zbpp/cuda.h"

/* A device message buffer: n slots of NC floats, microbatch m's in slot[m] (-1: none), planned
 * by lifetime (pl_cuda_msg_slots; docs/cuda.md "Message slots"). A slot may still be read by a
 * copy on another stream when the program gives it to the next microbatch, so its next writer
 * waits for an event first: reuse[k], the download of a staged SEND that read slot k (borrowed
 * from the staging's events); read[k], recorded after each B that reads a staged slot of
 * dx_out, which the upload into it waits for. */
typedef struct {
    float *mem;
    int n, *slot;
    struct CUevent_st **reuse; /* [n] or NULL */
    struct CUevent_st **read;  /* [n] or NULL */
} cu_buf_t;

/* Microbatch m's slot of b; NULL when b has none for it (or b is no buffer). */
static inline float *cu_slot(const cu_buf_t *b, int m, size_t NC)
{
    return b && b->mem && m >= 0 && b->slot[m] >= 0 ? b->mem + (size_t)b->slot[m] * NC : NULL;
}

typedef struct {
    zb_cuda_stage_t *stage;
    pl_cu_stash_pool_t pool; /* the stashes, by lifetime (rank_cuda_stash.c) */
    /* device message buffers; r_out: an R's output */
    cu_buf_t x_in, dx_out, own_x_out, own_dx_in;
    float *r_out;
    cu_buf_t *x_out, *dx_in; /* own_* or the neighbour stage's x_in / dx_out on this rank */
    bool prev_here, next_here;
    /* device messages: the events recorded after each outgoing slot is written, the handles
     * sent (out_*) and received (in_*), [M] each */
    struct CUevent_st **ev_x_out, **ev_dx_in;
    struct cu_msg *out_x, *out_dx, *in_x, *in_dx;
    /* staging (all but device messages): pinned host slots [M·NC] of what the stage sends (pin_x_out,
     * pin_dx_in) and receives (pin_x_in, pin_dx_out); events [2M] (k = m forward, M + m
     * backward): the producing F/B done (ev_prod), its download done (ev_down), the upload done
     * (ev_up); arrived[k]: 0 nothing, 1 the transport filled the pinned slot, 2 upload queued */
    float *pin_x_out, *pin_dx_in, *pin_x_in, *pin_dx_out;
    struct CUevent_st **ev_prod, **ev_down, **ev_up;
    unsigned char *arrived;
} cu_stage_t;

/* A device message: where the sender's slot is and the event after which it may be read. */
typedef struct cu_msg {
    const float *src;
    struct CUevent_st *ev;
    int device;
} cu_msg_t;

typedef struct {
    int device;
    bool device_messages;
    bool null_messages; /* --gpu-messages none: skip_copies from the second training step */
    bool skip_copies;
    long first_step;    /* the run's first training step (-1 before it) */
    /* the step's gradient zeroing, queued when the rank first has to wait anyway (zero_grads) */
    bool zero_due;
    zb_cuda_timer_t *timer; /* CUDA events around every action of the program */
    double t_begin;         /* host time (since the step's t0) of the timer's step start */
    int begin_due;          /* the action whose begin event waits for its kernels, -1 none */
    zb_cuda_timer_t *phase_timer; /* events around the step's phases (ZB_STEP_SEGMENTS) */
    struct CUevent_st *ev_tied;   /* rank_cuda_tied.c: the tied WTE's fold, ordered by it */
    /* One WTE for two thread ranks on a GPU (pl_cuda_wte_shared): the embedding's rank records
     * ev_wte after its step's update; the head's rank (wte_owner: the embedding's rank) waits
     * for it before its next step or validation reads WTE. */
    struct CUevent_st *ev_wte;
    const pl_rank_t *wte_owner;
    /* Device messages: the ranks that pull from this rank's sent slots (pullers, global indices;
     * they are also the ranks it pulls from: a stage sends both ways to a neighbour on another
     * rank) and ev_done[k], recorded after the rank's training program for puller k
     * (cuda_program_done): each waits for its own before its next step writes the slots it
     * sends again, instead of a host wait for the program. */
    struct CUevent_st **ev_done;
    int *pullers, n_pullers;
    bool no_backup_room; /* post-validation's backup did not fit: no more guesses */
    cu_stage_t *st; /* [n_local], as R->st */
} cu_rank_t;

static inline cu_rank_t *CU(const pl_rank_t *R) { return (cu_rank_t *)R->devst; }

#endif
