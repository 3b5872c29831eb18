/* zbpp — a pipeline rank on a GPU (rank_device.h; docs/cuda.md "Pipeline ranks on GPUs"): one
 * CUDA stage (zbpp/cuda.h) per local pipeline stage, global rank g on GPU g mod N (MPI: the
 * process's place on its machine mod N), ranks that
 * share a GPU each on their own SM partition's stream (green contexts, zb_cuda_partitions_new);
 * all stages of a rank queue on one stream, so a stage reading its neighbour's output on the
 * same rank is ordered after it.
 *
 * First version, kept simple and exact:
 * - messages are staged through pinned host slots on each stage's copy stream (thread ranks
 *   and MPI alike): a SEND queues the download after its producer and the executor hands the
 *   slot to the transport once it is done (a deferred send), a RECV's slot is uploaded at the
 *   rank's next device call and the consumer's stream waits for it; or, with device messages
 *   (thread ranks), a handle and an event; a neighbouring stage on the same rank reads the
 *   device buffer directly;
 * - one device buffer slot per microbatch for each message buffer; the stashes pooled by
 *   lifetime with the CPU rank's slot rules (rank_cuda_stash.c over stash_slots.c: FW, FB and
 *   BW slots as the program holds them at once; a non-saving F gives its slots back when it
 *   ends and its R takes them again, recomputing from the kept input); a head stage on the
 *   embedding stage's rank reads that stage's WTE (zb_cuda_stage_new_tied), a head stage on
 *   another rank keeps its own copy, stepped with the same folded gradient and moments, so the
 *   copies stay the same bits;
 * - the tied fold on the device (rank_cuda_tied.c) for thread ranks on one GPU and a rank
 *   holding both ends; otherwise it, the replica reduction and checkpoints reuse the CPU's
 *   host paths on the rank's host mirror (pl_rank_t params / grads / opt), via slice copies;
 * - grad norms summed on the device (one host wait per stage) and AdamW in one launch per
 *   stage; post-validation backs up params and moments in a plain device buffer per stage
 *   (zb_cuda_state_backup, queued) and steps all of it optimistically (rank_cuda_update.c);
 * - every training step times its actions (the begin event after the message waits) and its
 *   phases with CUDA events: the measured bubble and --trace are the device's.
 * Its private state: rank_cuda_state.h; its messages: rank_cuda_msg.c; its optimizer side:
 * rank_cuda_update.c. Uses only the zb_cuda_*
 * API (zbpp/cuda.h, cuda/stream.h), so it is compiled in every build. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"
#include "pipeline/pipeline_rank.h"
#include "pipeline/rank_cuda.h"
#include "pipeline/rank_cuda_msg.h"
#include "pipeline/rank_cuda_state.h"
#include "pipeline/rank_cuda_update.h"
#include "pipeline/rank_device.h"
#include "pipeline/rank_memory_cuda.h"
#include "zbpp/cuda.h"
#include "cuda/stream.h"
#include "zbpp/transport_mpi.h"
#include "zbpp/util.h"

/* ---- the run's GPUs ---- */

typedef struct {
    int ndev;
    zb_cuda_partitions_t **parts; /* [ndev] NULL: the device's ranks use their own streams */
} cu_run_t;

/* The GPU of global rank g: g mod N with thread ranks; under MPI, the process's place among
 * its machine's processes mod N (zb_mpi_local_rank), N = the GPUs the process sees. */
static int gpu_of(const pl_t *pl, int g, int ndev)
{
    int local = g, local_size;
    if (pl->opts->transport)
        zb_mpi_local_rank(pl->opts->transport, &local, &local_size);
    return local % ndev;
}

int pl_cuda_ranks_on(const pl_t *pl, int ndev, int d)
{
    if (pl->opts->transport) /* MPI: a process holds one rank, on a GPU of its own machine */
        return 1;
    int world = pl->P * pl->N;
    return world / ndev + (d < world % ndev);
}

