/* zbpp — the pipeline trainer's data: the run (pl_t), its plan, a rank (pl_rank_t) and its
 * stages. Types only: the files that work on them each have a header of their own name */
#ifndef ZBPP_PL_TYPES_H
#define ZBPP_PL_TYPES_H

#include <stdbool.h>
#include <stddef.h>

#include "zbpp/executor.h"
#include "zbpp/optim.h"
#include "zbpp/pipeline.h"
#include "zbpp/profile.h"
#include "zbpp/transport.h"
#include "zbpp/workers.h"

typedef struct pl pl_t;

/* What one step (or one validation batch) gives every rank, passed to the rank step by
 * pl_local_run (pl_rank_t.in during the call). */
typedef struct {
    long step;                   /* steps done before this one (lr, AdamW's t, test hooks) */
    const int *inputs, *targets; /* [B·T] the global batch */
    double t0;                   /* zb_now() at the step's start: the timelines' origin */
} pl_step_in_t;

/* A stage's message buffer (msg_buffers.c): n slots of B/M·T·C floats, slot[m] the one
 * microbatch m uses (-1: none), planned from the rank's program so that it holds only the
 * microbatches in flight at once. */
typedef enum { PL_BUF_X_IN, PL_BUF_DX_OUT, PL_BUF_X_OUT, PL_BUF_DX_IN } pl_buf_kind_t;
typedef struct {
    float *mem;
    int n, M;
    int *slot; /* [M] */
    bool held; /* the stage has this buffer */
} pl_msgbuf_t;

/* Which slot of each lifetime region (FW, FB, BW) a stage's microbatches hold
 * (stash_slots.c): n[k] slots, as many as the rank's program holds at once; an offloaded
 * microbatch holds none until its reload. */
typedef struct {
    int n[3];
    int *owner[3]; /* [n[k]] microbatch in the slot, -1 = free */
    int *slot[3];  /* [M] slot of a microbatch, -1 = none */
    unsigned char *away; /* [M] offloaded (an O ran, its L has not): FW and FB in host memory */
    int M;
    /* Where an O's FW and FB slots go back (stash_slots.h, pl_release_key): NULL = at the O;
     * else [M] per microbatch, and pending[k][m] the slot microbatch m's O left occupied until
     * then (-1 none) */
    int *release;
    int *pending[2];
} pl_stash_slots_t;

/* A stage's stashes pooled by lifetime on the host (stash_pool.c): the slots' bytes (bytes[k]
 * each), a split stash per microbatch bound to its slots, and the rank's scratch. */
typedef struct {
    size_t bytes[ZB_GPT2_NUM_REGIONS]; /* per slot, 64-byte multiples */
    pl_stash_slots_t slots;
    char *mem[3];
    zb_gpt2_stash_t **view; /* [M] */
    void *scratch;          /* the rank's (not owned) */
    int M;
} pl_stash_pool_t;

/* One stage held by a rank: its stash pool and message buffers. */
typedef struct {
    int stage;
    zb_gpt2_span_t span;
    pl_stash_pool_t pool;
    pl_msgbuf_t x_in;      /* activations in (not for the embedding stage) */
    pl_msgbuf_t dx_out;    /* gradient of the output (not for the head stage) */
    pl_msgbuf_t own_x_out; /* when the next stage is on another rank */
    pl_msgbuf_t own_dx_in; /* when the previous stage is on another rank */
    pl_msgbuf_t *x_out;    /* own_x_out or the next stage's x_in; NULL for the head stage */
    pl_msgbuf_t *dx_in;    /* own_dx_in or the previous stage's dx_out; NULL for the embedding */
    float *r_out;  /* [B/M·T·C] where an R's output goes (stages with R, not the head) */
} pl_stage_t;

/* A range of parameters this rank updates: `off` into its stage-local buffers, `goff` into the
 * whole model's (checkpoints). */
typedef struct {
    size_t off, count, goff;
} pl_range_t;

