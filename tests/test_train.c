/* Tests of the trainer on the demo corpus with a tiny model: loss falls, the same seed gives the
 * same bits, save + resume continues bit-exactly, gradient accumulation matches a single batch,
 * bad checkpoints and bad setups are rejected with a clear message, metrics are one JSON per step. */
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

#include "tempdir_testutil.h"
#include "zbpp/train.h"

static char corpus[1024];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(corpus, sizeof corpus, "%s/data/demo_corpus.txt", ZB_SOURCE_DIR);
    return test_dir_make("train");
}

static int remove_dir(void **state)
{
    (void)state;
    return test_dir_remove();
}

static void path_of(char *buf, size_t cap, const char *name) { test_path(buf, cap, name); }

/* L=2, C=32, T=16, B=4: small enough for the sanitizer build. */
static zb_train_config_t tiny_config(void)
{
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    c.model.layers = 2;
    c.model.heads = 2;
    c.model.channels = 32;
    c.text_path = corpus;
    c.batch = 4;
    c.seq = 16;
    c.steps = 8;
    c.adamw.lr = 2e-3f;
    c.warmup = 2;
    c.quiet = true;
    return c;
}

static void run_steps(zb_trainer_t *t, long n, float *losses)
{
    zb_err_t err;
    for (long i = 0; i < n; i++) {
        zb_step_stats_t s;
        zb_status_t st = zb_trainer_step(t, &s, &err);
        if (st != ZB_OK)
            fail_msg("step failed: %s", err.msg);
        if (losses)
            losses[i] = s.loss;
    }
}

static void init_ok(zb_trainer_t *t, const zb_train_config_t *c)
{
    zb_err_t err;
    zb_status_t st = zb_trainer_init(t, c, &err);
    if (st != ZB_OK)
        fail_msg("trainer init failed: %s", err.msg);
}

static void test_loss_falls_on_demo_corpus(void **state)
{
    (void)state;
    zb_train_config_t c = tiny_config();
    c.model.channels = 64;
    c.model.heads = 4;
    c.seq = 32;
    c.batch = 8;
    c.steps = 40;
    c.warmup = 5;
    zb_trainer_t t;
    init_ok(&t, &c);
    float loss[40];
    run_steps(&t, 40, loss);
    double first = 0, last = 0;
    for (int i = 0; i < 10; i++) {
        first += loss[i] / 10.0;
        last += loss[30 + i] / 10.0;
    }
    /* starts near ln(257) = 5.55; byte-level English falls well below 3.5 within 40 steps */
    assert_true(first > 4.5);
    if (!(last < first - 1.0))
        fail_msg("loss did not fall: first-10 mean %.4f, last-10 mean %.4f", first, last);
    zb_trainer_free(&t);
}

static void test_same_seed_same_bits(void **state)
{
    (void)state;
    zb_train_config_t c = tiny_config();
    zb_trainer_t a, b;
    init_ok(&a, &c);
    init_ok(&b, &c);
    float la[8], lb[8];
    run_steps(&a, 8, la);
    run_steps(&b, 8, lb);
    assert_memory_equal(la, lb, sizeof la);
    assert_memory_equal(a.params.data, b.params.data, a.params.count * sizeof(float));
    /* another seed: another init and data order */
    c.seed = 7;
    zb_trainer_t d;
    init_ok(&d, &c);
    float ld[8];
    run_steps(&d, 8, ld);
    assert_true(memcmp(la, ld, sizeof la) != 0);
    zb_trainer_free(&a);
    zb_trainer_free(&b);
    zb_trainer_free(&d);
}

/* N steps straight == k steps, save, resume in a new trainer, N-k steps: bitwise. Covers the
 * cosine schedule with warm-up and the shuffled loader's position. */
static void check_resume(zb_train_config_t c, long k)
{
    char ck[256];
    path_of(ck, sizeof ck, "resume.ckpt");
    long N = c.steps;
    zb_trainer_t straight, part, resumed;
    float ls[16], lp[16];
    init_ok(&straight, &c);
    run_steps(&straight, N, ls);

    init_ok(&part, &c);
    run_steps(&part, k, lp);
    zb_err_t err;
    assert_int_equal(zb_train_save(&part, ck, &err), ZB_OK);
    zb_trainer_free(&part);

    c.resume_path = ck;
    init_ok(&resumed, &c);
    assert_int_equal(resumed.step, k);
    run_steps(&resumed, N - k, lp + k);
    assert_memory_equal(ls, lp, (size_t)N * sizeof(float));
    size_t bytes = straight.params.count * sizeof(float);
    assert_memory_equal(straight.params.data, resumed.params.data, bytes);
    assert_memory_equal(straight.opt.m.data, resumed.opt.m.data, bytes);
    assert_memory_equal(straight.opt.v.data, resumed.opt.v.data, bytes);
    zb_trainer_free(&straight);
    zb_trainer_free(&resumed);
}

