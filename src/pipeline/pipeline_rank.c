/* zbpp — one pipeline rank: its parameter copy, stages, stash pools, the executor ops that call
 * the GPT-2 stage API, the tied-embedding exchange and the optimizer step (barrier or
 * post-validation). Everything here touches only this rank's memory and its transport, so the
 * same code serves an MPI process. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_dp.h"
#include "pipeline/pipeline_hooks.h"
#include "pipeline/pipeline_rank.h"
#include "pipeline/rank_device.h"
#include "pipeline/stash_pool.h"
#include "pipeline/step_phases.h"
#include "pipeline/wte_share.h"
#include "zbpp/nn.h"

/* ---- setup ---- */

static zb_status_t oom(zb_err_t *err, int rank)
{
    return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for its pipeline state", rank);
}

static zb_status_t stage_init(pl_t *pl, pl_rank_t *R, pl_stage_t *ls, int stage, zb_err_t *err)
{
    ls->stage = stage;
    ls->span = zb_partition_span(pl->plan.first, pl->plan.S, stage);
    /* the device's buffers of the stage: the CPU's stash pool and message buffers (a GPU
     * keeps its own on the device) */
    bool prev_here = stage > 0 && zb_stage_rank(pl->plan.sched, stage - 1) == R->rank;
    bool next_here = stage + 1 < pl->plan.S && zb_stage_rank(pl->plan.sched, stage + 1) == R->rank;
    zb_status_t st = R->dev->stage_open ? R->dev->stage_open(R, ls, prev_here, next_here, err)
                                        : ZB_OK;
    if (st != ZB_OK)
        return st;
    /* an R recomputes the stage's output: it goes here, not over what was already sent */
    if (!ls->span.head && pl_stage_recomputes(&pl->plan.sched->rank[R->rank], stage) &&
        !(ls->r_out = malloc(pl->NC * sizeof(float))))
        return oom(err, R->rank);
    return ZB_OK;
}

/* Output buffers: a neighbouring stage on the same rank is fed directly (no message). */
static void stage_link(pl_rank_t *R, pl_stage_t *ls)
{
    int s = ls->stage;
    if (!ls->span.head) {
        int next = R->local_of_stage[s + 1];
        ls->x_out = next >= 0 ? &R->st[next].x_in : &ls->own_x_out;
    }
    if (!ls->span.embed) {
        int prev = R->local_of_stage[s - 1];
        ls->dx_in = prev >= 0 ? &R->st[prev].dx_out : &ls->own_dx_in;
    }
}

/* An owned unit: the rank holds all of it, so its local and global ranges pair up in order. */
static zb_status_t add_unit_ranges(pl_rank_t *R, int unit)
{
    size_t off[16], cnt[16], goff[16], gcnt[16];
    int n = zb_gpt2_params_unit_ranges(&R->params, unit, off, cnt);
    int gn = zb_gpt2_unit_ranges(&R->pl->mcfg, unit, goff, gcnt);
    if (n != gn)
        return ZB_EINVAL;
    pl_range_t *grown = realloc(R->upd, (size_t)(R->n_upd + n) * sizeof *grown);
    if (!grown)
        return ZB_ENOMEM;
    R->upd = grown;
    for (int i = 0; i < n; i++) {
        R->upd[R->n_upd++] = (pl_range_t){off[i], cnt[i], goff[i]};
        R->upd_elems += cnt[i];
    }
    return ZB_OK;
}

/* The rank's own parameters (and, resuming, moments) from where the run starts: only the
 * tensors of its stages are initialised or read, so no process ever holds the whole model. */
static zb_status_t fill_local_state(pl_rank_t *R, pl_init_t *init, zb_err_t *err)
{
    R->touch_opt = !init->checkpoint; /* fresh moments are zeros, written before the first step */
    if (init->checkpoint)
        return zb_train_load_into(init->checkpoint, &R->params, R->params.data, R->opt.m.data,
                                  R->opt.v.data, err);
    if (init->model_file)
        return zb_gpt2_load_llmc_into(init->model_file, &R->params, &init->file_hash, err);
    if (init->fresh)
        zb_gpt2_params_init_random(&R->params, init->seed);
    return ZB_OK;
}

/* Stage-local parameters, gradients and moments for the stages `rank` holds, filled from the
 * run's initial state. */
