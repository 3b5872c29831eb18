/* zbpp — the pipeline trainer: GPT-2 training with P pipeline ranks (and N data-parallel
 * replicas of them), any schedule of the registry, bit-identical to the single-process trainer
 * with the same microbatches (`--ranks 1`). The ranks are threads of this process, or with a
 * transport (MPI) one rank per process; their stages run on the CPU or on GPUs
 * (zb_pipeline_opts_t.cuda).
 *
 * Each rank holds its own copy of the parameters, its own gradients and the AdamW moments of the
 * parameters it owns, like an MPI process would. Per step: the driver loads the batch; every rank
 * runs its lowered program through the executor (F, B, W on its stages, activations and gradients
 * through the transport); the ranks holding the first and the last stage exchange their parts of
 * the tied embedding gradient; the per-unit squared norms are gathered in a fixed order; each rank
 * steps its optimizer (barrier, or optimistic post-validation with rollback). */
#ifndef ZBPP_PIPELINE_H
#define ZBPP_PIPELINE_H

#include <stdbool.h>
#include <stdio.h>

#include "zbpp/error.h"
#include "zbpp/gpt2.h"
#include "zbpp/profile.h"
#include "zbpp/schedule.h"
#include "zbpp/train.h"
#include "zbpp/transport.h"

/* ---- options ---- */

typedef enum {
    ZB_OPT_SYNC_POST_VALIDATION, /* step optimistically, validate, roll back if wrong (default) */
    ZB_OPT_SYNC_BARRIER          /* every rank waits for the global norm before stepping */
} zb_opt_sync_t;

/* "post-validation" or "barrier" (the --optimizer-sync values); ZB_EINVAL names the flag. */
zb_status_t zb_opt_sync_parse(const char *s, zb_opt_sync_t *out, zb_err_t *err);

typedef struct {
    int ranks;            /* P >= 1 */
    /* Data-parallel replicas N >= 1 (0 counts as 1) of the whole P-rank pipeline: N·P ranks,
     * global rank = d·P + p (replica-major). Replica d trains on sequences [d·B/N, (d+1)·B/N) of
     * the global batch B in M microbatches; each stage's gradients are summed over the replicas
     * in replica order 0, 1, ..., N-1 before the norm and the (identical) optimizer step. */
    int dp;
    const char *schedule; /* family in the registry ("1f1b", "zb-h1", ...) */
    /* A PyTorch pipelining CSV (compute-only or with comms) to train with instead of a family:
     * its P, v, placement and M must agree with ranks, chunks (0 = any) and the config's
     * microbatches; it is validated (and lowered if compute-only) like a generated one. */
    const char *schedule_file;
    int chunks;           /* v; 0 = the family's default */
    zb_opt_sync_t opt_sync;
    double mem_limit;     /* bytes of a rank's whole footprint (zb_rank_mem_t.total); <= 0 =
                           * none. The schedule's activations get what params, gradients,
                           * optimizer state, backup and message buffers leave. */
    /* One limit per rank instead of mem_limit (bytes, rank r's at [r], each > 0; exactly
     * `ranks` values: mem_limit_ranks_n must equal ranks). NULL = mem_limit for every rank.
     * The caller owns the array. Ranks differ in what they hold besides activations (the
     * embedding's and the head's ranks, the post-validation backup), so "half of each rank's
     * activations" needs one limit each. */
    const double *mem_limit_ranks;
    int mem_limit_ranks_n;
    const char *trace_path; /* measured timeline of the last step (Chrome trace); NULL = none */
    const char *trace_svg_path; /* measured vs predicted timeline of the last step in one SVG
                                 * chart (zb_svg_write_overlay); NULL = none */
    bool profile;         /* measure stage costs for partition + prediction (else FLOP model) */
    bool pin;             /* pin rank r's thread to core r when there are enough cores */
    double timeout;       /* seconds a rank may wait for a message (<= 0 = forever) */
    /* Faults injected by the project's tests (an internal struct); NULL = none. */
    const struct zb_pipeline_test_hooks *test_hooks;
    /* Distributed run (docs/mpi.md): NULL = every rank a thread of this process; else
     * this process runs only rank transport->rank of transport->size == ranks processes (MPI),
     * checks with the others at start-up (zb_handshake) and reports figures of its own rank. */
    struct zb_transport *transport;
    /* --save writes a sharded checkpoint (zbpp/checkpoint_sharded.h) instead of one file. */
    bool sharded_checkpoint;
    /* Activation recomputation (docs/runtime.md, "Recompute"): none; all (every F non-saving, an
     * R before each backward); auto (only when the schedule does not fit mem_limit). The
     * losses and parameters are the same bits whichever is chosen. */
    zb_recompute_t recompute;
    /* Activation offload (docs/offload.md; GPU ranks only): none; all (every stash to pinned
     * host memory after its F, back before its B); auto (keep, offload or recompute each
     * (stage, microbatch) to fit mem_limit at the least cost). Excludes `recompute` (auto
     * recomputes where offloading cannot fit). The planner times a copy by the bandwidths the
     * GPU profile measures (`profile`), else as long as the stage's F. Same bits whichever is
     * chosen. */
    zb_offload_t offload;
    /* What a saving F keeps (--keep-activations): ALL, or SELECTIVE (the LayerNorm and GELU
     * outputs are recomputed in W; zbpp/gpt2.h). Orthogonal to `recompute`; same bits. */
    zb_gpt2_keep_t keep;
    /* --device cuda (docs/cuda.md "Pipeline ranks on GPUs"): each rank's stages on GPU
     * (global rank) mod (visible GPUs), messages staged through host buffers; ranks sharing a
     * GPU get SM partitions. NULL = the CPU. With a transport (MPI): this process's rank on GPU
     * rank mod N, messages staged through host buffers (device messages: threads only). */
    const struct zb_cuda_train_opts *cuda;
} zb_pipeline_opts_t;

