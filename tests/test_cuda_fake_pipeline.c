/* Pipeline ranks on the CUDA stage (issue 13) on the fake device of cuda_fake_device.inc
 * ("device" memory in host memory, every op the CPU kernel): the host logic of
 * src/pipeline/rank_cuda.c must then give the SAME BITS as the CPU pipeline and as --ranks 1.
 * Every schedule family at P in {2, 4}, M in {P, 2P}: losses and final parameters equal the
 * single-process trainer's (and the CPU pipeline's); the post-validation rollback on an Inf, the
 * replica reduction (--dp 2) and validation through the pipeline are the same bits; a failing
 * rank stops all ranks with its name; checkpoints move between the fake-GPU pipeline and the CPU
 * pipeline (gathered and sharded) and the continuation is the straight run's bits; ranks sharing
 * the one fake GPU get SM partitions (the driver's green contexts stubbed here); device messages
 * (device-to-device copies after the sender's event, the fake's events counted) are the same
 * bits as host staging; --trace times every action on the rank's timer (stubbed with host
 * clock readings and timing.c's order rules) and the bits stay the same.
 * No clipping (grad_clip 0): the fake sums the norm in the GPU's block order, so a clip factor
 * would differ from the CPU's in the last bits (test_cuda_fake_train says the same).
 * Skipped (77) without CUDA. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef ZB_HAVE_CUDA
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#else

#include "cuda_fake_device.inc"
#include "pipeline_testutil.h"
#include "pipeline/pipeline_hooks.h"
#include "zbpp/pipeline.h"
#include "zbpp/schedule_io.h"
#include "zbpp/util.h"

/* ---- SM partitions without a driver: a fake 132-SM Hopper's plan, no streams ---- */

struct zb_cuda_partitions {
    zb_cuda_sm_plan_t plan;
};
static int partitions_made;

zb_status_t zb_cuda_partitions_new(int device, int ranks, int sm_per_rank,
                                   zb_cuda_partitions_t **out, zb_err_t *err)
{
    (void)device;
    *out = NULL;
    const zb_cuda_sm_info_t h100 = {.sm_count = 132, .min_partition = 8, .alignment = 8};
    zb_cuda_partitions_t *p = calloc(1, sizeof *p);
    if (!p)
        return zb_err_set(err, ZB_ENOMEM, "fake partitions");
    zb_status_t st = zb_cuda_sm_plan(&h100, ranks, sm_per_rank, &p->plan, err);
    if (st != ZB_OK) {
        free(p);
        return st;
    }
    partitions_made++;
    *out = p;
    return ZB_OK;
}
void zb_cuda_partitions_free(zb_cuda_partitions_t *p) { free(p); }
const zb_cuda_sm_plan_t *zb_cuda_partitions_plan(const zb_cuda_partitions_t *p)
{
    return &p->plan;
}
struct CUstream_st *zb_cuda_partition_stream(const zb_cuda_partitions_t *p, int r)
{
    (void)p, (void)r;
    return NULL; /* the fake device's stream */
}
int zb_cuda_partition_sms(const zb_cuda_partitions_t *p, int r)
{
    return r >= 0 && r < p->plan.ranks ? p->plan.sm_per_rank : -1;
}

#include "cuda_fake_timer.inc" /* --trace: action timing on host clock readings */

/* ---- helpers ---- */

enum { STEPS = 3 };
static const zb_cuda_train_opts_t GPU = {.device = 0, .precision = ZB_CUDA_FP32};
static const zb_cuda_train_opts_t GPU16 = {.device = 0, .precision = ZB_CUDA_BF16};
static const zb_cuda_train_opts_t *gpu = &GPU; /* what opts() gives a cuda run */

static void tiny(zb_train_config_t *c, int M, long steps)
{
    pt_tiny_config(c, 8, 8, M, steps);
    c->grad_clip = 0.0f;
}

static void opts(zb_pipeline_opts_t *o, int P, const char *schedule, bool cuda)
{
    zb_pipeline_opts_defaults(o);
    o->ranks = P;
    o->schedule = schedule;
    o->pin = false;
    o->timeout = 60;
    o->cuda = cuda ? gpu : NULL;
}

static void same_losses(const float *a, const float *b, int n, const char *what)
{
    for (int s = 0; s < n; s++)
        if (memcmp(&a[s], &b[s], sizeof(float)) != 0)
            fail_msg("%s: step %d loss %.9g vs %.9g", what, s, (double)a[s], (double)b[s]);
}

static void run_ok(const zb_train_config_t *c, const zb_pipeline_opts_t *o, float *loss,
                   zb_gpt2_params_t *out, zb_pipeline_report_t *rep)
{
    zb_err_t err;
    zb_err_clear(&err);
    zb_status_t st = pt_run(c, o, loss, out, rep, &err);
    if (st != ZB_OK)
        fail_msg("%s P=%d on %s: %s", o->schedule, o->ranks, o->cuda ? "cuda" : "cpu", err.msg);
}

/* ---- tests ---- */