static zb_status_t alloc_local_state(pl_t *pl, pl_rank_t *R, pl_init_t *init, zb_err_t *err)
{
    zb_gpt2_span_t spans[1024];
    int n = 0;
    bool head = false;
    for (int s = 0; s < pl->plan.S && n < 1024; s++)
        if (zb_stage_rank(pl->plan.sched, s) == R->rank) {
            spans[n] = zb_partition_span(pl->plan.first, pl->plan.S, s);
            head |= spans[n++].head;
        }
    zb_status_t st;
    if ((st = zb_gpt2_params_alloc_part(&R->params, &pl->mcfg, spans, n, err)) != ZB_OK)
        return st;
    /* the head part of WTE's gradient accumulates where the head is; the embedding-only rank
     * folds it in chunk by chunk as it arrives (tied_embedding) */
    if ((st = zb_gpt2_grads_alloc_like_for(&R->grads, &R->params, head, err)) != ZB_OK ||
        (st = zb_adamw_state_alloc_like(&R->opt, &R->params, err)) != ZB_OK ||
        (st = fill_local_state(R, init, err)) != ZB_OK)
        return st;
    /* thread ranks: one WTE for the embedding and the head rank (wte_share.c) */
    int e = zb_stage_rank(pl->plan.sched, 0), h = zb_stage_rank(pl->plan.sched, pl->plan.S - 1);
    if (!pl_wte_shared(pl, e, h))
        return ZB_OK;
    if (R->rank == e) {
        int hn = 0;
        for (int s = 0; s < pl->plan.S && hn < 1024; s++)
            if (zb_stage_rank(pl->plan.sched, s) == h)
                spans[hn++] = zb_partition_span(pl->plan.first, pl->plan.S, s);
        return pl_wte_share_embed(pl, R, zb_gpt2_params_part_count(&pl->mcfg, spans, hn), err);
    }
    return R->rank == h ? pl_wte_share_head(pl, R, err) : ZB_OK;
}

zb_status_t pl_rank_init(pl_t *pl, int global, pl_init_t *init, long skipped, zb_err_t *err)
{
    pl_rank_t *R = &pl->ranks[global];
    memset(R, 0, sizeof *R);
    R->pl = pl;
    R->global = global;
    R->rank = global % pl->P;
    R->replica = global / pl->P;
    const int rank = R->rank;
    R->skipped = skipped;
    R->dev = pl->dev;
    R->msg_bytes = pl->NC * sizeof(float); /* a device may carry a handle instead (open) */
    zb_status_t st = R->dev->init ? R->dev->init(R, err) : ZB_OK;
    /* Own copies of only what its stages use, like separate processes (docs/runtime.md). */
    if (st == ZB_OK)
        st = alloc_local_state(pl, R, init, err);
    if (st != ZB_OK)
        return st;

    R->local_of_stage = malloc((size_t)pl->plan.S * sizeof(int));
    R->st = calloc((size_t)pl->plan.S, sizeof *R->st);
    R->mb_loss = calloc((size_t)pl->M, sizeof(float));
    R->vec = calloc((size_t)pl->plan.n_units + 1, sizeof(double));
    R->units = malloc((size_t)pl->plan.n_units * sizeof(int));
    if (!R->local_of_stage || !R->st || !R->mb_loss || !R->vec || !R->units)
        return oom(err, rank);
    for (int s = 0; s < pl->plan.S; s++) {
        R->local_of_stage[s] = -1;
        if (zb_stage_rank(pl->plan.sched, s) == rank) {
            R->local_of_stage[s] = R->n_local;
            if ((st = stage_init(pl, R, &R->st[R->n_local++], s, err)) != ZB_OK)
                return st;
        }
    }
    for (int i = 0; i < R->n_local; i++)
        stage_link(R, &R->st[i]);
    R->has_embed = R->local_of_stage[0] >= 0;
    R->has_head = R->local_of_stage[pl->plan.S - 1] >= 0;

    for (int u = 0; u < pl->plan.n_units; u++)
        if (pl->plan.unit_owner[u] == rank) {
            R->units[R->n_owned++] = u;
            if ((st = add_unit_ranges(R, u)) != ZB_OK)
                return st == ZB_ENOMEM ? oom(err, rank)
                                       : zb_err_set(err, ZB_EINVAL,
                                                    "rank %d owns unit %d but holds only part of it",
                                                    rank, u);
        }
    if (R->has_head && !R->has_embed) {
        /* the head's copy of the tied WTE steps with the same gradient as the embedding's */
        pl_range_t *grown = realloc(R->upd, (size_t)(R->n_upd + 1) * sizeof *grown);
        if (!grown)
            return oom(err, rank);
        R->upd = grown;
        size_t wte_off = (size_t)(R->params.t[ZB_WTE] - R->params.data);
        R->upd[R->n_upd++] = (pl_range_t){wte_off, R->params.sizes[ZB_WTE], 0};
        R->upd_elems += R->params.sizes[ZB_WTE];
    }
    if (R->has_embed && !R->has_head && !R->wte_shared &&
        !(R->wte_chunk = malloc(pl_wte_chunk(R->params.sizes[ZB_WTE]) * sizeof(float))))
        return oom(err, rank);
    /* a shared WTE is backed up by the embedding rank only */
    R->backup_elems = R->upd_elems - (R->wte_shared && R->has_head ? R->params.sizes[ZB_WTE] : 0);
    if ((st = pl_dp_alloc(R, err)) != ZB_OK)
        return st;
    /* ranks of this process and their groups on disjoint cores (under MPI: the process's own) */
    int local = pl->opts->transport ? 1 : pl->P * pl->N;
    if ((st = zb_workers_new_for_rank(pl->opts->transport ? 0 : global,
                                      zb_workers_resolve(pl->cfg->threads, local), pl->opts->pin,
                                      &R->workers, err)) != ZB_OK)
        return st;
    if ((st = zb_exec_timeline_alloc(&R->tl, pl->plan.sched->rank[rank].len, err)) != ZB_OK)
        return st;
    return R->dev->open(R, err);
}

