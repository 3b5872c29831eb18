/* zbpp — the device seam of a pipeline rank: what a rank does on the device that holds its
 * stages, behind one small table, so that the driver, the executor, the transports and the host
 * paths (tied-embedding exchange, replica reduction, checkpoints, gather) are written once.
 *
 * The rank's host state (pl_rank_t: params, grads, opt) exists for every device; what only one
 * device needs is its own, in R->devst. On the CPU the host state IS the device state
 * (pl_rank_cpu, rank_cpu.c; its private state in rank_cpu_state.h: the stashes' scratch, the
 * backup in free memory, the shared WTE of thread ranks; stash pools and message buffers by
 * lifetime in its stages). On a GPU (pl_rank_cuda, rank_cuda.c) it is a host mirror:
 * parameters, gradients and moments live in one CUDA stage per local pipeline stage, and
 * `grads` / `state` move slices between the two when a host path needs them.
 *
 * The run picks its device once (pl_rank_device); nothing outside the device files asks which
 * device it is: what differs is a hook here, and a NULL hook means "as the host". */
#ifndef ZBPP_RANK_DEVICE_H
#define ZBPP_RANK_DEVICE_H

#include "pipeline/pipeline_types.h"

typedef struct pl_rank_dev {
    const char *name;
    /* ---- the run (pipeline.c): its devices before the ranks are made (rep->device says what
     * was made), freed after them. NULL: nothing to do. ---- */
    zb_status_t (*run_open)(pl_t *pl, zb_pipeline_report_t *rep, zb_err_t *err);
    void (*run_close)(pl_t *pl);
    /* ---- the memory model (pipeline_plan.c, rank_memory.c), before any rank exists ---- */
    /* Bytes a stage's stash holds live after F and after B (the cost model's m_f, m_b, m_w). */
    void (*stage_memory)(const pl_t *pl, const zb_gpt2_span_t *sp, size_t *after_f,
                         size_t *after_b);
    /* Device figures of stage sp: its state, backup and message buffers (stage_static;
     * embed_rank: where the embedding stage is, whose WTE a head stage may read) and
     * its stashes for the program `prog` (stage_stash, into m->stash_alloc). NULL: the host's
     * counting in rank_memory.c (host buffers, stash pools by lifetime). */
    void (*stage_static)(const pl_t *pl, const zb_gpt2_span_t *sp, bool prev_here,
                         bool next_here, int embed_rank, int rank, zb_rank_mem_t *m);
    void (*stage_stash)(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                        const zb_gpt2_span_t *sp, zb_rank_mem_t *m);
    /* The bytes of stage sp's message buffers in the program `prog` (with its comm actions);
     * stage_static counts their bound, a slot per microbatch. NULL: the host's counting. */
    double (*stage_messages)(const pl_t *pl, const zb_rank_program_t *prog, int stage,
                             const zb_gpt2_span_t *sp);
    /* Thread ranks of one replica may hold one tied WTE between them (wte_share.c). */
    bool shares_wte;
    /* ---- a rank ---- */
    /* Before the rank's host state is built: its private state in R->devst. NULL: open makes
     * it. */
    zb_status_t (*init)(pl_rank_t *R, zb_err_t *err);
    /* While the host state is built, for each local stage ls in stage order (prev_here /
     * next_here: the neighbour stage is on this rank too): the stage's host buffers. NULL:
     * none. */
    zb_status_t (*stage_open)(pl_rank_t *R, pl_stage_t *ls, bool prev_here, bool next_here,
                              zb_err_t *err);
    /* After the host state is built (pl_rank_init): the device's copy of it. */
    zb_status_t (*open)(pl_rank_t *R, zb_err_t *err);
    void (*close)(pl_rank_t *R);
    /* Start of a step or of a validation batch, in the rank's thread: gradients zero (training),
     * every stash free. */
    zb_status_t (*step_begin)(pl_rank_t *R, bool training, zb_err_t *err);
    /* Compute action a (F, R, B, W, BW; eval: an F that keeps nothing) of microbatch a->mb on
     * local stage ls; tok = the microbatch's first token in the step's batch. The head's F
     * writes R->mb_loss[a->mb]. */
    zb_status_t (*compute)(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, size_t tok,
                           bool eval, zb_err_t *err);
    /* O / L of microbatch a->mb on local stage ls: its stash to host memory / back (queued;
     * the B after an L finds it there). NULL: the device cannot offload (the planner refuses
     * --offload for it before any rank exists). */
    zb_status_t (*copy)(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, zb_err_t *err);
    /* SEND_F / SEND_B: the message's bytes in host memory (*host, R->msg_bytes: NC floats, or
     * a device's handle); RECV_F / RECV_B: where the transport writes them. */
    zb_status_t (*message)(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, void **host,
                           zb_err_t *err);
    /* A SEND whose bytes `message` only queued (a copy into host memory): *ready = they are
     * there (wait: block until they are). NULL: a SEND's bytes are there when `message`
     * returns. The executor defers such sends (zb_exec_ops_t.send_ready). */
    zb_status_t (*message_ready)(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, bool wait,
                                 bool *ready, zb_err_t *err);
    /* R->grads <-> the device (wte_only: the tied WTE's parts: the embedding's gradient and the
     * head's accumulator to the host, the folded gradient back). NULL: the host is the device. */
    zb_status_t (*grads)(pl_rank_t *R, bool wte_only, bool to_host, zb_err_t *err);
    /* The tied WTE's gradient folded where it lives (the embedding's and head's ranks, after
     * their programs, over the pipeline transport t): *done = it was; else (or NULL) the host
     * path (grads, pl_tied_embedding). Both ends must decide alike. */
    zb_status_t (*tied_wte)(zb_transport_t *t, pl_rank_t *R, bool *done, zb_err_t *err);
    /* R->params and R->opt <-> the device (checkpoints, gather, replica check, resume). NULL:
     * the host is the device. */
    zb_status_t (*state)(pl_rank_t *R, bool to_host, zb_err_t *err);
    /* After the rank's program (training or validation), before its collectives: its queued
     * device work done (buffers other ranks read are free to be written again). NULL: none. */
    zb_status_t (*finish)(pl_rank_t *R, zb_err_t *err);
    /* After a training step's program: the same orders kept on the device instead (no host
     * wait), for the next step's work to follow. NULL: finish. */
    zb_status_t (*program_done)(pl_rank_t *R, zb_err_t *err);
    /* The head's microbatch losses into R->mb_loss once its program ran (training or
     * validation; the device's F queued them without a host wait). NULL: already there. */
    zb_status_t (*losses)(pl_rank_t *R, zb_err_t *err);
    /* --trace on a device: action i of the rank's training program begins / ends (in program
     * order, every action), and after the step (its collectives done) the device's times
     * replace the executor's host times in R->tl. NULL: the executor's times stand. */
    zb_status_t (*time_action)(pl_rank_t *R, int i, bool begin, zb_err_t *err);
    zb_status_t (*step_end)(pl_rank_t *R, zb_err_t *err);
    /* Segment `seg` of the step's phases (step_phases.c) begins / ends: the device records its
     * events; at step_end it writes each segment's times into R->phases (seg_start, seg_end on
     * R->tl's clock) and sums R->phases.device_ms. NULL: the host's times stand. */
    zb_status_t (*time_phase)(pl_rank_t *R, int seg, bool begin, zb_err_t *err);
    /* The rank's memory on the device in zb_rank_mem_t's fields (all but total and rss_peak),
     * from its allocations. */
    void (*memory)(const pl_rank_t *R, zb_rank_mem_t *m);
    /* Bytes in use on the devices the run's ranks are on, as the device itself counts them
     * (everything on them, not only the ranks' buffers); < 0 when it cannot say. NULL: a
     * device whose memory is the process's (the CPU: the peak RSS says it). */
    double (*bytes_in_use)(const pl_t *pl);
    /* The squared norm of norm unit `unit` (owned by this rank) of the folded gradients. */
    zb_status_t (*unit_sumsq)(pl_rank_t *R, int unit, double *out, zb_err_t *err);
    /* All of them at once: vec[u] = unit_sumsq of every owned unit u (the same bits), fewer
     * host waits. NULL: unit_sumsq per unit. */
    zb_status_t (*units_sumsq)(pl_rank_t *R, double *vec, zb_err_t *err);
    /* The optimizer's parts; the policy (barrier, or post-validation with rollback) is the
     * rank's, written once (pipeline_rank.c). update: zb_train_update's rules with the global
     * partials `sumsq` (fills R->stats) and the step on the device. optimistic_elems: how many
     * leading elements of the update ranges an optimistic step may touch (0 = none; all of them
     * = optimistic_elems(R) == R->backup_elems). backup: save (or restore) params and moments of
     * those K. step_elems: AdamW with clip factor 1 on elements [from, to) of the update ranges. */
    zb_status_t (*update)(pl_rank_t *R, const double *sumsq, zb_err_t *err);
    size_t (*optimistic_elems)(const pl_rank_t *R);
    zb_status_t (*backup)(pl_rank_t *R, size_t K, bool save, zb_err_t *err);
    zb_status_t (*step_elems)(pl_rank_t *R, size_t from, size_t to, float lr, long adam_t,
                              zb_err_t *err);
} pl_rank_dev_t;

extern const pl_rank_dev_t pl_rank_cpu;  /* rank_cpu.c */
extern const pl_rank_dev_t pl_rank_cuda; /* rank_cuda.c */

/* The device of a run with options o: a GPU with o->cuda, else the CPU. */
static inline const pl_rank_dev_t *pl_rank_device(const zb_pipeline_opts_t *o)
{
    return o->cuda ? &pl_rank_cuda : &pl_rank_cpu;
}

#endif