static void test_every_family_same_bits(void **state)
{
    (void)state;
    size_t n = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    int ran = 0;
    static const int Ms[] = {2, 4, 8};
    for (int mi = 0; mi < 3; mi++) {
        int M = Ms[mi];
        zb_train_config_t c;
        tiny(&c, M, STEPS);
        float ref_loss[STEPS];
        zb_gpt2_params_t ref;
        pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);
        for (size_t g = 0; g < n; g++)
            for (int P = 2; P <= 4; P += 2) {
                if (M != P && M != 2 * P)
                    continue;
                zb_pipeline_opts_t o;
                opts(&o, P, gens[g].name, true);
                o.opt_sync = (ran % 2) ? ZB_OPT_SYNC_BARRIER : ZB_OPT_SYNC_POST_VALIDATION;
                float loss[STEPS];
                zb_gpt2_params_t got;
                zb_pipeline_report_t rep = {0};
                zb_err_t err;
                int before = partitions_made;
                long not_ready = fake_event_not_ready, pinned = fake_host_allocs;
                zb_status_t st = pt_run(&c, &o, loss, &got, &rep, &err);
                if (st == ZB_EINVAL) { /* the family refuses (P, M), as on the CPU */
                    print_message("    %-18s P=%d M=%d rejected: %s\n", gens[g].name, P, M,
                                  err.msg);
                    zb_pipeline_report_free(&rep);
                    continue;
                }
                if (st != ZB_OK)
                    fail_msg("%s P=%d M=%d: %s", gens[g].name, P, M, err.msg);
                char what[96];
                snprintf(what, sizeof what, "cuda %s P=%d M=%d", gens[g].name, P, M);
                same_losses(loss, ref_loss, STEPS, what);
                pt_assert_same_params(&got, &ref, what);
                /* P ranks on the one fake GPU: one set of partitions, said in the report */
                assert_int_equal(partitions_made, before + 1);
                /* host staging through pinned slots, the sends deferred until their downloads
                 * (the fake's copy stream finishes them late: a slot sent early carries NaN) */
                assert_true(fake_host_allocs > pinned && fake_event_not_ready > not_ready);
                if (!strstr(rep.device, "SM partitions: "))
                    fail_msg("%s: no partition line in '%s'", what, rep.device);
                zb_gpt2_params_free(&got);
                ran++;
                zb_pipeline_report_free(&rep);
            }
        zb_gpt2_params_free(&ref);
    }
    print_message("    %d fake-GPU pipeline runs matched --ranks 1 bit for bit\n", ran);
    assert_true(ran >= 10);

    /* and the CPU pipeline itself, side by side on one interleaved (two stages a rank) run */
    zb_train_config_t c;
    tiny(&c, 4, STEPS);
    zb_pipeline_opts_t o;
    float lc[STEPS], lg[STEPS];
    zb_gpt2_params_t pc, pg;
    zb_pipeline_report_t rep = {0};
    opts(&o, 2, "interleaved-1f1b", false);
    run_ok(&c, &o, lc, &pc, &rep);
    assert_string_equal(rep.device, "");
    opts(&o, 2, "interleaved-1f1b", true);
    run_ok(&c, &o, lg, &pg, &rep);
    assert_non_null(strstr(rep.device, "2 ranks on 1 GPU; GPU 0 SM partitions: 2 ranks x 64 SMs"));
    same_losses(lg, lc, STEPS, "cuda vs cpu pipeline");
    pt_assert_same_params(&pg, &pc, "cuda vs cpu pipeline");
    zb_gpt2_params_free(&pg);
    /* --partition profile on cuda: the GPU profiler's costs, timed in the partition a rank
     * gets (a second split of the device: the profile's, then the run's), plan the partition
     * and predict with the ranks' slowdown of each other; same bits */
    opts(&o, 2, "zb-h1", true);
    o.profile = true;
    int before = partitions_made;
    run_ok(&c, &o, lg, &pg, &rep);
    assert_int_equal(partitions_made, before + 2);
    assert_non_null(strstr(rep.note, "profile"));
    /* both ranks share the one GPU: the simulator runs them with the profile's factors */
    assert_non_null(strstr(rep.note, "ranks sharing the GPU as profiled"));
    assert_non_null(strstr(rep.note, "and what they run (beside all F / B / W"));
    assert_non_null(strstr(rep.note, "; a fused BW "));
    same_losses(lg, lc, STEPS, "cuda with a GPU profile");
    pt_assert_same_params(&pg, &pc, "cuda with a GPU profile");
    zb_gpt2_params_free(&pg);
    zb_pipeline_report_free(&rep);
    /* and --offload all: the copies predicted on the host link the profile timed, which the
     * ranks' copies share in the simulator; same bits */
    o.offload = ZB_OFFLOAD_ALL;
    memset(&rep, 0, sizeof rep);
    run_ok(&c, &o, lg, &pg, &rep);
    if (!strstr(rep.offload_note, "the ranks' copies sharing a host link of"))
        fail_msg("offload note '%s'", rep.offload_note);
    same_losses(lg, lc, STEPS, "cuda --offload all with a GPU profile");
    pt_assert_same_params(&pg, &pc, "cuda --offload all with a GPU profile");
    zb_gpt2_params_free(&pc), zb_gpt2_params_free(&pg);
    zb_pipeline_report_free(&rep);
}

/* --ranks 1 --sm-per-rank K: the one rank in a partition of K SMs (the reference a partitioned
 * pipeline is compared with on a GPU): one partition made, said in the report, the same bits. */
static void test_one_rank_in_a_partition(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny(&c, 4, STEPS);
    float ref_loss[STEPS], loss[STEPS];
    zb_gpt2_params_t ref, got;
    pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);
    zb_cuda_train_opts_t part = GPU;
    part.sm_per_rank = 16;
    zb_pipeline_opts_t o;
    opts(&o, 1, "1f1b", true);
    o.cuda = &part;
    zb_pipeline_report_t rep = {0};
    int before = partitions_made;
    run_ok(&c, &o, loss, &got, &rep);
    assert_int_equal(partitions_made, before + 1);
    if (!strstr(rep.device, "1 rank x 16 SMs"))
        fail_msg("no one-rank partition in '%s'", rep.device);
    same_losses(loss, ref_loss, STEPS, "one rank in a 16-SM partition");
    pt_assert_same_params(&got, &ref, "one rank in a 16-SM partition");
    zb_gpt2_params_free(&got);

    /* the whole GPU with its GEMMs planned for 16 SMs: no partition, the same bits; a negative
     * SM count is refused with its name */
    zb_cuda_train_opts_t planned = GPU;
    planned.gemm_sms = 16;
    o.cuda = &planned;
    before = partitions_made;
    run_ok(&c, &o, loss, &got, &rep);
    assert_int_equal(partitions_made, before);
    same_losses(loss, ref_loss, STEPS, "whole GPU planned for 16 SMs");
    pt_assert_same_params(&got, &ref, "whole GPU planned for 16 SMs");
    zb_gpt2_params_free(&got);
    planned.gemm_sms = -1;
    zb_err_t err;
    assert_int_equal(pt_run(&c, &o, loss, NULL, &rep, &err), ZB_EINVAL);
    if (!strstr(err.msg, "gemm_sms"))
        fail_msg("gemm_sms -1: '%s'", err.msg);
    zb_gpt2_params_free(&ref);
    zb_pipeline_report_free(&rep);
}

/* --dp 2 x 2 ranks of `schedule`: the fake-GPU pipeline (options gpu) against the CPU pipeline's
 * fixed-order sum of the replicas: the same losses and parameters; *rep: the GPU run's report. */
static void dp2_same_as_cpu(const char *schedule, const zb_cuda_train_opts_t *gpu,
                            const char *what, zb_pipeline_report_t *rep)
{
    zb_train_config_t c;
    tiny(&c, 2, STEPS);
    zb_pipeline_opts_t o;
    float ref_loss[STEPS], loss[STEPS];
    zb_gpt2_params_t ref, got;
    opts(&o, 2, schedule, false);
    o.dp = 2;
    run_ok(&c, &o, ref_loss, &ref, rep);
    opts(&o, 2, schedule, true);
    o.cuda = gpu;
    o.dp = 2;
    run_ok(&c, &o, loss, &got, rep);
    same_losses(loss, ref_loss, STEPS, what);
    pt_assert_same_params(&got, &ref, what);
    zb_gpt2_params_free(&ref), zb_gpt2_params_free(&got);
}

/* Validation through the pipeline of `schedule` (2 ranks): on the CPU into *sc, on the fake GPU
 * (options gpu) into *sg; the same loss, bit for bit. */
static void val_same_as_cpu(const char *schedule, const zb_cuda_train_opts_t *gpu,
                            const char *what, zb_train_summary_t *sc, zb_train_summary_t *sg)
{
    zb_train_config_t c;
    tiny(&c, 4, 2);
    c.val_text_path = c.text_path;
    c.val_every = 1;
    c.val_steps = 2;
    zb_pipeline_opts_t o;
    zb_err_t err;
    opts(&o, 2, schedule, false);
    assert_int_equal(zb_pipeline_train(&c, &o, NULL, sc, NULL, NULL, &err), ZB_OK);
    opts(&o, 2, schedule, true);
    o.cuda = gpu;
    if (zb_pipeline_train(&c, &o, NULL, sg, NULL, NULL, &err) != ZB_OK)
        fail_msg("%s: %s", what, err.msg);
    assert_memory_equal(&sc->val_loss, &sg->val_loss, sizeof(float));
}

