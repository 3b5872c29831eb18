/* auto: the memory-aware search. Every property is checked with the validator and simulator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "schedule/auto_greedy.h"
#include "zbpp/plan.h"
#include "zbpp/schedule.h"

typedef struct {
    double rate, span, makespan, peak;
} res_t;

static void costs(zb_costs_t *c, int S, double f, double b, double w, double comm, double mf,
                  double mb, double mw, double limit)
{
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(c, S, f, b, w, comm, mf, mb, mw, &e), ZB_OK);
    c->mem_limit = limit;
}

/* Generate `fam` with costs c (v=1 unless the family says otherwise); check validity (memory
 * limit included) and simulate. Returns false if the family does not apply / fit. */
static bool eval(const char *fam, int P, int M, const zb_costs_t *c, res_t *r, char *note)
{
    zb_gen_params_t p = {.ranks = P, .microbatches = M, .chunks = 1, .costs = c};
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    if (zb_generate(fam, &p, &s, &e) != ZB_OK)
        return false;
    if (note)
        snprintf(note, 256, "%s", p.note);
    bool ok = zb_validate(s, c, &e) == ZB_OK;
    if (ok) {
        zb_sim_t sim;
        assert_int_equal(zb_simulate(s, c, &sim, &e), ZB_OK);
        r->rate = sim.bubble_rate;
        r->span = sim.span_max;
        r->makespan = sim.makespan;
        r->peak = 0;
        for (int k = 0; k < P; k++)
            r->peak = fmax(r->peak, sim.peak_mem[k]);
        zb_sim_free(&sim);
    }
    zb_schedule_free(s);
    return ok;
}

/* F = B = W, c = 0, limit 2P M_F: zero bubble whenever M >= 2P. */
static void test_zero_bubble_at_2p(void **state)
{
    (void)state;
    for (int P = 2; P <= 6; P += 2)
        for (int M = 2 * P; M <= 3 * P; M += P) {
            zb_costs_t c;
            costs(&c, P, 1, 1, 1, 0, 1, 0, -1, 2.0 * P);
            res_t r = {0};
            assert_true(eval("auto", P, M, &c, &r, NULL));
            assert_true(r.rate <= 1e-9);
            assert_true(r.peak <= 2.0 * P + 1e-9);
            zb_costs_free(&c);
        }
}

/* limit P M_F: at most ZB-H1's bubble, for plain memory and when B frees most of it. */
static void test_at_most_zbh1_at_p(void **state)
{
    (void)state;
    const double mems[2][3] = {{1, 0, -1}, {1, -0.8, -0.2}};
    for (int k = 0; k < 2; k++)
        for (int P = 2; P <= 8; P *= 2)
            for (int M = 2 * P; M <= 4 * P; M += 2 * P) {
                zb_costs_t c;
                costs(&c, P, 1, 1, 1, 0, mems[k][0], mems[k][1], mems[k][2], P);
                res_t a = {0}, h = {0};
                assert_true(eval("auto", P, M, &c, &a, NULL));
                assert_true(eval("zb-h1", P, M, &c, &h, NULL));
                assert_true(a.rate <= h.rate + 1e-9);
                assert_true(a.peak <= P + 1e-9);
                zb_costs_free(&c);
            }
}

/* Realistic profiles (B ~ F, W 0.5-0.7 F, comm 3-8% of F, B releasing half of the activation):
 * bubble under 3% at 2P M_F. */
static void test_realistic_near_zero(void **state)
{
    (void)state;
    const double prof[3][4] = {{1, 1, 0.6, 0.05}, {1, 1.1, 0.5, 0.08}, {1, 0.9, 0.7, 0.03}};
    const int sizes[3][2] = {{4, 32}, {8, 64}, {16, 64}};
    for (int k = 0; k < 3; k++)
        for (int z = 0; z < 3; z++) {
            int P = sizes[z][0], M = sizes[z][1];
            zb_costs_t c;
            costs(&c, P, prof[k][0], prof[k][1], prof[k][2], prof[k][3], 1, -0.5, -0.5, 2.0 * P);
            res_t r = {0};
            assert_true(eval("auto", P, M, &c, &r, NULL));
            if (r.rate >= 0.03)
                fprintf(stderr, "profile %d P=%d M=%d: bubble %.4f\n", k, P, M, r.rate);
            assert_true(r.rate < 0.03);
            zb_costs_free(&c);
        }
}

/* Never worse (max span, the judge's first key) than a handcrafted family that fits. */
static void test_never_worse_than_families(void **state)
{
    (void)state;
    const double limits[3] = {3, 4, 7};
    size_t n;
    const zb_generator_info_t *fam = zb_generators(&n);
    for (int l = 0; l < 3; l++) {
        zb_costs_t c;
        costs(&c, 4, 1, 1.2, 0.7, 0.05, 1, -0.3, -0.7, limits[l]);
        res_t a = {0};
        assert_true(eval("auto", 4, 12, &c, &a, NULL));
        for (size_t i = 0; i < n; i++) {
            if (!strcmp(fam[i].name, "auto") || !strcmp(fam[i].name, "optimal"))
                continue;
            res_t h = {0};
            if (eval(fam[i].name, 4, 12, &c, &h, NULL))
                assert_true(a.span <= h.span + 1e-9);
        }
        zb_costs_free(&c);
    }
}

