/* zbpp — the pipeline trainer's driver: checks and plans before training (schedule, partition,
 * memory model), then steps the ranks (threads) and does what zb_train_run does around them:
 * data, progress, metrics, checkpoints gathered from the ranks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/divergence.h"
#include "pipeline/pipeline_dist.h"
#include "pipeline/pipeline_dp.h"
#include "pipeline/pipeline_eval.h"
#include "pipeline/pipeline_local.h"
#include "pipeline/pipeline_plan.h"
#include "pipeline/pipeline_rank.h"
#include "pipeline/pipeline_report.h"
#include "pipeline/rank_device.h"
#include "train/train_loop.h"
#include "zbpp/checkpoint_sharded.h"
#include "zbpp/cuda.h"
#include "zbpp/nn.h"
#include "zbpp/schedule_io.h"
#include "zbpp/transport_mpi.h"
#include "zbpp/util.h"

void zb_pipeline_opts_defaults(zb_pipeline_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->ranks = 1;
    o->dp = 1;
    o->schedule = "1f1b";
    o->opt_sync = ZB_OPT_SYNC_POST_VALIDATION;
    o->pin = true;
    o->timeout = 600;
    o->test_hooks = NULL;
}

zb_status_t zb_opt_sync_parse(const char *s, zb_opt_sync_t *out, zb_err_t *err)
{
    if (!strcmp(s, "post-validation"))
        *out = ZB_OPT_SYNC_POST_VALIDATION;
    else if (!strcmp(s, "barrier"))
        *out = ZB_OPT_SYNC_BARRIER;
    else
        return zb_err_set(err, ZB_EINVAL,
                          "--optimizer-sync must be post-validation or barrier (got '%s')", s);
    return ZB_OK;
}

/* The trainer's whole-model buffers serve only gathering a checkpoint or the final parameters
 * of thread ranks: a pipeline process holds its stages' state (pl_rank_init, which builds it
 * from the run's initial state unit by unit), so they are brought in on demand and released. */
static void release_whole_model(zb_trainer_t *t)
{
    zb_gpt2_stash_free(t->stash);
    t->stash = NULL;
    zb_gpt2_grads_free(&t->grads);
    zb_adamw_state_free(&t->opt);
    zb_gpt2_params_free(&t->params);
}

static zb_status_t acquire_whole_model(pl_t *pl, zb_trainer_t *t, bool moments, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    if (!t->params.data)
        st = zb_gpt2_params_alloc(&t->params, &pl->mcfg, err);
    if (st == ZB_OK && moments && !t->opt.m.data)
        st = zb_adamw_state_alloc(&t->opt, &pl->mcfg, err);
    return st;
}

/* Threads: every unit from the rank that owns (and updates) it into the whole-model buffers. */
static zb_status_t gather(pl_t *pl, zb_trainer_t *t, bool moments, zb_err_t *err)
{
    zb_status_t st = acquire_whole_model(pl, t, moments, err);
    if (st == ZB_OK) /* a GPU's state to its host copy first (a no-op on the CPU) */
        st = pl_ranks_state(pl, true, err);
    for (int u = 0; st == ZB_OK && u < pl->plan.n_units; u++) {
        const pl_rank_t *R = &pl->ranks[pl->plan.unit_owner[u]];
        zb_gpt2_copy_unit(&t->params, &R->params, u);
        if (moments) {
            zb_gpt2_copy_unit(&t->opt.m, &R->opt.m, u);
            zb_gpt2_copy_unit(&t->opt.v, &R->opt.v, u);
        }
    }
    return st;
}

/* ---- the run ---- */

/* The run's shape: ranks, replicas, microbatch size (what the profile and the plan need). */
static void setup_shape(pl_t *pl, const zb_trainer_t *t)
{
    const zb_pipeline_opts_t *o = pl->opts;
    const zb_train_config_t *c = pl->cfg;
    pl->mcfg = t->model;
    pl->param_count = t->param_count;
    pl->P = o->ranks;
    pl->N = o->dp > 1 ? o->dp : 1;
    pl->M = c->microbatches;
    pl->seq_per_replica = c->batch / pl->N;
    pl->mbB = pl->seq_per_replica / c->microbatches;
    pl->T = c->seq;
    pl->keep = o->keep;
    pl->NC = (size_t)pl->mbB * (size_t)pl->T * (size_t)pl->mcfg.channels;
    /* as the local trainer, over the GLOBAL batch: the replicas' sum is the batch mean */
    pl->grad_scale = 1.0f / ((float)c->batch * (float)c->seq);
}

