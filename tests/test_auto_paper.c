/* auto against the zero-bubble paper's ZB-2p on the paper's own profiled costs (issue 10's
 * table): F, B, W, comm in microseconds per stage, memory per F = 34h + 5as with s = 1024, per
 * W = -32h, per B the rest; limit 2P·M_F. Bubble rate as the paper defines it (schedule.h).
 * The ZB-2p figures are the paper's, printed with 4 decimals: auto's rate rounded to the same
 * 4 decimals must not exceed them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "zbpp/plan.h"
#include "zbpp/schedule.h"

typedef struct {
    int P, M;
    double f, b, w, c;
    int h, a;
    double zb2p; /* the paper's published bubble rate of ZB-2p */
} paper_row_t;

static const paper_row_t rows[] = {
    {8, 24, 18522, 18086, 9337, 601, 2304, 24, 0.0433},
    {8, 64, 18546, 18097, 9321, 762, 2304, 24, 0.0026},
    {16, 48, 11347, 11248, 8132, 377, 5120, 40, 0.0066},
    {16, 64, 11307, 11254, 8101, 379, 5120, 40, 0.0054},
    {16, 128, 11325, 11308, 8109, 378, 5120, 40, 0.0028},
    /* rows at M = 2P..4P and larger P with the ZB-2p figures of the paper's heuristic, where
     * auto once fell back to zb-h2 (0.0121, 0.0116, 0.0132, 0.0050, 0.0069) */
    {24, 96, 18522, 18086, 9337, 601, 2304, 24, 0.0040},
    {32, 128, 18522, 18086, 9337, 601, 2304, 24, 0.0031},
    {48, 192, 18522, 18086, 9337, 601, 2304, 24, 0.0021},
    {32, 128, 10408, 10204, 7703, 408, 6144, 48, 0.0029},
    {48, 144, 10408, 10204, 7703, 408, 6144, 48, 0.0045},
};

enum { PAPER_TABLE_ROWS = 5 }; /* the first rows: the paper's own table */

static void paper_costs(zb_costs_t *c, const paper_row_t *r, double limit_in_mf)
{
    const double mf = 34.0 * r->h + 5.0 * r->a * 1024, mw = -32.0 * r->h;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(c, r->P, r->f, r->b, r->w, r->c, mf, -(mf + mw), mw,
                                           &e),
                     ZB_OK);
    c->mem_limit = limit_in_mf * mf;
}

/* auto's bubble rate on row r (checked valid within the limit); NAN if it fails. */
static double auto_rate(const paper_row_t *r, double limit_in_mf, bool any_placement,
                        int *chunks)
{
    zb_costs_t c;
    paper_costs(&c, r, limit_in_mf);
    zb_gen_params_t p = {.ranks = r->P, .microbatches = r->M, .chunks = 1, .costs = &c,
                         .any_placement = any_placement};
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate("auto", &p, &s, &e), ZB_OK);
    zb_costs_t sc;
    const zb_costs_t *use = &c;
    if (s->chunks != 1) { /* any_placement may split each rank's work in two */
        assert_int_equal(zb_costs_rechunk(&c, r->P, s->chunks, s->placement, &sc, &e), ZB_OK);
        use = &sc;
    }
    assert_int_equal(zb_validate(s, use, &e), ZB_OK); /* memory limit included */
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, use, &sim, &e), ZB_OK);
    double rate = sim.bubble_rate;
    *chunks = s->chunks;
    zb_sim_free(&sim);
    if (use == &sc)
        zb_costs_free(&sc);
    zb_schedule_free(s);
    zb_costs_free(&c);
    return rate;
}

static void test_at_or_below_zb2p(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int v = 0;
        double rate = auto_rate(&rows[i], 2.0 * rows[i].P, false, &v);
        double shown = round(rate * 1e4) / 1e4;
        if (shown > rows[i].zb2p + 1e-12)
            fprintf(stderr, "P=%d M=%d: auto %.5f > ZB-2p %.4f\n", rows[i].P, rows[i].M, rate,
                    rows[i].zb2p);
        assert_int_equal(v, 1);
        assert_true(shown <= rows[i].zb2p + 1e-12);
    }
}

/* With another chunking allowed (2 chunks per rank, loop or V placement) auto is clearly below
 * ZB-2p on every row: at most half its rate. */
static void test_any_placement_clearly_below(void **state)
{
    (void)state;
    for (size_t i = 0; i < PAPER_TABLE_ROWS; i++) {
        int v = 0;
        double rate = auto_rate(&rows[i], 2.0 * rows[i].P, true, &v);
        if (rate > 0.5 * rows[i].zb2p)
            fprintf(stderr, "P=%d M=%d any placement: auto %.5f vs ZB-2p %.4f\n", rows[i].P,
                    rows[i].M, rate, rows[i].zb2p);
        assert_true(rate <= 0.5 * rows[i].zb2p);
    }
}

/* The same costs at a larger size (our own row, not in the paper): P=32, M=256 at 2P·M_F stays
 * below 1%. */
static void test_larger_below_one_percent(void **state)
{
    (void)state;
    paper_row_t r = rows[4];
    r.P = 32;
    r.M = 256;
    int v = 0;
    assert_true(auto_rate(&r, 2.0 * r.P, false, &v) < 0.01);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_at_or_below_zb2p),
        cmocka_unit_test(test_any_placement_clearly_below),
        cmocka_unit_test(test_larger_below_one_percent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
