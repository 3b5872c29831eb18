/* Validation, metrics fields and --keep-last (cmocka):
 *  - the validation loss of a batch equals the training loss of the same batch (a forward);
 *  - the same bits for --ranks 1, 2 (zb-h1), 4 (1f1b), 2 with zb-v (two chunks) and --dp 2;
 *    validation changes nothing: the trained parameters equal a run without it;
 *  - metrics: "step" numbered from 1, elapsed_s, tflops, mfu (null without a peak), val_loss
 *    only on the validated steps;
 *  - zb_ckpt_rotate keeps the newest N links, never the one just written, content intact. */
#include "pipeline_testutil.h"

#include <dirent.h>
#include <sys/stat.h>

static void val_config(zb_train_config_t *c, int layers, int B, int M, long steps)
{
    pt_tiny_config(c, layers, B, M, steps);
    c->shuffle = false;
    c->val_text_path = ZB_SOURCE_DIR "/data/demo_corpus.txt";
    c->val_steps = 3;
}

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Unshuffled, the validation text is the training text: its first batch is the first step's. */
static void test_val_is_forward_of_training_batch(void **state)
{
    (void)state;
    zb_train_config_t c;
    val_config(&c, 2, 4, 2, 1);
    c.val_steps = 1;
    zb_trainer_t t;
    zb_err_t err;
    assert_int_equal(zb_trainer_init(&t, &c, &err), ZB_OK);
    float val = 0, again = 0;
    assert_int_equal(zb_trainer_validate(&t, &val, &err), ZB_OK);
    assert_int_equal(zb_trainer_validate(&t, &again, &err), ZB_OK); /* same batches each time */
    assert_int_equal(bits(val), bits(again));
    zb_step_stats_t s;
    assert_int_equal(zb_trainer_step(&t, &s, &err), ZB_OK);
    assert_int_equal(bits(val), bits(s.loss));
    assert_true(isfinite(val) && val > 0);
    zb_trainer_free(&t);
}

static void test_val_same_bits_every_rank_count(void **state)
{
    (void)state;
    zb_train_config_t c;
    val_config(&c, 4, 8, 4, 4);
    c.val_every = 2;
    zb_train_summary_t ref;
    zb_err_t err;
    zb_gpt2_params_t pref = {0};
    assert_int_equal(zb_train_run(&c, NULL, &ref, &err), ZB_OK);
    assert_true(ref.has_val);
    /* validation leaves the training alone: the parameters equal a run without it */
    zb_train_config_t nv = c;
    nv.val_text_path = NULL;
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = 2;
    o.schedule = "zb-h1";
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    assert_non_null(rep);
    zb_train_summary_t sum;
    assert_int_equal(zb_pipeline_train(&nv, &o, NULL, &sum, rep, &pref, &err), ZB_OK);
    assert_false(sum.has_val);
    struct {
        int ranks, dp;
        const char *schedule;
    } runs[] = {{2, 1, "zb-h1"}, {4, 1, "1f1b"}, {2, 1, "zb-v"}, {2, 2, "1f1b"}, {1, 1, "1f1b"}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        zb_pipeline_opts_defaults(&o);
        o.ranks = runs[i].ranks;
        o.dp = runs[i].dp;
        o.schedule = runs[i].schedule;
        zb_gpt2_params_t p = {0};
        zb_status_t st = zb_pipeline_train(&c, &o, NULL, &sum, rep, runs[i].dp == 1 ? &p : NULL,
                                           &err);
        if (st != ZB_OK)
            fail_msg("%s P=%d dp=%d: %s", runs[i].schedule, runs[i].ranks, runs[i].dp, err.msg);
        assert_true(sum.has_val);
        if (runs[i].dp > 1) { /* replicas average their halves: close, not the same sum order */
            assert_true(fabsf(sum.val_loss - ref.val_loss) < 1e-3f);
            continue;
        }
        if (bits(sum.val_loss) != bits(ref.val_loss))
            fail_msg("%s P=%d: val loss %.9g, --ranks 1 %.9g", runs[i].schedule, runs[i].ranks,
                     (double)sum.val_loss, (double)ref.val_loss);
        pt_assert_same_params(&pref, &p, "with and without validation");
        zb_gpt2_params_free(&p);
    }
    zb_gpt2_params_free(&pref);
    zb_pipeline_report_free(rep), free(rep);
}