void pl_rank_free(pl_rank_t *R)
{
    if (!R->pl)
        return;
    if (R->dev) /* the device's state and buffers, a shared WTE handed back */
        R->dev->close(R);
    for (int i = 0; i < R->n_local; i++)
        free(R->st[i].r_out);
    free(R->st), free(R->local_of_stage), free(R->units), free(R->upd);
    free(R->mb_loss), free(R->vec), free(R->wte_chunk);
    pl_dp_free(R);
    zb_workers_free(R->workers);
    zb_bf16_weight_cache_free(R->bf16_weights);
    zb_exec_timeline_free(&R->tl);
    zb_adamw_state_free(&R->opt);
    zb_gpt2_grads_free(&R->grads);
    zb_gpt2_params_free(&R->params);
    memset(R, 0, sizeof *R);
}

/* ---- executor ops: the device's (rank_device.h) behind the checks every device shares ---- */

pl_stage_t *pl_rank_stage(pl_rank_t *R, int stage, zb_err_t *err)
{
    int i = stage >= 0 && stage < R->pl->plan.S ? R->local_of_stage[stage] : -1;
    if (i < 0) {
        zb_err_set(err, ZB_ESCHEDULE, "stage %d is not held by rank %d", stage, R->rank);
        return NULL;
    }
    return &R->st[i];
}

/* this replica's slice of the global batch, then microbatch m of it */
size_t pl_rank_tok(const pl_rank_t *R, int m)
{
    const pl_t *pl = R->pl;
    return ((size_t)R->replica * (size_t)pl->seq_per_replica + (size_t)m * (size_t)pl->mbB) *
           (size_t)pl->T;
}

/* Device timing (--trace on a GPU): the executor runs the program in order, one op per action,
 * so the op count is the action's index. */
static zb_status_t timed(pl_rank_t *R, bool begin, zb_err_t *err)
{
    return R->dev->time_action ? R->dev->time_action(R, R->op_index, begin, err) : ZB_OK;
}

static zb_status_t timed_end(pl_rank_t *R, zb_status_t st, zb_err_t *err)
{
    if (st == ZB_OK)
        st = timed(R, false, err);
    R->op_index++;
    return st;
}

/* The local stage of a compute or copy action, its microbatch checked; NULL + err. */
static pl_stage_t *action_stage(pl_rank_t *R, const zb_action_t *a, zb_err_t *err)
{
    pl_stage_t *ls = pl_rank_stage(R, a->stage, err);
    if (ls && (a->mb < 0 || a->mb >= R->pl->M)) {
        zb_err_set(err, ZB_ESCHEDULE, "microbatch %d out of range", a->mb);
        return NULL;
    }
    return ls;
}

