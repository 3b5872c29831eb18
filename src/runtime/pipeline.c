/* zbpp — the pipeline trainer's driver: checks and plans before training (schedule, partition,
 * memory model), then steps the ranks (threads) and does what zb_train_run does around them:
 * data, progress, metrics, checkpoints gathered from the ranks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/divergence.h"
#include "runtime/pipeline_dist.h"
#include "runtime/pipeline_internal.h"
#include "zbpp/checkpoint_sharded.h"
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
    o->inject_inf_step = -1;
    o->inject_inf_unit = -1;
    o->fail_step = -1;
    o->fail_rank = -1;
    o->fail_action = -1;
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

/* The trainer's whole-model buffers serve start-up (init, resume, handshake) and gathering a
 * checkpoint or the final parameters; in between a pipeline process holds only its stages'
 * state (pl_rank_init), so they are released and brought back on demand. */
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

/* After the run: measured bubble (last step), trace, peaks. */
static zb_status_t report_run(pl_t *pl, zb_pipeline_report_t *rep, zb_err_t *err)
{
    zb_exec_timeline_t *tls = calloc((size_t)pl->P, sizeof *tls);
    double *peaks = calloc((size_t)pl->P, sizeof *peaks);
    if (!tls || !peaks) {
        free(tls), free(peaks);
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the report");
    }
    for (int r = 0; r < pl->P; r++) { /* replica 0's ranks are pl->ranks[0..P-1] */
        tls[r] = pl->ranks[r].tl;
        peaks[r] = (double)pl->ranks[r].live_peak;
    }
    zb_status_t st = pl_report_measured(pl, tls, peaks, rep, err);
    free(tls), free(peaks);
    return st;
}

zb_status_t pl_report_measured(pl_t *pl, const zb_exec_timeline_t *tls, const double *peaks,
                               zb_pipeline_report_t *rep, zb_err_t *err)
{
    for (int r = 0; r < pl->P; r++)
        rep->peak_stash_bytes[r] = peaks[r];
    zb_sim_t measured;
    zb_status_t st = zb_exec_fill_sim(pl->plan.sched, tls, peaks, &measured, err);
    if (st == ZB_OK) {
        rep->bubble_measured = measured.bubble_rate;
        rep->span_measured = measured.span_max;
        rep->busy_measured = measured.busy_max;
        rep->measured = true;
        if (pl->opts->trace_path || pl->opts->trace_svg_path)
            st = pl_write_traces(pl, &measured, err);
        zb_exec_sim_free(&measured);
    }
    return st;
}

/* ---- the run ---- */