/* An Inf in unit 3's gradient at step 1, every rank guessing (post-validation): the run on the
 * fake GPU (P = 4, zb-h1) against the reference that skips the step; returns its rollbacks. */
static long inf_step_run(const char *what)
{
    zb_train_config_t c;
    tiny(&c, 4, 4);
    pt_inf_t hook = {1, 3};
    float ref_loss[4], loss[4];
    zb_gpt2_params_t ref, got;
    long skipped;
    pt_reference(&c, pt_inject_inf, &hook, ref_loss, &ref, &skipped);
    assert_int_equal(skipped, 1);
    zb_pipeline_opts_t o;
    opts(&o, 4, "zb-h1", true);
    zb_pipeline_test_hooks_t hooks = ZB_PIPELINE_TEST_HOOKS_OFF;
    hooks.inject_inf_step = 1;
    hooks.inject_inf_unit = 3;
    hooks.always_guess = 1; /* whether a rank guesses otherwise follows timings */
    o.test_hooks = &hooks;
    zb_pipeline_report_t rep = {0};
    run_ok(&c, &o, loss, &got, &rep);
    same_losses(loss, ref_loss, 4, what);
    pt_assert_same_params(&got, &ref, what);
    zb_gpt2_params_free(&ref), zb_gpt2_params_free(&got);
    long rollbacks = rep.rollbacks;
    zb_pipeline_report_free(&rep);
    return rollbacks;
}

/* An Inf in unit 3's gradient at step 1: skipped on every rank, the optimistic step rolled back
 * (post-validation), the result the reference's that skips the step. */
static void test_rollback_dp_and_validation(void **state)
{
    (void)state;
    assert_true(inf_step_run("cuda rollback") > 0);
    zb_pipeline_report_t rep = {0};

    /* two replicas of a 2-rank pipeline: the CPU pipeline's fixed-order sum of the replicas */
    dp2_same_as_cpu("1f1b", &GPU, "cuda --dp 2", &rep);
    assert_true(rep.replicas_checked);
    assert_int_equal(rep.replicas_differ, 0);

    /* validation through the fake-GPU pipeline: the CPU pipeline's loss, bit for bit */
    zb_train_summary_t sc, sg;
    val_same_as_cpu("zb-v", &GPU, "cuda validation", &sc, &sg);
    assert_true(sc.has_val && sg.has_val);
    zb_pipeline_report_free(&rep);
}

/* A device without room for post-validation's backup: the ranks stop guessing and update after
 * the norm barrier (so nothing rolls back where test_rollback_dp_and_validation's same run
 * does), and the run ends with the bits of the reference instead of failing. */
static void test_backup_without_room(void **state)
{
    (void)state;
    fake_refuse_backup = true;
    long rollbacks = inf_step_run("backup without room");
    fake_refuse_backup = false;
    assert_int_equal(rollbacks, 0);
}

/* The step's phases after the actions, from the (fake) GPU's events: a last step whose norm is
 * +Inf on one unit makes the other ranks back up, step optimistically and roll back; every
 * rank drains, exchanges norms and updates; the tied WTE's two ranks exchange it; each phase's
 * device time is the sum of its segments, which follow one another and lie inside the host's
 * intervals. */
static void test_step_phases_timeline(void **state)
{
    (void)state;
    enum { STEPS_HERE = 3 };
    zb_train_config_t c;
    tiny(&c, 4, STEPS_HERE);
    zb_pipeline_opts_t o;
    opts(&o, 4, "zb-h1", true);
    zb_pipeline_test_hooks_t hooks = ZB_PIPELINE_TEST_HOOKS_OFF;
    hooks.inject_inf_step = STEPS_HERE - 1; /* the last step: the one reported */
    hooks.inject_inf_unit = 3;
    hooks.always_guess = 1; /* whether a rank guesses otherwise follows timings */
    o.test_hooks = &hooks;
    float loss[STEPS_HERE];
    zb_pipeline_report_t rep = {0};
    long launches = fake_adamw_launches;
    run_ok(&c, &o, loss, NULL, &rep);
    /* one AdamW launch per rank and step, a rollback at most one more */
    assert_true(fake_adamw_launches - launches <= 4L * STEPS_HERE + rep.rollbacks);
    assert_true(rep.measured && rep.phases);
    int rolled = 0;
    for (int r = 0; r < 4; r++) {
        const zb_step_phases_t *ph = &rep.phases[r];
        double sum[ZB_PHASES] = {0};
        assert_true(ph->segments >= 3 && ph->segments <= ZB_STEP_SEGMENTS);
        for (int k = 0; k < (int)ph->segments; k++) {
            assert_true(ph->seg_start[k] <= ph->seg_end[k]);
            if (k > 0)
                assert_true(ph->seg_end[k - 1] <= ph->seg_start[k]);
            sum[(int)ph->seg_phase[k]] += (ph->seg_end[k] - ph->seg_start[k]) * 1e3;
        }
        for (int p = 0; p < ZB_PHASES; p++) {
            assert_true(fabs(sum[p] - ph->device_ms[p]) < 1e-9);
            assert_true(ph->device_ms[p] <= ph->host_ms[p] + 1e-6);
        }
        assert_true(ph->host_ms[ZB_PHASE_DRAIN] > 0 && ph->host_ms[ZB_PHASE_NORM_SYNC] > 0);
        assert_true(ph->host_ms[ZB_PHASE_GRAD_NORM] > 0);
        assert_true(ph->host_ms[ZB_PHASE_OPTIMIZER] > 0 || ph->host_ms[ZB_PHASE_ROLLBACK] > 0);
        if (ph->host_ms[ZB_PHASE_ROLLBACK] > 0) { /* after a backup and an optimistic step */
            rolled++;
            assert_true(ph->host_ms[ZB_PHASE_BACKUP] > 0 && ph->device_ms[ZB_PHASE_ROLLBACK] > 0);
        }
        bool tied = r == 0 || r == 3; /* the embedding's and the head's ranks */
        assert_int_equal(ph->host_ms[ZB_PHASE_TIED_WTE] > 0, tied);
    }
    assert_true(rolled >= 1 && rolled == (int)rep.rollbacks);
    zb_pipeline_report_free(&rep);
}

/* The tied WTE's gradient folded on the device, once per step: between the embedding's rank and
 * the head's (1f1b, P = 4: two thread ranks on one GPU, ordered by events) and inside one rank
 * holding both (zb-v, P = 2: rank 0 has the first and the last stage); the optimizer's launches
 * counted; the bits of --ranks 1. */