zb_status_t pl_cuda_open(pl_t *pl, zb_pipeline_report_t *rep, zb_err_t *err)
{
    const zb_cuda_train_opts_t *o = pl->opts->cuda;
    if (o->precision != ZB_CUDA_FP32 && o->precision != ZB_CUDA_TF32 &&
        o->precision != ZB_CUDA_BF16)
        return zb_err_set(err, ZB_EINVAL, "unknown precision %d", (int)o->precision);
    if (o->gemm_sms < 0)
        return zb_err_set(err, ZB_EINVAL, "gemm_sms (the SMs the GEMMs are planned for) must be "
                                          ">= 0, got %d", o->gemm_sms);
    zb_status_t st = zb_cuda_require_device(0, err);
    int ndev = 0;
    if (st == ZB_OK)
        st = zb_cuda_device_count(&ndev, err);
    if (st != ZB_OK)
        return st;
    cu_run_t *run = calloc(1, sizeof *run);
    if (!run || !(run->parts = calloc((size_t)ndev, sizeof *run->parts))) {
        free(run);
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the GPUs of the pipeline");
    }
    run->ndev = ndev;
    pl->cuda = run;
    int world = pl->P * pl->N;
    int used = world < ndev ? world : ndev;
    /* MPI: this process holds one rank, on GPU (its place on its machine) mod N (N = the GPUs
     * this process sees); green contexts are per process, so ranks of several processes on one
     * GPU time-share it, and only --sm-per-rank K makes a partition (of K SMs, its own) */
    const zb_transport_t *net = pl->opts->transport;
    int local = 0, local_size = 1;
    zb_mpi_local_rank(net, &local, &local_size);
    size_t n = net ? (size_t)snprintf(rep->device, sizeof rep->device,
                                      "MPI rank %d of %d (process %d of %d on its machine) on "
                                      "GPU %d of %d (messages staged through host buffers)",
                                      net->rank, world, local, local_size,
                                      gpu_of(pl, net->rank, ndev), ndev)
                   : (size_t)snprintf(rep->device, sizeof rep->device, "%d rank%s on %d GPU%s",
                                      world, world == 1 ? "" : "s", used, used == 1 ? "" : "s");
    if (!net && o->device_messages && o->null_messages && n < sizeof rep->device)
        n += (size_t)snprintf(rep->device + n, sizeof rep->device - n,
                              "; no-op messages after step 1 (a timing baseline: the losses are "
                              "not meaningful)");
    for (int d = 0; d < used && st == ZB_OK; d++) {
        if (net && d != gpu_of(pl, net->rank, ndev))
            continue;
        int k = pl_cuda_ranks_on(pl, ndev, d);
        if (k < 2 && o->sm_per_rank == 0)
            continue; /* one rank: the whole GPU */
        /* several ranks share the GPU: each its partition; one rank with --sm-per-rank K: a
         * partition of K SMs (what a partitioned pipeline's ranks each get) */
        st = zb_cuda_partitions_new(d, k, o->sm_per_rank, &run->parts[d], err);
        if (st == ZB_EUNSUPPORTED && o->sm_per_rank == 0) {
            /* no green contexts here: the ranks share the whole GPU, said in the report */
            if (n < sizeof rep->device)
                n += (size_t)snprintf(rep->device + n, sizeof rep->device - n,
                                      "; GPU %d: %d ranks share all SMs (no SM partitions: %.80s)",
                                      d, k, err ? err->msg : "unsupported");
            st = ZB_OK;
            continue;
        }
        if (st != ZB_OK)
            break;
        char line[96];
        const zb_cuda_sm_plan_t *plan = zb_cuda_partitions_plan(run->parts[d]);
        zb_cuda_sm_plan_describe(plan, plan->ranks * plan->sm_per_rank + plan->sm_unused, line,
                                 sizeof line);
        if (n < sizeof rep->device)
            n += (size_t)snprintf(rep->device + n, sizeof rep->device - n,
                                  "; GPU %d SM partitions: %s", d, line);
    }
    return st;
}

void pl_cuda_close(pl_t *pl)
{
    cu_run_t *run = pl->cuda;
    if (!run)
        return;
    for (int d = 0; d < run->ndev; d++)
        zb_cuda_partitions_free(run->parts[d]);
    free(run->parts);
    free(run);
    pl->cuda = NULL;
}

/* Every (tensor, layer) slice stage `span` touches, as host pointer in `h` and element offset
 * in the stage's own buffers (zb_cuda_stage_slice); fn is called on each. WTE comes first. */
typedef zb_status_t (*slice_fn)(pl_rank_t *R, cu_stage_t *cs, const zb_gpt2_span_t *sp, int t,
                                float *host, size_t dev_off, size_t n, void *arg, zb_err_t *err);

static zb_status_t each_slice(pl_rank_t *R, cu_stage_t *cs, const zb_gpt2_span_t *sp,
                              const zb_gpt2_params_t *h, bool wte_only, slice_fn fn, void *arg,
                              zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    for (int t = 0; t < ZB_GPT2_NUM_TENSORS && st == ZB_OK; t++) {
        bool layer = t >= ZB_LN1W && t <= ZB_FCPROJB;
        if (wte_only && t != ZB_WTE)
            continue;
        int from = layer ? sp->layer_begin : 0, to = layer ? sp->layer_end : 1;
        for (int l = from; l < to && st == ZB_OK; l++) {
            size_t n, off, dn;
            float *p = zb_gpt2_slice(h, t, l, &n);
            if (!p || !zb_cuda_stage_slice(cs->stage, t, l, &off, &dn))
                continue;
            st = dn == n ? fn(R, cs, sp, t, p, off, n, arg, err)
                         : zb_err_set(err, ZB_EINVAL,
                                      "rank %d: tensor %d of block %d: %zu floats on the GPU, "
                                      "%zu on the host",
                                      R->rank, t, l, dn, n);
        }
    }
    return st;
}

typedef struct {
    zb_cuda_state_t which;
    bool to_host;
} copy_arg_t;

/* WTE to the host from the embedding stage when the rank has one (both copies are the same
 * bits; a head stage's may hold the folded gradient only). */
static bool wte_source(pl_rank_t *R, const zb_gpt2_span_t *sp)
{
    return sp->embed || !R->has_embed;
}

static zb_status_t copy_slice(pl_rank_t *R, cu_stage_t *cs, const zb_gpt2_span_t *sp, int t,
                              float *host, size_t off, size_t n, void *arg, zb_err_t *err)
{
    copy_arg_t *a = arg;
    if (a->to_host && t == ZB_WTE && !wte_source(R, sp))
        return ZB_OK;
    return zb_cuda_state_copy(cs->stage, a->which, off, host, n, a->to_host, err);
}

/* The host mirror of a head rank that reads the embedding rank's WTE (C->wte_owner) keeps a
 * WTE of its own, as the CPU's and MPI's ranks do (checkpoint shards, the replica check): state
 * to the host fills it from the owner's stage; nothing goes back (the owner uploads its own). */
static zb_status_t borrowed_wte_to_host(pl_rank_t *R, zb_cuda_state_t which,
                                        zb_gpt2_params_t *h, zb_err_t *err)
{
    const pl_rank_t *Q = CU(R)->wte_owner;
    size_t n, off, dn;
    float *p = zb_gpt2_slice(h, ZB_WTE, 0, &n);
    zb_cuda_stage_t *es = CU(Q)->st[Q->local_of_stage[0]].stage;
    if (!p || !zb_cuda_stage_slice(es, ZB_WTE, 0, &off, &dn) || dn != n)
        return zb_err_set(err, ZB_EINVAL, "rank %d: the shared WTE does not match its host copy",
                          R->rank);
    return zb_cuda_state_copy(es, which, off, p, n, true, err);
}