static zb_status_t op_compute(void *ctx, const zb_action_t *a, zb_err_t *err)
{
    pl_rank_t *R = ctx;
    pl_t *pl = R->pl;
    const zb_pipeline_test_hooks_t *h = pl->opts->test_hooks;
    if (h && R->in->step == h->fail_step && R->rank == h->fail_rank &&
        R->computes == h->fail_action)
        return zb_err_set(err, ZB_ENUMERIC, "injected fault (test hook) in a kernel");
    R->computes++;
    pl_stage_t *ls = action_stage(R, a, err);
    if (!ls)
        return ZB_ESCHEDULE;
    zb_status_t st = timed(R, true, err);
    if (st == ZB_OK)
        st = R->dev->compute(R, ls, a, pl_rank_tok(R, a->mb), false, err);
    return timed_end(R, st, err);
}

/* O / L: the device's copy of the stash, timed like a compute action (its copy runs beside the
 * compute, so its interval on the compute stream is empty: copies are not busy time). */
static zb_status_t op_copy(void *ctx, const zb_action_t *a, zb_err_t *err)
{
    pl_rank_t *R = ctx;
    if (!R->dev->copy)
        return zb_err_set(err, ZB_EUNSUPPORTED, "%s ranks cannot offload activations",
                          R->dev->name);
    pl_stage_t *ls = action_stage(R, a, err);
    if (!ls)
        return ZB_ESCHEDULE;
    zb_status_t st = timed(R, true, err);
    if (st == ZB_OK)
        st = R->dev->copy(R, ls, a, err);
    return timed_end(R, st, err);
}

zb_status_t pl_rank_payload(pl_rank_t *R, const zb_action_t *a, bool queue, void **at,
                            zb_err_t *err)
{
    pl_stage_t *ls = pl_rank_stage(R, a->stage, err);
    if (!ls)
        return ZB_ESCHEDULE;
    if (a->mb < 0 || a->mb >= R->pl->M)
        return zb_err_set(err, ZB_ESCHEDULE, "microbatch %d out of range", a->mb);
    bool send = a->type == ZB_ACT_SEND_F || a->type == ZB_ACT_SEND_B;
    zb_status_t st = R->dev->message(R, ls, a, at, err);
    if (st == ZB_OK && !*at)
        return zb_err_set(err, ZB_ESCHEDULE, "stage %d %s that way", a->stage,
                          send ? "has nothing to send" : "receives nothing");
    bool ready;
    if (st == ZB_OK && send && !queue && R->dev->message_ready)
        st = R->dev->message_ready(R, ls, a, true, &ready, err);
    return st;
}

/* A SEND is queued (the executor asks op_send_ready before it hands the bytes over). */
static zb_status_t op_send(void *ctx, const zb_action_t *a, const void **buf, size_t *bytes,
                           zb_err_t *err)
{
    pl_rank_t *R = ctx;
    void *at = NULL;
    zb_status_t st = timed(R, true, err);
    if (st == ZB_OK)
        st = pl_rank_payload(R, a, true, &at, err);
    *buf = at;
    *bytes = R->msg_bytes;
    return timed_end(R, st, err);
}

/* The executor's send_ready: the device's message_ready for the SEND's stage. */
static zb_status_t op_send_ready(void *ctx, const zb_action_t *a, bool wait, bool *ready,
                                 zb_err_t *err)
{
    pl_rank_t *R = ctx;
    pl_stage_t *ls = pl_rank_stage(R, a->stage, err);
    *ready = true;
    return ls ? R->dev->message_ready(R, ls, a, wait, ready, err) : ZB_ESCHEDULE;
}

static zb_status_t op_recv(void *ctx, const zb_action_t *a, void **buf, size_t *bytes,
                           zb_err_t *err)
{
    pl_rank_t *R = ctx;
    void *at = NULL;
    zb_status_t st = timed(R, true, err);
    if (st == ZB_OK)
        st = pl_rank_payload(R, a, false, &at, err);
    *buf = at;
    *bytes = R->msg_bytes;
    return timed_end(R, st, err);
}

static size_t op_recv_bytes(void *ctx, const zb_action_t *a)
{
    (void)a;
    return ((pl_rank_t *)ctx)->msg_bytes;
}

/* ---- after the compute: tied embedding, norm, optimizer ---- */