/* After setup_shape and the profile: the plan (partition, schedule, prediction) and the local
 * ranks. */
static zb_status_t setup(pl_t *pl, zb_trainer_t *t, zb_pipeline_report_t *rep, zb_err_t *err)
{
    zb_status_t st = pl_plan_build(pl, &pl->plan, rep, err);
    if (st == ZB_OK && pl->dev->run_open)
        st = pl->dev->run_open(pl, rep, err);
    if (st != ZB_OK)
        return st;
    if (!(pl->ranks = calloc((size_t)pl->P * (size_t)pl->N, sizeof *pl->ranks)))
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the pipeline");
    /* a sharded checkpoint is restored into the ranks afterwards (pl_resume_sharded) */
    const zb_train_config_t *c = pl->cfg;
    bool sharded = c->resume_path && zb_ckpt_is_sharded(c->resume_path);
    pl_init_t init = {.checkpoint = sharded ? NULL : c->resume_path,
                      .model_file = c->resume_path ? NULL : c->init_from,
                      .fresh = !c->resume_path && !c->init_from,
                      .seed = c->seed};
    for (int g = 0; g < pl->P * pl->N && st == ZB_OK; g++)
        if (!pl->opts->transport || g == pl->opts->transport->rank) /* a process holds only
                                                                       its own rank */
            st = pl_rank_init(pl, g, &init, t->skipped, err);
    if (st == ZB_OK && init.model_file) /* the file every process read, for the handshake */
        t->init_hash = init.file_hash;
    return st;
}

/* --save: one gathered file (threads: from memory; MPI: through the transport) or shards. */
static zb_status_t save(pl_t *pl, zb_trainer_t *t, zb_err_t *err)
{
    zb_status_t st;
    if (pl->opts->sharded_checkpoint)
        return (st = pl_ranks_state(pl, true, err)) != ZB_OK ? st : pl_save_sharded(pl, t, err);
    if (pl->opts->transport) {
        zb_transport_t *net = pl->opts->transport;
        st = net->rank == 0 ? acquire_whole_model(pl, t, true, err) : ZB_OK;
        if (st == ZB_OK) /* a GPU's state to its host mirror first (a no-op on the CPU) */
            st = pl_ranks_state(pl, true, err);
        if (st != ZB_OK) /* the others would wait for rank 0 to receive */
            zb_transport_abort(net, err ? err->msg : zb_strerror(st));
        else
            st = pl_save_gathered(pl, t, err);
    } else if ((st = gather(pl, t, true, err)) == ZB_OK) {
        st = zb_train_save(t, pl->cfg->save_path, err);
    }
    release_whole_model(t);
    /* --keep-last: the file is where it was written (rank 0 under MPI) */
    if (st == ZB_OK && pl->cfg->keep_last > 0 && (!pl->opts->transport ||
                                                  pl->opts->transport->rank == 0))
        st = zb_ckpt_rotate(pl->cfg->save_path, t->step, pl->cfg->keep_last, err);
    return st;
}

static void teardown(pl_t *pl)
{
    /* last rank first: a GPU head rank may read the WTE of the embedding's rank below it
     * (pl_cuda_wte_shared), whose stage must outlive the head's queued work */
    for (int g = pl->P * pl->N - 1; pl->ranks && g >= 0; g--)
        pl_rank_free(&pl->ranks[g]);
    free(pl->ranks);
    if (pl->dev->run_close)
        pl->dev->run_close(pl);
    zb_schedule_free(pl->eval_sched);
    pl_plan_free(pl);
}

/* Mailboxes big enough that a valid schedule never waits for room: every message a rank can
 * receive in a step (its RECVs, collectives, the exchange). */
static int mailbox_capacity(const pl_t *pl)
{
    int most = 0;
    for (int r = 0; r < pl->P; r++) {
        int n = 0;
        for (int i = 0; i < pl->plan.sched->rank[r].len; i++) {
            int ty = pl->plan.sched->rank[r].actions[i].type;
            n += ty == ZB_ACT_RECV_F || ty == ZB_ACT_RECV_B;
        }
        if (n > most)
            most = n;
    }
    /* + the replica reduction: N-1 chunks twice and the loss gather */
    return most + pl->P + 3 * pl->N + 8;
}

/* ---- the run: the one training loop (train/train_loop.h) with the pipeline's hooks ---- */