static zb_status_t copy_state(pl_rank_t *R, zb_cuda_state_t which, zb_gpt2_params_t *h,
                              bool wte_only, bool to_host, zb_err_t *err)
{
    copy_arg_t a = {which, to_host};
    zb_status_t st = ZB_OK;
    for (int i = 0; i < R->n_local && st == ZB_OK; i++)
        st = each_slice(R, &CU(R)->st[i], &R->st[i].span, h, wte_only, copy_slice, &a, err);
    if (st == ZB_OK && to_host && CU(R)->wte_owner && which != ZB_CUDA_STATE_GRADS)
        st = borrowed_wte_to_host(R, which, h, err);
    return st;
}

static zb_status_t cuda_state(pl_rank_t *R, bool to_host, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    for (int i = 0; i < R->n_local && st == ZB_OK; i++)
        st = zb_cuda_stage_bind(CU(R)->st[i].stage, err);
    if (st == ZB_OK)
        st = copy_state(R, ZB_CUDA_STATE_PARAMS, &R->params, false, to_host, err);
    if (st == ZB_OK)
        st = copy_state(R, ZB_CUDA_STATE_M, &R->opt.m, false, to_host, err);
    if (st == ZB_OK)
        st = copy_state(R, ZB_CUDA_STATE_V, &R->opt.v, false, to_host, err);
    return st;
}

/* wte_only to the host: the embedding stage's WTE gradient and the head stage's accumulator
 * (what pl_tied_embedding folds); back: the folded WTE gradient to every stage holding WTE.
 * Else every slice of the gradients (the replica reduction, the test hook). */
static zb_status_t cuda_grads(pl_rank_t *R, bool wte_only, bool to_host, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    if (wte_only && to_host) {
        for (int i = 0; i < R->n_local && st == ZB_OK; i++) {
            const pl_stage_t *ls = &R->st[i];
            zb_cuda_stage_t *s = CU(R)->st[i].stage;
            size_t n = R->grads.g.sizes[ZB_WTE], off, dn;
            if (ls->span.embed && zb_cuda_stage_slice(s, ZB_WTE, 0, &off, &dn))
                st = zb_cuda_state_copy(s, ZB_CUDA_STATE_GRADS, off, R->grads.g.t[ZB_WTE], n,
                                        true, err);
            if (st == ZB_OK && ls->span.head && R->grads.wte_head)
                st = zb_cuda_state_copy(s, ZB_CUDA_STATE_WTE_HEAD, 0, R->grads.wte_head, n, true,
                                        err);
        }
        return st;
    }
    return copy_state(R, ZB_CUDA_STATE_GRADS, &R->grads.g, wte_only, to_host, err);
}

/* Device messages: the ranks (global indices) whose streams copy from this rank's sent slots,
 * each once, and the event they wait for (cuda_program_done, cuda_step_begin). */
static zb_status_t find_pullers(pl_rank_t *R, zb_err_t *err)
{
    const pl_t *pl = R->pl;
    cu_rank_t *C = CU(R);
    if (!(C->pullers = malloc(2 * (size_t)R->n_local * sizeof *C->pullers)))
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for its peers", R->rank);
    for (int i = 0; i < R->n_local; i++) {
        const cu_stage_t *cs = &C->st[i];
        int s = R->st[i].stage, peer[2] = {-1, -1};
        if (cs->own_x_out.slot)
            peer[0] = zb_stage_rank(pl->plan.sched, s + 1);
        if (cs->own_dx_in.slot)
            peer[1] = zb_stage_rank(pl->plan.sched, s - 1);
        for (int k = 0; k < 2; k++) {
            int g = peer[k] < 0 ? -1 : R->replica * pl->P + peer[k], j = 0;
            while (g >= 0 && j < C->n_pullers && C->pullers[j] != g)
                j++;
            if (g >= 0 && j == C->n_pullers)
                C->pullers[C->n_pullers++] = g;
        }
    }
    if (!(C->ev_done = calloc((size_t)(C->n_pullers ? C->n_pullers : 1), sizeof *C->ev_done)))
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for its peers", R->rank);
    zb_status_t st = ZB_OK;
    for (int k = 0; k < C->n_pullers && st == ZB_OK; k++)
        st = zb_cuda_event_new(C->st[0].stage, &C->ev_done[k], err);
    return st;
}

/* The event rank P records after its program for puller R (NULL: none). */
static struct CUevent_st *done_for(const pl_rank_t *P, const pl_rank_t *R)
{
    const cu_rank_t *C = CU(P);
    for (int k = 0; C && k < C->n_pullers; k++)
        if (C->pullers[k] == R->global)
            return C->ev_done[k];
    return NULL;
}

/* The embedding stage whose WTE the head stage at local index i reads instead of a copy of its
 * own: on this rank (made before it), or on the embedding's thread rank on this GPU (opened
 * before this one: pl_cuda_wte_shared), which then becomes C->wte_owner; NULL: its own copy. */
static const zb_cuda_stage_t *wte_to_read(pl_rank_t *R, const zb_gpt2_span_t *sp, int i)
{
    const pl_t *pl = R->pl;
    cu_rank_t *C = CU(R);
    int e = R->local_of_stage[0];
    if (pl_cuda_head_tied(sp, e >= 0))
        return e < i ? C->st[e].stage : NULL;
    if (!sp->head || sp->embed || !pl_cuda_wte_shared(pl, pl->plan.embed_rank, R->rank))
        return NULL;
    const pl_rank_t *Q = &pl->ranks[R->replica * pl->P + pl->plan.embed_rank];
    const cu_rank_t *O = Q->devst;
    int qe = Q->local_of_stage ? Q->local_of_stage[0] : -1;
    if (!O || qe < 0 || O->device != C->device || !O->ev_wte)
        return NULL; /* not set up: keep a copy (the memory model would then be wrong, and the
                        memory test says so) */
    C->wte_owner = Q;
    return O->st[qe].stage;
}