/* Both holders of WTE end with (embedding part) + (head part), formed by zb_gpt2_fold_tied. */
size_t pl_wte_chunk(size_t wte_elems)
{
    return wte_elems < PL_WTE_CHUNK ? wte_elems : PL_WTE_CHUNK;
}

/* In chunks of pl_wte_chunk elements, each its own tagged exchange: the embedding rank sends its
 * part of chunk k and adds the head's part of chunk k as it arrives (into a chunk-sized buffer,
 * not a second WTE-sized one); the head rank sends its part (wte_head) and receives the
 * embedding part into the gradient, then folds. Both end with (embedding part) + (head part),
 * the order zb_gpt2_fold_tied uses, so the two copies and --ranks 1 have the same bits. */
zb_status_t pl_tied_embedding(zb_transport_t *t, pl_rank_t *R, zb_err_t *err)
{
    pl_t *pl = R->pl;
    if (R->wte_shared) { /* one WTE: meet after both ranks' last W, then fold on the embedding */
        float mine = 0.0f, theirs;
        zb_status_t st = zb_exchange(t, &mine, &theirs, 1,
                                     R->has_embed ? pl->plan.head_rank : pl->plan.embed_rank,
                                     zb_tag(ZB_TAG_EXCHANGE, 0, 0), err);
        if (st == ZB_OK && R->has_embed)
            pl_wte_fold_shared(R);
        return st;
    }
    if (R->has_embed == R->has_head) { /* both or neither here: nothing to exchange */
        if (R->has_embed)
            zb_gpt2_fold_tied(&R->grads);
        return ZB_OK;
    }
    size_t n = R->grads.g.sizes[ZB_WTE], step = pl_wte_chunk(n);
    float *g = R->grads.g.t[ZB_WTE];
    for (size_t lo = 0, k = 0; lo < n; lo += step, k++) {
        size_t len = n - lo < step ? n - lo : step;
        uint32_t tag = zb_tag(ZB_TAG_EXCHANGE, 0, (int)k);
        zb_status_t st;
        if (R->has_embed) {
            st = zb_exchange(t, g + lo, R->wte_chunk, len, pl->plan.head_rank, tag, err);
            for (size_t i = 0; st == ZB_OK && i < len; i++)
                g[lo + i] = g[lo + i] + R->wte_chunk[i]; /* embedding + head */
        } else {
            st = zb_exchange(t, R->grads.wte_head + lo, g + lo, len, pl->plan.embed_rank, tag, err);
        }
        if (st != ZB_OK)
            return st;
    }
    if (R->has_head)
        zb_gpt2_fold_tied(&R->grads);
    return ZB_OK;
}


/* A host step on R's gradients: fn(t, R, err). */
typedef zb_status_t (*host_grads_fn)(zb_transport_t *t, pl_rank_t *R, zb_err_t *err);

/* fn on the host copy of R's gradients (wte_only: the tied WTE parts, which only the embedding
 * and head ranks hold): a device's gradients come to the host and go back (rank_device.h). */
static zb_status_t on_host_grads(zb_transport_t *t, pl_rank_t *R, bool wte_only,
                                 host_grads_fn fn, zb_err_t *err)
{
    bool moves = R->dev->grads && (!wte_only || R->has_embed || R->has_head);
    zb_status_t st = moves ? R->dev->grads(R, wte_only, true, err) : ZB_OK;
    if (st == ZB_OK)
        st = fn(t, R, err);
    if (st == ZB_OK && moves)
        st = R->dev->grads(R, wte_only, false, err);
    return st;
}

zb_status_t pl_ranks_state(pl_t *pl, bool to_host, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    for (int g = 0; pl->ranks && g < pl->P * pl->N && st == ZB_OK; g++) {
        pl_rank_t *R = &pl->ranks[g];
        if (R->pl && R->dev && R->dev->state)
            st = R->dev->state(R, to_host, err);
    }
    return st;
}

/* The test hook's +Inf (host_grads_fn; t unused): the first element of its unit. */
static zb_status_t inject_inf(zb_transport_t *t, pl_rank_t *R, zb_err_t *err)
{
    (void)t, (void)err;
    size_t off[16], cnt[16];
    if (zb_gpt2_params_unit_ranges(&R->grads.g, R->pl->opts->test_hooks->inject_inf_unit, off,
                                   cnt) > 0)
        R->grads.g.data[off[0]] = INFINITY;
    return ZB_OK;
}

