/* Tests of the profiler and of planning with measured costs: the measurement is complete and
 * sane; stage and rank cost models add up the parts exactly (embedding on the first stage, head
 * on the last, memory from zb_gpt2_stage_mem); the partition follows measured costs; the
 * pipeline trainer with profiled costs and --schedule auto (with and without a memory limit)
 * trains bit-identically to the single process; --trace writes measured and predicted files. */
#include "pipeline_testutil.h"
#include "zbpp/pipeline_trace.h"
#include "zbpp/profile.h"
#include "zbpp/util.h"

enum { STEPS = 3 };

static zb_gpt2_config_t tiny_model(void)
{
    return (zb_gpt2_config_t){.max_seq = 16, .vocab = 257, .padded_vocab = 384, .layers = 4,
                              .heads = 2, .channels = 32};
}

static void test_measure_is_complete(void **state)
{
    (void)state;
    zb_gpt2_config_t cfg = tiny_model();
    zb_profile_t p;
    zb_err_t err;
    assert_int_equal(zb_profile_measure(NULL, &cfg, 2, 16, 3, 2, false, &p, &err), ZB_OK);
    assert_int_equal(p.threads, 2);
    assert_int_equal(p.layers, 4);
    assert_int_equal(p.batch, 2);
    assert_int_equal(p.seq, 16);
    assert_int_equal(p.reps, 3);
    assert_int_equal(p.msg_bytes, 2 * 16 * 32 * sizeof(float));
    for (int l = 0; l < p.layers; l++) {
        /* every block does real matmuls in F, B and W: strictly positive, finite */
        assert_true(p.block[l].f > 0 && p.block[l].f < 1);
        assert_true(p.block[l].b > 0 && p.block[l].b < 1);
        assert_true(p.block[l].w > 0 && p.block[l].w < 1);
    }
    assert_true(p.head.f > 0 && p.head.b > 0 && p.head.w > 0); /* LM head matmuls */
    assert_true(p.embed.f >= 0 && p.embed.b >= 0 && p.embed.w >= 0);
    assert_true(p.comm > 0 && p.comm < 1);
    assert_true(p.wall > 0);
    zb_profile_free(&p);

    /* bad shapes are refused with a message, not measured */
    assert_int_equal(zb_profile_measure(NULL, &cfg, 2, 17, 3, 1, false, &p, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "max_seq"));
    assert_int_equal(zb_profile_measure(NULL, &cfg, 2, 16, 0, 1, false, &p, &err), ZB_EINVAL);
    assert_int_equal(zb_profile_measure(NULL, &cfg, 2, 16, 1, 0, false, &p, &err), ZB_EINVAL);
    zb_gpt2_config_t bad = cfg;
    bad.heads = 3; /* does not divide C */
    assert_int_equal(zb_profile_measure(NULL, &bad, 2, 16, 1, 1, false, &p, &err), ZB_EINVAL);
}

/* A hand-made profile: the cost models are exact sums of its figures. */
static void fake_profile(zb_profile_t *p, zb_op_time_t *blocks)
{
    memset(p, 0, sizeof *p);
    p->cfg = tiny_model();
    p->batch = 2, p->seq = 16, p->reps = 1, p->layers = 4;
    p->block = blocks;
    blocks[0] = (zb_op_time_t){1, 2, 3};
    blocks[1] = (zb_op_time_t){1, 1, 1};
    blocks[2] = (zb_op_time_t){1, 1, 1};
    blocks[3] = (zb_op_time_t){10, 10, 10}; /* one heavy block */
    p->embed = (zb_op_time_t){0.5, 0.25, 0.125};
    p->head = (zb_op_time_t){4, 2, 1};
    p->comm = 0.01;
}