static zb_status_t cuda_open(pl_rank_t *R, zb_err_t *err)
{
    pl_t *pl = R->pl;
    cu_run_t *run = pl->cuda;
    cu_rank_t *C = calloc(1, sizeof *C);
    if (!C || !(C->st = calloc((size_t)(R->n_local ? R->n_local : 1), sizeof *C->st))) {
        free(C);
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for its GPU state", R->rank);
    }
    R->devst = C;
    C->device = gpu_of(pl, R->global, run->ndev);
    /* device messages need the sender's memory in this process: thread ranks */
    C->device_messages = pl->opts->cuda->device_messages && !pl->opts->transport;
    C->null_messages = C->device_messages && pl->opts->cuda->null_messages;
    C->first_step = -1;
    C->begin_due = -1;
    if (C->device_messages)
        R->msg_bytes = sizeof(cu_msg_t);
    bool lends_wte = R->has_embed && !R->has_head &&
                     pl_cuda_wte_shared(pl, R->rank, pl->plan.head_rank);
    zb_cuda_partitions_t *parts = run->parts[C->device];
    const size_t NC = pl->NC;
    zb_status_t st = ZB_OK;
    for (int i = 0; i < R->n_local && st == ZB_OK; i++) {
        pl_stage_t *ls = &R->st[i];
        cu_stage_t *cs = &C->st[i];
        int s = ls->stage;
        cs->prev_here = s > 0 && R->local_of_stage[s - 1] >= 0;
        cs->next_here = s + 1 < pl->plan.S && R->local_of_stage[s + 1] >= 0;
        const zb_cuda_stage_t *wte_from = wte_to_read(R, &ls->span, i);
        if (wte_from)
            st = zb_cuda_stage_new_tied(&pl->mcfg, &ls->span, pl->mbB, pl->T,
                                        pl->opts->cuda->precision, C->device, wte_from,
                                        &cs->stage, err);
        else
            st = zb_cuda_stage_new(&pl->mcfg, &ls->span, pl->mbB, pl->T,
                                   pl->opts->cuda->precision, C->device, &cs->stage, err);
        if (st == ZB_OK)
            st = zb_cuda_stage_set_fp32_attention(cs->stage, pl->opts->cuda->fp32_attention,
                                                  err);
        if (st == ZB_OK) /* a head's F leaves the logits' gradient at the B's scale */
            st = zb_cuda_stage_fold_loss_grad(cs->stage, pl->grad_scale, err);
        /* one stream for all the rank's stages: a stage reads its neighbour's device output
         * (x_in / dx_out) in stream order. The partition's, else the first stage's own. */
        int part = pl->opts->transport ? 0 : R->global / run->ndev;
        if (st == ZB_OK && parts)
            st = zb_cuda_stage_use_stream(cs->stage, zb_cuda_partition_stream(parts, part),
                                          zb_cuda_partition_sms(parts, part), err);
        else if (st == ZB_OK && i > 0)
            st = zb_cuda_stage_use_stream(cs->stage, zb_cuda_stage_stream(C->st[0].stage), 0,
                                          err);
        if (st == ZB_OK && !parts) /* the whole GPU, planned as a partition would be */
            st = zb_cuda_stage_plan_sms(cs->stage, pl->opts->cuda->gemm_sms, err);
        if (st == ZB_OK)
            st = pl_cu_stash_pool_init(&cs->pool, cs->stage, &pl->plan.sched->rank[R->rank], s,
                                       pl->M, pl_o_release(&pl->plan, s, pl->M), err);
        if (st == ZB_OK && !ls->span.embed)
            st = pl_cu_buf_init(R, ls, cs, &cs->x_in, PL_BUF_X_IN, err);
        if (st == ZB_OK && !ls->span.head)
            st = pl_cu_buf_init(R, ls, cs, &cs->dx_out, PL_BUF_DX_OUT, err);
        if (st == ZB_OK && !ls->span.head && !cs->next_here)
            st = pl_cu_buf_init(R, ls, cs, &cs->own_x_out, PL_BUF_X_OUT, err);
        if (st == ZB_OK && !ls->span.embed && !cs->prev_here)
            st = pl_cu_buf_init(R, ls, cs, &cs->own_dx_in, PL_BUF_DX_IN, err);
        if (st == ZB_OK && ls->r_out)
            st = zb_cuda_buffer_alloc(cs->stage, NC, &cs->r_out, err);
        if (st == ZB_OK && ls->span.head) /* a slot per microbatch and one for an R's */
            st = zb_cuda_stage_loss_slots(cs->stage, pl->M + 1, err);
        if (st == ZB_OK && C->device_messages)
            st = pl_cu_device_messages_init(R, cs, err);
        else if (st == ZB_OK) /* pinned slots on a copy stream, for threads and MPI */
            st = pl_cu_staging_init(R, ls, cs, err);
    }
    for (int i = 0; i < R->n_local && st == ZB_OK; i++) {
        cu_stage_t *cs = &C->st[i];
        int s = R->st[i].stage;
        if (!R->st[i].span.head)
            cs->x_out = cs->next_here ? &C->st[R->local_of_stage[s + 1]].x_in : &cs->own_x_out;
        if (!R->st[i].span.embed)
            cs->dx_in = cs->prev_here ? &C->st[R->local_of_stage[s - 1]].dx_out : &cs->own_dx_in;
    }
    if (st == ZB_OK && lends_wte) /* the head's rank waits for it (wte_to_read) */
        st = zb_cuda_event_new(C->st[R->local_of_stage[0]].stage, &C->ev_wte, err);
    if (st == ZB_OK && C->device_messages && R->n_local > 0)
        st = find_pullers(R, err);
    /* post-validation's backup now, as the memory plan counts it (a device without room for it
     * stops the rank guessing instead: pl_cu_optimistic_elems) */
    if (st == ZB_OK && pl_rank_backs_up(pl))
        (void)pl_cu_optimistic_elems(R);
    /* the GPU's times of every action (on the rank's one stream): the measured bubble and the
     * --trace files are the device's, not the host's launch times */
    if (st == ZB_OK && R->n_local > 0)
        st = zb_cuda_timer_new(zb_cuda_stage_stream(C->st[0].stage),
                               pl->plan.sched->rank[R->rank].len, &C->timer, err);
    if (st == ZB_OK && R->n_local > 0) /* and of the step's phases after them */
        st = zb_cuda_timer_new(zb_cuda_stage_stream(C->st[0].stage), ZB_STEP_SEGMENTS,
                               &C->phase_timer, err);
    /* the start-up state (fresh, --init-from, --resume) onto the device; fresh moments are the
     * stage's zeros already */
    if (st == ZB_OK)
        st = copy_state(R, ZB_CUDA_STATE_PARAMS, &R->params, false, false, err);
    if (st == ZB_OK && !R->touch_opt)
        st = copy_state(R, ZB_CUDA_STATE_M, &R->opt.m, false, false, err);
    if (st == ZB_OK && !R->touch_opt)
        st = copy_state(R, ZB_CUDA_STATE_V, &R->opt.v, false, false, err);
    if (st == ZB_OK && R->touch_opt) { /* the host mirror's moments are zeros too */
        zb_adamw_state_touch(&R->opt);
        R->touch_opt = false;
    }
    if (st != ZB_OK && err) { /* which rank */
        char inner[sizeof err->msg];
        snprintf(inner, sizeof inner, "%s", err->msg);
        snprintf(err->msg, sizeof err->msg, "rank %d (GPU %d): %.480s", R->rank, C->device, inner);
    }
    return st;
}