/* phase p's end after its work `st` (a failed part leaves the phase open: the step fails) */
static zb_status_t phase_end(pl_rank_t *R, zb_step_phase_t p, zb_status_t st, zb_err_t *err)
{
    return st == ZB_OK ? pl_phase(R, p, false, err) : st;
}

/* host-gradient work fn (on_host_grads) inside phase p */
static zb_status_t grads_phase(zb_transport_t *t, pl_rank_t *R, zb_step_phase_t p,
                               bool wte_only, host_grads_fn fn, zb_err_t *err)
{
    zb_status_t st = pl_phase(R, p, true, err);
    if (st == ZB_OK)
        st = on_host_grads(t, R, wte_only, fn, err);
    return phase_end(R, p, st, err);
}

/* the tied embedding's fold: on the device where it can, else through the host */
static zb_status_t tied_phase(zb_transport_t *t, pl_rank_t *R, zb_err_t *err)
{
    bool done = false;
    zb_status_t st = pl_phase(R, ZB_PHASE_TIED_WTE, true, err);
    if (st == ZB_OK && R->dev->tied_wte)
        st = R->dev->tied_wte(t, R, &done, err);
    if (st == ZB_OK && !done)
        st = on_host_grads(t, R, true, pl_tied_embedding, err);
    return phase_end(R, ZB_PHASE_TIED_WTE, st, err);
}

/* The replica's part of the step: execute the program, fold the tied embedding, and sum the
 * gradients over the replicas. */
static zb_status_t compute_part(zb_transport_t *pipe, zb_transport_t *dp, pl_rank_t *R,
                                zb_err_t *err)
{
    pl_t *pl = R->pl;
    zb_exec_ops_t ops = {.ctx = R,
                         .compute = op_compute,
                         .send_payload = op_send,
                         .recv_payload = op_recv,
                         .recv_bytes = op_recv_bytes,
                         .send_ready = R->dev->message_ready ? op_send_ready : NULL,
                         .copy = op_copy};
    zb_exec_opts_t eo = {.recv_lookahead = 4, .t0 = R->in->t0};
    /* the schedule's actions: the rank's weights are fixed until the optimizer (and a shared
     * WTE too: the tied phase below orders its update after every rank's actions) */
    zb_bf16_weight_cache_open(&R->bf16_weights);
    zb_status_t st = zb_execute(pl->plan.sched, pipe, &ops, &eo, &R->tl, err);
    zb_bf16_weight_cache_close();
    const pl_rank_dev_t *dev = R->dev;
    if (st == ZB_OK && (dev->program_done || dev->finish) &&
        (st = pl_phase(R, ZB_PHASE_DRAIN, true, err)) == ZB_OK)
        st = phase_end(R, ZB_PHASE_DRAIN,
                       dev->program_done ? dev->program_done(R, err) : dev->finish(R, err), err);
    if (st == ZB_OK && (R->has_embed || R->has_head)) /* the others have nothing to exchange */
        st = tied_phase(pipe, R, err);
    else if (st == ZB_OK)
        st = on_host_grads(pipe, R, true, pl_tied_embedding, err);
    if (st == ZB_OK && dp)
        st = grads_phase(dp, R, ZB_PHASE_REPLICAS, false, pl_dp_reduce, err);
    return st;
}

/* The test hook's +Inf, on the host copy of the gradients (a device's: there and back). */
static zb_status_t poke_inf(pl_rank_t *R, zb_err_t *err)
{
    const zb_pipeline_test_hooks_t *h = R->pl->opts->test_hooks;
    if (!h || R->in->step != h->inject_inf_step || h->inject_inf_unit < 0 ||
        h->inject_inf_unit >= R->pl->plan.n_units ||
        R->pl->plan.unit_owner[h->inject_inf_unit] != R->rank)
        return ZB_OK;
    return on_host_grads(NULL, R, false, inject_inf, err);
}

bool pl_rank_backs_up(const pl_t *pl)
{
    /* with a single rank its own norm is the global one: nothing to validate */
    return pl->opts->opt_sync == ZB_OPT_SYNC_POST_VALIDATION && pl->P * pl->N > 1;
}

/* The norm partials (loss last) summed over the pipeline's ranks: the step's collective. */
static zb_status_t norm_sync(zb_transport_t *t, pl_rank_t *R, zb_err_t *err)
{
    zb_status_t st = pl_phase(R, ZB_PHASE_NORM_SYNC, true, err);
    if (st == ZB_OK)
        st = zb_allreduce_sum(t, R->vec, R->pl->plan.n_units + 1, err);
    return phase_end(R, ZB_PHASE_NORM_SYNC, st, err);
}