static void test_resume_is_bit_exact(void **state)
{
    (void)state;
    zb_train_config_t c = tiny_config();
    check_resume(c, 3);
    c.shuffle = false;
    c.microbatches = 2;
    c.lr_schedule = ZB_LR_CONSTANT;
    check_resume(c, 5);
}

/* B=4 as 2 microbatches of 2 vs 1 microbatch of 4: same math, different summation grouping. */
static void test_microbatches_match_full_batch(void **state)
{
    (void)state;
    zb_train_config_t c = tiny_config();
    c.steps = 3;
    zb_trainer_t one, two;
    init_ok(&one, &c);
    c.microbatches = 2;
    init_ok(&two, &c);
    float l1[3], l2[3];
    run_steps(&one, 3, l1);
    run_steps(&two, 3, l2);
    for (int i = 0; i < 3; i++)
        assert_true(fabsf(l1[i] - l2[i]) < 1e-4f * fabsf(l1[i]));
    double maxdiff = 0;
    for (size_t i = 0; i < one.params.count; i++) {
        double d = fabs((double)one.params.data[i] - two.params.data[i]);
        maxdiff = d > maxdiff ? d : maxdiff;
    }
    assert_true(maxdiff < 1e-4);
    zb_trainer_free(&one);
    zb_trainer_free(&two);
}

