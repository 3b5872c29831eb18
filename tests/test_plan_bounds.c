/* zbpp plan's bounds: a time limit on the whole comparison (families not started in time are
 * listed as skipped with that reason), and one size cap for the exact solver shared with
 * `schedule` (issue 16, defects 9 and 11). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "zbpp/plan.h"
#include "zbpp/schedule.h"

static void rank_costs(zb_costs_t *c, int P)
{
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(c, P, 1, 1, 0.6, 0.05, 1, 0, -1, &e), ZB_OK);
    c->mem_limit = 2.0 * P;
}

static const zb_plan_row_t *row_of(const zb_plan_t *pl, const char *family)
{
    for (int i = 0; i < pl->count; i++)
        if (!strcmp(pl->rows[i].family, family))
            return &pl->rows[i];
    fail_msg("no row for %s", family);
    return NULL;
}

/* A limit used up before the first family: every family is listed, none run, each says why. */
static void test_time_limit_skips_with_reason(void **state)
{
    (void)state;
    zb_costs_t c;
    rank_costs(&c, 8);
    zb_plan_opts_t o = {.time_limit = 1e-12};
    zb_plan_t pl;
    zb_err_t e = {0};
    assert_int_equal(zb_plan_compare_opts(8, 16, &c, &o, &pl, &e), ZB_OK);
    size_t nf;
    zb_generators(&nf);
    assert_int_equal(pl.count, (int)nf);
    assert_int_equal(pl.fitting, 0);
    for (int i = 0; i < pl.count; i++) {
        assert_false(pl.rows[i].fits);
        if (!strstr(pl.rows[i].reason, "time limit") && !strstr(pl.rows[i].reason, "does not") &&
            !strstr(pl.rows[i].reason, "too large"))
            fail_msg("%s: reason '%s'", pl.rows[i].family, pl.rows[i].reason);
    }
    assert_non_null(strstr(row_of(&pl, "auto")->reason, "time limit"));
    zb_plan_free(&pl);
    /* no limit: the same call runs the families */
    o.time_limit = 0;
    assert_int_equal(zb_plan_compare_opts(8, 16, &c, &o, &pl, &e), ZB_OK);
    assert_true(pl.fitting > 0);
    assert_true(row_of(&pl, "auto")->fits);
    zb_plan_free(&pl);
    zb_costs_free(&c);
}

/* plan runs the exact solver up to the cap `schedule -s optimal` accepts, and both refuse
 * beyond it naming the same cap. */
static void test_optimal_cap_agrees(void **state)
{
    (void)state;
    const int P = 4, inside = ZB_OPTIMAL_MAX_PM / P, outside = inside + 1;
    zb_costs_t c;
    rank_costs(&c, P);
    zb_plan_opts_t o = {.solver_time_limit = 0.2};
    zb_plan_t pl;
    zb_err_t e = {0};
    /* P*M = 64 > the old plan-only cap of 32: plan must try it */
    assert_int_equal(zb_plan_compare_opts(P, inside, &c, &o, &pl, &e), ZB_OK);
    assert_null(strstr(row_of(&pl, "optimal")->reason, "too large"));
    zb_plan_free(&pl);
    assert_int_equal(zb_plan_compare_opts(P, outside, &c, &o, &pl, &e), ZB_OK);
    const char *why = row_of(&pl, "optimal")->reason;
    assert_non_null(strstr(why, "too large"));
    assert_non_null(strstr(why, "max 64"));
    zb_plan_free(&pl);
    zb_gen_params_t p = {.ranks = P, .microbatches = outside, .costs = &c, .time_limit = 0.2};
    zb_schedule_t *s = NULL;
    zb_status_t st = zb_generate("optimal", &p, &s, &e);
    assert_int_not_equal(st, ZB_OK);
    if (st != ZB_EUNSUPPORTED) /* a build without GLPK says so instead */
        assert_non_null(strstr(e.msg, "max 64"));
    zb_costs_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_limit_skips_with_reason),
        cmocka_unit_test(test_optimal_cap_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