/* ranks 1, dp 1, schedule "1f1b", post-validation, no limit, no trace, FLOP model, pin, timeout 600 s,
 * hooks off. */
void zb_pipeline_opts_defaults(zb_pipeline_opts_t *o);

/* A rank's whole memory footprint in bytes (docs/runtime.md, "Whole-rank memory"). `total` is
 * params + grads + optimizer + backup + messages + activations, where activations is the peak of
 * the live activation stash (what the schedule's memory model predicts and the stash accounts);
 * stash_alloc is what the rank's stash pools allocate ahead for it (scratch included), which
 * process RSS reflects. */
typedef struct {
    double params;      /* stage-local parameters */
    double grads;       /* their gradients (+ the tied head's WTE accumulator) */
    double optimizer;   /* AdamW moments m, v */
    double backup;      /* post-validation: params, m, v of the updated ranges before a step */
    double messages;    /* activation / gradient message buffers of its stages */
    double activations; /* peak live activation stash */
    double stash_alloc; /* activation stash pools as allocated */
    double workspace;   /* what the rank's calls use besides (GPU: cuBLASLt's workspace, the
                         * column-sum partials, the norm's rows, the optimizer's tables; CPU:
                         * the bf16 products' weight copies), allocated when the rank opens */
    double total;       /* params + grads + optimizer + backup + messages + activations +
                         * workspace */
    double rss_peak;    /* measured only: peak resident set of the process holding the rank
                         * (with threads, the whole process: every rank shares it) */
} zb_rank_mem_t;

/* The bytes a rank's buffers take as allocated: its total with the stash pools' allocation
 * (stash_alloc) in place of the live activation peak. */
double zb_rank_mem_allocated(const zb_rank_mem_t *m);

/* The whole-rank memory zbpp train would predict for each rank of `sched` (compute-only or
 * lowered), without training: partition `first` (first[S] = layers), per-stage `costs` (their
 * times and memory-delta layout; the deltas themselves are recomputed in bytes for `keep`),
 * microbatches of mbB sequences of T tokens, optimizer sync `sync`, one replica, ranks as threads
 * of one process (they share the tied WTE; MPI processes each hold it: docs/runtime.md). out[r]
 * for every rank r < sched->ranks (rss_peak 0). ZB_EINVAL for mismatched shapes. */
zb_status_t zb_pipeline_predict_memory(const zb_gpt2_config_t *cfg, const int *first,
                                       const zb_schedule_t *sched, const zb_costs_t *costs,
                                       int mbB, int T, zb_opt_sync_t sync, zb_gpt2_keep_t keep,
                                       zb_rank_mem_t *out, zb_err_t *err);
/* The same for ranks on GPUs (`zbpp train --device cuda`): each rank's device memory as the run
 * predicts it, from the CUDA stage's layout figures (computed on the host: no GPU needed, but the
 * CUDA backend, else ZB_EUNSUPPORTED); cuda gives the precision and the message kind, one GPU
 * (thread ranks of one GPU share the tied WTE), the stash kept whole (no selective keep on GPUs). */