static void test_limit_below_minimum(void **state)
{
    (void)state;
    zb_costs_t c;
    costs(&c, 4, 1, 1, 1, 0, 1, 0, -1, 0.9);
    zb_gen_params_t p = {.ranks = 4, .microbatches = 8, .costs = &c};
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_EMEMLIMIT);
    assert_null(s);
    assert_non_null(strstr(e.msg, "memory limit 0.9 is below the minimum 1"));
    /* exactly the minimum works: one microbatch at a time */
    c.mem_limit = 1;
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_OK);
    assert_int_equal(zb_validate(s, &c, &e), ZB_OK);
    zb_schedule_free(s);
    /* B that allocates raises the minimum: F 1, B +0.5, W -1.5 needs 1.5 */
    zb_costs_free(&c);
    costs(&c, 4, 1, 1, 1, 0, 1, 0.5, -1.5, 1.4);
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_EMEMLIMIT);
    assert_non_null(strstr(e.msg, "minimum 1.5"));
    assert_true(fabs(zb_min_memory_needed(4, 1, ZB_PLACE_LOOP, &c) - 1.5) < 1e-12);
    zb_costs_free(&c);
}

static void test_nonsense_costs(void **state)
{
    (void)state;
    zb_gen_params_t p = {.ranks = 4, .microbatches = 8};
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_EINVAL); /* no costs */
    zb_costs_t c;
    costs(&c, 4, 1, 1, 1, 0, 1, 0, -1, 8);
    p.costs = &c;
    c.t_b[2] = NAN;
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "stage 2"));
    c.t_b[2] = -1;
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_EINVAL);
    c.t_b[2] = 1;
    c.m_w[1] = -0.5; /* 1 + 0 - 0.5 != 0 */
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "sum to 0"));
    assert_null(s);
    zb_costs_free(&c);
}

/* --any-placement: with 2P chunk units available the V chunking wins at P M_F and auto says so;
 * the schedule validates against the re-chunked costs. */
static void test_any_placement(void **state)
{
    (void)state;
    zb_costs_t c;
    costs(&c, 4, 1, 1, 1, 0, 1, 0, -1, 4);
    zb_gen_params_t p = {.ranks = 4, .microbatches = 8, .chunks = 1, .costs = &c,
                         .any_placement = true};
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_OK);
    assert_int_equal(s->chunks, 2);
    assert_non_null(strstr(p.note, "2 chunks per rank"));
    zb_costs_t split;
    assert_int_equal(zb_costs_rechunk(&c, 4, s->chunks, s->placement, &split, &e), ZB_OK);
    assert_int_equal(zb_validate(s, &split, &e), ZB_OK);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, &split, &sim, &e), ZB_OK);
    res_t one = {0};
    assert_true(eval("auto", 4, 8, &c, &one, NULL));
    assert_true(sim.span_max < one.span - 1e-9); /* V beats every one-chunk schedule here */
    zb_sim_free(&sim);
    zb_costs_free(&split);
    zb_schedule_free(s);
    zb_costs_free(&c);
}

/* Local improvement keeps validity and never makes (span, makespan) worse; on 1F1B with each
 * fused backward split into B then W it finds the ZB-H1 idea: W's move out of the way of B's. */
static void test_local_improvement(void **state)
{
    (void)state;
    zb_costs_t c;
    costs(&c, 4, 1, 1, 1, 0, 1, 0, -1, 4); /* 1F1B's own peak: every move must keep it */
    zb_gen_params_t p = {.ranks = 4, .microbatches = 8};
    zb_schedule_t *f = NULL, *s = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate("1f1b", &p, &f, &e), ZB_OK);
    s = zb_schedule_new("split", 4, 1, ZB_PLACE_LOOP, 8);
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < f->rank[r].len; i++) {
            zb_action_t a = f->rank[r].actions[i];
            if (a.type == ZB_ACT_BW) {
                a.type = ZB_ACT_B;
                assert_int_equal(zb_schedule_push(s, r, a), ZB_OK);
                a.type = ZB_ACT_W;
            }
            assert_int_equal(zb_schedule_push(s, r, a), ZB_OK);
        }
    zb_schedule_free(f);
    zb_sim_t a, b;
    assert_int_equal(zb_simulate(s, &c, &a, &e), ZB_OK);
    double mk;
    assert_int_equal(zb_improve_local(&s, &c, 2000, &mk, &e), ZB_OK);
    assert_int_equal(zb_validate(s, &c, &e), ZB_OK); /* memory limit 4 included */
    assert_int_equal(zb_simulate(s, &c, &b, &e), ZB_OK);
    assert_true(b.span_max < a.span_max - 1e-9);
    assert_true(b.makespan <= a.makespan + 1e-9);
    assert_true(fabs(mk - b.makespan) < 1e-9);
    zb_sim_free(&a);
    zb_sim_free(&b);
    zb_schedule_free(s);
    zb_costs_free(&c);
}