static void cuda_close(pl_rank_t *R)
{
    cu_rank_t *C = CU(R);
    if (!C)
        return;
    /* the queued work first (a failed step may leave copies and kernels queued): nothing it
     * reads or writes may be freed under it */
    for (int i = 0; C->st && i < R->n_local; i++) {
        zb_err_t ignored;
        if (C->st[i].stage)
            (void)zb_cuda_sync(C->st[i].stage, &ignored);
    }
    zb_cuda_timer_free(C->timer);
    zb_cuda_timer_free(C->phase_timer);
    zb_cuda_event_free(C->ev_tied);
    zb_cuda_event_free(C->ev_wte);
    for (int k = 0; C->ev_done && k < C->n_pullers; k++)
        zb_cuda_event_free(C->ev_done[k]);
    free(C->ev_done), free(C->pullers);
    for (int i = R->n_local - 1; i >= 0; i--) { /* stage 0 last: the others borrow its stream */
        cu_stage_t *cs = &C->st[i];
        pl_cu_stash_pool_free(&cs->pool);
        pl_cu_buf_free(&cs->x_in), pl_cu_buf_free(&cs->dx_out);
        pl_cu_buf_free(&cs->own_x_out), pl_cu_buf_free(&cs->own_dx_in);
        zb_cuda_buffer_free(cs->r_out);
        for (int m = 0; m < R->pl->M; m++) {
            zb_cuda_event_free(cs->ev_x_out ? cs->ev_x_out[m] : NULL);
            zb_cuda_event_free(cs->ev_dx_in ? cs->ev_dx_in[m] : NULL);
        }
        free(cs->ev_x_out), free(cs->ev_dx_in);
        free(cs->out_x), free(cs->out_dx), free(cs->in_x), free(cs->in_dx);
        zb_cuda_stage_free(cs->stage); /* its streams' work done before the pinned slots go */
        pl_cu_staging_free(R, cs);
    }
    free(C->st);
    free(C);
    R->devst = NULL;
}

static zb_status_t cuda_step_begin(pl_rank_t *R, bool training, zb_err_t *err)
{
    cu_rank_t *C = CU(R);
    zb_status_t st = ZB_OK;
    if (training && C->first_step < 0)
        C->first_step = R->in->step;
    /* no-op transfers once the first step filled the slots with real activations */
    C->skip_copies = C->null_messages && training && R->in->step > C->first_step;
    if (R->n_local > 0) /* the rank's device current before the waits below are queued */
        st = zb_cuda_stage_bind(C->st[0].stage, err);
    /* the WTE this rank reads from the embedding's rank, as its last step left it (the record
     * was queued in that step: the rank threads meet between steps) */
    if (st == ZB_OK && C->wte_owner && R->n_local > 0)
        st = zb_cuda_stage_wait(C->st[0].stage, CU(C->wte_owner)->ev_wte, err);
    /* device messages: the sent slots are written again only after the ranks that pull from
     * them copied the last step's (their ev_done, recorded in that step) */
    for (int k = 0; k < C->n_pullers && st == ZB_OK; k++) {
        struct CUevent_st *ev = done_for(&R->pl->ranks[C->pullers[k]], R);
        st = ev ? zb_cuda_stage_wait(C->st[0].stage, ev, err)
                : zb_err_set(err, ZB_EINVAL, "rank %d: rank %d does not say when it pulled",
                             R->rank, C->pullers[k]);
    }
    for (int i = 0; i < R->n_local && st == ZB_OK; i++) {
        cu_stage_t *cs = &C->st[i];
        if ((st = zb_cuda_stage_bind(cs->stage, err)) != ZB_OK)
            break;
        pl_cu_stash_pool_reset(&cs->pool); /* a failed step may have left some in flight */
        if (cs->arrived) /* a message not received this time is seen as missing */
            memset(cs->arrived, 0, 2 * (size_t)R->pl->M);
        if (cs->in_x) { /* a handle not received this time is seen as missing */
            memset(cs->in_x, 0, (size_t)R->pl->M * sizeof *cs->in_x);
            memset(cs->in_dx, 0, (size_t)R->pl->M * sizeof *cs->in_dx);
        }
    }
    C->zero_due = training; /* queued by zero_grads, off the step's critical path */
    C->begin_due = -1;
    if (st == ZB_OK && training && C->timer) {
        st = zb_cuda_timer_step_begin(C->timer, err);
        C->t_begin = zb_now() - R->in->t0;
    }
    if (st == ZB_OK && training && C->phase_timer)
        st = zb_cuda_timer_step_begin(C->phase_timer, err);
    return st;
}