typedef struct {
    pl_t *pl;
    zb_trainer_t *t; /* the host copy: start-up state, gathered checkpoints and samples */
    pl_local_t local;
    zb_pipeline_report_t *rep;
    double *step_ms; /* [steps to run] */
    long n_steps;
} pl_run_t;

/* One step on every local rank; the process reports its reporter rank's figures. */
static zb_status_t hook_step(void *ctx, zb_trainer_t *t, zb_step_stats_t *s, zb_err_t *err)
{
    pl_run_t *run = ctx;
    zb_transport_t *net = run->local.net;
    /* The report's timeline is the last step's: with processes, start it together so every
     * rank's offsets share one origin (each from its own barrier exit). */
    zb_status_t st = ZB_OK;
    if (net && t->step == t->cfg.steps - 1 && (st = zb_barrier(net, err)) != ZB_OK)
        return st;
    pl_step_in_t in = {.step = t->step, .t0 = zb_now()};
    if ((st = zb_trainer_next_batch(t, err)) != ZB_OK)
        return st;
    in.inputs = t->inputs;
    in.targets = t->targets;
    zb_mpi_stats_t before, after;
    zb_mpi_transport_stats(net, &before);
    if ((st = pl_local_run(&run->local, pl_rank_step, &in, err)) != ZB_OK)
        return st;
    zb_mpi_transport_stats(net, &after); /* zeros unless net is an MPI transport */
    zb_pipeline_report_t *rep = run->rep;
    rep->step_bytes_sent += after.bytes_sent - before.bytes_sent;
    rep->step_bytes_received += after.bytes_received - before.bytes_received;
    rep->step_msgs_sent += (double)(after.msgs_sent - before.msgs_sent);
    rep->step_msgs_received += (double)(after.msgs_received - before.msgs_received);
    rep->step_wait_s += after.wait_s - before.wait_s;
    const pl_rank_t *me = pl_local_reporter(&run->local);
    *s = me->stats;
    zb_trainer_end_step(t, me->loss, in.t0, s);
    run->step_ms[run->n_steps++] = s->step_ms;
    rep->step_ms_last = s->step_ms;
    return ZB_OK;
}

/* The whole model (and moments) gathered from the thread ranks into t; a transport's ranks
 * hold only their own stages (the run refuses what would need this there). */
static zb_status_t hook_to_host(void *ctx, bool optimizer, zb_err_t *err)
{
    pl_run_t *run = ctx;
    if (run->local.net)
        return zb_err_set(err, ZB_EUNSUPPORTED,
                          "the whole model is not in one process with --transport mpi");
    return gather(run->pl, run->t, optimizer, err);
}

static void hook_host_done(void *ctx)
{
    pl_run_t *run = ctx;
    release_whole_model(run->t);
}

static zb_status_t hook_validate(void *ctx, zb_trainer_t *t, float *loss, zb_err_t *err)
{
    pl_run_t *run = ctx;
    return pl_validate(&run->local, t->val, loss, err);
}

static zb_status_t hook_save(void *ctx, zb_trainer_t *t, zb_err_t *err)
{
    pl_run_t *run = ctx;
    return save(run->pl, t, err);
}

/* Ctrl-C: processes agree (any rank's flag stops all). */
static zb_status_t hook_stop_agreed(void *ctx, bool local, bool *stop, zb_err_t *err)
{
    pl_run_t *run = ctx;
    *stop = local;
    if (!run->local.net)
        return ZB_OK;
    double flag = local ? 1.0 : 0.0;
    zb_status_t st = zb_allreduce_sum(run->local.net, &flag, 1, err);
    *stop = flag > 0;
    return st;
}

/* The first rank whose own memory limit is not a positive finite number of bytes, or -1. */
static int bad_rank_limit(const zb_pipeline_opts_t *opts)
{
    for (int r = 0; opts->mem_limit_ranks && r < opts->mem_limit_ranks_n; r++)
        if (!(opts->mem_limit_ranks[r] > 0) || !isfinite(opts->mem_limit_ranks[r]))
            return r;
    return -1;
}

