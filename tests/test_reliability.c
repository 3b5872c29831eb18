/* Reliability regressions (issue 16) that need the library directly: a small sharded manifest
 * cannot name a huge model, a manifest shard named ".." is refused, zb_fast_expf is defined on
 * NaN (the sanitizer build aborted on it), the divergence rule stops after K skips, and a
 * reader refuses a FIFO without blocking. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "nn/fastmath.h"
#include "train/divergence.h"
#include "zbpp/checkpoint_sharded.h"
#include "zbpp/handshake.h"
#include "zbpp/train.h"
#include "zbpp/transport.h"
#include "zbpp/util.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zbpp_test_rel_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_bytes(const char *path, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fputc((int)(i & 0x7f), f);
    fclose(f);
}

/* A manifest for one rank with the given model and shard file (of `bytes` bytes on disk). */
static void write_manifest(const char *path, const zb_gpt2_config_t *g, size_t params,
                           const char *shard, uint64_t bytes)
{
    zb_ckpt_manifest_t m;
    zb_err_t err;
    assert_int_equal(zb_ckpt_manifest_alloc(&m, 1, 1, &err), ZB_OK);
    zb_train_config_defaults(&m.cfg);
    m.cfg.model = *g;
    m.cfg.batch = 4, m.cfg.seq = 16, m.cfg.steps = 10;
    snprintf(m.schedule, sizeof m.schedule, "1f1b");
    m.chunks = 1;
    m.step = 1;
    m.first[0] = 0, m.first[1] = g->layers + 2;
    m.param_count = params;
    snprintf(m.shard[0].file, sizeof m.shard[0].file, "%s", shard);
    m.shard[0].bytes = bytes;
    assert_int_equal(zb_ckpt_manifest_write(path, &m, &err), ZB_OK);
    zb_ckpt_manifest_free(&m);
}

static size_t gpt2_params(const zb_gpt2_config_t *g)
{
    size_t C = (size_t)g->channels, L = (size_t)g->layers;
    return (size_t)g->padded_vocab * C + (size_t)g->max_seq * C + L * (12 * C * C + 13 * C) +
           2 * C;
}

/* Defect 6: 407 bytes of manifest named a model of 2.4 GB (allocated after zb_ckpt_sharded_peek);
 * peek must bound it by its shards. */
static void test_manifest_bounded_by_shards(void **state)
{
    (void)state;
    char path[256], shard[256];
    snprintf(path, sizeof path, "%s/big", dir);
    snprintf(shard, sizeof shard, "%s/big.1-00000000.rank0", dir);
    write_bytes(shard, 4096);
    zb_gpt2_config_t huge = {.max_seq = 1024, .vocab = 50257, .padded_vocab = 50304,
                             .layers = 48, .heads = 25, .channels = 1600};
    write_manifest(path, &huge, gpt2_params(&huge), "big.1-00000000.rank0", 4096);
    zb_train_config_t c;
    zb_err_t err;
    assert_int_equal(zb_ckpt_sharded_peek(path, &c, &err), ZB_EFORMAT);
    assert_non_null(strstr(err.msg, "too small"));

    /* the size on disk, not the manifest's word, is what counts */
    write_manifest(path, &huge, gpt2_params(&huge), "big.1-00000000.rank0",
                   (uint64_t)gpt2_params(&huge) * 12);
    assert_int_equal(zb_ckpt_sharded_peek(path, &c, &err), ZB_EFORMAT);
    assert_non_null(strstr(err.msg, "another size"));

    /* a params line that does not follow from the shape */
    zb_gpt2_config_t tiny = {.max_seq = 16, .vocab = 257, .padded_vocab = 384, .layers = 1,
                             .heads = 2, .channels = 16};
    size_t n = gpt2_params(&tiny);
    write_bytes(shard, n * 12 + 64 + 16);
    write_manifest(path, &tiny, n + 1, "big.1-00000000.rank0", n * 12 + 64 + 16);
    assert_int_equal(zb_ckpt_sharded_peek(path, &c, &err), ZB_EFORMAT);
    assert_non_null(strstr(err.msg, "model shape"));
    /* and the same tiny model with consistent sizes is accepted */
    write_manifest(path, &tiny, n, "big.1-00000000.rank0", n * 12 + 64 + 16);
    if (zb_ckpt_sharded_peek(path, &c, &err) != ZB_OK)
        fail_msg("consistent manifest rejected: %s", err.msg);
}