/* The step's gradient zeroing (every local stage's gradients and head accumulator), queued once
 * per training step. Not at the step's start: rank 0's first F needs no message, and a zeroing
 * queued before it (its gradients: 258 MB at GPT-2 124M L=16 P=4, a third of a millisecond on
 * 32 SMs) delayed the whole pipeline by that much. Only W and BW write gradients, so it goes
 * before the rank's first action that either waits for a message (the stream idles there
 * anyway: rank 0's first B, every other rank's first F) or writes them (a rank without messages),
 * else after the program. The stream's order keeps it after the last step's readers of the
 * gradients (optimizer, norm, the tied fold's event waits queued then). */
static zb_status_t zero_grads(pl_rank_t *R, const cu_stage_t *bound, zb_err_t *err)
{
    cu_rank_t *C = CU(R);
    zb_status_t st = ZB_OK;
    if (!C->zero_due)
        return st;
    C->zero_due = false;
    for (int i = 0; i < R->n_local && st == ZB_OK; i++)
        if ((st = zb_cuda_stage_bind(C->st[i].stage, err)) == ZB_OK)
            st = zb_cuda_grads_zero(C->st[i].stage, err);
    return st == ZB_OK && bound ? zb_cuda_stage_bind(bound->stage, err) : st;
}

/* Whether action a of local stage ls waits for a message or writes gradients (zero_grads). */
static bool waits_or_writes_grads(const pl_stage_t *ls, const cu_stage_t *cs,
                                  const zb_action_t *a)
{
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_F: return !ls->span.embed && !cs->prev_here;
    case ZB_ACT_B: return !ls->span.head && !cs->next_here;
    case ZB_ACT_W:
    case ZB_ACT_BW: return true;
    default: return false; /* R: its input was kept */
    }
}

/* An action's begin event is recorded when its kernels are about to be queued (begin_kernels),
 * after the stream's waits for its incoming message and that message's copy: the interval is
 * the action's compute, and the time the stream waited stays idle time in the timeline, as in
 * the simulator's. An action that queues no kernel (a message) gets it at its end. */
static zb_status_t cuda_time_action(pl_rank_t *R, int i, bool begin, zb_err_t *err)
{
    cu_rank_t *C = CU(R);
    if (!C->timer)
        return ZB_OK;
    if (begin) {
        C->begin_due = i;
        return ZB_OK;
    }
    zb_status_t st = C->begin_due == i ? zb_cuda_timer_begin(C->timer, i, err) : ZB_OK;
    C->begin_due = -1;
    return st == ZB_OK ? zb_cuda_timer_end(C->timer, i, err) : st;
}

static zb_status_t begin_kernels(pl_rank_t *R, zb_err_t *err)
{
    cu_rank_t *C = CU(R);
    if (!C->timer || C->begin_due < 0)
        return ZB_OK;
    int i = C->begin_due;
    C->begin_due = -1;
    return zb_cuda_timer_begin(C->timer, i, err);
}

/* The step's GPU times into R->tl, on the clock of the first rank on this GPU (thread ranks:
 * global rank `device`; every rank of a GPU shares its step-start event; across GPUs, and for
 * an MPI process's one rank, each clock starts at its first rank's host time of the step
 * start). */
static zb_status_t cuda_time_phase(pl_rank_t *R, int seg, bool begin, zb_err_t *err)
{
    zb_cuda_timer_t *t = CU(R)->phase_timer;
    if (!t)
        return ZB_OK;
    return begin ? zb_cuda_timer_begin(t, seg, err) : zb_cuda_timer_end(t, seg, err);
}

/* The phases' device times: the unused segments timed empty (the timer resolves a full step),
 * then every segment's events on the actions' clock; device_ms summed per phase. */
static zb_status_t resolve_phases(pl_rank_t *R, const zb_cuda_timer_t *origin, double origin_s,
                                  zb_err_t *err)
{
    zb_step_phases_t *ph = &R->phases;
    zb_cuda_timer_t *t = CU(R)->phase_timer;
    zb_status_t st = ZB_OK;
    for (int k = (int)ph->segments; k < ZB_STEP_SEGMENTS && st == ZB_OK; k++)
        if ((st = zb_cuda_timer_begin(t, k, err)) == ZB_OK)
            st = zb_cuda_timer_end(t, k, err);
    double start[ZB_STEP_SEGMENTS], end[ZB_STEP_SEGMENTS];
    if (st == ZB_OK)
        st = zb_cuda_timer_resolve(t, origin, origin_s, start, end, ZB_STEP_SEGMENTS, err);
    for (int k = 0; st == ZB_OK && k < (int)ph->segments; k++) {
        ph->seg_start[k] = start[k];
        ph->seg_end[k] = end[k];
        ph->device_ms[(int)ph->seg_phase[k]] += (end[k] - start[k]) * 1e3;
    }
    return st;
}

