/* auto with recompute (issue 11): the recompute modes of zb_generate, the costs they need, and
 * the goal rows of bench_recompute_sim at P=4, M=8 (F=1, B=1, W=0.6, c=0.05, R=F, memory
 * 1/-0.5/-0.5, a non-saving F keeps 0.1). */
#include "schedule_testutil.h"

#include <string.h>

#include "schedule/auto_recompute.h"
#include "zbpp/plan.h"

enum { P = 4, M = 8 };
#define KEEP 0.1

static void costs_at(zb_costs_t *c, int stages, double limit)
{
    zb_err_t e = {0};
    if (zb_costs_init_uniform(c, stages, 1, 1, 0.6, 0.05, 1, -0.5, -0.5, &e) != ZB_OK ||
        zb_costs_set_recompute(c, 1, KEEP, &e) != ZB_OK)
        fail_msg("costs: %s", e.msg);
    c->mem_limit = limit;
}

/* Generate `family` (one stage per rank costs c, re-chunked to the family's chunking), check it
 * validates under c's limit and return its makespan; INFINITY when it fails or does not fit. */
static double makespan_of(const char *family, zb_recompute_t rc, const zb_costs_t *c,
                          bool *recomputes)
{
    zb_schedule_t *s = NULL;
    int v = 1;
    zb_placement_t pl = ZB_PLACE_LOOP;
    bool is_auto = !strcmp(family, "auto");
    if (!is_auto) {
        s = tu_gen(family, P, M, 0);
        v = s->chunks;
        pl = s->placement;
        zb_schedule_free(s);
        s = NULL;
    }
    zb_costs_t cc, sc;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_rechunk(c, P, v, pl, &cc, &e), ZB_OK);
    zb_gen_params_t p = {.ranks = P, .microbatches = M, .chunks = v, .costs = &cc,
                         .any_placement = is_auto, .recompute = rc};
    double mk = INFINITY;
    if (zb_generate(family, &p, &s, &e) == ZB_OK) {
        assert_int_equal(zb_costs_rechunk(c, P, s->chunks, s->placement, &sc, &e), ZB_OK);
        zb_sim_t sim;
        if (zb_validate(s, &sc, &e) == ZB_OK) {
            assert_int_equal(zb_simulate(s, &sc, &sim, &e), ZB_OK);
            mk = sim.makespan;
            zb_sim_free(&sim);
        } else if (is_auto) {
            fail_msg("auto's schedule does not validate: %s", e.msg);
        }
        if (recomputes)
            *recomputes = zb_schedule_has_recompute(s);
        zb_costs_free(&sc);
    } else if (is_auto) {
        fail_msg("auto at limit %g: %s", c->mem_limit, e.msg);
    }
    zb_schedule_free(s);
    zb_costs_free(&cc);
    return mk;
}

/* --recompute all works on a fixed family: an R per (stage, mb) whose F does not directly
 * precede its backward (ZB-H1, P=4: ranks 0-2, not the last, which runs F B W in a row), and
 * exactly those F's non-saving. */
static void test_all_on_a_family(void **state)
{
    (void)state;
    zb_gen_params_t p = {.ranks = P, .microbatches = M, .recompute = ZB_RECOMPUTE_ALL};
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate("zb-h1", &p, &s, &e), ZB_OK);
    int r_count = 0;
    for (int r = 0; r < P; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            zb_action_t a = s->rank[r].actions[i];
            r_count += a.type == ZB_ACT_R;
            if (a.type == ZB_ACT_F)
                assert_int_equal(a.flags, r < P - 1 ? ZB_ACT_NOSAVE : 0);
        }
    assert_int_equal(r_count, (P - 1) * M);
    assert_int_equal(zb_validate(s, NULL, &e), ZB_OK);
    zb_schedule_free(s);
}

/* auto's recompute choice belongs to the auto family only. */
static void test_auto_mode_needs_auto(void **state)
{
    (void)state;
    zb_gen_params_t p = {.ranks = P, .microbatches = M, .recompute = ZB_RECOMPUTE_AUTO};
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate("1f1b", &p, &s, &e), ZB_EINVAL);
    assert_null(s);
    assert_non_null(strstr(e.msg, "auto"));
    zb_recompute_t r;
    assert_int_equal(zb_recompute_parse("all", &r, &e), ZB_OK);
    assert_int_equal(r, ZB_RECOMPUTE_ALL);
    assert_int_equal(zb_recompute_parse("some", &r, &e), ZB_EINVAL);
}

/* Re-chunking splits the recompute costs like the others. */
static void test_rechunk_splits_recompute_costs(void **state)
{
    (void)state;
    zb_costs_t c, v;
    zb_err_t e = {0};
    costs_at(&c, P, INFINITY);
    assert_int_equal(zb_costs_rechunk(&c, P, 2, ZB_PLACE_V, &v, &e), ZB_OK);
    for (int s = 0; s < 2 * P; s++) {
        assert_close(zb_costs_t_r(&v, s), 0.5);
        assert_close(zb_costs_m_keep(&v, s), KEEP / 2);
    }
    zb_costs_free(&v);
    zb_costs_free(&c);
}

/* Below every no-recompute schedule's need, auto without recompute refuses the limit; with
 * recompute it fits and fills the pipeline (at least twice as fast as one microbatch at a
 * time), and at ALL every F it returns recomputes. */