/* the device's whole update with the global partials in R->vec, as phase p */
static zb_status_t update_phase(pl_rank_t *R, zb_step_phase_t p, zb_err_t *err)
{
    zb_status_t st = pl_phase(R, p, true, err);
    if (st == ZB_OK)
        st = R->dev->update(R, R->vec, err);
    return phase_end(R, p, st, err);
}

static zb_status_t backup_phase(pl_rank_t *R, size_t K, bool save, zb_err_t *err)
{
    zb_status_t st = pl_phase(R, ZB_PHASE_BACKUP, true, err);
    if (st == ZB_OK)
        st = R->dev->backup(R, K, save, err);
    return phase_end(R, ZB_PHASE_BACKUP, st, err);
}

static zb_status_t step_phase(pl_rank_t *R, size_t from, size_t to, float lr, long adam_t,
                              zb_err_t *err)
{
    zb_status_t st = pl_phase(R, ZB_PHASE_OPTIMIZER, true, err);
    if (st == ZB_OK)
        st = R->dev->step_elems(R, from, to, lr, adam_t, err);
    return phase_end(R, ZB_PHASE_OPTIMIZER, st, err);
}

/* Whether an optimistic update can pay this step, from the last one: not after a clipped step
 * (the global norm moves slowly: the guess would be rolled back), and not when the rank's wait
 * at the norm barrier was shorter than the optimistic backup and update took (the rank that
 * finishes last: its guess would only delay the step). Which path runs changes no bit. */
static bool worth_guessing(const pl_rank_t *R)
{
    const zb_pipeline_test_hooks_t *h = R->pl->opts->test_hooks;
    if (h && h->always_guess)
        return true;
    return !R->guess.clipped && R->guess.wait_ms >= R->guess.cost_ms;
}

/* After the step: what worth_guessing reads next time. */
static void remember_guess(pl_rank_t *R)
{
    const zb_step_phases_t *ph = &R->phases;
    R->guess.clipped = R->stats.skipped || R->stats.clip_scale < 1.0f;
    R->guess.wait_ms = ph->host_ms[ZB_PHASE_NORM_SYNC];
    if (R->guess.optimistic) {
        double dev = ph->device_ms[ZB_PHASE_BACKUP] + ph->device_ms[ZB_PHASE_OPTIMIZER];
        double host = ph->host_ms[ZB_PHASE_BACKUP] + ph->host_ms[ZB_PHASE_OPTIMIZER];
        R->guess.cost_ms = dev > host ? dev : host;
    }
}

/* The optimizer step with the unit partials in R->vec (loss last), over the pipeline `t`.
 * Barrier: sum the partials, then update. Post-validation: step with what this rank knows (its
 * own units) while the others finish, then check against the global norm. Its own partial norm is
 * a lower bound of the global one, so: own norm non-finite -> the step is skipped anyway; own
 * norm above the clip -> clipping is certain, wait for the exact factor; else step the first K
 * elements (all that the device's backup holds) with factor 1, and when the global norm agrees
 * step the rest with the same figures (AdamW is elementwise: the bits of one whole update), else
 * undo and redo with the global figures as the barrier mode would: the same bits either way. */