static zb_status_t cuda_step_end(pl_rank_t *R, zb_err_t *err)
{
    cu_rank_t *C = CU(R);
    if (C->ev_wte) { /* WTE updated (or rolled back and redone): the head's rank may read it */
        zb_status_t st = zb_cuda_event_record(C->st[R->local_of_stage[0]].stage, C->ev_wte, err);
        if (st != ZB_OK)
            return st;
    }
    if (!C->timer)
        return ZB_OK;
    const cu_rank_t *O = R->pl->opts->transport ? C : R->pl->ranks[C->device].devst;
    const zb_cuda_timer_t *origin = O && O->timer ? O->timer : C->timer;
    double origin_s = origin == C->timer ? C->t_begin : O->t_begin;
    zb_status_t st = zb_cuda_timer_resolve(C->timer, origin, origin_s, R->tl.start, R->tl.end,
                                           R->tl.len, err);
    return st == ZB_OK && C->phase_timer ? resolve_phases(R, origin, origin_s, err) : st;
}

static zb_status_t cuda_finish(pl_rank_t *R, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    for (int i = 0; i < R->n_local && st == ZB_OK; i++)
        st = zb_cuda_sync(CU(R)->st[i].stage, err);
    return st;
}

/* After a training program, no host wait: what the next step must follow is ordered on the
 * device. The rank's own buffers follow in its stream (stashes, received slots: their uploads
 * wait for their last reader, cu_buf_t.read; the pinned slot a receive fills waits for its last
 * upload, staged_message); offload's copies all end before the stream's last B; a staged sent
 * slot's download is done before its send left; the tied WTE and the norm have their own
 * events and waits. What another rank's stream reads after the program is a device message's
 * slot: ev_done, which the pullers' next step waits for (cuda_step_begin). Validation keeps the
 * host wait (cuda_finish). */
static zb_status_t cuda_program_done(pl_rank_t *R, zb_err_t *err)
{
    cu_rank_t *C = CU(R);
    zb_status_t st = zero_grads(R, NULL, err); /* a program that never needed them zeroed */
    for (int k = 0; k < C->n_pullers && st == ZB_OK; k++)
        st = zb_cuda_event_record(C->st[0].stage, C->ev_done[k], err);
    return st;
}

/* The head's losses its F's queued (cu_forward): one wait for the last copy, then each
 * microbatch's mean, the bits a waiting F gives. */
static zb_status_t cuda_losses(pl_rank_t *R, zb_err_t *err)
{
    int h = R->local_of_stage[R->pl->plan.S - 1];
    zb_status_t st = ZB_OK;
    for (int m = 0; h >= 0 && m < R->pl->M && st == ZB_OK; m++)
        st = zb_cuda_loss_take(CU(R)->st[h].stage, m, &R->mb_loss[m], err);
    return st;
}

/* The rank's device memory from what its stages allocated (rank_memory_cuda.c predicts it). */
static void cuda_memory(const pl_rank_t *R, zb_rank_mem_t *m)
{
    const cu_rank_t *C = R->devst;
    const double slot = (double)R->pl->NC * sizeof(float);
    for (int i = 0; i < R->n_local; i++) {
        const cu_stage_t *cs = &C->st[i];
        zb_cuda_stage_mem_t a;
        zb_cuda_stage_allocated(cs->stage, &a);
        m->params += (double)(a.state + a.weights16);
        m->grads += (double)(a.state + a.wte_head);
        m->optimizer += 2.0 * (double)a.state;
        m->backup += (double)a.backup;
        m->workspace += (double)a.workspace;
        m->messages += slot * (double)(cs->x_in.n + cs->dx_out.n + cs->own_x_out.n +
                                       cs->own_dx_in.n);
        if (cs->r_out)
            m->messages += (double)R->pl->NC * sizeof(float);
        m->stash_alloc += (double)pl_cu_stash_pool_bytes(&cs->pool) + (double)a.scratch;
    }
    m->activations = (double)R->live_peak;
}

static double cuda_bytes_in_use(const pl_t *pl)
{
    int ndev = pl->gpus;
    if (ndev < 1 && zb_cuda_device_count(&ndev, NULL) != ZB_OK)
        return -1;
    double sum = 0;
    for (int d = 0; d < ndev; d++) {
        size_t used, total;
        if (zb_cuda_device_memory(d, &used, &total, NULL) != ZB_OK)
            return -1;
        sum += (double)used;
    }
    return sum;
}

static void track_memory(pl_rank_t *R)
{
    size_t live = 0;
    for (int i = 0; i < R->n_local; i++)
        live += pl_cu_stash_pool_live(&CU(R)->st[i].pool);
    if (live > R->live_peak)
        R->live_peak = live;
}

/* F (or an eval F, or an R) of microbatch m: its input uploaded when a RECV_F brought it; a
 * head's loss into deferred slot loss_slot (cuda_losses takes them after the program). */
static zb_status_t cu_forward(pl_rank_t *R, pl_stage_t *ls, cu_stage_t *cs, zb_cuda_stash_t *sh,
                              int m, size_t tok, float *x_out, int loss_slot, bool upload,
                              zb_err_t *err)
{
    pl_t *pl = R->pl;
    float *x_in = ls->span.embed ? NULL : cu_slot(&cs->x_in, m, pl->NC);
    if (!ls->span.embed && !x_in)
        return zb_err_set(err, ZB_ESCHEDULE, "stage %d: no input slot for microbatch %d",
                          ls->stage, m);
    zb_status_t st = ZB_OK;
    if (upload && !cs->prev_here && !ls->span.embed)
        st = pl_cu_bring_in(R, ls, cs, true, m, x_in, err);
    if (st == ZB_OK && x_out && upload) /* an F's output slot, once a download has read it */
        st = pl_cu_before_write(cs, cs->x_out, m, err);
    if (st == ZB_OK)
        st = begin_kernels(R, err);
    if (st == ZB_OK)
        st = zb_cuda_forward_deferred(cs->stage, sh, ls->span.embed ? R->in->inputs + tok : NULL,
                                      x_in, ls->span.head ? R->in->targets + tok : NULL,
                                      ls->span.head ? NULL : x_out, loss_slot, err);
    if (st == ZB_OK && x_in) /* a staged upload into this slot waits for this F or R */
        st = pl_cu_after_read(cs, &cs->x_in, m, err);
    return st;
}