/* Defect 11: a shard named ".." made the reader report 9223372036854775807 bytes. */
static void test_manifest_dotdot_shard(void **state)
{
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/dots", dir);
    zb_gpt2_config_t tiny = {.max_seq = 16, .vocab = 257, .padded_vocab = 384, .layers = 1,
                             .heads = 2, .channels = 16};
    write_manifest(path, &tiny, gpt2_params(&tiny), "..", 4096);
    zb_ckpt_manifest_t m;
    zb_err_t err;
    assert_int_equal(zb_ckpt_manifest_read(path, &m, &err), ZB_EFORMAT);
    assert_non_null(strstr(err.msg, "bad shard line"));
    assert_null(strstr(err.msg, "9223372036854775807"));
}

/* Defect 10: NaN went through the float->int conversion and a left shift of a negative value
 * (undefined; UBSan aborted `zbpp train --lr 1e10`). Run under the sanitizer build. */
static void test_fast_expf_nan(void **state)
{
    (void)state;
    volatile float nan_in = NAN;
    assert_true(isnan(zb_fast_expf(nan_in)));
    assert_true(isnan(zb_fast_expf(-nan_in)));
    assert_true(isnan(zb_fast_tanhf(nan_in)));
    /* the clamps still hold for finite and infinite inputs */
    assert_true(zb_fast_expf(INFINITY) > 1e38f && isfinite(zb_fast_expf(INFINITY)));
    assert_true(zb_fast_expf(-INFINITY) >= 0.0f && zb_fast_expf(-INFINITY) < 1e-37f);
    assert_true(fabsf(zb_fast_expf(1.0f) - 2.7182818f) < 1e-6f);
}

/* Defect 10: K consecutive skipped steps end the run; a good step resets the count. */
static void test_divergence_rule(void **state)
{
    (void)state;
    zb_diverge_t d;
    zb_err_t err;
    zb_diverge_init(&d, 3);
    assert_int_equal(zb_diverge_step(&d, true, 2.5f, 1, &err), ZB_OK);
    assert_false(zb_diverge_may_save(&d));
    assert_int_equal(zb_diverge_step(&d, true, 2.5f, 2, &err), ZB_OK);
    assert_int_equal(zb_diverge_step(&d, false, 2.5f, 3, &err), ZB_OK); /* a spike, not divergence */
    assert_true(zb_diverge_may_save(&d));
    assert_int_equal(zb_diverge_step(&d, true, 2.5f, 4, &err), ZB_OK);
    assert_int_equal(zb_diverge_step(&d, true, 2.5f, 5, &err), ZB_OK);
    assert_int_equal(zb_diverge_step(&d, true, 2.5f, 6, &err), ZB_ENUMERIC);
    assert_non_null(strstr(err.msg, "steps 4-6"));
    zb_diverge_init(&d, 0);
    assert_int_equal(d.limit, ZB_DIVERGE_MAX_SKIPS);
}

/* A run whose last loss is NaN has diverged: no periodic save, and the end refuses to save;
 * weights with a NaN or an infinity are never written. */
static void test_divergence_final_loss(void **state)
{
    (void)state;
    zb_diverge_t d;
    zb_err_t err;
    zb_diverge_init(&d, 0);
    assert_int_equal(zb_diverge_step(&d, false, 5.5f, 4, &err), ZB_OK);
    assert_true(zb_diverge_may_save(&d));
    assert_int_equal(zb_diverge_final(&d, &err), ZB_OK);
    assert_int_equal(zb_diverge_step(&d, false, NAN, 5, &err), ZB_OK); /* not K skips */
    assert_false(zb_diverge_may_save(&d));
    assert_int_equal(zb_diverge_final(&d, &err), ZB_ENUMERIC);
    assert_non_null(strstr(err.msg, "loss of step 5"));
    float w[4] = {1, 2, 3, 4};
    assert_int_equal(zb_diverge_check_weights(w, 4, "m.bin", &err), ZB_OK);
    w[2] = INFINITY;
    assert_int_equal(zb_diverge_check_weights(w, 4, "m.bin", &err), ZB_ENUMERIC);
    assert_non_null(strstr(err.msg, "1 of 4 weights"));
    assert_non_null(strstr(err.msg, "m.bin not saved"));
}

/* A sequence length stored in a manifest that its own model cannot hold is the file's fault:
 * the message says so, not "--seq N exceeds ..." of a flag nobody gave. */