static void test_tied_wte_on_device(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny(&c, 4, STEPS);
    float ref_loss[STEPS], loss[STEPS];
    zb_gpt2_params_t ref, got;
    pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);
    static const struct {
        const char *schedule;
        int P;
    } runs[] = {{"1f1b", 4}, {"zb-v", 2}};
    for (int k = 0; k < 2; k++) {
        zb_pipeline_opts_t o;
        opts(&o, runs[k].P, runs[k].schedule, true);
        long folds = fake_add_inplace_calls, launches = fake_adamw_launches;
        long norms = fake_sum_rows_launches, partials = fake_sumsq_multi_launches;
        zb_pipeline_report_t rep = {0};
        run_ok(&c, &o, loss, &got, &rep);
        assert_int_equal(fake_add_inplace_calls - folds, STEPS);
        /* the optimizer: one AdamW launch and one norm (one launch of every range's partials,
         * one reduction) per stage and step (zb-v: two stages per rank), no rollback here (no
         * clipping) */
        long stages = runs[k].P * (k == 1 ? 2 : 1);
        assert_int_equal(rep.rollbacks, 0);
        assert_int_equal(fake_adamw_launches - launches, stages * STEPS);
        assert_int_equal(fake_sum_rows_launches - norms, stages * STEPS);
        assert_int_equal(fake_sumsq_multi_launches - partials, stages * STEPS);
        same_losses(loss, ref_loss, STEPS, runs[k].schedule);
        pt_assert_same_params(&got, &ref, runs[k].schedule);
        zb_gpt2_params_free(&got);
        zb_pipeline_report_free(&rep);
    }
    zb_gpt2_params_free(&ref);
}

/* Device messages (opts.device_messages): the receiver copies from the sender's device slot
 * after the sender's event, no host round trip; the same bits for every family (P = 4, M = 8,
 * both optimizer syncs), with --dp 2 and through validation. */
static const zb_cuda_train_opts_t GPU_D2D = {.device = 0, .precision = ZB_CUDA_FP32,
                                             .device_messages = true};

static void test_device_messages(void **state)
{
    (void)state;
    size_t n = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    zb_train_config_t c;
    tiny(&c, 8, STEPS);
    float ref_loss[STEPS], loss[STEPS];
    zb_gpt2_params_t ref, got;
    pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);
    int ran = 0;
    for (size_t g = 0; g < n; g++) {
        zb_pipeline_opts_t o;
        opts(&o, 4, gens[g].name, true);
        o.cuda = &GPU_D2D;
        o.opt_sync = (g % 2) ? ZB_OPT_SYNC_BARRIER : ZB_OPT_SYNC_POST_VALIDATION;
        long rec = fake_events_recorded, waits = fake_event_waits;
        zb_pipeline_report_t rep = {0};
        zb_err_t err;
        zb_status_t st = pt_run(&c, &o, loss, &got, &rep, &err);
        if (st == ZB_EINVAL) {
            zb_pipeline_report_free(&rep);
            continue;
        }
        if (st != ZB_OK)
            fail_msg("device messages %s: %s", gens[g].name, err.msg);
        char what[96];
        snprintf(what, sizeof what, "device messages %s P=4 M=8", gens[g].name);
        same_losses(loss, ref_loss, STEPS, what);
        pt_assert_same_params(&got, &ref, what);
        /* every message of every step went through an event: 2 per microbatch and boundary;
         * each is waited for once by a stream, except the head's loss copies (one per F, the
         * host waits for the last one: zb_cuda_loss_take) and the small uploads' ring slots
         * (an F's tokens on the first stage, its targets on the last: the host waits for a
         * slot before it writes it again, small_copy.c) */
        assert_true(fake_events_recorded - rec >= (long)STEPS * 8 * 2 * 3);
        assert_int_equal(fake_event_waits - waits,
                         fake_events_recorded - rec - (long)STEPS * 8 * 3);
        zb_gpt2_params_free(&got);
        ran++;
        zb_pipeline_report_free(&rep);
    }
    assert_true(ran >= 8);
    zb_gpt2_params_free(&ref);

    /* --gpu-messages none (the benchmark's no-op transfers): the first step moves the data
     * (its losses are the real ones), later steps wait on the same events but copy nothing */
    static const zb_cuda_train_opts_t GPU_NULL = {.device = 0, .precision = ZB_CUDA_FP32,
                                                  .device_messages = true,
                                                  .null_messages = true};
    const zb_cuda_train_opts_t *modes[3] = {&GPU, &GPU_D2D, &GPU_NULL}; /* host, device, none */
    long copies[3], waits[3];
    float nloss[3][STEPS];
    for (int k = 0; k < 3; k++) {
        zb_pipeline_opts_t o;
        opts(&o, 4, "zb-h1", true);
        o.cuda = modes[k];
        /* one optimizer path: whether a rank guesses (post-validation) follows timings, and
         * the whole-GPU update's stream switch waits on an event too */
        o.opt_sync = ZB_OPT_SYNC_BARRIER;
        long c0 = fake_d2d_copies, w0 = fake_event_waits;
        zb_pipeline_report_t rep = {0};
        run_ok(&c, &o, nloss[k], NULL, &rep);
        copies[k] = fake_d2d_copies - c0, waits[k] = fake_event_waits - w0;
        assert_true((k == 2) == (strstr(rep.device, "no-op messages after step 1") != NULL));
        zb_pipeline_report_free(&rep);
    }
    /* the device-to-device copies of the messages: what the device run adds to the staged one */
    long msg_copies = copies[1] - copies[0];
    assert_true(msg_copies > 0 && msg_copies % STEPS == 0);
    assert_int_equal(copies[2] - copies[0], msg_copies / STEPS);
    assert_int_equal(waits[2], waits[1]);
    assert_memory_equal(&nloss[2][0], &nloss[1][0], sizeof(float));
    assert_true(memcmp(&nloss[2][STEPS - 1], &nloss[1][STEPS - 1], sizeof(float)) != 0);

    /* --dp 2 and validation: as with host staging */
    zb_pipeline_report_t rep = {0};
    dp2_same_as_cpu("zb-h2", &GPU_D2D, "device messages --dp 2", &rep);
    zb_train_summary_t sc, sg;
    val_same_as_cpu("1f1b", &GPU_D2D, "device messages validation", &sc, &sg);
    zb_pipeline_report_free(&rep);
}

/* --trace on the (fake) GPU: every action of every rank's program timed in program order on the
 * rank's timer, resolved after each step into the timeline the trace files and the measured
 * bubble come from; no action's interval holds its stream's wait for a message (the wait is
 * idle time, not busy); the bits do not change. */
