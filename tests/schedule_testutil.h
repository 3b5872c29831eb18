/* Helpers shared by the schedule tests (cmocka). Header-only: each test is its own executable. */
#ifndef ZBPP_TESTS_SCHEDULE_TESTUTIL_H
#define ZBPP_TESTS_SCHEDULE_TESTUTIL_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "zbpp/schedule.h"

/* Generate or fail the test with the generator's message. */
static inline zb_schedule_t *tu_gen(const char *family, int P, int M, int v)
{
    zb_gen_params_t gp = {.ranks = P, .microbatches = M, .chunks = v};
    zb_schedule_t *s = NULL;
    zb_err_t e = {0};
    zb_status_t st = zb_generate(family, &gp, &s, &e);
    if (st != ZB_OK)
        fail_msg("%s P=%d M=%d v=%d: %s", family, P, M, v, e.msg);
    return s;
}

/* Uniform costs for a schedule; memory model F +1, B 0, W -1 unless given. */
static inline void tu_costs(zb_costs_t *c, int stages, double f, double b, double w, double comm)
{
    zb_err_t e = {0};
    if (zb_costs_init_uniform(c, stages, f, b, w, comm, 1, 0, -1, &e) != ZB_OK)
        fail_msg("costs: %s", e.msg);
}

static inline zb_action_t tu_act(zb_action_type_t t, int stage, int mb)
{
    return (zb_action_t){.type = (uint8_t)t, .stage = stage, .mb = mb};
}

static inline bool tu_close(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fmax(fabs(a), fabs(b)));
}

#define assert_close(a, b)                                                                    \
    do {                                                                                      \
        double tu_a_ = (a), tu_b_ = (b);                                                      \
        if (!tu_close(tu_a_, tu_b_))                                                          \
            fail_msg("%s = %.12g, expected %s = %.12g", #a, tu_a_, #b, tu_b_);                \
    } while (0)

#endif