static zb_status_t optimizer(zb_transport_t *t, pl_rank_t *R, zb_err_t *err)
{
    pl_t *pl = R->pl;
    const pl_rank_dev_t *dev = R->dev;
    const int U = pl->plan.n_units;
    double *sums = R->vec;
    zb_status_t st;
    if (pl->opts->opt_sync == ZB_OPT_SYNC_BARRIER) {
        if ((st = norm_sync(t, R, err)) != ZB_OK)
            return st;
        return update_phase(R, ZB_PHASE_OPTIMIZER, err);
    }
    double own_norm = zb_grad_norm_total(sums, U);
    float clip = pl->cfg->grad_clip;
    size_t K = pl_rank_backs_up(pl) ? dev->optimistic_elems(R) : 0;
    bool optimistic = isfinite(own_norm) && zb_grad_clip_scale(own_norm, clip) == 1.0f && K > 0 &&
                      worth_guessing(R);
    R->guess.optimistic = optimistic;
    long adam_t = R->in->step - R->skipped + 1;
    zb_lr_schedule_t sched = {pl->cfg->lr_schedule, pl->cfg->adamw.lr, pl->cfg->lr_min,
                              pl->cfg->warmup, pl->cfg->steps};
    float lr = zb_lr_at(&sched, R->in->step);
    if (optimistic && ((st = backup_phase(R, K, true, err)) != ZB_OK ||
                       (st = step_phase(R, 0, K, lr, adam_t, err)) != ZB_OK))
        return st;
    if ((st = norm_sync(t, R, err)) != ZB_OK)
        return st;
    double norm = zb_grad_norm_total(sums, U);
    bool right = isfinite(norm) && zb_grad_clip_scale(norm, clip) == 1.0f;
    if (optimistic && right) {
        if (K < R->backup_elems &&
            (st = step_phase(R, K, R->backup_elems, lr, adam_t, err)) != ZB_OK)
            return st;
        /* what zb_train_update would report */
        R->stats = (zb_step_stats_t){.step = R->in->step, .lr = lr, .grad_norm = norm,
                                     .clip_scale = 1.0f, .skipped = false};
        return ZB_OK;
    }
    if (!optimistic)
        return update_phase(R, ZB_PHASE_OPTIMIZER, err);
    /* the rollback: the backup restored and the update redone, one phase */
    if ((st = pl_phase(R, ZB_PHASE_ROLLBACK, true, err)) != ZB_OK)
        return st;
    if ((st = dev->backup(R, K, false, err)) == ZB_OK)
        st = dev->update(R, sums, err);
    R->rollbacks++;
    return phase_end(R, ZB_PHASE_ROLLBACK, st, err);
}

zb_status_t pl_rank_step(zb_transport_t *t, void *arg, zb_err_t *err)
{
    pl_rank_t *R = arg;
    pl_t *pl = R->pl;
    zb_workers_enter(R->workers);
    R->computes = 0;
    R->op_index = 0;
    zb_transport_t *pipe, *dp;
    pl_phases_step_begin(R);
    zb_status_t st = R->dev->step_begin(R, true, err);
    if (st == ZB_OK)
        st = pl_dp_views(t, R, &pipe, &dp, err);
    if (st == ZB_OK)
        st = compute_part(pipe, dp, R, err);
    if (st == ZB_OK)
        st = poke_inf(R, err);
    if (st == ZB_OK) {
        memset(R->vec, 0, (size_t)(pl->plan.n_units + 1) * sizeof(double));
        st = pl_phase(R, ZB_PHASE_GRAD_NORM, true, err);
        if (st == ZB_OK && R->dev->units_sumsq)
            st = R->dev->units_sumsq(R, R->vec, err);
        for (int i = 0; i < R->n_owned && st == ZB_OK && !R->dev->units_sumsq; i++)
            st = R->dev->unit_sumsq(R, R->units[i], &R->vec[R->units[i]], err);
        st = phase_end(R, ZB_PHASE_GRAD_NORM, st, err);
        if (st == ZB_OK && R->has_head && R->dev->losses)
            st = R->dev->losses(R, err);
        if (st == ZB_OK && R->has_head) {
            R->vec[pl->plan.n_units] = zb_train_mean_loss(R->mb_loss, pl->M);
            if (dp) /* every rank of this dp group holds the head: all call it */
                st = pl_dp_mean_loss(dp, &R->vec[pl->plan.n_units], err);
        }
    }
    if (st == ZB_OK)
        st = optimizer(pipe, R, err);
    if (st == ZB_OK && R->dev->step_end) /* after the collectives: every rank's step began */
        st = R->dev->step_end(R, err);
    if (st == ZB_OK)
        remember_guess(R);
    if (st != ZB_OK) {
        if (pl->N > 1 && st != ZB_EABORT && err) { /* which replica, when there are several */
            char inner[sizeof err->msg];
            snprintf(inner, sizeof inner, "%s", err->msg);
            snprintf(err->msg, sizeof err->msg, "replica %d, %.480s", R->replica, inner);
        }
        if (st != ZB_EABORT)
            zb_transport_abort(t, err ? err->msg : zb_strerror(st));
        return st;
    }
    R->loss = (float)R->vec[pl->plan.n_units]; /* 0 + ... + loss + 0: exact */
    if (R->stats.skipped)
        R->skipped++;
    return zb_flush(t, err);
}