static void test_manifest_seq_beyond_model(void **state)
{
    (void)state;
    char body[1024], path[256];
    int n = snprintf(body, sizeof body,
                     "zbpp-sharded-checkpoint 1\nstep 2\nskipped 0\nranks 2\n"
                     "schedule 1f1b 1 2\nstage_rank 0 1\npartition 0 1 2\n"
                     "model 64 257 384 2 4 64\nparams 128768\n"
                     "config 4 100000 2 2 1 1337 399d4952 3f666666 3f733333 322bcc77 3dcccccd "
                     "3f800000 1 0 00000000\ndata 3deaed0ec8e2f680 381124 1\n"
                     "position 0 0 2\nshard 0 m.rank0 944160 513c227ba3b8e741\n"
                     "shard 1 m.rank1 896560 2ef022d16b1065cf\n");
    snprintf(body + n, sizeof body - (size_t)n, "end %016llx\n",
             (unsigned long long)zb_hash_bytes(ZB_HASH_SEED, body, (size_t)n));
    snprintf(path, sizeof path, "%s/seq.ckpt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    zb_err_t err;
    assert_int_equal(zb_ckpt_sharded_peek(path, &c, &err), ZB_EFORMAT);
    assert_non_null(strstr(err.msg, "holds sequence length 100000, more than its model's maximum 64"));
    assert_null(strstr(err.msg, "--seq"));
}

/* A GPU run's MFU without --peak-tflops: the data sheet's dense figure of a known GPU for the
 * precision in use, 0 for anything unknown (never a guess). */
static void test_gpu_spec_peak(void **state)
{
    (void)state;
    assert_true(zb_gpu_spec_peak_tflops("NVIDIA H100 80GB HBM3, sm_90, 132 SMs", "bf16") == 989.4);
    assert_true(zb_gpu_spec_peak_tflops("NVIDIA H100 80GB HBM3", "fp32") == 66.9);
    assert_true(zb_gpu_spec_peak_tflops("NVIDIA H100 PCIe", "bf16") == 756.0);
    assert_true(zb_gpu_spec_peak_tflops("NVIDIA H200", "tf32") == 494.7);
    assert_true(zb_gpu_spec_peak_tflops("NVIDIA GeForce GTX 1080", "fp32") == 0);
    assert_true(zb_gpu_spec_peak_tflops("NVIDIA H100 80GB HBM3", "fp8") == 0);
    assert_true(zb_gpu_spec_peak_tflops(NULL, "fp32") == 0);
    /* the CPU's measured figure: positive, and the same on a second call (cached) */
    double a = zb_cpu_peak_flops_per_core();
    assert_true(a > 1e8);
    assert_true(zb_cpu_peak_flops_per_core() == a);
}

/* A timeout past time_t's reach is refused (it made every wait spin at 100% CPU), the bound
 * itself is accepted. */
static void test_timeout_bounded(void **state)
{
    (void)state;
    zb_thread_world_t *w = NULL;
    zb_err_t err;
    assert_int_equal(zb_thread_world_new(2, 4, 1e300, &w, &err), ZB_EINVAL);
    assert_null(w);
    assert_non_null(strstr(err.msg, "timeout"));
    assert_int_equal(zb_thread_world_new(2, 4, ZB_TIMEOUT_MAX_S, &w, &err), ZB_OK);
    zb_thread_world_free(w);
}

/* Defect 7: opening a FIFO for reading must not block (the test would hang before the fix). */
static void test_reader_refuses_fifo(void **state)
{
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    char *data;
    size_t len;
    zb_err_t err;
    assert_int_equal(zb_read_file(path, 1 << 20, &data, &len, &err), ZB_EIO);
    assert_non_null(strstr(err.msg, "a FIFO"));
    assert_false(zb_ckpt_is_sharded(path));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest_bounded_by_shards),
        cmocka_unit_test(test_manifest_dotdot_shard),
        cmocka_unit_test(test_fast_expf_nan),
        cmocka_unit_test(test_divergence_rule),
        cmocka_unit_test(test_divergence_final_loss),
        cmocka_unit_test(test_manifest_seq_beyond_model),
        cmocka_unit_test(test_gpu_spec_peak),
        cmocka_unit_test(test_timeout_bounded),
        cmocka_unit_test(test_reader_refuses_fifo),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
