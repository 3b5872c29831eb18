/* Activation recomputation in the pipeline trainer (ranks as threads): with --recompute all
 * every schedule family trains to the same losses and parameters, bit for bit, as the
 * single-process trainer; a partial recompute from a schedule file too. Recompute lowers the
 * stash (live peak and pool) and the memory model predicts it; `auto` recomputes exactly when
 * the schedule does not fit the limit. */
#include "pipeline_testutil.h"

#include "zbpp/schedule_io.h"

enum { STEPS = 2 };

#define assert_close(a, b) assert_true(fabs((a) - (b)) <= 1e-9 * fmax(1.0, fabs(b)))

static void tiny_config(zb_train_config_t *c, int M) { pt_tiny_config(c, 4, 8, M, STEPS); }

static void opts(zb_pipeline_opts_t *o, int P, const char *family, zb_recompute_t rc)
{
    zb_pipeline_opts_defaults(o);
    o->ranks = P;
    o->schedule = family;
    o->recompute = rc;
    o->pin = false;
    o->timeout = 60;
    o->profile = false; /* FLOP model: the same plan every run */
}

static void assert_matches(const zb_train_config_t *c, const zb_pipeline_opts_t *o,
                           const float *ref_loss, const zb_gpt2_params_t *ref, const char *what,
                           zb_pipeline_report_t *rep)
{
    float loss[STEPS];
    zb_gpt2_params_t got;
    zb_err_t err;
    zb_status_t st = pt_run(c, o, loss, &got, rep, &err);
    if (st != ZB_OK)
        fail_msg("%s: %s", what, err.msg);
    for (int s = 0; s < STEPS; s++)
        if (memcmp(&loss[s], &ref_loss[s], sizeof(float)) != 0)
            fail_msg("%s: step %d loss %.9g vs reference %.9g", what, s, (double)loss[s],
                     (double)ref_loss[s]);
    pt_assert_same_params(&got, ref, what);
    zb_gpt2_params_free(&got);
}

static void test_every_family_bit_identical(void **state)
{
    (void)state;
    size_t n = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    zb_train_config_t c;
    tiny_config(&c, 4);
    float ref_loss[STEPS];
    zb_gpt2_params_t ref;
    pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);
    int ran = 0;
    for (size_t g = 0; g < n; g++) {
        if (!strcmp(gens[g].name, "optimal"))
            continue; /* the exact solver: slow, and covered by its own tests */
        zb_pipeline_opts_t o;
        opts(&o, 2, gens[g].name, ZB_RECOMPUTE_ALL);
        zb_pipeline_report_t rep = {0};
        char what[96];
        snprintf(what, sizeof what, "%s P=2 M=4 --recompute all", gens[g].name);
        float loss[STEPS];
        zb_gpt2_params_t got;
        zb_err_t err;
        zb_status_t st = pt_run(&c, &o, loss, &got, &rep, &err);
        if (st == ZB_EINVAL) { /* the family refuses this shape, as without recompute */
            print_message("    %s rejected: %s\n", what, err.msg);
            zb_pipeline_report_free(&rep);
            continue;
        }
        zb_gpt2_params_free(&got);
        assert_matches(&c, &o, ref_loss, &ref, what, &rep);
        assert_non_null(strstr(rep.note, "forwards recomputed"));
        for (int r = 0; r < 2; r++) /* the live stash never exceeds the model's prediction */
            assert_true(rep.peak_stash_bytes[r] <= rep.predicted_stash_bytes[r] + 0.5);
        ran++;
        zb_pipeline_report_free(&rep);
    }
    assert_true(ran >= 8);
    /* one rank, and four */
    zb_pipeline_opts_t o;
    zb_pipeline_report_t rep = {0};
    opts(&o, 1, "1f1b", ZB_RECOMPUTE_ALL);
    assert_matches(&c, &o, ref_loss, &ref, "1f1b P=1 --recompute all", &rep);
    opts(&o, 4, "zb-h1", ZB_RECOMPUTE_ALL);
    assert_matches(&c, &o, ref_loss, &ref, "zb-h1 P=4 --recompute all", &rep);
    print_message("    %d families (P=2) + P=1 + P=4 matched --ranks 1 bit for bit\n", ran);
    zb_gpt2_params_free(&ref);
    zb_pipeline_report_free(&rep);
}

/* GPipe holds every microbatch: recompute keeps one rebuilt at a time, so the live peak and the
 * pool shrink, and the measured figures are the predicted ones. */