static void expect_load_error(zb_train_config_t c, const char *ck, zb_status_t want,
                              const char *needle)
{
    c.resume_path = ck;
    zb_trainer_t t;
    zb_err_t err;
    zb_err_clear(&err);
    assert_int_equal(zb_trainer_init(&t, &c, &err), want);
    if (!strstr(err.msg, needle))
        fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void copy_prefix(const char *from, const char *to, long len, long flip_at)
{
    FILE *f = fopen(from, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size + 16);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    if (len < 0)
        len = size;
    if (len > size)
        memset(buf + size, 0, (size_t)(len - size));
    if (flip_at >= 0)
        buf[flip_at] ^= 0x40;
    f = fopen(to, "wb");
    fwrite(buf, 1, (size_t)len, f);
    fclose(f);
    free(buf);
}

static void test_bad_checkpoints_rejected(void **state)
{
    (void)state;
    zb_train_config_t c = tiny_config();
    char good[256], bad[256], other[256];
    path_of(good, sizeof good, "good.ckpt");
    path_of(bad, sizeof bad, "bad.ckpt");
    path_of(other, sizeof other, "other.txt");
    zb_trainer_t t;
    init_ok(&t, &c);
    run_steps(&t, 2, NULL);
    zb_err_t err;
    assert_int_equal(zb_train_save(&t, good, &err), ZB_OK);
    long size = 64 * 8 + 3 * (long)t.params.count * 4;
    zb_trainer_free(&t);

    copy_prefix(good, bad, size - 10, -1);
    expect_load_error(c, bad, ZB_EFORMAT, "truncated");
    copy_prefix(good, bad, size + 4, -1);
    expect_load_error(c, bad, ZB_EFORMAT, "oversized");
    copy_prefix(good, bad, 100, -1);
    expect_load_error(c, bad, ZB_EFORMAT, "header");
    copy_prefix(good, bad, -1, 0);
    expect_load_error(c, bad, ZB_EFORMAT, "magic");
    copy_prefix(good, bad, -1, size - 3); /* a flipped bit in v */
    expect_load_error(c, bad, ZB_EFORMAT, "corrupt");
    expect_load_error(c, "/nonexistent/x.ckpt", ZB_EIO, "x.ckpt");

    zb_train_config_t m = c;
    m.batch = 8;
    expect_load_error(m, good, ZB_EMISMATCH, "--batch");
    m = c;
    m.adamw.lr = 1e-3f;
    expect_load_error(m, good, ZB_EMISMATCH, "--lr");
    m = c;
    m.shuffle = false;
    expect_load_error(m, good, ZB_EMISMATCH, "shuffle");
    /* different data */
    FILE *f = fopen(other, "w");
    for (int i = 0; i < 200; i++)
        fputs("some other text entirely. ", f);
    fclose(f);
    m = c;
    m.text_path = other;
    expect_load_error(m, good, ZB_EMISMATCH, "different data");
    /* a save that cannot happen leaves no file behind */
    zb_trainer_t u;
    init_ok(&u, &c);
    assert_int_equal(zb_train_save(&u, "/nonexistent/dir/x.ckpt", &err), ZB_EIO);
    zb_trainer_free(&u);
}

static void test_bad_setups_rejected(void **state)
{
    (void)state;
    zb_trainer_t t;
    zb_err_t err;
    zb_train_config_t c = tiny_config();
    c.batch = 6;
    c.microbatches = 4;
    assert_int_equal(zb_trainer_init(&t, &c, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "divisible"));

    c = tiny_config();
    c.model.max_seq = 8; /* T = 16 */
    assert_int_equal(zb_trainer_init(&t, &c, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "--seq"));

    c = tiny_config();
    c.model.vocab = 100; /* the byte corpus has ids up to 256 */
    assert_int_equal(zb_trainer_init(&t, &c, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "vocabulary"));

    c = tiny_config();
    c.text_path = "/nonexistent/corpus.txt";
    assert_int_equal(zb_trainer_init(&t, &c, &err), ZB_EIO);
    assert_non_null(strstr(err.msg, "corpus.txt"));

    c = tiny_config();
    c.save_every = 2;
    assert_int_equal(zb_trainer_init(&t, &c, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "--save"));
}

static void test_run_writes_metrics_and_checkpoint(void **state)
{
    (void)state;
    zb_train_config_t c = tiny_config();
    char metrics[256], ck[256];
    path_of(metrics, sizeof metrics, "m.jsonl");
    path_of(ck, sizeof ck, "run.ckpt");
    c.steps = 5;
    c.metrics_path = metrics;
    c.save_path = ck;
    c.save_every = 2;
    zb_train_summary_t sum;
    zb_err_t err;
    zb_status_t st = zb_train_run(&c, NULL, &sum, &err);
    if (st != ZB_OK)
        fail_msg("run failed: %s", err.msg);
    assert_int_equal(sum.steps_run, 5);
    FILE *f = fopen(metrics, "r");
    assert_non_null(f);
    char line[512];
    int n = 0;
    float last_loss = 0;
    while (fgets(line, sizeof line, f)) {
        long step;
        assert_int_equal(sscanf(line, "{\"step\":%ld,\"loss\":%f", &step, &last_loss), 2);
        assert_int_equal(step, n + 1); /* numbered like the console */
        for (const char *key = "lr\0grad_norm\0step_ms\0tokens_per_s\0skipped\0"; *key;
             key += strlen(key) + 1) {
            char q[32];
            snprintf(q, sizeof q, "\"%s\":", key);
            assert_non_null(strstr(line, q));
        }
        n++;
    }
    fclose(f);
    assert_int_equal(n, 5);
    assert_true(last_loss == sum.last_loss); /* %.9g round-trips a float */
    /* the checkpoint is at step 5; resuming with more steps continues from there */
    zb_train_config_t peek = tiny_config();
    assert_int_equal(zb_train_peek(ck, &peek, &err), ZB_OK);
    assert_int_equal(peek.batch, c.batch);
    c.resume_path = ck;
    c.steps = 7;
    c.metrics_path = metrics;
    st = zb_train_run(&c, NULL, &sum, &err);
    if (st != ZB_OK)
        fail_msg("resumed run failed: %s", err.msg);
    assert_int_equal(sum.first_step, 5);
    assert_int_equal(sum.steps_run, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_falls_on_demo_corpus),
        cmocka_unit_test(test_same_seed_same_bits),
        cmocka_unit_test(test_resume_is_bit_exact),
        cmocka_unit_test(test_microbatches_match_full_batch),
        cmocka_unit_test(test_bad_checkpoints_rejected),
        cmocka_unit_test(test_bad_setups_rejected),
        cmocka_unit_test(test_run_writes_metrics_and_checkpoint),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
