/* Tests of data-parallel replicas (--dp N) with the thread transport.
 *
 * The reference of `--dp N --ranks P` is `--dp N --ranks 1`: the same replicas without a
 * pipeline, bit for bit (losses, parameters), for several schedules and both optimizer sync
 * modes. `--dp 1` with N·M microbatches is NOT bit-identical (the replicas' partial sums are a
 * different association than one sequential accumulation), only close. Also: every replica ends
 * with the same state; the run trains; a checkpoint resumes bit-exactly with the same N; a
 * failing rank in one replica stops all; bad batch splits are refused; the group views of a
 * transport map ranks and keep collectives in group order. */
#include <pthread.h>

#include "pipeline_testutil.h"
#include "pipeline/pipeline_hooks.h"
#include "pipeline/pipeline_dp.h"
#include "zbpp/transport.h"

enum { STEPS = 3, MAXSTEPS = 8 };

static void tiny_config(zb_train_config_t *c, int B, int M, long steps)
{
    pt_tiny_config(c, 4, B, M, steps);
}

static void opts(zb_pipeline_opts_t *o, int P, int N, const char *sched)
{
    zb_pipeline_opts_defaults(o);
    o->ranks = P;
    o->dp = N;
    o->schedule = sched;
    o->pin = false;
    o->timeout = 60;
}

/* --dp N --ranks P == --dp N --ranks 1, bit for bit; every replica ends identical. */
static void test_pipeline_equals_one_rank_per_replica(void **state)
{
    (void)state;
    static const struct {
        int N, P, M;
        const char *sched;
        zb_opt_sync_t sync;
    } cases[] = {
        {2, 2, 2, "zb-h1", ZB_OPT_SYNC_POST_VALIDATION},
        {2, 2, 4, "1f1b", ZB_OPT_SYNC_BARRIER},
        {3, 2, 2, "zb-h2", ZB_OPT_SYNC_POST_VALIDATION},
        {2, 4, 4, "zb-h1", ZB_OPT_SYNC_BARRIER},
        {2, 2, 4, "zb-v", ZB_OPT_SYNC_POST_VALIDATION},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        zb_train_config_t c;
        tiny_config(&c, cases[k].N * cases[k].M * 2, cases[k].M, STEPS);
        c.grad_clip = 0.5f; /* some steps clip: post-validation rolls back and redoes */
        zb_pipeline_opts_t o;
        opts(&o, 1, cases[k].N, "1f1b");
        float ref_loss[STEPS], loss[STEPS];
        zb_gpt2_params_t ref, got;
        zb_pipeline_report_t rep = {0};
        zb_err_t err;
        assert_int_equal(pt_run(&c, &o, ref_loss, &ref, &rep, &err), ZB_OK);
        opts(&o, cases[k].P, cases[k].N, cases[k].sched);
        o.opt_sync = cases[k].sync;
        zb_status_t st = pt_run(&c, &o, loss, &got, &rep, &err);
        if (st != ZB_OK)
            fail_msg("case %zu: %s", k, err.msg);
        char what[96];
        snprintf(what, sizeof what, "--dp %d --ranks %d %s M=%d", cases[k].N, cases[k].P,
                 cases[k].sched, cases[k].M);
        for (int s = 0; s < STEPS; s++)
            if (memcmp(&loss[s], &ref_loss[s], sizeof(float)) != 0)
                fail_msg("%s: step %d loss %.9g vs --ranks 1 %.9g", what, s, (double)loss[s],
                         (double)ref_loss[s]);
        pt_assert_same_params(&got, &ref, what);
        assert_true(rep.replicas_checked);
        assert_int_equal(rep.replicas_differ, 0);
        assert_true(rep.measured);
        print_message("    %s: bit-identical to --ranks 1, %d replicas identical\n", what,
                      cases[k].N);
        zb_gpt2_params_free(&ref), zb_gpt2_params_free(&got);
        zb_pipeline_report_free(&rep);
    }
}

/* --dp N with M microbatches vs --dp 1 with N·M: the same sequences, another association of the
 * gradient sum. Close (losses to 1e-5 relative, parameters on average), and it trains. */