/* The metrics line of a run: fields present, step 1-based, val_loss where due, mfu. */
static void test_metrics_fields(void **state)
{
    (void)state;
    char path[256];
    pt_tmp_path(path, sizeof path, "val_metrics.jsonl");
    for (int with_peak = 0; with_peak < 2; with_peak++) {
        zb_train_config_t c;
        val_config(&c, 2, 4, 1, 3);
        c.val_every = 2; /* steps 2 and 3 (the last) */
        c.metrics_path = path;
        c.peak_tflops = with_peak ? 1.0 : 0.0;
        zb_train_summary_t sum;
        zb_err_t err;
        assert_int_equal(zb_train_run(&c, NULL, &sum, &err), ZB_OK);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        char line[1024];
        int n = 0;
        while (fgets(line, sizeof line, f)) {
            long step = -1;
            assert_int_equal(sscanf(line, "{\"step\":%ld,", &step), 1);
            assert_int_equal(step, n + 1);
            bool want_val = step == 2 || step == 3;
            assert_int_equal(strstr(line, "\"val_loss\":") != NULL, want_val);
            assert_non_null(strstr(line, "\"elapsed_s\":"));
            const char *tf = strstr(line, "\"tflops\":");
            assert_non_null(tf);
            assert_true(strtod(tf + 9, NULL) > 0);
            const char *mfu = strstr(line, "\"mfu\":");
            assert_non_null(mfu);
            if (with_peak) /* tflops / 1 TFLOP/s */
                assert_true(fabs(strtod(mfu + 6, NULL) - strtod(tf + 9, NULL)) < 1e-5);
            else
                assert_int_equal(strncmp(mfu + 6, "null", 4), 0);
            n++;
        }
        fclose(f);
        assert_int_equal(n, 3);
    }
    unlink(path);
}

static void test_flops_formula(void **state)
{
    (void)state;
    zb_gpt2_config_t m = {.max_seq = 16, .vocab = 257, .padded_vocab = 384, .layers = 2,
                          .heads = 2, .channels = 32};
    /* (6 N + 12 L C T) per token, B·T tokens */
    double want = (6.0 * 1000 + 12.0 * 2 * 32 * 16) * 4 * 16;
    assert_true(fabs(zb_train_flops_per_step(&m, 1000, 4, 16) - want) < 1e-6 * want);
}

static int count_links(const char *dir, const char *base, long *steps, int cap)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    size_t bl = strlen(base);
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, base, bl) && !strncmp(e->d_name + bl, ".step", 5) && n < cap)
            steps[n++] = strtol(e->d_name + bl + 5, NULL, 10);
    closedir(d);
    return n;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_keep_last_rotation(void **state)
{
    (void)state;
    char dir[256], path[300], name[400];
    pt_tmp_path(dir, sizeof dir, "rotate");
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/ck", dir);
    zb_err_t err;
    /* an unrelated file with the prefix is left alone */
    snprintf(name, sizeof name, "%s/ck.stepx", dir);
    write_text(name, "other");
    for (long s = 1; s <= 5; s++) {
        char text[32];
        snprintf(text, sizeof text, "state %ld", s);
        /* the writer renames a new file over ck: the links keep the old ones */
        char tmp[320];
        snprintf(tmp, sizeof tmp, "%s.new", path);
        write_text(tmp, text);
        assert_int_equal(rename(tmp, path), 0);
        assert_int_equal(zb_ckpt_rotate(path, s, 2, &err), ZB_OK);
    }
    long steps[16];
    int n = count_links(dir, "ck", steps, 16);
    assert_int_equal(n, 3); /* step4, step5, stepx */
    for (long s = 4; s <= 5; s++) {
        snprintf(name, sizeof name, "%s/ck.step%06ld", dir, s);
        FILE *f = fopen(name, "r");
        assert_non_null(f);
        char got[32] = "";
        assert_non_null(fgets(got, sizeof got, f));
        fclose(f);
        char want[32];
        snprintf(want, sizeof want, "state %ld", s);
        assert_string_equal(got, want);
    }
    /* a stale link of a longer earlier run does not push out the one just written */
    snprintf(name, sizeof name, "%s/ck.step000099", dir);
    write_text(name, "old run");
    assert_int_equal(zb_ckpt_rotate(path, 6, 1, &err), ZB_OK);
    snprintf(name, sizeof name, "%s/ck.step000006", dir);
    assert_int_equal(access(name, R_OK), 0);
    n = count_links(dir, "ck", steps, 16);
    assert_int_equal(n, 2); /* step6 and stepx */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_val_is_forward_of_training_batch),
        cmocka_unit_test(test_val_same_bits_every_rank_count),
        cmocka_unit_test(test_metrics_fields),
        cmocka_unit_test(test_flops_formula),
        cmocka_unit_test(test_keep_last_rotation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
