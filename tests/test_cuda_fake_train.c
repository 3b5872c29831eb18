/* `zbpp train --device cuda` and `zbpp profile --device cuda` without a GPU: the device trainer
 * (src/train/trainer_cuda.c) and profiler (src/profile/profile_cuda.c) compiled against the
 * fake device of cuda_fake_device.inc (src/cuda/stage.c with the CPU kernels). On it the device
 * trainer must be the CPU trainer bit for bit wherever the only difference left is the order of
 * the grad-norm sum (the fake sums squares in the GPU's block order): without clipping the
 * checkpoints and llm.c model files are byte-identical, with clipping close. Also: a checkpoint
 * moves between the devices both ways and the continuation is the straight run's bytes;
 * periodic saves on the device; a diverging run stops as on the CPU; the checks before the
 * device; the device profiler's table.
 * Skipped (77) without CUDA. */
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
#include "cuda_fake_timer.inc" /* the GPU profile times its rounds with events */
/* the code under test, on the fake device */
#include "../src/profile/profile_cuda.c"
#include "../src/train/trainer_cuda.c"
#include "tempdir_testutil.h"

static char corpus[1024];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(corpus, sizeof corpus, "%s/data/demo_corpus.txt", ZB_SOURCE_DIR);
    return test_dir_make("cuda_train");
}

static int remove_dir(void **state)
{
    (void)state;
    return test_dir_remove();
}

static const char *path_of(char *buf, const char *name) { return test_path(buf, 256, name); }

/* L=2, C=32, T=16, B=4 in 2 microbatches, no clipping: small enough for the sanitizer build. */
static zb_train_config_t tiny(long steps)
{
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    c.model.layers = 2;
    c.model.heads = 2;
    c.model.channels = 32;
    c.text_path = corpus;
    c.batch = 4;
    c.seq = 16;
    c.microbatches = 2;
    c.steps = steps;
    c.adamw.lr = 2e-3f;
    c.warmup = 2;
    c.grad_clip = 0.0f;
    c.quiet = true;
    return c;
}

static const zb_cuda_train_opts_t GPU = {.device = 0, .precision = ZB_CUDA_FP32};

static void run(const zb_train_config_t *c, bool cuda, zb_train_summary_t *sum)
{
    zb_err_t e;
    zb_err_clear(&e);
    zb_status_t st = cuda ? zb_cuda_train_run(c, &GPU, NULL, sum, &e)
                          : zb_train_run(c, NULL, sum, &e);
    if (st != ZB_OK)
        fail_msg("%s run failed: %s", cuda ? "cuda" : "cpu", e.msg);
}