static void test_close_to_single_replica_and_trains(void **state)
{
    (void)state;
    const int N = 2, M = 2;
    zb_train_config_t c;
    tiny_config(&c, 8, M, MAXSTEPS);
    zb_pipeline_opts_t o;
    opts(&o, 2, N, "zb-h1");
    float dp_loss[MAXSTEPS], one_loss[MAXSTEPS];
    zb_gpt2_params_t dp, one;
    zb_pipeline_report_t rep = {0};
    zb_err_t err;
    assert_int_equal(pt_run(&c, &o, dp_loss, &dp, &rep, &err), ZB_OK);
    zb_train_config_t c1 = c;
    c1.microbatches = N * M;
    opts(&o, 2, 1, "zb-h1");
    assert_int_equal(pt_run(&c1, &o, one_loss, &one, &rep, &err), ZB_OK);
    assert_false(rep.replicas_checked); /* one replica: nothing to compare */
    for (int s = 0; s < MAXSTEPS; s++)
        assert_true(fabsf(dp_loss[s] - one_loss[s]) <= 1e-5f * fabsf(one_loss[s]));
    double diff = 0;
    for (size_t i = 0; i < dp.count; i++)
        diff += fabs((double)dp.data[i] - (double)one.data[i]);
    diff /= (double)dp.count;
    print_message("    dp 2 x M 2 vs dp 1 x M 4: mean |param diff| %.3g, loss %.5f vs %.5f\n",
                  diff, (double)dp_loss[MAXSTEPS - 1], (double)one_loss[MAXSTEPS - 1]);
    assert_true(diff < 1e-4); /* parameters are O(0.02..1); lr 1e-2 over 8 steps */
    assert_true(dp_loss[MAXSTEPS - 1] < dp_loss[0] - 0.05f); /* it trains */
    zb_gpt2_params_free(&dp), zb_gpt2_params_free(&one);
    zb_pipeline_report_free(&rep);
}

/* 3 + 3 steps through a checkpoint (single file and sharded) == 6 straight steps, same N. */
static void test_resume_same_replicas(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 8, 2, 6);
    c.lr_schedule = ZB_LR_CONSTANT;
    zb_pipeline_opts_t o;
    opts(&o, 2, 2, "zb-h1");
    zb_gpt2_params_t straight, resumed;
    zb_pipeline_report_t rep = {0};
    zb_err_t err;
    assert_int_equal(pt_run(&c, &o, NULL, &straight, &rep, &err), ZB_OK);
    for (int sharded = 0; sharded <= 1; sharded++) {
        char ckpt[256];
        pt_tmp_path(ckpt, sizeof ckpt, sharded ? "sharded.ckpt" : "file.ckpt");
        zb_train_config_t first = c;
        first.steps = 3;
        first.save_path = ckpt;
        o.sharded_checkpoint = sharded;
        assert_int_equal(pt_run(&first, &o, NULL, NULL, &rep, &err), ZB_OK);
        zb_train_config_t second = c;
        second.resume_path = ckpt;
        zb_status_t st = pt_run(&second, &o, NULL, &resumed, &rep, &err);
        if (st != ZB_OK)
            fail_msg("resume (%s): %s", sharded ? "sharded" : "file", err.msg);
        pt_assert_same_params(&resumed, &straight, sharded ? "sharded resume" : "file resume");
        assert_int_equal(rep.replicas_differ, 0);
        zb_gpt2_params_free(&resumed);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -f %s %s.*", ckpt, ckpt);
        assert_int_equal(system(cmd), 0);
    }
    zb_gpt2_params_free(&straight);
    zb_pipeline_report_free(&rep);
}