static zb_status_t cu_backward_input(pl_rank_t *R, pl_stage_t *ls, cu_stage_t *cs,
                                     zb_cuda_stash_t *sh, int m, zb_err_t *err)
{
    pl_t *pl = R->pl;
    float *dx_out = ls->span.head ? NULL : cu_slot(&cs->dx_out, m, pl->NC);
    float *dx_in = ls->span.embed ? NULL : cu_slot(cs->dx_in, m, pl->NC);
    if ((!ls->span.head && !dx_out) || (!ls->span.embed && !dx_in))
        return zb_err_set(err, ZB_ESCHEDULE, "stage %d: no gradient slot for microbatch %d",
                          ls->stage, m);
    zb_status_t st = ZB_OK;
    if (dx_out && !cs->next_here)
        st = pl_cu_bring_in(R, ls, cs, false, m, dx_out, err);
    if (st == ZB_OK && dx_in)
        st = pl_cu_before_write(cs, cs->dx_in, m, err);
    if (st == ZB_OK)
        st = begin_kernels(R, err);
    if (st == ZB_OK)
        st = zb_cuda_backward_input(cs->stage, sh, dx_out, pl->grad_scale, dx_in, err);
    if (st == ZB_OK && dx_out) /* a staged upload into this slot waits for this B */
        st = pl_cu_after_read(cs, &cs->dx_out, m, err);
    return st;
}

static zb_status_t cuda_compute(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, size_t tok,
                                bool eval, zb_err_t *err)
{
    cu_stage_t *cs = &CU(R)->st[ls - R->st];
    int m = a->mb;
    if (!eval && CU(R)->zero_due && waits_or_writes_grads(ls, cs, a)) {
        zb_status_t st = zero_grads(R, cs, err);
        if (st != ZB_OK)
            return st;
    }
    float *x_out = ls->span.head ? NULL : cu_slot(cs->x_out, m, R->pl->NC);
    if (!ls->span.head && !x_out)
        return zb_err_set(err, ZB_ESCHEDULE, "stage %d: no output slot for microbatch %d",
                          ls->stage, m);
    zb_status_t st = CU(R)->device_messages ? ZB_OK : pl_cu_upload_arrived(R, err);
    if (st != ZB_OK)
        return st;
    if (eval) { /* a stash for the F alone, nothing kept */
        zb_cuda_stash_t *sh = pl_cu_stash_pool_eval(&cs->pool);
        st = cu_forward(R, ls, cs, sh, m, tok, x_out, m, true, err);
        zb_cuda_stash_reset(sh);
        return st;
    }
    zb_cuda_stash_t *sh = pl_cu_stash_pool_begin(&cs->pool, a, err);
    if (!sh)
        return ZB_ESCHEDULE;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_F: st = cu_forward(R, ls, cs, sh, m, tok, x_out, m, true, err); break;
    case ZB_ACT_R: /* the forward again from the kept input (the x_in slot, or the tokens); its
                    * output goes to r_out, not over what was sent; same bits as the first time */
        st = cu_forward(R, ls, cs, sh, m, tok, cs->r_out, R->pl->M, false, err); /* its loss: a
                                                                             * spare slot */
        break;
    case ZB_ACT_B: st = cu_backward_input(R, ls, cs, sh, m, err); break;
    case ZB_ACT_W:
        if ((st = begin_kernels(R, err)) == ZB_OK)
            st = zb_cuda_backward_weight(cs->stage, sh, err);
        break;
    case ZB_ACT_BW:
        if ((st = cu_backward_input(R, ls, cs, sh, m, err)) == ZB_OK)
            st = zb_cuda_backward_weight(cs->stage, sh, err);
        break;
    default: return zb_err_set(err, ZB_EINVAL, "not a compute action");
    }
    if (st == ZB_OK) /* a non-saving F keeps only its input for its R */
        pl_cu_stash_pool_end(&cs->pool, a);
    track_memory(R);
    return st;
}

/* O / L: the stash pool's copies (rank_cuda_stash.c). */
static zb_status_t cuda_copy(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, zb_err_t *err)
{
    zb_status_t st = pl_cu_stash_pool_copy(&CU(R)->st[ls - R->st].pool, a, err);
    track_memory(R);
    return st;
}

const pl_rank_dev_t pl_rank_cuda = {.name = "cuda",
                                    .run_open = pl_cuda_open,
                                    .run_close = pl_cuda_close,
                                    .stage_memory = pl_cuda_stage_memory,
                                    .stage_static = pl_cuda_stage_static,
                                    .stage_stash = pl_cuda_stage_stash,
                                    .stage_messages = pl_cuda_stage_messages,
                                    .shares_wte = false,
                                    .open = cuda_open,
                                    .close = cuda_close,
                                    .step_begin = cuda_step_begin,
                                    .compute = cuda_compute,
                                    .copy = cuda_copy,
                                    .message = pl_cu_message,
                                    .message_ready = pl_cu_message_ready,
                                    .memory = cuda_memory,
                                    .bytes_in_use = cuda_bytes_in_use,
                                    .grads = cuda_grads,
                                    .tied_wte = pl_cu_tied_wte,
                                    .state = cuda_state,
                                    .finish = cuda_finish,
                                    .program_done = cuda_program_done,
                                    .losses = cuda_losses,
                                    .time_action = cuda_time_action,
                                    .step_end = cuda_step_end,
                                    .time_phase = cuda_time_phase,
                                    .unit_sumsq = pl_cu_unit_sumsq,
                                    .units_sumsq = pl_cu_units_sumsq,
                                    .update = pl_cu_update,
                                    .optimistic_elems = pl_cu_optimistic_elems,
                                    .backup = pl_cu_backup,
                                    .step_elems = pl_cu_step_elems};