static void test_recompute_lowers_the_stash(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 8);
    zb_pipeline_report_t none = {0}, all = {0};
    zb_pipeline_opts_t o;
    zb_err_t err;
    opts(&o, 2, "gpipe", ZB_RECOMPUTE_NONE);
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &none, &err), ZB_OK);
    opts(&o, 2, "gpipe", ZB_RECOMPUTE_ALL);
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &all, &err), ZB_OK);
    assert_true(none.mem_measured_ok && all.mem_measured_ok);
    for (int r = 0; r < 2; r++) {
        const zb_rank_mem_t *pn = &none.mem_predicted[r], *mn = &none.mem_measured[r];
        const zb_rank_mem_t *pa = &all.mem_predicted[r], *ma = &all.mem_measured[r];
        assert_true(ma->activations * 3 < mn->activations); /* 8 in flight -> 1 rebuilt */
        assert_true(ma->stash_alloc * 3 < mn->stash_alloc);
        assert_close(pa->activations, ma->activations);
        assert_close(pa->stash_alloc, ma->stash_alloc);
        assert_close(pa->messages, ma->messages);
        assert_close(pn->activations, mn->activations);
        assert_true(ma->total < mn->total);
    }
    zb_pipeline_report_free(&none);
    zb_pipeline_report_free(&all);
}

/* N of the report's ", N of S forwards recomputed" (fails the test when it is absent). */
static int recomputed(const char *note)
{
    const char *f = strstr(note, " forwards recomputed");
    assert_non_null(f);
    while (f > note && f[-1] != ',')
        f--;
    int n = 0, of = 0;
    assert_int_equal(sscanf(f, " %d of %d", &n, &of), 2);
    return n;
}

/* auto: with room for the saving schedule nothing is recomputed; with a limit only the
 * recomputing one fits, it recomputes; below that the run is refused naming the limit. */
static void test_auto_recomputes_when_needed(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 8);
    zb_pipeline_report_t none = {0}, all = {0}, rep = {0};
    zb_pipeline_opts_t o;
    zb_err_t err;
    opts(&o, 2, "gpipe", ZB_RECOMPUTE_NONE);
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &none, &err), ZB_OK);
    opts(&o, 2, "gpipe", ZB_RECOMPUTE_ALL);
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &all, &err), ZB_OK);
    int all_r = recomputed(all.note);
    double need_none = fmax(none.mem_predicted[0].total, none.mem_predicted[1].total);
    double need_all = fmax(all.mem_predicted[0].total, all.mem_predicted[1].total);
    assert_true(need_all < need_none);

    opts(&o, 2, "gpipe", ZB_RECOMPUTE_AUTO);
    o.mem_limit = need_none * 1.01;
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &rep, &err), ZB_OK);
    assert_null(strstr(rep.note, "+rc"));
    o.mem_limit = (need_all + need_none) / 2;
    if (pt_run(&c, &o, NULL, NULL, &rep, &err) != ZB_OK)
        fail_msg("auto at %.0f bytes: %s", o.mem_limit, err.msg);
    assert_non_null(strstr(rep.note, "+rc"));
    /* only the R's the limit needs stay (zb_recompute_prune): fewer than every one */
    int n_r = recomputed(rep.note);
    assert_true(n_r > 0 && n_r < all_r);
    o.recompute = ZB_RECOMPUTE_NONE;
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &rep, &err), ZB_EMEMLIMIT);
    o.recompute = ZB_RECOMPUTE_AUTO;
    o.mem_limit = need_all * 0.9;
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &rep, &err), ZB_EMEMLIMIT);
    assert_non_null(strstr(err.msg, "MiB"));
    zb_pipeline_report_free(&none);
    zb_pipeline_report_free(&all);
    zb_pipeline_report_free(&rep);
}

/* One memory limit per rank (mem_limit_ranks): rank 0's between what it needs recomputing
 * every microbatch and what it needs keeping all, rank 1's what it needs keeping all. auto
 * then recomputes on rank 0 only: rank 1 keeps its activation peak, rank 0's drops, each rank
 * within its own limit, the losses and parameters those of the run without. A limit rank 1
 * cannot meet even recomputing is refused naming rank 1; a list of the wrong length is
 * refused before anything runs. */