static void test_refusals_and_failures(void **state)
{
    (void)state;
    zb_train_config_t c;
    tiny_config(&c, 8, 2, STEPS);
    zb_pipeline_opts_t o;
    zb_pipeline_report_t rep = {0};
    zb_err_t err;

    opts(&o, 2, 3, "1f1b"); /* 8 sequences cannot be split 3 ways */
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "not divisible by --dp 3"));

    opts(&o, 2, 2, "1f1b"); /* 8 / 2 = 4 per replica, not divisible by 8 microbatches */
    zb_train_config_t m8 = c;
    m8.microbatches = 8;
    assert_int_equal(pt_run(&m8, &o, NULL, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "sequences per replica is not divisible by --microbatches 8"));

    opts(&o, 2, 2000, "1f1b");
    assert_int_equal(pt_run(&c, &o, NULL, NULL, &rep, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "--dp must be in"));

    /* a failing compute on rank 1 (of every replica) stops all replicas, naming one */
    char ckpt[256];
    pt_tmp_path(ckpt, sizeof ckpt, "never.ckpt");
    zb_train_config_t cf = c;
    cf.save_path = ckpt;
    opts(&o, 2, 2, "zb-h1");
    o.timeout = 0; /* only the abort can end the other ranks' waits */
    zb_pipeline_test_hooks_t hooks = ZB_PIPELINE_TEST_HOOKS_OFF;
    hooks.fail_step = 1;
    hooks.fail_rank = 1;
    hooks.fail_action = 2;
    o.test_hooks = &hooks;
    assert_int_equal(pt_run(&cf, &o, NULL, NULL, &rep, &err), ZB_ENUMERIC);
    assert_non_null(strstr(err.msg, "replica "));
    assert_non_null(strstr(err.msg, "injected fault"));
    assert_int_equal(access(ckpt, F_OK), -1);
    zb_pipeline_report_free(&rep);
}

/* ---- group views of a transport ---- */

enum { GP = 3, GN = 2 };

static zb_status_t group_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    (void)arg;
    int d = t->rank / GP, p = t->rank % GP;
    zb_transport_group_t pipe, dp;
    zb_status_t st = zb_transport_group_init(&pipe, t, d * GP, 1, GP, err);
    if (st == ZB_OK)
        st = zb_transport_group_init(&dp, t, p, GP, GN, err);
    if (st != ZB_OK)
        return st;
    if (pipe.base.rank != p || pipe.base.size != GP || dp.base.rank != d || dp.base.size != GN)
        return zb_err_set(err, ZB_EINVAL, "rank %d: wrong group numbering", t->rank);
    /* ring in the pipeline group: send my global rank to the next, get the previous one's */
    int next = (p + 1) % GP, prev = (p + GP - 1) % GP;
    double mine = t->rank, got = -1;
    uint32_t tag = zb_tag(ZB_TAG_USER, 0, 0);
    if ((st = zb_send(&pipe.base, &mine, sizeof mine, next, tag, err)) != ZB_OK ||
        (st = zb_recv(&pipe.base, &got, sizeof got, prev, tag, err)) != ZB_OK)
        return st;
    if (got != d * GP + prev)
        return zb_err_set(err, ZB_EINVAL, "rank %d got %g from its pipeline predecessor",
                          t->rank, got);
    /* allgather in the dp group: row k = replica k's global rank */
    double all[GN];
    if ((st = zb_allgather(&dp.base, &mine, 1, all, err)) != ZB_OK)
        return st;
    for (int k = 0; k < GN; k++)
        if (all[k] != k * GP + p)
            return zb_err_set(err, ZB_EINVAL, "rank %d: dp allgather row %d = %g", t->rank, k,
                              all[k]);
    /* a sum whose value depends on the order: group order 0 + 1 on every member */
    double v[1] = {d == 0 ? 1e16 : 1.0};
    if ((st = zb_allreduce_sum(&dp.base, v, 1, err)) != ZB_OK)
        return st;
    if (v[0] != (0.0 + 1e16) + 1.0)
        return zb_err_set(err, ZB_EINVAL, "rank %d: dp sum %.17g", t->rank, v[0]);
    /* a rank outside the group is refused */
    zb_transport_group_t bad;
    zb_err_t e2;
    if (zb_transport_group_init(&bad, t, (d + 1) % GN * GP, 1, GP, &e2) != ZB_EINVAL)
        return zb_err_set(err, ZB_EINVAL, "rank %d: joined a group it is not in", t->rank);
    return ZB_OK;
}

static void test_group_views(void **state)
{
    (void)state;
    zb_thread_world_t *w;
    zb_err_t err;
    assert_int_equal(zb_thread_world_new(GP * GN, 16, 30, &w, &err), ZB_OK);
    zb_status_t st = zb_thread_world_run(w, group_rank, NULL, 0, NULL, &err);
    if (st != ZB_OK)
        fail_msg("%s", err.msg);
    zb_transport_group_t g;
    assert_int_equal(zb_transport_group_init(&g, zb_thread_world_rank(w, 0), 0, 4, 3, &err),
                     ZB_EINVAL); /* ranks 0, 4, 8 do not fit 6 */
    zb_thread_world_free(w);
}