zb_status_t zb_pipeline_predict_gpu_memory(const zb_cuda_train_opts_t *cuda,
                                           const zb_gpt2_config_t *cfg, const int *first,
                                           const zb_schedule_t *sched, const zb_costs_t *costs,
                                           int mbB, int T, zb_opt_sync_t sync,
                                           zb_rank_mem_t *out, zb_err_t *err);

/* The parts of a training step after the pipeline's actions, in the order a step may run them
 * (the optimizer may run twice, e.g. an optimistic step and the rest; rollback = restore and
 * redo). */
typedef enum {
    ZB_PHASE_DRAIN,     /* the host waits for the rank's queued device work (end of the span) */
    ZB_PHASE_TIED_WTE,  /* the tied embedding's gradient exchange between its two stages */
    ZB_PHASE_REPLICAS,  /* the gradient sum over data-parallel replicas */
    ZB_PHASE_GRAD_NORM, /* the squared norms of the rank's units */
    ZB_PHASE_NORM_SYNC, /* the norm partials summed over the ranks (waits for the slowest) */
    ZB_PHASE_BACKUP,    /* post-validation: params and moments saved */
    ZB_PHASE_OPTIMIZER, /* AdamW */
    ZB_PHASE_ROLLBACK,  /* post-validation: restore and redo with the global norm */
    ZB_PHASES
} zb_step_phase_t;

/* Short name of a phase ("drain", "tied-wte", ...); "?" out of range. */
const char *zb_step_phase_name(zb_step_phase_t p);

#define ZB_STEP_SEGMENTS 16 /* phase intervals kept per step for the trace */

/* One rank's phases of the last step. host_ms: host wall time in each phase; device_ms: the
 * device's time between events recorded around it on the rank's stream (a GPU), the host's on
 * the CPU. The segments: each phase interval in step order (seg_phase = its zb_step_phase_t), in
 * seconds on the clock of the step's timeline (device times where there are), for the trace.
 * All doubles: sent as one row over a transport. */
typedef struct {
    double host_ms[ZB_PHASES];
    double device_ms[ZB_PHASES];
    double segments;
    double seg_phase[ZB_STEP_SEGMENTS], seg_start[ZB_STEP_SEGMENTS], seg_end[ZB_STEP_SEGMENTS];
} zb_step_phases_t;

/* The compute actions the report compares with the cost model, in this order. */
enum { ZB_REPORT_KINDS = 5 };
extern const zb_action_type_t zb_report_kinds[ZB_REPORT_KINDS]; /* F, B, W, BW, R */