static void test_trace_times_every_action(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny(&c, 8, STEPS);
    float ref_loss[STEPS], loss[STEPS];
    zb_gpt2_params_t ref, got;
    pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);
    char trace[256];
    pt_tmp_path(trace, sizeof trace, "trace.json");
    zb_pipeline_opts_t o;
    opts(&o, 4, "zb-v", true);
    o.trace_path = trace;
    long acts = timed_actions, res = timers_resolved, waits = fake_event_waits;
    long waits_in = waits_inside_actions;
    zb_pipeline_report_t rep = {0};
    run_ok(&c, &o, loss, &got, &rep);
    assert_true(fake_event_waits > waits); /* device messages: the consumers' streams waited */
    assert_int_equal(waits_inside_actions - waits_in, 0);
    same_losses(loss, ref_loss, STEPS, "cuda --trace");
    pt_assert_same_params(&got, &ref, "cuda --trace");
    assert_int_equal(timers_resolved - res, 2 * 4 * STEPS); /* the actions' and the phases' */
    assert_true(timed_actions - acts >= 4L * STEPS * 3 * 8); /* F, B, W of 8 mbs on each */
    assert_true(rep.measured);
    assert_true(rep.bubble_measured >= 0.0 && rep.bubble_measured < 1.0);
    /* the actions' makespan holds the longest rank's span, and the step holds its actions:
     * the report's "outside the actions" is never negative */
    assert_true(rep.span_measured > 0 && rep.makespan_measured >= rep.span_measured);
    assert_true(rep.span_predicted > 0 && rep.makespan_predicted >= rep.span_predicted);
    assert_true(rep.step_ms_last >= rep.makespan_measured * 1e3);
    /* what comes before the first action is a part of that */
    assert_true(rep.first_action_at >= 0 &&
                rep.first_action_at * 1e3 <= rep.step_ms_last - rep.makespan_measured * 1e3);
    /* the cost model against the run: every rank ran F, B and W (zb-v splits), no BW or R */
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < ZB_REPORT_KINDS; k++) {
            double m = rep.action_measured[r * ZB_REPORT_KINDS + k];
            double p = rep.action_predicted[r * ZB_REPORT_KINDS + k];
            bool ran = zb_report_kinds[k] == ZB_ACT_F || zb_report_kinds[k] == ZB_ACT_B ||
                       zb_report_kinds[k] == ZB_ACT_W;
            assert_true(ran ? m > 0 && p > 0 : m == 0 && p == 0);
        }
    assert_int_equal(access(trace, F_OK), 0);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -f /tmp/zbpp_test_%ld_trace*", (long)getpid());
    assert_int_equal(system(rm), 0);
    zb_gpt2_params_free(&ref), zb_gpt2_params_free(&got);
    zb_pipeline_report_free(&rep);
}

static void test_failing_rank_stops_all(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny(&c, 8, 4);
    zb_pipeline_opts_t o;
    opts(&o, 4, "zb-h2", true);
    o.timeout = 0; /* no timeout: only the abort can end the other ranks' waits */
    zb_pipeline_test_hooks_t hooks = ZB_PIPELINE_TEST_HOOKS_OFF;
    hooks.fail_step = 1;
    hooks.fail_rank = 1;
    hooks.fail_action = 3;
    o.test_hooks = &hooks;
    zb_pipeline_report_t rep = {0};
    zb_err_t err;
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &rep, &err), ZB_ENUMERIC);
    assert_non_null(strstr(err.msg, "rank 1, "));
    assert_non_null(strstr(err.msg, "injected fault"));
    zb_pipeline_report_free(&rep);
}

/* Train 2 steps on one device and save, continue to 4 on the other: the straight 4-step run's
 * losses and parameters. Gathered file fake GPU -> CPU; sharded CPU -> fake GPU. */
static void cross_resume(bool sharded, bool first_cuda)
{
    char ckpt[256];
    pt_tmp_path(ckpt, sizeof ckpt, sharded ? "ckpt_sharded" : "ckpt.bin");
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf %s %s.*", ckpt, ckpt); /* a sharded save's shards too */
    assert_int_equal(system(rm), 0);
    zb_train_config_t c;
    tiny(&c, 4, 4);
    c.lr_schedule = ZB_LR_CONSTANT; /* the same lr whatever --steps the first run has */
    float ref_loss[4], loss[4];
    zb_gpt2_params_t ref, got;
    pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);

    zb_pipeline_opts_t o;
    zb_pipeline_report_t rep = {0};
    zb_train_config_t first = c;
    first.steps = 2;
    first.save_path = ckpt;
    opts(&o, 2, "zb-h1", first_cuda);
    o.sharded_checkpoint = sharded;
    run_ok(&first, &o, loss, NULL, &rep);
    same_losses(loss, ref_loss, 2, "before the checkpoint");

    zb_train_config_t second = c;
    second.resume_path = ckpt;
    opts(&o, 2, "zb-h1", !first_cuda);
    run_ok(&second, &o, loss, &got, &rep);
    same_losses(loss, ref_loss + 2, 2, "after the checkpoint");
    pt_assert_same_params(&got, &ref, sharded ? "sharded resume" : "gathered resume");
    zb_gpt2_params_free(&ref), zb_gpt2_params_free(&got);
    assert_int_equal(system(rm), 0);
    zb_pipeline_report_free(&rep);
}

static void test_checkpoints_cross_devices(void **state)
{
    (void)state;
    cross_resume(false, true);
    cross_resume(true, false);
}

/* A memory table row's fields, in one order for field-by-field checks. */
#define MEM_FIELDS 9
static void mem_fields(const zb_rank_mem_t *m, double f[MEM_FIELDS])
{
    const double v[MEM_FIELDS] = {m->params,      m->grads,     m->optimizer,
                                  m->backup,      m->messages,  m->activations,
                                  m->stash_alloc, m->workspace, m->total};
    memcpy(f, v, sizeof v);
}

/* The memory table of GPU ranks is their device memory: predicted from the plan (the CUDA
 * stage's layout figures) = measured from what the ranks allocated, field by field; each stage
 * holds only its span's state (summed over the ranks: the model once, plus the head's WTE copy
 * where the head cannot read the embedding stage's, and its accumulator). Post-validation's
 * backup is held from the start (3 x state). --mem-limit is on each rank's device total;
 * --recompute saves device memory, same bits. */
static void device_memory_matches(const char *schedule, int P, zb_recompute_t recompute,
                                  int wte_copies)
{
    zb_train_config_t c;
    tiny(&c, 2 * P, 2);
    zb_pipeline_opts_t o;
    opts(&o, P, schedule, true);
    o.recompute = recompute;
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    float loss[2];
    fake_device_bytes_reset();
    run_ok(&c, &o, loss, NULL, rep);
    assert_true(rep->mem_on_device && rep->mem_measured_ok);
    double copy16 = gpu->precision == ZB_CUDA_BF16 ? 0.5 : 0.0; /* bf16 copies of the weights */
    double params = 0, grads = 0, held = 0;
    for (int r = 0; r < P; r++) {
        const zb_rank_mem_t *x = &rep->mem_measured[r];
        held += zb_rank_mem_allocated(x);
        assert_true(x->workspace >= (double)ZB_CU_LT_WS_BYTES);
        double a[MEM_FIELDS], b[MEM_FIELDS];
        mem_fields(&rep->mem_predicted[r], a), mem_fields(x, b);
        for (int i = 0; i < MEM_FIELDS; i++)
            if (a[i] != b[i] || !(a[i] >= 0))
                fail_msg("%s P=%d rank %d field %d: predicted %.0f, measured %.0f", schedule, P,
                         r, i, a[i], b[i]);
        assert_true(x->backup == 3 * x->params / (1.0 + copy16) && x->activations > 0);
        params += x->params, grads += x->grads;
    }
    /* every byte the run put on the device is in the table: the device's peak is what the
     * ranks' fields say they hold (nothing allocated later, nothing left out) */
    /* the driver's count at the end of the run (the fake's: its own bytes) is the same sum */
    if (rep->device_bytes_in_use != held)
        fail_msg("%s P=%d: %.0f bytes in use on the device, the ranks' tables hold %.0f",
                 schedule, P, rep->device_bytes_in_use, held);
    double peak = (double)fake_device_bytes_peak();
    if (peak != held)
        fail_msg("%s P=%d: the device's peak is %.0f bytes, the ranks' tables hold %.0f", schedule,
                 P, peak, held);
    /* and all of it is there before the first step: a run of no steps holds the same bytes (a
     * buffer that grows in a step would hold the table's figure only afterwards) */
    zb_train_config_t c0 = c;
    c0.steps = 0;
    zb_pipeline_report_t *rep0 = calloc(1, sizeof *rep0);
    fake_device_bytes_reset();
    run_ok(&c0, &o, NULL, NULL, rep0);
    double at_open = (double)fake_device_bytes_peak();
    if (at_open != held)
        fail_msg("%s P=%d: %.0f bytes on the device before the first step, %.0f after the run",
                 schedule, P, at_open, held);
    zb_pipeline_report_free(rep0), free(rep0);
    zb_trainer_t t; /* the model the run derived from c */
    zb_err_t err;
    assert_int_equal(zb_trainer_init(&t, &c, &err), ZB_OK);
    double whole = (double)t.params.count * sizeof(float);
    double wte = (double)t.params.sizes[ZB_WTE] * sizeof(float);
    zb_trainer_free(&t);
    /* the head's own WTE copy where it cannot read the embedding stage's (not here: thread ranks
     * of one GPU share it, pl_cuda_wte_shared); its accumulator always */
    if (params != (1.0 + copy16) * (whole + wte_copies * wte) ||
        grads != whole + (1 + wte_copies) * wte)
        fail_msg("%s P=%d: the ranks hold %.0f bytes of parameters and %.0f of gradients; the "
                 "model is %.0f, its WTE %.0f, copies of it %d",
                 schedule, P, params, grads, whole, wte, wte_copies);
    zb_pipeline_report_free(rep), free(rep);
}