/* ---- the replica reduction itself: g_0 + g_1 + g_2 in that order, on every replica ---- */

enum { RN = 3, RLEN = 23 };

typedef struct {
    pl_t pl;
    pl_rank_t R;
    pl_range_t ranges[2];
    float grad[RLEN];
} red_rank_t;

/* Values of very different magnitudes, so the order of the additions shows in the bits. */
static float red_value(int d, int i)
{
    static const float scale[RN] = {1.0f, 1e8f, -1e8f};
    return scale[d] * (1.0f + 0.37f * (float)((i * 7 + d * 3) % 11)) + 0.001f * (float)i;
}

static zb_status_t red_rank_fn(zb_transport_t *t, void *arg, zb_err_t *err)
{
    red_rank_t *x = arg;
    return pl_dp_reduce(t, &x->R, err);
}

static void reduce_case(size_t n_first, size_t n_second)
{
    red_rank_t x[RN];
    void *args[RN];
    zb_err_t err;
    memset(x, 0, sizeof x);
    for (int d = 0; d < RN; d++) {
        x[d].pl.N = RN;
        x[d].R.pl = &x[d].pl;
        x[d].R.replica = d;
        /* two update ranges with a gap: [0, n_first) and [12, 12 + n_second) */
        x[d].ranges[0] = (pl_range_t){0, n_first, 0};
        x[d].ranges[1] = (pl_range_t){12, n_second, 12};
        x[d].R.upd = x[d].ranges;
        x[d].R.n_upd = 2;
        x[d].R.upd_elems = n_first + n_second;
        for (int i = 0; i < RLEN; i++)
            x[d].grad[i] = red_value(d, i);
        x[d].R.grads.g.data = x[d].grad;
        assert_int_equal(pl_dp_alloc(&x[d].R, &err), ZB_OK);
        args[d] = &x[d];
    }
    zb_thread_world_t *w;
    assert_int_equal(zb_thread_world_new(RN, 16, 30, &w, &err), ZB_OK);
    if (zb_thread_world_run(w, red_rank_fn, args, 0, NULL, &err) != ZB_OK)
        fail_msg("%s", err.msg);
    zb_thread_world_free(w);
    for (int i = 0; i < RLEN; i++) {
        bool in = (size_t)i < n_first || (i >= 12 && (size_t)(i - 12) < n_second);
        for (int d = 0; d < RN; d++) {
            float want = in ? (red_value(0, i) + red_value(1, i)) + red_value(2, i)
                            : red_value(d, i); /* outside the ranges: untouched */
            if (memcmp(&x[d].grad[i], &want, sizeof want) != 0)
                fail_msg("replica %d element %d: %.9g, want %.9g", d, i, (double)x[d].grad[i],
                         (double)want);
        }
    }
    for (int d = 0; d < RN; d++)
        pl_dp_free(&x[d].R);
}

static void test_reduction_order(void **state)
{
    (void)state;
    /* the order matters for these values: (a + b) + c differs from a + (b + c) somewhere */
    bool order_shows = false;
    for (int i = 0; i < RLEN; i++) {
        float l = (red_value(0, i) + red_value(1, i)) + red_value(2, i);
        float r = red_value(0, i) + (red_value(1, i) + red_value(2, i));
        order_shows |= memcmp(&l, &r, sizeof l) != 0;
    }
    assert_true(order_shows);
    reduce_case(5, 7);  /* 12 elements in 3 chunks of 4 */
    reduce_case(10, 1); /* uneven chunks */
    reduce_case(1, 1);  /* fewer elements than replicas: an empty chunk */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_views),
        cmocka_unit_test(test_reduction_order),
        cmocka_unit_test(test_pipeline_equals_one_rank_per_replica),
        cmocka_unit_test(test_close_to_single_replica_and_trains),
        cmocka_unit_test(test_resume_same_replicas),
        cmocka_unit_test(test_refusals_and_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
