/* auto against ZB-H1 and ZB-H2 at their own memory, on a grid of shapes (P 4..16, M from P to
 * 8P) and cost models (unit, 1:2:1, the zero-bubble paper's profiled F:B:W:comm with its memory
 * model, a cheap-W one with comm, and costs that differ per stage): for each family that runs on
 * the shape, auto given that family's peak as its limit must return a valid schedule within it
 * whose bubble rate is at most the family's. */
#include "schedule_testutil.h"

#include "schedule/auto_heuristic.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    const char *name;
    double f, b, w, c;  /* per stage */
    bool paper_memory;  /* m_f = 34h + 5as, m_w = -32h (h = 2304, a = 24, s = 1024); else 1,0,-1 */
    bool per_stage;     /* stage s's times scaled by 1 + 0.15 (s mod 3) */
} model_t;

static const model_t models[] = {
    {"unit", 1, 1, 1, 0, false, false},
    {"1:2:1", 1, 2, 1, 0, false, false},
    {"paper", 18522, 18086, 9337, 601, true, false},
    {"cheap W", 1, 1.2, 0.3, 0.05, true, false},
    {"per stage", 1, 1.1, 0.6, 0.02, false, true},
};

static void make_costs(zb_costs_t *c, int P, const model_t *m)
{
    const double mf = 34.0 * 2304 + 5.0 * 24 * 1024, mw = -32.0 * 2304;
    zb_err_t e = {0};
    int st = m->paper_memory
                 ? zb_costs_init_uniform(c, P, m->f, m->b, m->w, m->c, mf, -(mf + mw), mw, &e)
                 : zb_costs_init_uniform(c, P, m->f, m->b, m->w, m->c, 1, 0, -1, &e);
    assert_int_equal(st, ZB_OK);
    if (m->per_stage)
        for (int s = 0; s < P; s++) {
            const double k = 1 + 0.15 * (s % 3);
            c->t_f[s] *= k;
            c->t_b[s] *= k;
            c->t_w[s] *= k;
        }
}

/* Bubble rate and max peak of s under c (validated). */
static double rate_of(const zb_schedule_t *s, const zb_costs_t *c, double *peak)
{
    zb_err_t e = {0};
    if (zb_validate(s, c, &e) != ZB_OK)
        fail_msg("%s: invalid: %s", s->name, e.msg);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, c, &sim, &e), ZB_OK);
    double r = sim.bubble_rate;
    *peak = 0;
    for (int k = 0; k < s->ranks; k++)
        *peak = fmax(*peak, sim.peak_mem[k]);
    zb_sim_free(&sim);
    return r;
}

static void check_shape(int P, int M, const model_t *m, const char *family)
{
    zb_costs_t c;
    make_costs(&c, P, m);
    zb_gen_params_t fp = {.ranks = P, .microbatches = M, .chunks = 1, .costs = &c};
    zb_schedule_t *fs = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate(family, &fp, &fs, &e), ZB_OK);
    double fpeak, frate = rate_of(fs, &c, &fpeak);
    zb_schedule_free(fs);

    c.mem_limit = fpeak;
    zb_gen_params_t ap = {.ranks = P, .microbatches = M, .chunks = 1, .costs = &c};
    zb_schedule_t *as = NULL;
    if (zb_generate("auto", &ap, &as, &e) != ZB_OK)
        fail_msg("auto at %s's memory, P=%d M=%d %s: %s", family, P, M, m->name, e.msg);
    double apeak, arate = rate_of(as, &c, &apeak);
    zb_schedule_free(as);
    if (arate > frate + 1e-9 || apeak > fpeak * (1 + 1e-9))
        fail_msg("P=%d M=%d %s: auto %.5f (peak %g) vs %s %.5f (peak %g); %s", P, M, m->name,
                 arate, apeak, family, frate, fpeak, ap.note);
    zb_costs_free(&c);
}

static void grid(const char *family)
{
    const int Ps[] = {4, 5, 8, 12, 16};
    for (size_t i = 0; i < sizeof Ps / sizeof Ps[0]; i++) {
        const int P = Ps[i];
        const int Ms[] = {P, 2 * P, 3 * P, 8 * P};
        for (int k = 0; k < 4; k++)
            for (size_t j = 0; j < sizeof models / sizeof models[0]; j++)
                check_shape(P, Ms[k], &models[j], family);
    }
}

static void test_auto_at_zbh1_memory(void **state)
{
    (void)state;
    grid("zb-h1");
}

static void test_auto_at_zbh2_memory(void **state)
{
    (void)state;
    grid("zb-h2");
}

/* The paper's heuristic times its own order as it builds it; auto trusts those figures to pick
 * a variant without simulating all of them: they must be the simulator's. */
static void test_heuristic_times_are_the_simulators(void **state)
{
    (void)state;
    for (size_t j = 0; j < sizeof models / sizeof models[0]; j++)
        for (int P = 3; P <= 9; P += 3)
            for (int M = P; M <= 4 * P; M += P + 1) {
                zb_costs_t c;
                make_costs(&c, P, &models[j]);
                c.mem_limit = 2 * P * c.m_f[0];
                for (int k = 0; k < ZB_HEURISTIC_VARIANTS; k++) {
                    zb_schedule_t *s = NULL;
                    zb_err_t e = {0};
                    double span, mk;
                    if (zb_zb_heuristic(P, M, &c, k, &s, &span, &mk, &e) != ZB_OK)
                        continue;
                    assert_int_equal(zb_validate(s, &c, &e), ZB_OK);
                    zb_sim_t sim;
                    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
                    assert_close(span, sim.span_max);
                    assert_close(mk, sim.makespan);
                    zb_sim_free(&sim);
                    zb_schedule_free(s);
                }
                zb_costs_free(&c);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_at_zbh1_memory),
        cmocka_unit_test(test_auto_at_zbh2_memory),
        cmocka_unit_test(test_heuristic_times_are_the_simulators),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