/* Two runs of `schedule` at P on the fake GPU, without and with a memory option (`with` sets
 * it): the same losses and parameters; their reports into rep[0] and rep[1] (allocated). */
static void same_bits_with(const char *schedule, int P, void (*with)(zb_pipeline_opts_t *),
                           const char *what, zb_pipeline_report_t *rep[2])
{
    zb_train_config_t c;
    tiny(&c, 2 * P, 2);
    float loss[2][2];
    zb_gpt2_params_t out[2];
    for (int k = 0; k < 2; k++) {
        zb_pipeline_opts_t o;
        opts(&o, P, schedule, true);
        if (k)
            with(&o);
        rep[k] = calloc(1, sizeof *rep[k]);
        run_ok(&c, &o, loss[k], &out[k], rep[k]);
    }
    same_losses(loss[1], loss[0], 2, what);
    pt_assert_same_params(&out[1], &out[0], what);
    zb_gpt2_params_free(&out[0]), zb_gpt2_params_free(&out[1]);
}

static void recompute_all(zb_pipeline_opts_t *o) { o->recompute = ZB_RECOMPUTE_ALL; }
static void offload_all(zb_pipeline_opts_t *o) { o->offload = ZB_OFFLOAD_ALL; }

/* --recompute on GPU ranks: a non-saving F gives its stash back, the R takes one again: the
 * same bits as without, and less activation memory on every rank that recomputes. */
static void recompute_saves_gpu_memory(const char *schedule, int P)
{
    zb_pipeline_report_t *rep[2];
    same_bits_with(schedule, P, recompute_all, "cuda --recompute all", rep);
    bool less = false;
    for (int r = 0; r < P; r++) {
        double none = rep[0]->mem_measured[r].activations, all = rep[1]->mem_measured[r].activations;
        assert_true(all <= none);
        less |= all < none;
    }
    assert_true(less);
    zb_pipeline_report_free(rep[0]), zb_pipeline_report_free(rep[1]);
    free(rep[0]), free(rep[1]);
}

/* The most microbatches rank r's program holds between an F and its W (a whole stash each
 * before the lifetime pools). */
static int in_flight(const zb_schedule_t *s, int r)
{
    int now = 0, most = 0;
    for (int i = 0; i < s->rank[r].len; i++) {
        const zb_action_t *a = &s->rank[r].actions[i];
        now += a->type == ZB_ACT_F;
        most = now > most ? now : most;
        now -= a->type == ZB_ACT_W || a->type == ZB_ACT_BW;
    }
    return most;
}

/* GPU ranks pool their stashes by lifetime (the CPU rank's slot rules over the CUDA stash's
 * FW / FB / BW regions): with W deferred (zb-h2) a rank holds less than a whole stash per
 * microbatch between F and W, on the rank with the most deferred W's strictly less. */
static void test_gpu_stashes_by_lifetime(void **state)
{
    (void)state;
    const int P = 4, M = 8;
    zb_train_config_t c;
    tiny(&c, M, 1);
    zb_pipeline_opts_t o;
    opts(&o, P, "zb-h2", true);
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    float loss[1];
    run_ok(&c, &o, loss, NULL, rep);
    zb_gen_params_t gp = {.ranks = P, .microbatches = M, .chunks = 1};
    zb_schedule_t *s = NULL;
    zb_err_t e;
    assert_int_equal(zb_generate("zb-h2", &gp, &s, &e), ZB_OK);
    assert_int_equal(rep->stages, P);
    zb_trainer_t t; /* the model the run derived from c */
    assert_int_equal(zb_trainer_init(&t, &c, &e), ZB_OK);
    bool less = false;
    for (int r = 0; r < P; r++) {
        zb_gpt2_span_t sp = zb_partition_span(rep->first, rep->stages, r);
        zb_cuda_stage_mem_t fig;
        assert_int_equal(zb_cuda_stage_memory(&t.model, &sp, c.batch / M, c.seq, gpu->precision,
                                              &fig, &e),
                         ZB_OK);
        double pooled = rep->mem_measured[r].stash_alloc - (double)fig.scratch;
        double whole = (double)in_flight(s, r) * (double)fig.stash;
        print_message("    rank %d: stashes %.0f bytes pooled, %.0f as whole stashes (%d)\n", r,
                      pooled, whole, in_flight(s, r));
        assert_true(pooled <= whole);
        less |= pooled < whole;
    }
    assert_true(less);
    zb_trainer_free(&t);
    zb_schedule_free(s);
    zb_pipeline_report_free(rep), free(rep);
}

/* --offload all on GPU ranks: each stash goes to pinned host memory after its F and comes
 * back before its B (rank_cuda_stash.c); the losses and parameters are the bits of the run
 * without, the stash slots the ranks allocate are what the plan predicts, and fewer than
 * without on the first rank (which holds the most microbatches between F and B). On the CPU
 * --offload is refused in one line. */
static void offload_same_bits(const char *schedule, int P)
{
    zb_pipeline_report_t *rep[2];
    same_bits_with(schedule, P, offload_all, "cuda --offload all", rep);
    assert_non_null(strstr(rep[1]->note, "+O"));
    /* the report says how many moved and what a copy was taken to cost (the FLOP model here) */
    assert_non_null(strstr(rep[1]->offload_note, " stashes offloaded; a copy costs its stage's F"));
    assert_string_equal(rep[0]->offload_note, "");
    for (int r = 0; r < P; r++)
        if (rep[1]->mem_predicted[r].stash_alloc != rep[1]->mem_measured[r].stash_alloc)
            fail_msg("%s P=%d rank %d: stash slots predicted %.0f, allocated %.0f", schedule, P, r,
                     rep[1]->mem_predicted[r].stash_alloc, rep[1]->mem_measured[r].stash_alloc);
    print_message("    %s P=%d rank 0 stash slots: %.0f bytes kept, %.0f offloaded\n", schedule, P,
                  rep[0]->mem_measured[0].stash_alloc, rep[1]->mem_measured[0].stash_alloc);
    assert_true(rep[1]->mem_measured[0].stash_alloc < rep[0]->mem_measured[0].stash_alloc);
    zb_pipeline_report_free(rep[0]), zb_pipeline_report_free(rep[1]);
    free(rep[0]), free(rep[1]);
}

