/* zbpp — pipeline trainer internals shared by pipeline.c (driver) and pipeline_rank.c (one rank's
 * state and step). */
#ifndef ZBPP_PIPELINE_INTERNAL_H
#define ZBPP_PIPELINE_INTERNAL_H

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

/* A stage's stashes pooled by lifetime (stash_pool.c): slots of the FW, FB and BW regions
 * (n[k] of bytes[k] each, as many as the rank's program holds at once), a split stash per
 * microbatch bound to its slots, and the rank's scratch. */
typedef struct {
    size_t bytes[ZB_GPT2_NUM_REGIONS]; /* per slot, 64-byte multiples */
    int n[3];
    char *mem[3];
    int *owner[3]; /* [n[k]] microbatch in the slot, -1 = free */
    int *slot[3];  /* [M] slot of a microbatch, -1 = none */
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

enum { PL_MAX_SPARE = 64 };

typedef struct {
    pl_t *pl;
    const struct pl_rank_dev *dev; /* rank_device.h: the CPU's, or a GPU's with its state */
    void *devst;
    size_t msg_bytes; /* bytes of one message (NC floats, or a device message's handle) */
    int op_index;     /* the action of the training program the executor is at (device timing) */
    const pl_step_in_t *in; /* the current call's inputs (pl_local_run) */
    int rank;    /* pipeline rank p (stages, schedule program) */
    int replica; /* data-parallel replica d */
    int global;  /* d·P + p: index in pl->ranks and rank in the world transport */
    /* views of the world for this step: the replica's pipeline and the replicas of rank p */
    zb_transport_group_t pipe_view, dp_view;
    float *dp_flat; /* [upd_elems] gradients of the update ranges, packed (dp > 1) */
    float *dp_in, *dp_acc; /* [one chunk] a replica's chunk, the running sum (dp > 1) */
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
    /* optimistic.c: the rank's stash and message memory, free while the optimizer runs, holds
     * the post-validation backup of the first pl_optimistic_elems elements */
    struct { float *p; size_t n; } spare[PL_MAX_SPARE];
    int n_spare;
    size_t spare_floats;
    /* wte_share.c: thread ranks share the tied WTE (params, m, v) of the embedding rank */
    bool wte_shared;
    float *wte_joint[3];  /* embedding rank: the shared blocks of params, m, v */
    size_t wte_head_rest; /* embedding rank: floats before WTE in them (the head's others) */
    float *mb_loss;  /* [M] */
    float *wte_chunk; /* [pl_wte_chunk] embedding-only rank: the head's WTE gradient arriving */
    double *vec;     /* [n_units + 1] unit partials, loss last */
    size_t live_peak;
    void *stash_scratch; /* [stash_scratch_bytes] scratch of every stash of the rank */
    size_t stash_scratch_bytes;
    zb_exec_timeline_t tl;
    long skipped;    /* steps skipped so far (same on every rank) */
    long rollbacks;
    int computes;
    zb_step_stats_t stats;
    float loss;
    zb_workers_t *workers; /* the rank's threads (--threads), entered at each step */
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
    pl_rank_t *ranks;
    zb_schedule_t *eval_sched; /* pipeline_eval.c: the forward-only program (NULL = none) */
    void *cuda; /* rank_cuda.c: the run's GPUs and SM partitions (opts->cuda) */
};

/* pipeline_local.c: the ranks this process runs — every rank of every replica as a thread
 * (a thread world of mailbox_capacity per rank), or with opts->transport the process's one rank.
 * pl_local_run runs fn on each of them with `in` (pl_rank_t.in) and returns the first failure.
 * pl_local_reporter: the rank whose figures this process reports (global rank 0 with threads). */
typedef struct {
    pl_t *pl;
    zb_transport_t *net;      /* MPI: the process's rank; NULL = threads */
    zb_thread_world_t *world; /* threads */
    int first, n;             /* global ranks first .. first + n - 1 run here */
    void **args;              /* [n] their pl_rank_t */
} pl_local_t;
zb_status_t pl_local_open(pl_local_t *L, pl_t *pl, int mailbox_capacity, zb_err_t *err);
void pl_local_close(pl_local_t *L);
zb_status_t pl_local_run(pl_local_t *L, zb_rank_fn fn, const pl_step_in_t *in, zb_err_t *err);
pl_rank_t *pl_local_rank(const pl_local_t *L, int i);
pl_rank_t *pl_local_reporter(const pl_local_t *L);

/* pipeline_plan.c. pl_profile: measure the costs when opts->profile (with a transport: on rank 0
 * only, which pl_share_profile then sends to the others) into pl->prof.
 * pl_plan_build: the plan of the run from pl's shape, options and profile (pl is not changed):
 * the schedule (family, file or planned with costs, then --recompute), the partition its cost
 * model balances, validated against the memory limit, lowered; fills the prediction of `rep`
 * (bubble, span, busy, stash peaks, whole-rank memory per rank, stages, partition, note).
 * pl_plan_free: the plan and the profile. */
zb_status_t pl_profile(pl_t *pl, const zb_gpt2_params_t *params, zb_err_t *err);
zb_status_t pl_plan_build(const pl_t *pl, pl_plan_t *plan, zb_pipeline_report_t *rep,
                          zb_err_t *err);
void pl_plan_free(pl_t *pl);

/* pipeline_trace.c: the --trace files (measured, and predicted with the plan's costs). */
zb_status_t pl_write_traces(pl_t *pl, const zb_sim_t *measured, zb_err_t *err);

/* pipeline_report.c: pl_report_run: after the run, the figures of the local ranks into rep
 * (rollbacks, stash peaks, whole-rank memory, RSS) and, when `stepped`, the measured bubble and
 * --trace files of the last step (replica 0's timelines; over a transport gathered to rank 0 by
 * pl_gather_report, pipeline_dist.h). pl_report_measured: those from replica 0's P timelines and
 * stash peaks. */
zb_status_t pl_report_run(const pl_local_t *L, bool stepped, zb_pipeline_report_t *rep,
                          zb_err_t *err);
zb_status_t pl_report_measured(pl_t *pl, const zb_exec_timeline_t *tls, const double *peaks,
                               zb_pipeline_report_t *rep, zb_err_t *err);

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
/* The zb_rank_fn of one training step (compute, tied exchange, norm, optimizer). */
zb_status_t pl_rank_step(zb_transport_t *t, void *arg, zb_err_t *err);

/* The tied WTE gradient crosses between the embedding and the head rank in chunks of this many
 * floats (1 MiB): the embedding rank then needs no second WTE-sized buffer. */
#define PL_WTE_CHUNK ((size_t)1 << 18)
size_t pl_wte_chunk(size_t wte_elems);
/* m_f, m_b, m_w of every stage in bytes from the stash layout of pl->keep (partition `first`
 * of S stages, mbB, T; on GPUs the device stash's), and m_keep 0: a non-saving F's input stays
 * in its receive buffer (or the batch), counted with the messages. */
void pl_stage_memory(const pl_t *pl, int S, const int *first, zb_costs_t *costs);

/* stash_pool.c. pl_stash_plan: the FW, FB, BW slots `stage` needs in a rank's program (at least
 * one FW and FB: validation). pl_stash_stage_bytes: what its pool allocates (and its scratch
 * need in *scratch). The pool: init, free, reset (step start: all free); begin binds and
 * returns microbatch a->mb's stash for compute action a (taking slots; NULL + err when the
 * program breaks the order), end gives back what a leaves unneeded; eval: a stash for
 * forwards that keep nothing (between steps); live: bytes the stashes hold now; bytes: pool
 * allocation (scratch not included). */
void pl_stash_plan(const zb_rank_program_t *prog, int stage, int n[3]);
size_t pl_stash_stage_bytes(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                            size_t *scratch);
zb_status_t pl_stash_pool_init(pl_stash_pool_t *p, const pl_t *pl,
                               const zb_rank_program_t *prog, const zb_gpt2_span_t *span,
                               int stage, zb_err_t *err);
void pl_stash_pool_free(pl_stash_pool_t *p);
void pl_stash_pool_reset(pl_stash_pool_t *p);
zb_gpt2_stash_t *pl_stash_pool_begin(pl_stash_pool_t *p, const zb_action_t *a, zb_err_t *err);
void pl_stash_pool_end(pl_stash_pool_t *p, const zb_action_t *a);
zb_gpt2_stash_t *pl_stash_pool_eval(pl_stash_pool_t *p);
size_t pl_stash_pool_live(const pl_stash_pool_t *p);
size_t pl_stash_pool_bytes(const pl_stash_pool_t *p);
/* msg_buffers.c: the slots buffer `kind` of `stage` needs in a rank's program (neighbour_here:
 * the neighbour stage that writes it is on the same rank), and each microbatch's slot into
 * slot[M] when not NULL; -1 when out of memory. pl_msgbuf_init plans and allocates one;
 * pl_msgbuf_at: microbatch mb's B/M·T·C floats, NULL when the buffer has none for it. */
int pl_msgbuf_plan(const zb_rank_program_t *prog, int stage, pl_buf_kind_t kind,
                   bool neighbour_here, int M, int *slot);
zb_status_t pl_msgbuf_init(pl_msgbuf_t *b, const zb_rank_program_t *prog, int stage,
                           pl_buf_kind_t kind, bool neighbour_here, int M, size_t NC);
void pl_msgbuf_free(pl_msgbuf_t *b);
float *pl_msgbuf_at(const pl_msgbuf_t *b, int mb, size_t NC);
/* True when the program has an R of `stage` (the stage then owns an R output buffer). */
bool pl_stage_recomputes(const zb_rank_program_t *prog, int stage);

/* wte_share.c (threads, one replica): pl_wte_shared says whether the embedding and the head rank
 * share one WTE; pl_wte_share_embed (embedding rank, after its buffers are made: head_count is
 * the head rank's parameter count) moves params, m, v into the shared blocks; pl_wte_share_head
 * (head rank, after the embedding rank) lays its buffers over them, WTE last, and makes its
 * gradient's WTE part its head accumulator; pl_wte_share_release before freeing a rank's
 * buffers; pl_wte_fold_shared (embedding rank, after both ranks' last W): its WTE gradient +=
 * the head's accumulator. */
bool pl_wte_shared(const pl_t *pl, int embed_rank, int head_rank);
zb_status_t pl_wte_share_embed(pl_t *pl, pl_rank_t *R, size_t head_count, zb_err_t *err);
zb_status_t pl_wte_share_head(pl_t *pl, pl_rank_t *R, zb_err_t *err);
void pl_wte_share_release(pl_rank_t *R);
void pl_wte_fold_shared(pl_rank_t *R);

/* optimistic.c: pl_spare_collect lists the rank's stash pools, scratch and message buffers
 * (after they are made); pl_optimistic_elems: how many elements of its update ranges (in
 * order, the head's shared WTE excluded) an optimistic step may touch, a third of that spare
 * memory; pl_backup_prefix saves (or restores) params, m, v of the first K there;
 * pl_update_elems: AdamW with clip factor 1 on elements [from, to) of the update ranges. */
void pl_spare_collect(pl_rank_t *R);
size_t pl_optimistic_elems(const pl_rank_t *R);
void pl_backup_prefix(pl_rank_t *R, size_t K, bool save);
void pl_update_elems(pl_rank_t *R, size_t from, size_t to, float lr, long adam_t);

/* rank_memory.c: whole-rank memory (zb_rank_mem_t). pl_rank_backs_up: post-validation keeps a
 * backup (more than one rank). pl_static_bound: the most any rank's non-activation memory can be
 * with S stages partitioned by `first`, over the placements a schedule may use (message
 * buffers as the comm pass places their actions; a lowered file may need more, which the exact
 * check after planning sees) (what a
 * --mem-limit leaves the activations is the limit minus this). pl_mem_predict: rank's figures
 * from `plan` (its partition and program) with the memory model's activation peak;
 * pl_mem_measure: from its allocations and the stash's live peak. */
bool pl_rank_backs_up(const pl_t *pl);
double pl_static_bound(const pl_t *pl, int S, const int *first);
void pl_mem_predict(const pl_t *pl, const pl_plan_t *plan, int rank, double activations,
                    zb_rank_mem_t *m);
/* What rank `rank` of the compute-only schedule s holds besides its activations (bytes). */
double pl_rank_fixed_bytes(const pl_t *pl, const zb_schedule_t *s, int rank);
void pl_mem_measure(const pl_rank_t *R, zb_rank_mem_t *m);

/* rank_memory_cuda.c: the same figures for a rank on a GPU, its device memory (pl->opts->cuda).
 * pl_cuda_stage_memory: a device stash's live bytes after F and after B; pl_cuda_stage_static
 * adds stage sp's state, backup and device message buffers to m; pl_cuda_stage_stash adds its
 * stashes (one per microbatch in flight in `prog`) and scratch to m->stash_alloc. */
void pl_cuda_stage_memory(const pl_t *pl, const zb_gpt2_span_t *sp, size_t *after_f,
                          size_t *after_b);
void pl_cuda_stage_static(const pl_t *pl, const zb_gpt2_span_t *sp, bool prev_here,
                          bool next_here, zb_rank_mem_t *m);
void pl_cuda_stage_stash(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                         const zb_gpt2_span_t *sp, zb_rank_mem_t *m);

/* pipeline_dp.c: buffers for the replica reduction (dp > 1); the reduction of the gradients of
 * R's update ranges over the N replicas of its pipeline rank (group `dp`): every replica ends
 * with g_0 + g_1 + ... + g_{N-1}, added in that order (reduce-scatter then all-gather, each
 * replica summing one chunk); and the mean of the replicas' losses (head ranks). */
zb_status_t pl_dp_alloc(pl_rank_t *R, zb_err_t *err);
void pl_dp_free(pl_rank_t *R);
zb_status_t pl_dp_reduce(zb_transport_t *dp, pl_rank_t *R, zb_err_t *err);
zb_status_t pl_dp_mean_loss(zb_transport_t *dp, double *loss, zb_err_t *err);
/* After the run (collective with a transport): hash each rank's params + moments and count the
 * ranks that differ from replica 0's (rep->replicas_checked, replicas_differ). */
zb_status_t pl_dp_check(pl_t *pl, zb_pipeline_report_t *rep, zb_err_t *err);

/* pipeline_eval.c: validation through the pipeline. pl_eval_plan: the forward-only program
 * (pl->eval_sched) from the lowered training program. pl_eval_step: the zb_rank_fn of one
 * validation batch (pl->inputs / targets): F of every microbatch on every stage, each stash
 * emptied right after its F; every rank ends with the batch's loss in R->val_loss.
 * pl_validate: the mean loss over the K validation batches, run on the ranks of this process. */
zb_status_t pl_eval_plan(pl_t *pl, zb_err_t *err);
zb_status_t pl_eval_step(zb_transport_t *t, void *arg, zb_err_t *err);
struct zb_val;
zb_status_t pl_validate(pl_local_t *L, struct zb_val *val, float *loss, zb_err_t *err);

#endif