/* The run's options, before anything is read or allocated: one line naming the bad one. */
static zb_status_t check_options(const zb_train_config_t *cfg, const zb_pipeline_opts_t *opts,
                                 const zb_gpt2_params_t *final_params, zb_err_t *err)
{
    const zb_transport_t *net = opts->transport;
    zb_status_t st = ZB_OK;
    const int N = opts->dp > 1 ? opts->dp : 1;
    int bad; /* read only once the list's length is checked */
    if (opts->ranks < 1 || opts->ranks > 1024)
        st = zb_err_set(err, ZB_EINVAL, "--ranks must be in 1..1024 (got %d)", opts->ranks);
    else if (opts->dp < 0 || opts->dp > 1024 || opts->ranks * N > 4096)
        st = zb_err_set(err, ZB_EINVAL,
                        "--dp must be in 1..1024 with --dp x --ranks <= 4096 (got --dp %d, "
                        "--ranks %d)", opts->dp, opts->ranks);
    else if (opts->mem_limit_ranks && opts->mem_limit_ranks_n != opts->ranks)
        st = zb_err_set(err, ZB_EINVAL, "--mem-limit: %d values for %d ranks (one per rank, or "
                                        "one for all)", opts->mem_limit_ranks_n, opts->ranks);
    else if ((bad = bad_rank_limit(opts)) >= 0)
        st = zb_err_set(err, ZB_EINVAL, "--mem-limit: rank %d's limit %g is not a positive number "
                                        "of bytes", bad, opts->mem_limit_ranks[bad]);
    else if (cfg->batch % N != 0)
        st = zb_err_set(err, ZB_EINVAL,
                        "--batch %d is not divisible by --dp %d (each replica takes B/N sequences)",
                        cfg->batch, N);
    else if (cfg->microbatches > 0 && (cfg->batch / N) % cfg->microbatches != 0)
        st = zb_err_set(err, ZB_EINVAL,
                        "--batch %d / --dp %d = %d sequences per replica is not divisible by "
                        "--microbatches %d", cfg->batch, N, cfg->batch / N, cfg->microbatches);
    else if (!opts->schedule_file && (!opts->schedule || !zb_generator_find(opts->schedule)))
        st = zb_err_set(err, ZB_EINVAL, "unknown schedule '%s' (see zbpp schedule --help)",
                        opts->schedule ? opts->schedule : "(none)");
    else if (opts->chunks < 0)
        st = zb_err_set(err, ZB_EINVAL, "--chunks must be >= 1 (got %d)", opts->chunks);
    else if (net && net->size != opts->ranks * N && N == 1)
        st = zb_err_set(err, ZB_EINVAL,
                        "--ranks %d but %d processes were started: run one process per pipeline "
                        "rank (mpirun -np %d)",
                        opts->ranks, net->size, opts->ranks);
    else if (net && net->size != opts->ranks * N)
        st = zb_err_set(err, ZB_EINVAL,
                        "--dp %d x --ranks %d = %d ranks but %d processes were started: run one "
                        "process per rank of every replica (mpirun -np %d)",
                        N, opts->ranks, N * opts->ranks, net->size, N * opts->ranks);
    else if (net && cfg->sample_every > 0)
        st = zb_err_set(err, ZB_EINVAL,
                        "--sample-every is not available with --transport mpi (use --save-model "
                        "and zbpp generate)");
    else if (net && cfg->save_model_path)
        st = zb_err_set(err, ZB_EINVAL,
                        "--save-model is not available with --transport mpi (use --save)");
    else if (net && final_params)
        st = zb_err_set(err, ZB_EINVAL, "final_params needs every rank in this process");
    else if (net && opts->cuda && opts->cuda->device_messages)
        st = zb_err_set(err, ZB_EUNSUPPORTED,
                        "--gpu-messages device needs thread ranks (device pointers and events do "
                        "not cross processes): use --gpu-messages host with --transport mpi");
    else if (cfg->keep_last > 0 && opts->sharded_checkpoint)
        st = zb_err_set(err, ZB_EINVAL,
                        "--keep-last is not available with --checkpoint-format sharded");
    return st;
}