/* A schedule file with O/L cells (the planner's zb-h1 with every stash offloaded, copies as
 * long as a forward): its O's give their device slots back where the plan's simulation frees
 * the memory (after the download, not at the O as --offload all does): the same bits, and
 * slots predicted = allocated. */
static char offload_file[64];
static void offload_from_file(zb_pipeline_opts_t *o)
{
    o->schedule = NULL;
    o->schedule_file = offload_file;
}

static void offload_file_same_bits(int P, int M)
{
    zb_schedule_t *plain = NULL, *off = NULL;
    zb_gen_params_t gp = {.ranks = P, .microbatches = M};
    zb_costs_t c;
    zb_err_t e;
    if (zb_generate("zb-h1", &gp, &plain, &e) != ZB_OK ||
        zb_costs_init_uniform(&c, P, 1, 1, 1, 0, 1, -0.5, -0.5, &e) != ZB_OK ||
        zb_add_offload(plain, NULL, &c, &off, &e) != ZB_OK)
        fail_msg("%s", e.msg);
    snprintf(offload_file, sizeof offload_file, "/tmp/zbpp-offload-%d.csv", (int)getpid());
    FILE *f = fopen(offload_file, "w");
    assert_non_null(f);
    assert_int_equal(zb_csv_write(off, f, &e), ZB_OK);
    fclose(f);
    zb_pipeline_report_t *rep[2];
    same_bits_with("zb-h1", P, offload_from_file, "cuda, a CSV with O/L", rep);
    unlink(offload_file);
    for (int r = 0; r < P; r++)
        if (rep[1]->mem_predicted[r].stash_alloc != rep[1]->mem_measured[r].stash_alloc)
            fail_msg("CSV offload rank %d: stash slots predicted %.0f, allocated %.0f", r,
                     rep[1]->mem_predicted[r].stash_alloc, rep[1]->mem_measured[r].stash_alloc);
    print_message("    zb-h1+O from a CSV, rank 0 stash slots: %.0f bytes (%.0f without offload)\n",
                  rep[1]->mem_measured[0].stash_alloc, rep[0]->mem_measured[0].stash_alloc);
    zb_pipeline_report_free(rep[0]), zb_pipeline_report_free(rep[1]);
    free(rep[0]), free(rep[1]);
    zb_costs_free(&c);
    zb_schedule_free(plain), zb_schedule_free(off);
}

static void test_gpu_offload_same_bits(void **state)
{
    (void)state;
    offload_same_bits("1f1b", 4);
    offload_same_bits("zb-h1", 4);
    offload_same_bits("zb-v", 2);
    offload_file_same_bits(4, 8);
    zb_train_config_t c;
    tiny(&c, 4, 1);
    zb_pipeline_opts_t o;
    opts(&o, 2, "1f1b", false);
    o.offload = ZB_OFFLOAD_ALL;
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    float loss[1];
    zb_err_t err;
    assert_int_equal(pt_run(&c, &o, loss, NULL, rep, &err), ZB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "no second memory"));
    zb_pipeline_report_free(rep), free(rep);
}

/* Message slots by lifetime on GPU ranks (pl_cuda_msg_slots): a received gradient lives from its
 * RECV to its B, a staged sent slot from its F or B until its download is done, over at least
 * two slots; hooks.sent_slots = 1 gives each sent buffer the CPU's one slot, so every next
 * microbatch's F or B reuses a slot whose download the fake has not run yet (its copy stream
 * runs a copy only when something waits for it): without the wait for that download
 * (cu_buf_t.reuse) these runs send the next microbatch's bytes and their losses differ. */
static zb_pipeline_test_hooks_t one_sent_slot_hooks;
static void one_sent_slot(zb_pipeline_opts_t *o)
{
    one_sent_slot_hooks = ZB_PIPELINE_TEST_HOOKS_OFF;
    one_sent_slot_hooks.sent_slots = 1;
    o->test_hooks = &one_sent_slot_hooks;
}
static void device_pulls(zb_pipeline_opts_t *o) { o->cuda = &GPU_D2D; }

/* Each rank's message slots, measured = predicted, and under a slot per microbatch of each
 * buffer (loop placement: x_in and dx_in unless first, dx_out and x_out unless last). */
static void fewer_message_slots(const zb_pipeline_report_t *rep, const char *what, int P, int M,
                                double NC)
{
    for (int r = 0; r < P; r++) {
        const zb_rank_mem_t *w = &rep->mem_predicted[r], *x = &rep->mem_measured[r];
        double bound = (double)M * NC * sizeof(float) * (2.0 * (r > 0) + 2.0 * (r < P - 1));
        print_message("    %s rank %d: message slots %.0f bytes, %.0f one per microbatch\n",
                      what, r, x->messages, bound);
        if (w->messages != x->messages)
            fail_msg("%s rank %d: messages predicted %.0f, allocated %.0f", what, r, w->messages,
                     x->messages);
        assert_true(x->messages < bound);
    }
}

static void test_gpu_message_slots_by_lifetime(void **state)
{
    (void)state;
    static const char *const fams[] = {"1f1b", "zb-h2", "gpipe"};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        zb_pipeline_report_t *rep[2];
        same_bits_with(fams[i], 4, one_sent_slot, "cuda, one slot per sent buffer", rep);
        zb_train_config_t c;
        tiny(&c, 8, 2);
        double NC = (double)(c.batch / 8) * c.seq * c.model.channels;
        fewer_message_slots(rep[0], fams[i], 4, 8, NC);
        fewer_message_slots(rep[1], "  one sent slot", 4, 8, NC);
        zb_pipeline_report_free(rep[0]), zb_pipeline_report_free(rep[1]);
        free(rep[0]), free(rep[1]);
    }
    /* V placement (neighbours on one rank keep a slot per microbatch) and device messages (the
     * received gradient pooled; a sent slot is the receiver's to copy, a slot per microbatch) */
    zb_pipeline_report_t *rep[2];
    same_bits_with("zb-v", 2, one_sent_slot, "cuda zb-v, one slot per sent buffer", rep);
    zb_pipeline_report_free(rep[0]), zb_pipeline_report_free(rep[1]);
    free(rep[0]), free(rep[1]);
    same_bits_with("zb-h1", 4, device_pulls, "cuda device messages", rep);
    for (int r = 0; r < 4; r++)
        assert_true(rep[1]->mem_measured[r].messages == rep[1]->mem_predicted[r].messages);
    assert_true(rep[1]->mem_measured[0].messages > rep[0]->mem_measured[0].messages);
    zb_pipeline_report_free(rep[0]), zb_pipeline_report_free(rep[1]);
    free(rep[0]), free(rep[1]);
}