static long read_all(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n + 1);
    assert_non_null(*out);
    assert_int_equal(fread(*out, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return n;
}

static void assert_same_file(const char *a, const char *b)
{
    unsigned char *x, *y;
    long n = read_all(a, &x), m = read_all(b, &y);
    assert_int_equal(n, m);
    if (memcmp(x, y, (size_t)n) != 0)
        fail_msg("%s and %s differ", a, b);
    free(x);
    free(y);
}

/* Without clipping: the same losses, checkpoint and model file as the CPU trainer. */
static void test_cuda_trainer_is_the_cpu_trainer(void **state)
{
    (void)state;
    char a[256], b[256], ma[256], mb[256];
    zb_train_config_t c = tiny(5);
    zb_train_summary_t sc, sg;
    c.save_path = path_of(a, "cpu.ckpt");
    c.save_model_path = path_of(ma, "cpu.bin");
    run(&c, false, &sc);
    c.save_path = path_of(b, "gpu.ckpt");
    c.save_model_path = path_of(mb, "gpu.bin");
    run(&c, true, &sg);
    assert_int_equal(sg.steps_run, 5);
    assert_memory_equal(&sg.first_loss, &sc.first_loss, sizeof(float));
    assert_memory_equal(&sg.last_loss, &sc.last_loss, sizeof(float));
    assert_true(sg.last_loss < sg.first_loss);
    assert_same_file(a, b);
    assert_same_file(ma, mb);
}

/* --precision bf16 through the trainer (bf16 storage on the fake device): the loss follows the
 * fp32 CPU trainer's within 0.05 and falls, a second run writes the same checkpoint and model
 * byte for byte, and a run resumed from a step-3 checkpoint continues to the straight run's
 * bits (the bf16 weight copy is rebuilt from the restored fp32 parameters). */
static void test_bf16_trainer(void **state)
{
    (void)state;
    static const zb_cuda_train_opts_t BF16 = {.device = 0, .precision = ZB_CUDA_BF16};
    char a[256], b[256], ma[256], mb[256], mid[256];
    zb_train_config_t c = tiny(6);
    zb_train_summary_t sc, s1, s2, s3;
    zb_err_t e;
    run(&c, false, &sc);
    c.save_path = path_of(a, "bf16_a.ckpt");
    c.save_model_path = path_of(ma, "bf16_a.bin");
    if (zb_cuda_train_run(&c, &BF16, NULL, &s1, &e) != ZB_OK)
        fail_msg("bf16 run: %s", e.msg);
    printf("  bf16: first loss %.6f last %.6f; fp32 CPU %.6f / %.6f\n", s1.first_loss,
           s1.last_loss, sc.first_loss, sc.last_loss);
    assert_true(fabsf(s1.first_loss - sc.first_loss) <= 0.05f);
    assert_true(fabsf(s1.last_loss - sc.last_loss) <= 0.05f);
    assert_true(s1.last_loss < s1.first_loss);
    assert_true(memcmp(&s1.last_loss, &sc.last_loss, sizeof(float)) != 0); /* not fp32 */
    c.save_path = path_of(b, "bf16_b.ckpt");
    c.save_model_path = path_of(mb, "bf16_b.bin");
    if (zb_cuda_train_run(&c, &BF16, NULL, &s2, &e) != ZB_OK)
        fail_msg("bf16 run: %s", e.msg);
    assert_memory_equal(&s2.last_loss, &s1.last_loss, sizeof(float));
    assert_same_file(a, b);
    assert_same_file(ma, mb);
    /* 3 steps, save, resume for the other 3 */
    zb_train_config_t h = tiny(3);
    h.save_path = path_of(mid, "bf16_mid.ckpt");
    if (zb_cuda_train_run(&h, &BF16, NULL, &s3, &e) != ZB_OK)
        fail_msg("bf16 first half: %s", e.msg);
    h = tiny(6);
    h.resume_path = mid;
    h.save_path = path_of(b, "bf16_c.ckpt");
    if (zb_cuda_train_run(&h, &BF16, NULL, &s3, &e) != ZB_OK)
        fail_msg("bf16 resumed: %s", e.msg);
    assert_same_file(a, b);
}

/* With clipping the norm's summation order shows only in the last bits. */
static void test_clipped_close(void **state)
{
    (void)state;
    zb_train_config_t c = tiny(4);
    c.grad_clip = 0.05f; /* below every step's norm here: each step is clipped */
    zb_train_summary_t sc, sg;
    run(&c, false, &sc);
    run(&c, true, &sg);
    double r = fabs((double)sg.last_loss - sc.last_loss) / fabs((double)sc.last_loss);
    printf("  clipped: last loss cuda %.8f cpu %.8f (rel %.3g)\n", sg.last_loss, sc.last_loss, r);
    assert_true(r <= 1e-6);
}

/* Checkpoints are device-independent: 3 steps on one device, 3 more on the other, gives the
 * straight run's checkpoint byte for byte (both directions), and so does resuming on the same
 * device. */
static void test_resume_across_devices(void **state)
{
    (void)state;
    char straight[256], half_cpu[256], half_gpu[256], out[256], every[256];
    zb_train_config_t c = tiny(6);
    zb_train_summary_t s;
    c.save_path = path_of(straight, "straight.ckpt");
    run(&c, false, &s);
    c = tiny(3);
    c.save_path = path_of(half_cpu, "half_cpu.ckpt");
    run(&c, false, &s);
    c.save_path = path_of(half_gpu, "half_gpu.ckpt");
    run(&c, true, &s);
    assert_same_file(half_cpu, half_gpu);
    const struct {
        const char *from;
        bool cuda;
    } legs[] = {{half_gpu, false}, {half_cpu, true}, {half_gpu, true}};
    for (size_t k = 0; k < sizeof legs / sizeof legs[0]; k++) {
        c = tiny(6);
        c.resume_path = legs[k].from;
        c.save_path = path_of(out, "resumed.ckpt");
        run(&c, legs[k].cuda, &s);
        assert_int_equal(s.first_step, 3);
        assert_int_equal(s.steps_run, 3);
        assert_same_file(straight, out);
    }
    /* periodic saves (a download every 2 steps) leave the device run's bytes unchanged */
    c = tiny(6);
    c.save_path = path_of(every, "every.ckpt");
    c.save_every = 2;
    run(&c, true, &s);
    assert_same_file(straight, every);
}

/* A diverging run (huge lr): the device trainer skips the same steps (no AdamW on a non-finite
 * norm) and stops with the same ZB_ENUMERIC line at the same step, without saving. */
static void test_divergence_same_as_cpu(void **state)
{
    (void)state;
    char ck[256];
    zb_train_config_t c = tiny(30);
    c.adamw.lr = 1e6f;
    c.save_path = path_of(ck, "diverged.ckpt");
    zb_train_summary_t sc, sg;
    zb_err_t ec, eg;
    assert_int_equal(zb_train_run(&c, NULL, &sc, &ec), ZB_ENUMERIC);
    assert_int_equal(zb_cuda_train_run(&c, &GPU, NULL, &sg, &eg), ZB_ENUMERIC);
    assert_string_equal(eg.msg, ec.msg);
    assert_int_equal(sg.steps_run, sc.steps_run);
    assert_int_equal(sg.skipped, sc.skipped);
    assert_true(sg.skipped >= 8);
    assert_int_equal(access(ck, F_OK), -1); /* nothing saved */
}

/* The checks that come before the device, and a bad precision. */
static void test_errors(void **state)
{
    (void)state;
    zb_err_t e;
    zb_train_summary_t s;
    zb_train_config_t c = tiny(1);
    c.batch = 3; /* not divisible by 2 microbatches */
    assert_int_equal(zb_cuda_train_run(&c, &GPU, NULL, &s, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "--microbatches"));
    c = tiny(1);
    zb_cuda_train_opts_t bad = {.device = 0, .precision = (zb_cuda_precision_t)7};
    assert_int_equal(zb_cuda_train_run(&c, &bad, NULL, &s, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "precision"));
    bad = (zb_cuda_train_opts_t){.device = 3, .precision = ZB_CUDA_FP32};
    assert_int_equal(zb_cuda_train_run(&c, &bad, NULL, &s, &e), ZB_EUNSUPPORTED);
    assert_non_null(strstr(e.msg, "no CUDA device 3"));
    c.resume_path = path_of((char[256]){0}, "missing.ckpt");
    assert_int_not_equal(zb_cuda_train_run(&c, &GPU, NULL, &s, &e), ZB_OK);
    assert_non_null(strstr(e.msg, "missing.ckpt"));
    /* --fp32-attention 3xtf32: refused at a head size without the kernel (8), a run at 16 */
    c = tiny(1);
    c.model.heads = 4;
    zb_cuda_train_opts_t x3 = GPU;
    x3.fp32_attention = ZB_CUDA_ATTN_3XTF32;
    assert_int_equal(zb_cuda_train_run(&c, &x3, NULL, &s, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "head size 8"));
    c.model.heads = 2;
    if (zb_cuda_train_run(&c, &x3, NULL, &s, &e) != ZB_OK)
        fail_msg("3xtf32 attention at head size 16: %s", e.msg);
}

/* The device profiler fills every part's F/B/W (the fake device's time is the CPU's) and the
 * copy bandwidths; for ranks sharing the GPU it times one while the others run. */
static void test_profile(void **state)
{
    (void)state;
    zb_gpt2_config_t cfg = {.max_seq = 16, .vocab = 67, .padded_vocab = 128, .layers = 3,
                            .heads = 2, .channels = 16};
    zb_profile_t p;
    zb_err_t e;
    zb_status_t st = zb_cuda_profile_measure(NULL, &cfg, 2, 16, 2, &GPU, &p, &e);
    if (st != ZB_OK)
        fail_msg("profile: %s", e.msg);
    assert_int_equal(p.layers, 3);
    assert_int_equal(p.batch, 2);
    assert_int_equal(p.msg_bytes, 2 * 16 * 16 * sizeof(float));
    for (int l = 0; l < 3; l++)
        assert_true(p.block[l].f > 0 && p.block[l].b > 0 && p.block[l].w > 0);
    assert_true(p.embed.f > 0 && p.head.f > 0 && p.head.b > 0 && p.comm >= 0);
    assert_true(p.copy_d2h > 0 && p.copy_h2d > 0 && p.copy_both > 0);
    assert_int_equal(p.threads, 1);
    assert_int_equal(p.share.n, 0); /* one rank shares with nobody */
    zb_profile_free(&p);
    assert_int_equal(zb_cuda_profile_measure(NULL, &cfg, 2, 17, 2, &GPU, &p, &e), ZB_EINVAL);
    /* for 4 ranks sharing the GPU, the 3 others run the same phases while one is timed: the
     * profile says 4 ranks were busy, and every part is still timed */
    zb_cuda_train_opts_t shared = GPU;
    shared.profile_ranks = 4;
    if ((st = zb_cuda_profile_measure(NULL, &cfg, 2, 16, 2, &shared, &p, &e)) != ZB_OK)
        fail_msg("profile for 4 ranks: %s", e.msg);
    assert_int_equal(p.threads, 4);
    for (int l = 0; l < 3; l++)
        assert_true(p.block[l].f > 0 && p.block[l].b > 0 && p.block[l].w > 0);
    /* and how the ranks slow each other: a factor for 0..3 others busy per phase, 1 at 3 */
    assert_int_equal(p.share.n, 4);
    for (int ph = 0; ph < 3; ph++) {
        for (int k = 0; k < 4; k++)
            assert_true(p.share.f[ph][k] > 0 && p.share.f[ph][k] <= 1e3);
        assert_true(p.share.f[ph][3] == 1.0);
    }
    /* ... and by what the others run (all beside F, B, W): measured, every factor positive */
    assert_true(zb_share_has_mix(&p.share));
    for (int ph = 0; ph < 3; ph++)
        for (int q = 0; q < 3; q++)
            assert_true(p.share.mix[ph][q] > 0 && p.share.mix[ph][q] <= 1e3);
    assert_true(p.share.bw > 0 && p.share.bw <= 1e3); /* and a fused BW against B + W */
    for (int ph = 0; ph < 3; ph++) /* and each phase beside copies both ways */
        assert_true(p.share.copy_slow[ph] > 0 && p.share.copy_slow[ph] <= 1e3);
    assert_true(p.copy_both > 0);
    assert_int_equal(zb_share_check(&p.share, &e), ZB_OK);
    zb_profile_free(&p);
}

/* A peer of the GPU profile stays busy through a timed round of any length: unit after unit
 * of one phase (or of F, B, W cycles), each on its next group of stashes, a group that has run
 * its phase first taking what it needs (W then F before another B, F then B before another W).
 * Twice around the groups for every kind of neighbour work, the stash state machine never
 * refusing (it would fail the unit), and the group just used left after the phase run. */
static void test_profile_peer_units(void **state)
{
    (void)state;
    zb_gpt2_config_t cfg = {.max_seq = 16, .vocab = 67, .padded_vocab = 128, .layers = 1,
                            .heads = 2, .channels = 16};
    zb_gpt2_params_t own;
    const zb_gpt2_params_t *params = NULL;
    zb_err_t e = {0};
    if (zb_profile_params(&cfg, NULL, &own, &params, &e) != ZB_OK)
        fail_msg("%s", e.msg);
    cprof_t lead, peer;
    if (cp_init(&lead, params, 2, 16, &GPU, NULL, 0, &e) != ZB_OK ||
        cp_init(&peer, params, 2, 16, &GPU, lead.parts, 1, &e) != ZB_OK)
        fail_msg("%s", e.msg);
    assert_null(peer.stage[PART_EMBED]); /* a peer runs blocks only */
    assert_null(peer.stage[PART_HEAD]);
    const float scale = 1.0f / 32;
    for (int beside = 0; beside <= BESIDE_CYCLE; beside++) {
        if (cp_peers_start(&peer, 1, beside, scale, &e) != ZB_OK)
            fail_msg("start beside %d: %s", beside, e.msg);
        const int groups = beside_groups(&peer, beside);
        for (int u = 2; u < 2 * groups + 1; u++) {
            if (peer_unit(&peer, beside, scale, &e) != ZB_OK)
                fail_msg("beside %d, unit %d: %s", beside, u, e.msg);
            const int g = u % groups;
            assert_int_equal(peer.cover_next[g], beside == BESIDE_CYCLE ? 0 : (beside + 1) % 3);
        }
        assert_int_equal(peer.units, 2 * groups + 1);
        if (zb_cuda_sync(peer.stage[PART_BLOCK], &e) != ZB_OK)
            fail_msg("%s", e.msg);
    }
    /* the timed context: one round of each part with the peer beside it as profiled */
    zb_op_time_t t;
    for (int k = 0; k < 3; k++)
        if (cp_round(&lead, &peer, 1, k, beside_ref, k == PART_BLOCK, false, scale, &t, &e) !=
            ZB_OK)
            fail_msg("round of part %d: %s", k, e.msg);
    /* beside copies (share.copy_slow): both contexts copy both ways through each timed phase
     * (two in flight per direction from its start), and none is left in flight after it */
    long copies_before = fake_host_copies;
    if (cp_round(&lead, &peer, 1, PART_BLOCK, beside_ref, false, true, scale, &t, &e) != ZB_OK)
        fail_msg("round beside copies: %s", e.msg);
    assert_true(fake_host_copies - copies_before >= 3 * 2 * 4); /* 3 phases, 2 contexts */
    assert_null(fake_copies_head);
    assert_int_equal(lead.loads[0] + lead.loads[1] + peer.loads[0] + peer.loads[1], 0);
    assert_int_equal(peer.groups, COVER);
    /* a device without room for a peer's third group of stashes: two do (the units wrap
     * around them), one does not */
    size_t before = fake_bytes_live;
    cp_free(&peer);
    size_t peer_bytes = before - fake_bytes_live;
    zb_cuda_stash_t *one = NULL;
    if (zb_cuda_stash_new(lead.stage[PART_BLOCK], &one, &e) != ZB_OK)
        fail_msg("%s", e.msg);
    size_t stash = fake_bytes_live - before + peer_bytes;
    zb_cuda_stash_free(one);
    fake_bytes_limit = fake_bytes_live + peer_bytes - ROUND * stash / 2;
    if (cp_init(&peer, params, 2, 16, &GPU, lead.parts, 1, &e) != ZB_OK)
        fail_msg("a peer with two groups: %s", e.msg);
    assert_int_equal(peer.groups, 2);
    if (cp_round(&lead, &peer, 1, PART_BLOCK, beside_ref, false, false, scale, &t, &e) != ZB_OK)
        fail_msg("round beside a peer of two groups: %s", e.msg);
    for (int u = 0; u < 5; u++)
        if (peer_unit(&peer, 1, scale, &e) != ZB_OK) /* B's, wrapping around two groups */
            fail_msg("unit %d: %s", u, e.msg);
    if (zb_cuda_sync(peer.stage[PART_BLOCK], &e) != ZB_OK)
        fail_msg("%s", e.msg);
    cp_free(&peer);
    fake_bytes_limit = fake_bytes_live + peer_bytes - 3 * ROUND * stash / 2;
    assert_int_equal(cp_init(&peer, params, 2, 16, &GPU, lead.parts, 1, &e), ZB_ENOMEM);
    fake_bytes_limit = 0;
    cp_free(&lead);
    zb_gpt2_params_free(&own);
}

/* The message cost is measured on the path the run will use: device-message runs with one
 * device-to-device copy per message (the warm-up and PINGPONGS timed ones, beyond the copies F
 * makes in both runs), staged runs through the page-locked host slot. */
static void test_profile_message_path(void **state)
{
    (void)state;
    zb_gpt2_config_t cfg = {.max_seq = 16, .vocab = 67, .padded_vocab = 128, .layers = 1,
                            .heads = 2, .channels = 16};
    zb_profile_t p;
    zb_err_t e;
    zb_cuda_train_opts_t dev = GPU;
    dev.device_messages = true;
    long d2d[2];
    for (int k = 0; k < 2; k++) {
        long before = fake_d2d_copies;
        if (zb_cuda_profile_measure(NULL, &cfg, 2, 16, 2, k ? &dev : &GPU, &p, &e) != ZB_OK)
            fail_msg("profile: %s", e.msg);
        d2d[k] = fake_d2d_copies - before;
        assert_true(p.comm > 0 && p.msg_bytes == 2 * 16 * 16 * sizeof(float));
        zb_profile_free(&p);
    }
    assert_int_equal(d2d[1] - d2d[0], PINGPONGS + 1);
}

/* The shared loop's features on the GPU path: validation after every 2 steps (on the host copy,
 * downloaded first) gives the CPU trainer's val loss bit for bit, and --keep-last keeps the same
 * rotated checkpoints. */
static void test_validation_and_keep_last_on_the_gpu_path(void **state)
{
    (void)state;
    char a[256], b[256];
    zb_train_config_t c = tiny(4);
    c.val_text_path = corpus;
    c.val_every = 2;
    c.val_steps = 2;
    c.save_every = 2;
    c.keep_last = 1;
    zb_train_summary_t cpu, gpu;
    c.save_path = path_of(a, "val_cpu.ckpt");
    run(&c, false, &cpu);
    c.save_path = path_of(b, "val_gpu.ckpt");
    run(&c, true, &gpu);
    assert_true(cpu.has_val && gpu.has_val);
    assert_memory_equal(&cpu.val_loss, &gpu.val_loss, sizeof cpu.val_loss);
    assert_same_file(a, b);
    char ra[300], rb[300];
    snprintf(ra, sizeof ra, "%s.step000004", a);
    snprintf(rb, sizeof rb, "%s.step000004", b);
    assert_same_file(ra, rb);
    snprintf(rb, sizeof rb, "%s.step000002", b);
    assert_int_equal(access(rb, F_OK), -1); /* rotated away: only the newest one is kept */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation_and_keep_last_on_the_gpu_path),
        cmocka_unit_test(test_cuda_trainer_is_the_cpu_trainer),
        cmocka_unit_test(test_clipped_close),
        cmocka_unit_test(test_bf16_trainer),
        cmocka_unit_test(test_resume_across_devices),
        cmocka_unit_test(test_divergence_same_as_cpu),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_profile_peer_units),
        cmocka_unit_test(test_profile_message_path),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
#endif