zb_status_t zb_pipeline_train(const zb_train_config_t *cfg, const zb_pipeline_opts_t *opts,
                              FILE *human, zb_train_summary_t *summary,
                              zb_pipeline_report_t *report, zb_gpt2_params_t *final_params,
                              zb_err_t *err)
{
    memset(summary, 0, sizeof *summary);
    if (!report) { /* the figures are still gathered: train with a report of our own */
        zb_pipeline_report_t own = {0};
        zb_status_t st = zb_pipeline_train(cfg, opts, human, summary, &own, final_params, err);
        zb_pipeline_report_free(&own);
        return st;
    }
    zb_pipeline_report_t *rep = report;
    zb_pipeline_report_free(rep); /* an earlier call's figures */
    zb_status_t init_st = zb_pipeline_report_init(rep, opts->ranks > 0 ? opts->ranks : 1, err);
    if (init_st != ZB_OK)
        return init_st;
    /* With a transport (MPI) every start-up failure still reaches the handshake below, so the
     * other processes hear of it instead of waiting for this one. */
    zb_transport_t *net = opts->transport;
    zb_status_t st = check_options(cfg, opts, final_params, err);
    if (st == ZB_OK)
        st = zb_train_config_check(cfg, err);
    if (st != ZB_OK && !net)
        return st;
    zb_blas_init();

    zb_trainer_t t;
    memset(&t, 0, sizeof t);
    /* a sharded checkpoint is restored after setup, into the ranks (pipeline_dist.c) */
    bool sharded_resume = cfg->resume_path && zb_ckpt_is_sharded(cfg->resume_path);
    zb_train_config_t icfg = *cfg;
    if (sharded_resume)
        icfg.resume_path = NULL;
    /* no whole model here: the ranks build their own parts (setup) */
    if (st == ZB_OK && (st = zb_trainer_init_host(&t, &icfg, err)) != ZB_OK && !net)
        return st;
    pl_t pl = {.cfg = cfg, .opts = opts, .dev = pl_rank_device(opts)};
    pl_run_t run = {0};
    if (st == ZB_OK) {
        setup_shape(&pl, &t);
        /* room for every compute thread's BLAS buffer, or a clear error now (blas_setup.c) */
        st = zb_blas_check_headroom(net ? 2 : pl.P * pl.N, err);
        if (st == ZB_OK)
            st = pl_profile(&pl, NULL, err); /* timings need no trained weights */
    }
    /* MPI: every rank takes part (even one that already failed), so all plan from rank 0's
     * figures and nobody waits for a message that never comes */
    if (net)
        st = pl_share_profile(&pl, st, err);
    if (st == ZB_OK)
        st = setup(&pl, &t, rep, err);
    if (st == ZB_OK && sharded_resume)
        st = pl_resume_sharded(&pl, &t, cfg->resume_path, err);
    if (st == ZB_OK && sharded_resume) /* into a GPU's stages (a no-op on the CPU) */
        st = pl_ranks_state(&pl, false, err);
    if (net && (st = pl_handshake(&pl, &t, st, err)) != ZB_OK)
        rep->failed_together = true;
    if (st != ZB_OK)
        goto out;
    long todo = cfg->steps > t.step ? cfg->steps - t.step : 0;
    run = (pl_run_t){.pl = &pl, .t = &t, .rep = rep};
    run.step_ms = calloc(todo > 0 ? (size_t)todo : 1, sizeof *run.step_ms);
    if (!run.step_ms) {
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for step timings");
        goto out;
    }
    if ((st = pl_local_open(&run.local, &pl, mailbox_capacity(&pl), err)) != ZB_OK)
        goto out;
    const zb_train_hooks_t hooks = {.ctx = &run,
                                    .step = hook_step,
                                    .to_host = hook_to_host,
                                    .host_done = hook_host_done,
                                    .validate = hook_validate,
                                    .save = hook_save,
                                    .stop_agreed = hook_stop_agreed,
                                    .own_threads = true};
    if (human && !cfg->quiet && rep->device[0]) /* --device cuda: GPUs and SM partitions */
        fprintf(human, "pipeline on cuda: %s\n", rep->device);
    st = zb_train_loop(cfg, human, &t, &hooks, summary, err);
    if (run.n_steps > 0) {
        zb_sort_doubles(run.step_ms, (size_t)run.n_steps);
        rep->step_ms_median = run.step_ms[run.n_steps / 2];
    }
    if (st == ZB_OK && summary->steps_run > 0 && pl.N > 1 &&
        (st = pl_ranks_state(&pl, true, err)) == ZB_OK)
        st = pl_dp_check(&pl, rep, err);
    if (st == ZB_OK)
        st = pl_report_run(&run.local, summary->steps_run > 0, rep, err);
    if (st == ZB_OK && final_params && (st = gather(&pl, &t, false, err)) == ZB_OK &&
        (st = zb_gpt2_params_alloc(final_params, &pl.mcfg, err)) == ZB_OK)
        memcpy(final_params->data, t.params.data, t.params.count * sizeof(float));
out:
    free(run.step_ms);
    pl_local_close(&run.local);
    teardown(&pl);
    zb_trainer_free(&t);
    return st;
}
