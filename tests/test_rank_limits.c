/* Per-rank memory limits in the cost model: the validator checks each rank against its own,
 * auto (greedy, the paper's heuristic, the families) plans within each, clones and rechunks
 * keep them, and dropping them restores the scalar limit. */
#include "schedule_testutil.h"

#include <stdio.h>
#include <string.h>

#include "zbpp/plan.h"

/* 1F1B's peaks at F +1, B 0, W -1 are P - r on rank r. */
static void test_validate_per_rank(void **state)
{
    (void)state;
    const int P = 4, M = 8;
    zb_schedule_t *s = tu_gen("1f1b", P, M, 1);
    zb_costs_t c;
    tu_costs(&c, P, 1, 1, 1, 0);
    zb_err_t e = {0};
    double fit[4] = {4, 3, 2, 1}, tight[4] = {4, 3, 1.5, 1};
    assert_int_equal(zb_costs_set_rank_limits(&c, P, fit, &e), ZB_OK);
    assert_int_equal(zb_validate(s, &c, &e), ZB_OK);
    c.mem_limit = 1; /* overridden by the per-rank limits */
    assert_int_equal(zb_validate(s, &c, &e), ZB_OK);
    assert_int_equal(zb_costs_set_rank_limits(&c, P, tight, &e), ZB_OK);
    assert_int_equal(zb_validate(s, &c, &e), ZB_EMEMLIMIT);
    assert_non_null(strstr(e.msg, "rank 2"));
    /* a clone keeps them */
    zb_costs_t d;
    assert_int_equal(zb_costs_clone(&d, &c, &e), ZB_OK);
    assert_int_equal(zb_validate(s, &d, &e), ZB_EMEMLIMIT);
    zb_costs_free(&d);
    /* dropped: the scalar holds again (1 < rank 0's 4) */
    assert_int_equal(zb_costs_set_rank_limits(&c, 0, NULL, &e), ZB_OK);
    assert_int_equal(zb_validate(s, &c, &e), ZB_EMEMLIMIT);
    assert_non_null(strstr(e.msg, "rank 0"));
    /* limits for another number of ranks */
    assert_int_equal(zb_costs_set_rank_limits(&c, 3, fit, &e), ZB_OK);
    assert_int_equal(zb_validate(s, &c, &e), ZB_EINVAL);
    double nan_limit[4] = {4, NAN, 2, 1};
    assert_int_equal(zb_costs_set_rank_limits(&c, P, nan_limit, &e), ZB_EINVAL);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* auto under per-rank limits: valid, each rank within its own, and its bubble at most that of
 * auto under the scalar limit equal to the tightest rank's (the per-rank limits only loosen). */
static void test_auto_per_rank(void **state)
{
    (void)state;
    const double costs[][4] = {{1, 1, 1, 0}, {1, 2, 1, 0.05}, {1, 1.2, 0.4, 0.02}};
    for (int P = 4; P <= 8; P += 4)
        for (size_t k = 0; k < sizeof costs / sizeof costs[0]; k++)
            for (int mult = 1; mult <= 3; mult += 2) {
                const int M = mult * P;
                zb_costs_t c;
                tu_costs(&c, P, costs[k][0], costs[k][1], costs[k][2], costs[k][3]);
                double lim[8];
                for (int r = 0; r < P; r++) /* later ranks get less, as 1F1B needs */
                    lim[r] = 1.5 * P - r;
                zb_err_t e = {0};
                assert_int_equal(zb_costs_set_rank_limits(&c, P, lim, &e), ZB_OK);
                zb_gen_params_t gp = {.ranks = P, .microbatches = M, .chunks = 1, .costs = &c};
                zb_schedule_t *s = NULL;
                if (zb_generate("auto", &gp, &s, &e) != ZB_OK)
                    fail_msg("auto P=%d M=%d: %s", P, M, e.msg);
                assert_int_equal(zb_validate(s, &c, &e), ZB_OK);
                double peaks[8];
                zb_sim_t sim;
                assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
                for (int r = 0; r < P; r++) {
                    peaks[r] = sim.peak_mem[r];
                    assert_true(peaks[r] <= lim[r] + 1e-9);
                }
                const double per_rank = sim.bubble_rate;
                zb_sim_free(&sim);
                zb_schedule_free(s);

                zb_costs_t flat;
                assert_int_equal(zb_costs_clone(&flat, &c, &e), ZB_OK);
                assert_int_equal(zb_costs_set_rank_limits(&flat, 0, NULL, &e), ZB_OK);
                flat.mem_limit = lim[P - 1];
                gp.costs = &flat;
                if (zb_generate("auto", &gp, &s, &e) == ZB_OK) {
                    assert_int_equal(zb_simulate(s, &flat, &sim, &e), ZB_OK);
                    if (per_rank > sim.bubble_rate + 1e-9)
                        fail_msg("P=%d M=%d costs %zu: per-rank %.4f > flat %.4f", P, M, k,
                                 per_rank, sim.bubble_rate);
                    zb_sim_free(&sim);
                    zb_schedule_free(s);
                }
                zb_costs_free(&flat);
                zb_costs_free(&c);
            }
}

/* Rechunking (auto's any-placement search) keeps the per-rank limits. */
static void test_rechunk_keeps_limits(void **state)
{
    (void)state;
    zb_costs_t c, d;
    tu_costs(&c, 4, 1, 1, 1, 0);
    double lim[4] = {5, 4, 3, 2};
    zb_err_t e = {0};
    assert_int_equal(zb_costs_set_rank_limits(&c, 4, lim, &e), ZB_OK);
    assert_int_equal(zb_costs_rechunk(&c, 4, 2, ZB_PLACE_V, &d, &e), ZB_OK);
    for (int r = 0; r < 4; r++)
        assert_true(zb_costs_limit(&d, r) == lim[r]);
    assert_true(zb_costs_limit_max(&d, 4) == 5);
    zb_costs_free(&d);
    zb_costs_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_per_rank),
        cmocka_unit_test(test_auto_per_rank),
        cmocka_unit_test(test_rechunk_keeps_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