/* What the run measured and what the models predicted. */
typedef struct {
    int stages;
    int first[1025];          /* partition (first[stages] = layers) */
    double step_ms_median;
    double step_ms_last;      /* the last step's wall time (its actions: makespan_measured) */
    /* the bubble, measured (last step, the executor's timeline: on a GPU the CUDA events of
     * the actions) and predicted (simulator, the cost model used), both zb_sim_span_idle:
     * 1 - sum of busy / (P x span) */
    double bubble_measured;
    double bubble_predicted;
    /* per-rank figures of replica 0's P ranks: arrays of `ranks` entries, allocated by
     * zb_pipeline_train (or zb_pipeline_report_init), freed by zb_pipeline_report_free */
    int ranks;
    double *peak_stash_bytes;      /* measured, per rank */
    double *predicted_stash_bytes; /* memory model (zb_simulate), per rank */
    long rollbacks;           /* post-validation steps that had to be undone and redone */
    char note[512];           /* e.g. what the cost model was */
    char offload_note[384];   /* a schedule with O/L: how many, and the copies' model ("" none) */
    char device[256];         /* --device cuda: GPUs and SM partitions of the ranks ("" = CPU) */
    /* distributed run: the error (if any) is known to every rank, so processes may exit
     * normally instead of aborting the job (start-up checks, checkpoint agreement) */
    bool failed_together;
    /* the bubble's parts (last step; measured in seconds, predicted in the cost model's unit,
     * seconds when profiled): T = the largest per-rank span, busy = the largest compute time */
    double span_measured, busy_measured, span_predicted, busy_predicted;
    /* the schedule's actions from the first start to the last end over every rank (the span
     * above leaves out the time before a rank's first F: the pipeline's fill); the step's time
     * outside its actions is step_ms_last - makespan_measured */
    double makespan_measured, makespan_predicted;
    /* when the last step's first action began, seconds after the step's start (the host's
     * clock; on a GPU the device's, anchored at the rank's step start): the part of the time
     * outside the actions that comes before them */
    double first_action_at;
    /* the cost model against the run, per rank and compute action (ZB_REPORT_KINDS: F, B, W,
     * BW, R): the mean time of one action in the last step, measured and predicted (the
     * simulator's, under the costs the bubble's prediction used: seconds when profiled), 0
     * where the rank ran none; [ranks * ZB_REPORT_KINDS], filled with `measured` */
    double *action_measured, *action_predicted;
    /* the measured figures (bubble, span, busy, peaks, trace) are those of replica 0's P ranks;
     * with an external transport they are gathered to its rank 0 and filled there only */
    bool measured;            /* bubble_measured & co. are filled */
    zb_step_phases_t *phases; /* [ranks] replica 0's, last step; filled when `measured` */
    /* --dp > 1: after the run every rank's parameters and AdamW moments were hashed and compared
     * with replica 0's rank of the same pipeline position; replicas_differ counts mismatches
     * (0 = all replicas identical, as they must be) */
    bool replicas_checked;
    int replicas_differ;
    /* MPI transport: this process's point-to-point traffic and blocked time INSIDE training
     * steps, summed over the steps run (start-up, checkpoints and the final report excluded);
     * zero with the thread transport */
    double step_bytes_sent, step_bytes_received, step_msgs_sent, step_msgs_received;
    double step_wait_s;
    /* whole-rank memory of replica 0's ranks: the model's prediction (every process) and the
     * allocators' accounting (mem_measured_ok: threads, or gathered to MPI rank 0);
     * rss_peak_bytes: this process's peak resident set (VmHWM), 0 if unknown */
    zb_rank_mem_t *mem_predicted, *mem_measured; /* per rank, as above */
    bool mem_measured_ok;
    bool mem_on_device; /* the figures are GPU memory (--device cuda; docs/cuda.md) */
    double rss_peak_bytes;
    /* GPU ranks of one process: the bytes in use on their GPUs at the end of the run, as the
     * driver counts them (cudaMemGetInfo: the CUDA contexts, cuBLASLt's own memory and other
     * processes included, beside the ranks' tables); < 0 = not known (CPU, MPI) */
    double device_bytes_in_use;
} zb_pipeline_report_t;

/* A zeroed report with its per-rank arrays for `ranks` ranks (>= 1). ZB_EINVAL, ZB_ENOMEM (then
 * nothing is left allocated). zb_pipeline_train does this itself: a report it filled is freed
 * with zb_pipeline_report_free, also after a failed run (a zeroed report is fine; it is zeroed
 * again). */
zb_status_t zb_pipeline_report_init(zb_pipeline_report_t *rep, int ranks, zb_err_t *err);
void zb_pipeline_report_free(zb_pipeline_report_t *rep);

/* One rank's own figures of a run, for the report's per-rank lines: its stash peak and
 * rollbacks, and over an external transport its traffic and blocked time inside steps (summed
 * over the steps run) and its median step time. */
typedef struct {
    double stash_peak_bytes, rollbacks;
    double bytes_sent, bytes_received, msgs_sent, msgs_received, wait_s;
    double step_ms_median;
} zb_pipeline_rank_figures_t;

/* After zb_pipeline_train over transport `net` (collective, every process with its own report):
 * all[g] = global rank g's figures, for g < net->size, on every process. */
zb_status_t zb_pipeline_gather_rank_figures(zb_transport_t *net, int ranks,
                                            const zb_pipeline_report_t *rep,
                                            zb_pipeline_rank_figures_t *all, zb_err_t *err);

/* Train with the pipeline. Checks before training starts: schedule exists and accepts (P, M,
 * v); stages <= layers; B % M == 0; sizes fit message tags; mem limit met by the memory model
 * (ZB_EMEMLIMIT). Then like zb_train_run: resume/init, steps, progress to `human`, metrics,
 * checkpoints (gathered from the ranks; written only after a complete step, never after a
 * failure). With final_params != NULL, *final_params receives a copy of the trained parameters
 * (free with zb_gpt2_params_free). A rank failure stops every rank; the error names the rank.
 * report (may be NULL) must be zeroed or hold an earlier call's figures (their arrays are freed
 * first); it is initialised for opts->ranks ranks and filled. Free it with
 * zb_pipeline_report_free whatever the result. */
zb_status_t zb_pipeline_train(const zb_train_config_t *cfg, const zb_pipeline_opts_t *opts,
                              FILE *human, zb_train_summary_t *summary,
                              zb_pipeline_report_t *report, zb_gpt2_params_t *final_params,
                              zb_err_t *err);

#endif