typedef struct {
    pl_t *pl;
    const struct pl_rank_dev *dev; /* rank_device.h: pl->dev */
    void *devst;      /* the device's private state: rank_cpu_state.h, or rank_cuda.c's */
    size_t msg_bytes; /* bytes of one message (NC floats, or a device message's handle) */
    int op_index;     /* the action of the training program the executor is at (device timing) */
    const pl_step_in_t *in; /* the current call's inputs (pl_local_run) */
    int rank;    /* pipeline rank p (stages, schedule program) */
    int replica; /* data-parallel replica d */
    int global;  /* d·P + p: index in pl->ranks and rank in the world transport */
    struct pl_replicas *dp; /* pipeline_dp.c: with replicas (dp > 1) only, else NULL */
    /* stage-local: only what this rank's stages use (zb_gpt2_params_alloc_part) */
    zb_gpt2_params_t params;
    zb_gpt2_grads_t grads;
    zb_adamw_state_t opt;
    bool touch_opt; /* moments still untouched zeros: write them before the first step */
    int n_local;
    pl_stage_t *st;      /* [n_local] in stage order */
    int *local_of_stage; /* [S] index into st, -1 if not here */
    int *units;          /* norm units this rank owns */
    int n_owned;
    bool has_embed, has_head;
    pl_range_t *upd; /* parameter ranges this rank updates (owned units + WTE on the head) */
    int n_upd;
    size_t upd_elems;
    size_t backup_elems; /* upd_elems, less the shared WTE on the head rank */
    /* wte_share.c: thread ranks share the tied WTE (params, m, v) of the embedding rank */
    bool wte_shared;
    float *mb_loss;  /* [M] */
    float *wte_chunk; /* [pl_wte_chunk] embedding-only rank: the head's WTE gradient arriving */
    double *vec;     /* [n_units + 1] unit partials, loss last */
    size_t live_peak; /* bytes: the most the rank's stashes held live at once */
    zb_exec_timeline_t tl;
    zb_step_phases_t phases; /* step_phases.c: the last step's phases after its actions */
    int phase_open;          /* the phase begun and not ended, -1 none */
    double phase_began;      /* its host begin (seconds since the step's t0) */
    long skipped;    /* steps skipped so far (same on every rank) */
    long rollbacks;
    /* pipeline_rank.c, post-validation: what the last steps said about going optimistic */
    struct {
        bool clipped;     /* the last step's global norm was clipped (or the step skipped) */
        double wait_ms;   /* its wait at the norm barrier (host) */
        double cost_ms;   /* the last optimistic update's backup + step (device, else host) */
        bool optimistic;  /* this step went optimistic */
    } guess;
    int computes;
    zb_step_stats_t stats;
    float loss;
    zb_workers_t *workers; /* the rank's threads (--threads), entered at each step */
    struct zb_bf16_weight_cache *bf16_weights; /* CPU bf16 products: weights rounded once a step */
    float val_loss;        /* pipeline_eval.c: the last validation batch's loss (every rank) */
} pl_rank_t;

/* The run's plan: partition, lowered schedule, per-stage cost model and unit ownership. Built once
 * at start-up by pl_plan_build from the run's shape, options and profile (the same on every rank
 * and process: the same inputs give the same plan); read-only afterwards. */
typedef struct {
    int S;                /* stages */
    int first[1025];      /* stage s holds transformer blocks first[s] .. first[s+1]-1 */
    zb_schedule_t *sched; /* lowered: every rank's program with its messages */
    zb_costs_t costs;     /* per-stage cost model (prediction, predicted trace), bytes for memory */
    int n_units;
    int *unit_owner;      /* [n_units] the pipeline rank that updates each norm unit */
    int embed_rank, head_rank;
    /* [P] the ranks whose program ends last in the simulation (within 1 % of its makespan):
     * when they finish, no other rank computes, so on a GPU their work after the program (the
     * tied fold, the norm) runs on the whole GPU (pl_cu_on_tail) */
    unsigned char *tail;
    /* [S·M] where the device slots of (stage s, microbatch m)'s O go back (pl_release_key): at
     * the stage's first compute action that starts after the copy ends in the simulation, as
     * the simulator frees them; NULL: the schedule offloads nothing */
    int *o_release;
} pl_plan_t;

struct pl {
    const zb_train_config_t *cfg;
    const zb_pipeline_opts_t *opts;
    /* the run's shape (setup_shape) */
    zb_gpt2_config_t mcfg;
    int P, M, mbB, T;
    zb_gpt2_keep_t keep; /* what a saving F keeps (--keep-activations) */
    int N;      /* data-parallel replicas; pl->ranks holds N·P entries */
    size_t param_count; /* elements of the whole model's parameter buffer */
    int seq_per_replica; /* B/N sequences of the global batch per replica */
    size_t NC; /* B/M · T · C floats per activation message */
    float grad_scale;
    zb_profile_t *prof; /* measured costs (opts->profile), NULL = FLOP model */
    pl_plan_t plan;     /* pl_plan_build; read-only once built */
    const struct pl_rank_dev *dev; /* the device every rank runs on (rank_device.h) */
    pl_rank_t *ranks;
    zb_schedule_t *eval_sched; /* pipeline_eval.c: the forward-only program (NULL = none) */
    void *cuda; /* rank_cuda.c: the run's GPUs and SM partitions (pl_rank_cuda's run_open) */
    int gpus;   /* GPUs the ranks are spread over, 0 = those the CUDA runtime sees (a run); a
                 * prediction without a GPU sets it (zb_pipeline_predict_gpu_memory) */
};

#endif