static void test_stage_and_rank_costs(void **state)
{
    (void)state;
    zb_op_time_t blocks[4];
    zb_profile_t p;
    fake_profile(&p, blocks);
    double block[4];
    zb_block_costs_t bc = {.block = block};
    zb_profile_block_costs(&p, &bc);
    assert_int_equal(bc.layers, 4);
    assert_true(block[0] == 6 && block[3] == 30 && bc.embed == 0.875 && bc.head == 7);

    /* the heavy last block (+ head) gets a stage of its own */
    int first[3];
    zb_err_t err;
    assert_int_equal(zb_partition(&bc, 2, first, &err), ZB_OK);
    assert_int_equal(first[0], 0);
    assert_int_equal(first[1], 3);
    assert_int_equal(first[2], 4);

    zb_costs_t c;
    assert_int_equal(zb_profile_stage_costs(&p, first, 2, &c, &err), ZB_OK);
    assert_true(c.t_f[0] == 0.5 + 1 + 1 + 1 && c.t_b[0] == 0.25 + 2 + 1 + 1 &&
                c.t_w[0] == 0.125 + 3 + 1 + 1);
    assert_true(c.t_f[1] == 10 + 4 && c.t_b[1] == 10 + 2 && c.t_w[1] == 10 + 1);
    assert_true(c.comm[0] == 0.01 && c.comm[1] == 0.01);
    assert_false(isfinite(c.mem_limit));
    for (int s = 0; s < 2; s++) {
        zb_gpt2_span_t span = zb_partition_span(first, 2, s);
        size_t af, ab;
        zb_gpt2_stage_mem(&p.cfg, &span, 2, 16, &af, &ab);
        assert_true(c.m_f[s] == (double)af && c.m_b[s] == (double)ab - (double)af &&
                    c.m_w[s] == -(double)ab);
        assert_true(af > 0);
    }
    zb_costs_free(&c);

    /* 4 stages, 2 ranks, V placement: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2 */
    int first4[5] = {0, 1, 2, 3, 4};
    assert_int_equal(zb_profile_stage_costs(&p, first4, 4, &c, &err), ZB_OK);
    zb_costs_t r;
    assert_int_equal(zb_profile_rank_costs(&c, 2, 2, ZB_PLACE_V, &r, &err), ZB_OK);
    assert_int_equal(r.stages, 2);
    assert_true(r.t_f[0] == c.t_f[0] + c.t_f[3] && r.t_f[1] == c.t_f[1] + c.t_f[2]);
    assert_true(r.m_w[0] == c.m_w[0] + c.m_w[3]);
    assert_int_equal(zb_costs_check(&r, &err), ZB_OK);
    zb_costs_free(&r);
    /* loop placement: rank 0 holds stages 0 and 2 */
    assert_int_equal(zb_profile_rank_costs(&c, 2, 2, ZB_PLACE_LOOP, &r, &err), ZB_OK);
    assert_true(r.t_b[0] == c.t_b[0] + c.t_b[2]);
    zb_costs_free(&r);
    assert_int_equal(zb_profile_rank_costs(&c, 3, 1, ZB_PLACE_LOOP, &r, &err), ZB_EINVAL);
    zb_costs_free(&c);

    /* a partition that does not cover the model is refused */
    int bad[3] = {0, 2, 3};
    assert_int_equal(zb_profile_stage_costs(&p, bad, 2, &c, &err), ZB_EINVAL);
}

/* The one-call chain gives the partition and costs of the three steps done by hand. */
static void test_profile_partition_is_the_chain(void **state)
{
    (void)state;
    zb_op_time_t blocks[4];
    zb_profile_t p;
    fake_profile(&p, blocks);
    zb_err_t err;
    int first[3];
    zb_costs_t c;
    assert_int_equal(zb_profile_partition(&p, 2, first, &c, &err), ZB_OK);
    assert_true(first[0] == 0 && first[1] == 3 && first[2] == 4); /* the heavy block alone */
    zb_costs_t by_hand;
    assert_int_equal(zb_profile_stage_costs(&p, first, 2, &by_hand, &err), ZB_OK);
    for (int s = 0; s < 2; s++)
        assert_true(c.t_f[s] == by_hand.t_f[s] && c.t_b[s] == by_hand.t_b[s] &&
                    c.t_w[s] == by_hand.t_w[s] && c.m_f[s] == by_hand.m_f[s] &&
                    c.m_keep[s] == by_hand.m_keep[s]);
    zb_costs_free(&by_hand);
    zb_costs_free(&c);
    /* more stages than blocks: the partitioner's error, nothing to free */
    int first9[10];
    assert_int_not_equal(zb_profile_partition(&p, 9, first9, &c, &err), ZB_OK);
    assert_true(err.msg[0] != '\0');
}

/* ---- pipeline with measured costs vs the single process ---- */

static void tiny_config(zb_train_config_t *c, int M) { pt_tiny_config(c, 8, 8, M, STEPS); }