static void test_fills_the_pipeline_below_the_plain_minimum(void **state)
{
    (void)state;
    zb_costs_t c;
    costs_at(&c, P, 0.9);
    zb_gen_params_t p = {.ranks = P, .microbatches = M, .chunks = 1, .costs = &c,
                         .any_placement = true};
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_EMEMLIMIT);
    assert_non_null(strstr(e.msg, "recompute"));
    bool rc = false;
    double one_at_a_time = M * P * (1 + 1 + 0.6 + 1 + 0.1); /* F, B, W, R and two messages */
    double mk = makespan_of("auto", ZB_RECOMPUTE_AUTO, &c, &rc);
    assert_true(rc);
    assert_true(mk < one_at_a_time / 2);
    double mk_all = makespan_of("auto", ZB_RECOMPUTE_ALL, &c, &rc);
    assert_true(rc && isfinite(mk_all));
    zb_costs_free(&c);
}

/* The goal rows: auto is no worse than the best fitting baseline, and at half of 1F1B's
 * activations (P/2) at least 10% faster than 1F1B with full recompute. */
static void test_goal_rows(void **state)
{
    (void)state;
    const double limits[] = {P / 2.0, 3.4, 7.0};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        zb_costs_t c;
        costs_at(&c, P, limits[i]);
        double f1 = makespan_of("1f1b", ZB_RECOMPUTE_ALL, &c, NULL);
        double best = fmin(f1, makespan_of("zb-h1", ZB_RECOMPUTE_ALL, &c, NULL));
        best = fmin(best, makespan_of("v-min", ZB_RECOMPUTE_NONE, &c, NULL));
        best = fmin(best, makespan_of("v-half", ZB_RECOMPUTE_NONE, &c, NULL));
        double a = makespan_of("auto", ZB_RECOMPUTE_AUTO, &c, NULL);
        assert_true(isfinite(best));
        if (!(a <= best * (1 + 1e-9)))
            fail_msg("limit %g: auto %g, best baseline %g", limits[i], a, best);
        if (i == 0 && !(a <= 0.9 * f1))
            fail_msg("limit P/2: auto %g is not 10%% faster than 1f1b+R %g", a, f1);
        zb_costs_free(&c);
    }
}

/* plan lists the recompute variants beside the others. */
static void test_plan_lists_recompute_rows(void **state)
{
    (void)state;
    zb_costs_t c;
    costs_at(&c, P, 2.0);
    zb_plan_t plan;
    zb_plan_opts_t o = {.recompute = ZB_RECOMPUTE_ALL, .solver_time_limit = 0.01};
    zb_err_t e = {0};
    assert_int_equal(zb_plan_compare_opts(P, M, &c, &o, &plan, &e), ZB_OK);
    bool f1r = false, f1 = false;
    for (int i = 0; i < plan.count; i++) {
        if (!strcmp(plan.rows[i].family, "1f1b+R"))
            f1r = plan.rows[i].fits;
        if (!strcmp(plan.rows[i].family, "1f1b"))
            f1 = plan.rows[i].fits;
    }
    assert_true(f1r);  /* 4 x 0.1 kept + one microbatch recomputed: 1.3 <= 2 */
    assert_false(f1);  /* 4 saving F's: 4 > 2 */
    zb_plan_free(&plan);
    zb_costs_free(&c);
}

static int count_r(const zb_schedule_t *s, int r)
{
    int n = 0;
    for (int i = 0; i < s->rank[r].len; i++)
        n += s->rank[r].actions[i].type == ZB_ACT_R;
    return n;
}

/* Pruning keeps an R only where the limit needs it: 1F1B+R on 2 ranks (memory 1, 0, -1, keep
 * 0) at limit 1: rank 0 (F0 F1 R0 BW0 F2 R1 BW1 F3 R2 BW2 R3 BW3) can save only F0 (nothing
 * else is held before R0); the others overlap a rebuilt microbatch and must keep recomputing
 * (the last rank has no R: its F's directly precede their backward). Without a limit every R
 * goes. */
static void test_prune_drops_the_rs_memory_allows(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("1f1b", 2, 4, 0), *s = NULL, *all = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_add_recompute(g, NULL, &s, &e), ZB_OK);
    assert_int_equal(zb_add_recompute(g, NULL, &all, &e), ZB_OK);
    zb_costs_t c;
    tu_costs(&c, 2, 1, 1, 1, 0);
    c.mem_limit = 1.0;
    zb_sim_t before, after;
    assert_int_equal(zb_simulate(s, &c, &before, &e), ZB_OK);
    int dropped = 0;
    assert_int_equal(zb_recompute_prune(s, &c, 1000000, &dropped, &e), ZB_OK);
    assert_int_equal(count_r(s, 1), 0);
    assert_int_equal(count_r(s, 0), 3);
    assert_int_equal(dropped, 1);
    assert_int_equal(zb_validate(s, &c, &e), ZB_OK);
    assert_int_equal(zb_simulate(s, &c, &after, &e), ZB_OK);
    assert_true(after.makespan <= before.makespan); /* dropping work never delays */
    zb_sim_free(&before);
    zb_sim_free(&after);
    c.mem_limit = INFINITY;
    assert_int_equal(zb_recompute_prune(all, &c, 1000000, &dropped, &e), ZB_OK);
    assert_int_equal(dropped, 4);
    assert_true(zb_schedule_equal(all, g)); /* the plain schedule, F's saving again */
    zb_costs_free(&c);
    zb_schedule_free(g);
    zb_schedule_free(s);
    zb_schedule_free(all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_on_a_family),
        cmocka_unit_test(test_auto_mode_needs_auto),
        cmocka_unit_test(test_rechunk_splits_recompute_costs),
        cmocka_unit_test(test_fills_the_pipeline_below_the_plain_minimum),
        cmocka_unit_test(test_goal_rows),
        cmocka_unit_test(test_plan_lists_recompute_rows),
        cmocka_unit_test(test_prune_drops_the_rs_memory_allows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