/* The run's shape: ranks, replicas, microbatch size (what the profile and the plan need). */
static void setup_shape(pl_t *pl, const zb_trainer_t *t)
{
    const zb_pipeline_opts_t *o = pl->opts;
    const zb_train_config_t *c = pl->cfg;
    pl->mcfg = t->params.cfg;
    pl->param_count = t->params.count;
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

/* Every rank's whole footprint within --mem-limit (the planner kept the activations within
 * what the heaviest rank leaves; this is the exact check, rank by rank). */
static zb_status_t check_mem_limit(const pl_t *pl, const zb_pipeline_report_t *rep, zb_err_t *err)
{
    const double MiB = 1048576.0, limit = pl->opts->mem_limit;
    for (int r = 0; limit > 0 && r < pl->P && r < 1024; r++) {
        const zb_rank_mem_t *m = &rep->mem_predicted[r];
        if (m->total > limit)
            return zb_err_set(err, ZB_EMEMLIMIT,
                              "rank %d needs %.2f MiB (parameters %.2f, gradients %.2f, optimizer "
                              "%.2f, backup %.2f, messages %.2f, activations %.2f), over the memory "
                              "limit of %.2f MiB per rank",
                              r, m->total / MiB, m->params / MiB, m->grads / MiB,
                              m->optimizer / MiB, m->backup / MiB, m->messages / MiB,
                              m->activations / MiB, limit / MiB);
    }
    return ZB_OK;
}

/* The schedule's activations do not fit what --mem-limit leaves them: say so in MiB, for the
 * rank with the highest peak (the validator's message counts bytes without a unit). */
static zb_status_t activations_over_limit(const pl_t *pl, const zb_schedule_t *s,
                                          const zb_costs_t *costs, zb_err_t *err)
{
    const double MiB = 1048576.0;
    zb_costs_t free_run = *costs; /* same arrays, no limit: only to find the peaks */
    free_run.mem_limit = INFINITY;
    zb_sim_t sim;
    zb_status_t st = zb_simulate(s, &free_run, &sim, err);
    if (st != ZB_OK)
        return st;
    int worst = 0;
    for (int r = 1; r < sim.ranks; r++)
        if (sim.peak_mem[r] > sim.peak_mem[worst])
            worst = r;
    st = zb_err_set(err, ZB_EMEMLIMIT,
                    "schedule %s: rank %d's activations peak at %.2f MiB, but the memory limit of "
                    "%.2f MiB per rank leaves them %.2f MiB after parameters, gradients, optimizer "
                    "state and message buffers%s",
                    s->name, worst, sim.peak_mem[worst] / MiB, pl->opts->mem_limit / MiB,
                    costs->mem_limit / MiB,
                    pl->opts->recompute == ZB_RECOMPUTE_NONE ? " (--recompute auto may fit)" : "");
    zb_sim_free(&sim);
    return st;
}

/* After setup_shape and the profile: plan (partition, schedule, prediction) and build the
 * local ranks. */
static zb_status_t setup(pl_t *pl, zb_trainer_t *t, zb_pipeline_report_t *rep, zb_err_t *err)
{
    const zb_pipeline_opts_t *o = pl->opts;
    zb_schedule_t *plain = NULL;
    zb_costs_t costs;
    zb_status_t st = pl_make_schedule(pl, &plain, &costs, err);
    if (st != ZB_OK)
        return st;
    pl->plan.S = plain->stages;
    rep->stages = pl->plan.S;
    memcpy(rep->first, pl->plan.first, (size_t)(pl->plan.S + 1) * sizeof(int));
    if ((st = zb_transport_check_sizes(pl->plan.S, pl->M, err)) != ZB_OK)
        goto done;
    /* costs.mem_limit: what the whole-rank limit leaves the activations (pipeline_plan.c) */
    if ((st = zb_validate(plain, &costs, err)) != ZB_OK) {
        if (st == ZB_EMEMLIMIT)
            st = activations_over_limit(pl, plain, &costs, err);
        goto done;
    }
    zb_sim_t sim;
    if ((st = zb_simulate(plain, &costs, &sim, err)) != ZB_OK)
        goto done;
    rep->bubble_predicted = sim.bubble_rate;
    rep->span_predicted = sim.span_max;
    rep->busy_predicted = sim.busy_max;
    for (int r = 0; r < pl->P; r++)
        rep->predicted_stash_bytes[r] = sim.peak_mem[r];
    /* a lowered file keeps its own message order; anything else is lowered here */
    if (!zb_schedule_has_comms(plain))
        st = zb_insert_comms(plain, &pl->plan.sched, err);
    else if (!(pl->plan.sched = zb_schedule_clone(plain)))
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for the schedule");
    if (st != ZB_OK) {
        zb_sim_free(&sim);
        goto done;
    }
    for (int r = 0; r < pl->P && r < 1024; r++)
        pl_mem_predict(pl, r, sim.peak_mem[r], &rep->mem_predicted[r]);
    zb_sim_free(&sim);
    if ((st = check_mem_limit(pl, rep, err)) != ZB_OK)
        goto done;
    char dp_note[48] = "", rc_note[64] = "";
    if (pl->N > 1)
        snprintf(dp_note, sizeof dp_note, " x %d data-parallel replicas", pl->N);
    int n_r = 0;
    for (int r = 0; r < plain->ranks; r++)
        for (int i = 0; i < plain->rank[r].len; i++)
            n_r += plain->rank[r].actions[i].type == ZB_ACT_R;
    if (n_r > 0)
        snprintf(rc_note, sizeof rc_note, ", %d of %d forwards recomputed", n_r, pl->plan.S * pl->M);
    snprintf(rep->note, sizeof rep->note, "%s, P=%d v=%d M=%d%s%s, stage costs %s", plain->name,
             pl->P, plain->chunks, pl->M, dp_note, rc_note,
             !pl->prof ? "from the FLOP model"
             : o->transport ? "measured on rank 0 (zbpp profile, one core), shared with every rank"
                            : "measured (zbpp profile, one core)");

    pl->plan.n_units = zb_gpt2_num_units(&pl->mcfg);
    pl->plan.unit_owner = malloc((size_t)pl->plan.n_units * sizeof(int));
    pl->ranks = calloc((size_t)pl->P * (size_t)pl->N, sizeof *pl->ranks);
    if (!pl->plan.unit_owner || !pl->ranks) {
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for the pipeline");
        goto done;
    }
    pl->plan.embed_rank = zb_stage_rank(pl->plan.sched, 0);
    pl->plan.head_rank = zb_stage_rank(pl->plan.sched, pl->plan.S - 1);
    pl->plan.unit_owner[0] = pl->plan.embed_rank;
    pl->plan.unit_owner[pl->plan.n_units - 1] = pl->plan.head_rank;
    for (int s = 0; s < pl->plan.S; s++)
        for (int l = pl->plan.first[s]; l < pl->plan.first[s + 1]; l++)
            pl->plan.unit_owner[1 + l] = zb_stage_rank(pl->plan.sched, s);
    for (int g = 0; g < pl->P * pl->N && st == ZB_OK; g++)
        if (!o->transport || g == o->transport->rank) /* a process holds only its own rank */
            /* fresh moments are zero: not copied (that would make them resident while the
             * whole model still is); the rank writes them before its first step */
            st = pl_rank_init(pl, g, &t->params, pl->cfg->resume_path ? &t->opt : NULL,
                              t->skipped, err);
done:
    if (st == ZB_OK) { /* kept for the predicted trace */
        pl->plan.costs = costs;
        pl->have_costs = true;
    } else {
        zb_costs_free(&costs);
    }
    zb_schedule_free(plain);
    return st;
}

/* --save: one gathered file (threads: from memory; MPI: through the transport) or shards. */
static zb_status_t save(pl_t *pl, zb_trainer_t *t, zb_err_t *err)
{
    zb_status_t st;
    if (pl->opts->sharded_checkpoint)
        return pl_save_sharded(pl, t, err);
    if (pl->opts->transport) {
        zb_transport_t *net = pl->opts->transport;
        st = net->rank == 0 ? acquire_whole_model(pl, t, true, err) : ZB_OK;
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
    for (int g = 0; pl->ranks && g < pl->P * pl->N; g++)
        pl_rank_free(&pl->ranks[g]);
    free(pl->ranks);
    free(pl->plan.unit_owner);
    zb_schedule_free(pl->plan.sched);
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

zb_status_t zb_pipeline_train(const zb_train_config_t *cfg, const zb_pipeline_opts_t *opts,
                              FILE *human, zb_train_summary_t *summary,
                              zb_pipeline_report_t *report, zb_gpt2_params_t *final_params,
                              zb_err_t *err)
{
    memset(summary, 0, sizeof *summary);
    zb_pipeline_report_t rep_local;
    zb_pipeline_report_t *rep = report ? report : &rep_local;
    memset(rep, 0, sizeof *rep);
    /* With a transport (MPI) every start-up failure still reaches the handshake below, so the
     * other processes hear of it instead of waiting for this one. */
    zb_transport_t *net = opts->transport;
    zb_status_t st = ZB_OK;
    const int N = opts->dp > 1 ? opts->dp : 1;
    if (opts->ranks < 1 || opts->ranks > 1024)
        st = zb_err_set(err, ZB_EINVAL, "--ranks must be in 1..1024 (got %d)", opts->ranks);
    else if (opts->dp < 0 || opts->dp > 1024 || opts->ranks * N > 4096)
        st = zb_err_set(err, ZB_EINVAL,
                        "--dp must be in 1..1024 with --dp x --ranks <= 4096 (got --dp %d, "
                        "--ranks %d)", opts->dp, opts->ranks);
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
    else if (cfg->keep_last > 0 && opts->sharded_checkpoint)
        st = zb_err_set(err, ZB_EINVAL,
                        "--keep-last is not available with --checkpoint-format sharded");
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
    if (st == ZB_OK && (st = zb_trainer_init(&t, &icfg, err)) != ZB_OK && !net)
        return st;
    pl_t pl = {.cfg = cfg, .opts = opts};
    zb_thread_world_t *world = NULL;
    void **args = NULL;
    double *step_ms = NULL;
    zb_progress_t *prog = NULL;
    if (st == ZB_OK) {
        setup_shape(&pl, &t);
        /* room for every compute thread's BLAS buffer, or a clear error now (blas_setup.c) */
        st = zb_blas_check_headroom(net ? 2 : pl.P * pl.N, err);
        if (st == ZB_OK)
            st = pl_profile(&pl, &t.params, err);
    }
    /* MPI: every rank takes part (even one that already failed), so all plan from rank 0's
     * figures and nobody waits for a message that never comes */
    if (net)
        st = pl_share_profile(&pl, st, err);
    if (st == ZB_OK)
        st = setup(&pl, &t, rep, err);
    if (st == ZB_OK && sharded_resume)
        st = pl_resume_sharded(&pl, &t, cfg->resume_path, err);
    if (net && (st = pl_handshake(&pl, &t, st, err)) != ZB_OK)
        rep->failed_together = true;
    if (st != ZB_OK)
        goto out;
    release_whole_model(&t);
    long todo = cfg->steps > t.step ? cfg->steps - t.step : 0;
    const int me = net ? net->rank : 0; /* the rank whose figures this process reports */
    const int world_size = pl.P * pl.N;
    args = calloc((size_t)world_size, sizeof *args);
    step_ms = calloc(todo > 0 ? (size_t)todo : 1, sizeof *step_ms);
    double *tps = calloc(todo > 0 ? (size_t)todo : 1, sizeof *tps);
    if (!args || !step_ms || !tps) {
        free(tps);
        st = zb_err_set(err, ZB_ENOMEM, "out of memory starting the pipeline");
        goto out;
    }
    for (int g = 0; g < world_size; g++)
        args[g] = &pl.ranks[g];
    if (net || (st = zb_thread_world_new(world_size, mailbox_capacity(&pl), opts->timeout, &world,
                                         err)) == ZB_OK)
        st = zb_progress_open(&prog, cfg->quiet ? NULL : human, cfg->metrics_path,
                              cfg->resume_path != NULL, cfg->steps, err);
    if (st == ZB_OK)
        zb_progress_set_flops(prog, zb_train_flops_per_step(&pl.mcfg, pl.param_count, cfg->batch,
                                                            cfg->seq),
                              cfg->peak_tflops * 1e12);
    summary->first_step = t.step;
    zb_diverge_t div;
    zb_diverge_init(&div, 0);
    while (st == ZB_OK && t.step < cfg->steps) {
        if (cfg->stop) { /* Ctrl-C at a step boundary; processes agree (any rank's flag) */
            double flag = *cfg->stop ? 1.0 : 0.0;
            if (net && (st = zb_allreduce_sum(net, &flag, 1, err)) != ZB_OK)
                break;
            if (flag > 0) {
                summary->interrupted = true;
                break;
            }
        }
        /* The report's timeline is the last step's: with processes, start it together so every
         * rank's offsets share one origin (each from its own barrier exit). */
        if (net && t.step == cfg->steps - 1 && (st = zb_barrier(net, err)) != ZB_OK)
            break;
        double t0 = zb_now();
        if ((st = zb_trainer_next_batch(&t, err)) != ZB_OK)
            break;
        pl.inputs = t.inputs;
        pl.targets = t.targets;
        pl.step = t.step;
        pl.t0 = t0;
        zb_mpi_stats_t before, after;
        zb_mpi_transport_stats(net, &before);
        st = net ? pl_rank_step(net, &pl.ranks[me], err)
                 : zb_thread_world_run(world, pl_rank_step, args, opts->pin, NULL, err);
        if (st != ZB_OK)
            break;
        zb_mpi_transport_stats(net, &after); /* zeros unless net is an MPI transport */
        rep->step_bytes_sent += after.bytes_sent - before.bytes_sent;
        rep->step_bytes_received += after.bytes_received - before.bytes_received;
        rep->step_msgs_sent += (double)(after.msgs_sent - before.msgs_sent);
        rep->step_msgs_received += (double)(after.msgs_received - before.msgs_received);
        rep->step_wait_s += after.wait_s - before.wait_s;
        zb_step_stats_t s = pl.ranks[me].stats;
        s.loss = pl.ranks[me].loss;
        t.step++;
        t.skipped += s.skipped;
        double secs = zb_now() - t0;
        s.step_ms = secs * 1e3;
        s.tokens_per_s = secs > 0 ? (double)cfg->batch * cfg->seq / secs : 0;
        if (summary->steps_run == 0)
            summary->first_loss = s.loss;
        summary->last_loss = s.loss;
        step_ms[summary->steps_run] = s.step_ms;
        tps[summary->steps_run++] = s.tokens_per_s;
        summary->skipped += s.skipped;
        s.has_val = zb_train_val_due(cfg, t.step);
        if (s.has_val && (st = pl_validate(&pl, t.val, world, args, me, &s.val_loss, err)) != ZB_OK)
            break;
        if (s.has_val) {
            summary->has_val = true;
            summary->val_loss = s.val_loss;
        }
        st = zb_progress_step(prog, &s, err);
        if (st == ZB_OK) /* K skipped steps in a row: diverged, stop before any save */
            st = zb_diverge_step(&div, s.skipped, t.step, err);
        if (st == ZB_OK && cfg->sample_every > 0 && t.step % cfg->sample_every == 0 && !net &&
            (st = gather(&pl, &t, false, err)) == ZB_OK) { /* --sample-every: whole model */
            st = zb_train_sample(cfg, &t.params, t.inputs[0], t.step, human, err);
            release_whole_model(&t);
        }
        if (st == ZB_OK && cfg->save_every > 0 && t.step % cfg->save_every == 0 &&
            t.step < cfg->steps && zb_diverge_may_save(&div))
            st = save(&pl, &t, err);
    }
    zb_err_t close_err;
    zb_status_t cst = zb_progress_close(prog, &close_err);
    if (st == ZB_OK && cst != ZB_OK) {
        st = cst;
        if (err)
            *err = close_err;
    }
    if (summary->steps_run > 0) {
        zb_sort_doubles(tps, (size_t)summary->steps_run);
        summary->median_tokens_per_s = tps[summary->steps_run / 2];
        summary->flops_per_token =
            zb_train_flops_per_step(&pl.mcfg, pl.param_count, cfg->batch, cfg->seq) /
            ((double)cfg->batch * cfg->seq);
        zb_sort_doubles(step_ms, (size_t)summary->steps_run);
        rep->step_ms_median = step_ms[summary->steps_run / 2];
    }
    free(tps);
    if (st == ZB_OK && summary->steps_run > 0)
        st = pl_dp_check(&pl, rep, err);
    if (st == ZB_OK) {
        if (summary->steps_run > 0 && !net)
            st = report_run(&pl, rep, err);
        for (int g = 0; !net && g < world_size; g++)
            rep->rollbacks += pl.ranks[g].rollbacks;
        for (int r = 0; !net && r < pl.P && r < 1024; r++)
            pl_mem_measure(&pl.ranks[r], &rep->mem_measured[r]);
        rep->mem_measured_ok = !net;
        rep->rss_peak_bytes = zb_rss_peak_bytes();
        if (net) { /* this process's own figures; rank 0 also gets replica 0's timelines */
            rep->rollbacks = pl.ranks[me].rollbacks;
            if (summary->steps_run > 0)
                st = pl_gather_report(&pl, rep, err);
            if (!rep->measured && pl.ranks[me].rank < 1024)
                rep->peak_stash_bytes[pl.ranks[me].rank] = (double)pl.ranks[me].live_peak;
        }
        if (st == ZB_OK && cfg->save_path) /* only after a complete run: never a partial one */
            st = save(&pl, &t, err);
        bool want_params = cfg->save_model_path || final_params;
        if (st == ZB_OK && want_params && !net)
            st = gather(&pl, &t, false, err);
        if (st == ZB_OK && cfg->save_model_path && !net) /* llm.c export, as --ranks 1 */
            st = zb_gpt2_save_llmc(cfg->save_model_path, &t.params, err);
        if (st == ZB_OK && final_params) {
            st = zb_gpt2_params_alloc(final_params, &pl.mcfg, err);
            if (st == ZB_OK)
                memcpy(final_params->data, t.params.data, t.params.count * sizeof(float));
        }
    }
out:
    free(args);
    free(step_ms);
    zb_thread_world_free(world);
    teardown(&pl);
    zb_trainer_free(&t);
    return st;
}