static void test_auto_with_measured_costs_bit_identical(void **state)
{
    (void)state;
    static const int Ms[] = {4, 8};
    for (int i = 0; i < 2; i++) {
        zb_train_config_t c;
        tiny_config(&c, Ms[i]);
        float ref_loss[STEPS], loss[STEPS];
        zb_gpt2_params_t ref, got;
        pt_reference(&c, NULL, NULL, ref_loss, &ref, NULL);
        zb_pipeline_opts_t o;
        zb_pipeline_opts_defaults(&o);
        o.ranks = 2;
        o.schedule = "auto";
        o.profile = true;
        o.pin = false;
        o.timeout = 60;
        for (int lim = 0; lim < 2; lim++) {
            zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
            zb_err_t err;
            assert_non_null(rep);
            zb_status_t st = pt_run(&c, &o, loss, &got, rep, &err);
            if (st != ZB_OK)
                fail_msg("auto M=%d limit %g: %s", Ms[i], o.mem_limit, err.msg);
            assert_non_null(strstr(rep->note, "measured"));
            assert_non_null(strstr(rep->note, "auto"));
            assert_memory_equal(loss, ref_loss, sizeof loss);
            assert_int_equal(got.count, ref.count);
            assert_memory_equal(got.data, ref.data, got.count * sizeof(float));
            assert_true(rep->bubble_predicted >= 0 && rep->bubble_predicted < 1);
            for (int r = 0; r < 2; r++) {
                assert_true(rep->peak_stash_bytes[r] <= rep->predicted_stash_bytes[r] + 0.5);
                if (o.mem_limit > 0) /* the limit is on the whole rank */
                    assert_true(rep->mem_predicted[r].total <= o.mem_limit);
                assert_true(rep->mem_measured_ok);
                assert_true(rep->mem_measured[r].total <= rep->mem_predicted[r].total + 0.5);
            }
            if (!lim) /* next round: a whole-rank limit that takes away 20% of the largest
                       * activation peak */
                o.mem_limit = fmax(rep->mem_predicted[0].total, rep->mem_predicted[1].total) -
                              0.2 * fmax(rep->predicted_stash_bytes[0],
                                         rep->predicted_stash_bytes[1]);
            zb_gpt2_params_free(&got);
            zb_pipeline_report_free(rep), free(rep);
        }
        zb_gpt2_params_free(&ref);
    }
}

static void test_flop_model_still_available(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 4);
    c.steps = 1;
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = 2;
    o.schedule = "zb-h1";
    o.pin = false;
    assert_false(o.profile); /* the library's default: deterministic planning */
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    float loss[STEPS];
    zb_err_t err;
    assert_int_equal(pt_run(&c, &o, loss, NULL, rep, &err), ZB_OK);
    assert_non_null(strstr(rep->note, "FLOP"));
    /* the FLOP model sees 8 equal blocks + a head: stage 0 gets at least half of the blocks */
    assert_true(rep->first[1] >= 4);
    zb_pipeline_report_free(rep), free(rep);
}

static bool file_has(const char *path, const char *needle)
{
    char *data = NULL;
    size_t len = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    data = malloc(1 << 22);
    len = data ? fread(data, 1, (1 << 22) - 1, f) : 0;
    fclose(f);
    if (!data)
        return false;
    data[len] = '\0';
    bool yes = strstr(data, needle) != NULL;
    free(data);
    return yes;
}

static void test_trace_files(void **state)
{
    (void)state;
    char buf[256];
    zb_err_t err;
    assert_int_equal(zb_pipeline_trace_path("out/x.trace.json", ZB_TRACE_PREDICTED_JSON, buf,
                                            sizeof buf, &err),
                     ZB_OK);
    assert_string_equal(buf, "out/x.trace.predicted.json");
    assert_int_equal(
        zb_pipeline_trace_path("out/x", ZB_TRACE_MEASURED_SVG, buf, sizeof buf, &err), ZB_OK);
    assert_string_equal(buf, "out/x.svg");
    assert_int_equal(zb_pipeline_trace_path("out/x.json", ZB_TRACE_PREDICTED_SVG, buf, 8, &err),
                     ZB_EINVAL);

    zb_train_config_t c;
    tiny_config(&c, 4);
    c.steps = 2;
    char trace[256];
    pt_tmp_path(trace, sizeof trace, "run.json");
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = 2;
    o.schedule = "zb-h2";
    o.profile = true;
    o.pin = false;
    o.trace_path = trace;
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    float loss[STEPS];
    assert_int_equal(pt_run(&c, &o, loss, NULL, rep, &err), ZB_OK);
    for (int k = 0; k < ZB_TRACE_FILES; k++) {
        assert_int_equal(zb_pipeline_trace_path(trace, (zb_trace_file_t)k, buf, sizeof buf, &err),
                         ZB_OK);
        bool svg = k == ZB_TRACE_MEASURED_SVG || k == ZB_TRACE_PREDICTED_SVG;
        if (!file_has(buf, svg ? "<svg" : "\"traceEvents\""))
            fail_msg("%s missing or not a %s", buf, svg ? "SVG" : "trace");
        assert_true(file_has(buf, svg ? "zb-h2" : "F s0 mb0"));
        unlink(buf);
    }
    zb_pipeline_report_free(rep), free(rep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measure_is_complete),
        cmocka_unit_test(test_stage_and_rank_costs),
        cmocka_unit_test(test_profile_partition_is_the_chain),
        cmocka_unit_test(test_auto_with_measured_costs_bit_identical),
        cmocka_unit_test(test_flop_model_still_available),
        cmocka_unit_test(test_trace_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