/* zb_pipeline_predict_gpu_memory (bench_gpu_memory_plan: the GPU goal's memory rows without a
 * GPU) gives, field by field, what a run on the GPU predicts and measures. */
static void predict_without_running(const char *schedule, int P, const zb_cuda_train_opts_t *dev)
{
    const int M = 2 * P;
    zb_train_config_t c;
    tiny(&c, M, 1);
    zb_pipeline_opts_t o;
    opts(&o, P, schedule, true);
    o.cuda = dev;
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    float loss[1];
    run_ok(&c, &o, loss, NULL, rep);
    zb_gen_params_t gp = {.ranks = P, .microbatches = M};
    zb_schedule_t *s = NULL;
    zb_err_t err;
    assert_int_equal(zb_generate(schedule, &gp, &s, &err), ZB_OK);
    zb_costs_t costs;
    assert_int_equal(zb_costs_init_uniform(&costs, s->stages, 1, 1, 1, 0, 1, 0, -1, &err), ZB_OK);
    zb_trainer_t t;
    assert_int_equal(zb_trainer_init(&t, &c, &err), ZB_OK);
    zb_rank_mem_t got[8];
    zb_status_t st = zb_pipeline_predict_gpu_memory(dev, &t.params.cfg, rep->first, s, &costs,
                                                    c.batch / M, c.seq, o.opt_sync, got, &err);
    zb_trainer_free(&t);
    if (st != ZB_OK)
        fail_msg("%s: %s", schedule, err.msg);
    for (int r = 0; r < P; r++) {
        double g[MEM_FIELDS], a[MEM_FIELDS], b[MEM_FIELDS];
        mem_fields(&got[r], g), mem_fields(&rep->mem_predicted[r], a);
        mem_fields(&rep->mem_measured[r], b);
        for (int i = 0; i < MEM_FIELDS; i++)
            if (g[i] != a[i] || g[i] != b[i])
                fail_msg("%s P=%d rank %d field %d: predict_gpu_memory %.0f, the run predicted "
                         "%.0f, measured %.0f", schedule, P, r, i, g[i], a[i], b[i]);
    }
    zb_costs_free(&costs);
    zb_schedule_free(s);
    zb_pipeline_report_free(rep), free(rep);
}

static void test_gpu_memory_predicted_without_a_run(void **state)
{
    (void)state;
    predict_without_running("1f1b", 4, gpu);
    predict_without_running("zb-h2", 4, &GPU_D2D);
    predict_without_running("zb-v", 2, gpu);
}

static void test_device_memory_predicted_is_measured(void **state)
{
    (void)state;
    device_memory_matches("1f1b", 2, ZB_RECOMPUTE_NONE, 0);
    device_memory_matches("zb-h1", 4, ZB_RECOMPUTE_ALL, 0);
    /* on two GPUs the head's rank (1) is not on the embedding's GPU: it keeps a WTE copy */
    fake_devices = 2;
    device_memory_matches("1f1b", 2, ZB_RECOMPUTE_NONE, 1);
    fake_devices = 1;
    recompute_saves_gpu_memory("1f1b", 4);
    recompute_saves_gpu_memory("zb-v", 2);
    /* --mem-limit on GPU ranks is on each rank's device total: the largest fits, a byte less
     * does not */
    zb_train_config_t c;
    tiny(&c, 4, 1);
    zb_pipeline_opts_t o;
    opts(&o, 2, "1f1b", true);
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    float loss[1];
    run_ok(&c, &o, loss, NULL, rep);
    o.mem_limit = fmax(rep->mem_predicted[0].total, rep->mem_predicted[1].total);
    run_ok(&c, &o, loss, NULL, rep);
    o.mem_limit -= 1;
    zb_err_t err;
    assert_int_equal(pt_run(&c, &o, loss, NULL, rep, &err), ZB_EMEMLIMIT);
    print_message("    --mem-limit a byte under the largest device total: %s\n", err.msg);
    zb_pipeline_report_free(rep), free(rep);
    /* the embedding and the head on rank 0: one WTE, the head stage reads the embedding's */
    device_memory_matches("zb-v", 2, ZB_RECOMPUTE_NONE, 0);
}

/* bf16 storage on GPU ranks: every family at P = 2 and 4 (M = 2P) gives the bits of --ranks 1
 * in bf16 (a stage's fp32 edges carry bf16 values, so cutting the model anywhere changes no
 * bit), and the device memory predicted per field is what the ranks allocate. */
static void test_bf16_same_bits_and_memory(void **state)
{
    (void)state;
    gpu = &GPU16;
    size_t n = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    int ran = 0;
    for (int P = 2; P <= 4; P += 2) {
        zb_train_config_t c;
        tiny(&c, 8, STEPS);
        c.microbatches = 2 * P;
        zb_pipeline_opts_t o;
        opts(&o, 1, "1f1b", true);
        float ref_loss[STEPS], loss[STEPS];
        zb_gpt2_params_t ref, got;
        zb_pipeline_report_t rep = {0};
        run_ok(&c, &o, ref_loss, &ref, &rep);
        zb_pipeline_report_free(&rep);
        for (size_t g = 0; g < n; g++) {
            opts(&o, P, gens[g].name, true);
            zb_err_t err;
            zb_status_t st = pt_run(&c, &o, loss, &got, &rep, &err);
            zb_pipeline_report_free(&rep);
            if (st == ZB_EINVAL) /* the family refuses (P, M), as on the CPU */
                continue;
            if (st != ZB_OK)
                fail_msg("bf16 %s P=%d: %s", gens[g].name, P, err.msg);
            char what[96];
            snprintf(what, sizeof what, "bf16 %s P=%d M=%d", gens[g].name, P, 2 * P);
            same_losses(loss, ref_loss, STEPS, what);
            pt_assert_same_params(&got, &ref, what);
            zb_gpt2_params_free(&got);
            ran++;
        }
        zb_gpt2_params_free(&ref);
    }
    print_message("    %d bf16 fake-GPU pipeline runs matched --ranks 1 bit for bit\n", ran);
    assert_true(ran >= 8);
    device_memory_matches("1f1b", 2, ZB_RECOMPUTE_NONE, 0);
    device_memory_matches("zb-v", 2, ZB_RECOMPUTE_NONE, 0);
    gpu = &GPU;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family_same_bits),
        cmocka_unit_test(test_one_rank_in_a_partition),
        cmocka_unit_test(test_rollback_dp_and_validation),
        cmocka_unit_test(test_backup_without_room),
        cmocka_unit_test(test_device_messages),
        cmocka_unit_test(test_trace_times_every_action),
        cmocka_unit_test(test_step_phases_timeline),
        cmocka_unit_test(test_tied_wte_on_device),
        cmocka_unit_test(test_failing_rank_stops_all),
        cmocka_unit_test(test_checkpoints_cross_devices),
        cmocka_unit_test(test_device_memory_predicted_is_measured),
        cmocka_unit_test(test_gpu_stashes_by_lifetime),
        cmocka_unit_test(test_gpu_message_slots_by_lifetime),
        cmocka_unit_test(test_gpu_memory_predicted_without_a_run),
        cmocka_unit_test(test_gpu_offload_same_bits),
        cmocka_unit_test(test_bf16_same_bits_and_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