/* The minimal-memory schedule is valid and its peak is exactly the stated minimum. */
static void test_min_memory_schedule(void **state)
{
    (void)state;
    zb_costs_t c;
    costs(&c, 8, 1, 1, 1, 0, 1, 0.25, -1.25, INFINITY);
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_min_memory_schedule("m", 4, 2, ZB_PLACE_V, 5, &s, &e), ZB_OK);
    assert_int_equal(zb_validate(s, &c, &e), ZB_OK);
    double y = zb_min_memory_needed(4, 2, ZB_PLACE_V, &c);
    assert_true(fabs(zb_schedule_peak_memory(s, &c, NULL) - y) < 1e-12);
    assert_true(fabs(y - 2.25) < 1e-12); /* two chunk F's, then B +0.25 */
    zb_schedule_free(s);
    zb_costs_free(&c);
}

/* The greedy with a memory cap never exceeds it and never deadlocks (banker's check), over a
 * grid of caps, placements and settings. */
static void test_greedy_cap_grid(void **state)
{
    (void)state;
    for (int pl = 0; pl < 2; pl++)
        for (int P = 2; P <= 5; P++) {
            int v = 2;
            zb_costs_t c;
            costs(&c, v * P, 1, 1.5, 0.5, 0.1, 1, -0.3, -0.7, INFINITY);
            double y = zb_min_memory_needed(P, v, (zb_placement_t)pl, &c);
            for (double cap = y; cap <= 2.5 * v * P; cap += 0.5) {
                for (int wm = 0; wm < 3; wm++) {
                    zb_greedy_opts_t o = zb_greedy_defaults();
                    o.mem_cap = cap;
                    o.w_mode = (zb_wmode_t)wm;
                    zb_schedule_t *s = NULL;
                    zb_err_t e = {0};
                    assert_int_equal(zb_greedy_build("g", P, v, (zb_placement_t)pl, 3 * P, &c,
                                                     &o, &s, NULL, &e),
                                     ZB_OK);
                    c.mem_limit = cap;
                    assert_int_equal(zb_validate(s, &c, &e), ZB_OK);
                    c.mem_limit = INFINITY;
                    zb_schedule_free(s);
                }
            }
            zb_costs_free(&c);
        }
}

/* opts.b_gap (a folded offload's copies): a B starts no earlier than its F's end plus the gap,
 * and the greedy fills the wait with other work. One rank, one stage, F = B = W = 1. */
static void test_greedy_b_gap(void **state)
{
    (void)state;
    zb_costs_t c;
    costs(&c, 1, 1, 1, 1, 0, 1, -0.5, -0.5, INFINITY);
    const double gap = 10;
    for (int with_gap = 0; with_gap < 2; with_gap++) {
        zb_greedy_opts_t o = zb_greedy_defaults();
        o.b_gap = with_gap ? &gap : NULL;
        zb_schedule_t *s = NULL;
        double mk = 0;
        zb_err_t e = {0};
        assert_int_equal(zb_greedy_build("g", 1, 1, ZB_PLACE_LOOP, 1, &c, &o, &s, &mk, &e), ZB_OK);
        assert_true(fabs(mk - (with_gap ? 13 : 3)) < 1e-12); /* F, the gap, B, W */
        zb_schedule_free(s);
        /* two microbatches: the second F runs in the gap, before the first B */
        assert_int_equal(zb_greedy_build("g", 1, 1, ZB_PLACE_LOOP, 2, &c, &o, &s, &mk, &e), ZB_OK);
        assert_int_equal(zb_validate(s, &c, &e), ZB_OK);
        const zb_action_t *second = &s->rank[0].actions[1];
        assert_int_equal(second->type, with_gap ? ZB_ACT_F : ZB_ACT_B);
        assert_int_equal(second->mb, with_gap ? 1 : 0);
        zb_schedule_free(s);
    }
    zb_costs_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_bubble_at_2p),
        cmocka_unit_test(test_at_most_zbh1_at_p),
        cmocka_unit_test(test_realistic_near_zero),
        cmocka_unit_test(test_never_worse_than_families),
        cmocka_unit_test(test_limit_below_minimum),
        cmocka_unit_test(test_nonsense_costs),
        cmocka_unit_test(test_any_placement),
        cmocka_unit_test(test_local_improvement),
        cmocka_unit_test(test_min_memory_schedule),
        cmocka_unit_test(test_greedy_cap_grid),
        cmocka_unit_test(test_greedy_b_gap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