static void test_per_rank_limits(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 8);
    zb_pipeline_report_t none = {0}, all = {0}, rep = {0};
    zb_pipeline_opts_t o;
    zb_err_t err;
    float ref_loss[STEPS];
    zb_gpt2_params_t ref;
    opts(&o, 2, "gpipe", ZB_RECOMPUTE_NONE);
    assert_int_equal(pt_run(&c, &o, ref_loss, &ref, &none, &err), ZB_OK);
    opts(&o, 2, "gpipe", ZB_RECOMPUTE_ALL);
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &all, &err), ZB_OK);
    double limits[2] = {(all.mem_predicted[0].total + none.mem_predicted[0].total) / 2,
                        none.mem_predicted[1].total * 1.001};
    assert_true(all.mem_predicted[0].total < none.mem_predicted[0].total);

    opts(&o, 2, "gpipe", ZB_RECOMPUTE_AUTO);
    o.mem_limit_ranks = limits, o.mem_limit_ranks_n = 2;
    assert_matches(&c, &o, ref_loss, &ref, "gpipe, auto recompute, a limit per rank", &rep);
    assert_non_null(strstr(rep.note, "+rc"));
    for (int r = 0; r < 2; r++)
        if (rep.mem_measured[r].total > limits[r] || rep.mem_predicted[r].total > limits[r])
            fail_msg("rank %d: %.0f bytes measured, %.0f predicted, over its limit %.0f", r,
                     rep.mem_measured[r].total, rep.mem_predicted[r].total, limits[r]);
    assert_true(rep.mem_predicted[0].activations < none.mem_predicted[0].activations);
    assert_close(rep.mem_predicted[1].activations, none.mem_predicted[1].activations);

    limits[1] = all.mem_predicted[1].total * 0.9;
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &rep, &err), ZB_EMEMLIMIT);
    assert_non_null(strstr(err.msg, "rank 1"));
    o.mem_limit_ranks_n = 3;
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "3 values for 2 ranks"));
    zb_gpt2_params_free(&ref);
    zb_pipeline_report_free(&none);
    zb_pipeline_report_free(&all);
    zb_pipeline_report_free(&rep);
}

/* A schedule file may recompute some microbatches only: trained as written, same bits. */
static void test_partial_recompute_from_a_file(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 4);
    float ref_loss[STEPS];
    zb_gpt2_params_t ref;
    pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);
    zb_gen_params_t gp = {.ranks = 2, .microbatches = 4};
    zb_schedule_t *plain = NULL, *rc = NULL;
    zb_err_t err;
    assert_int_equal(zb_generate("zb-h1", &gp, &plain, &err), ZB_OK);
    bool which[2 * 4] = {false};
    which[0 * 4 + 1] = which[0 * 4 + 3] = which[1 * 4 + 2] = true;
    assert_int_equal(zb_add_recompute(plain, which, &rc, &err), ZB_OK);
    char path[256];
    pt_tmp_path(path, sizeof path, "partial_rc.csv");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(zb_csv_write(rc, f, &err), ZB_OK);
    fclose(f);
    zb_pipeline_opts_t o;
    opts(&o, 2, "1f1b", ZB_RECOMPUTE_NONE);
    o.schedule_file = path;
    zb_pipeline_report_t rep = {0};
    assert_matches(&c, &o, ref_loss, &ref, "zb-h1 file with 3 R's", &rep);
    unlink(path);
    zb_schedule_free(rc);
    zb_schedule_free(plain);
    zb_gpt2_params_free(&ref);
    zb_pipeline_report_free(&rep);
}

/* Selective recompute (--keep-activations selective), alone and with --recompute all: the same
 * bits, and a smaller predicted and measured activation peak. */
static void test_selective_keep(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 4);
    float ref_loss[STEPS];
    zb_gpt2_params_t ref;
    pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);
    static const char *fams[] = {"zb-h1", "zb-v", "1f1b"};
    for (int f = 0; f < 3; f++)
        for (int rc = ZB_RECOMPUTE_NONE; rc <= ZB_RECOMPUTE_ALL; rc++) {
            zb_pipeline_opts_t o;
            zb_pipeline_report_t all = {0}, sel = {0};
            zb_err_t err;
            char what[96];
            snprintf(what, sizeof what, "%s --keep-activations selective --recompute %s",
                     fams[f], zb_recompute_name((zb_recompute_t)rc));
            opts(&o, 2, fams[f], (zb_recompute_t)rc);
            assert_int_equal(pt_run(&c, &o, NULL, NULL, &all, &err), ZB_OK);
            o.keep = ZB_GPT2_KEEP_SELECTIVE;
            assert_matches(&c, &o, ref_loss, &ref, what, &sel);
            for (int r = 0; r < 2; r++) {
                assert_true(sel.mem_measured[r].activations < all.mem_measured[r].activations);
                assert_close(sel.mem_predicted[r].activations, sel.mem_measured[r].activations);
            }
            zb_pipeline_report_free(&all);
            zb_pipeline_report_free(&sel);
        }
    zb_gpt2_params_free(&ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family_bit_identical),
        cmocka_unit_test(test_recompute_lowers_the_stash),
        cmocka_unit_test(test_auto_recomputes_when_needed),
        cmocka_unit_test(test_per_rank_limits),
        cmocka_unit_test(test_partial_recompute_from_a_file),
        cmocka_unit_test(test_selective_keep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
