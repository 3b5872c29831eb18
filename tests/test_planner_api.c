/* The flat planner facade (planner_api.h), the SVG options and overlay (svg.h) and the metrics
 * reader: round trips through the facade, error paths, and no leaks (run under ASan). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "zbpp/planner_api.h"
#include "zbpp/svg.h"
#include "zbpp/version.h"

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_version(void **state)
{
    (void)state;
    assert_string_equal(zb_version(), ZB_VERSION_STRING);
    assert_true(ZB_VERSION >= ZB_VERSION_AT(0, 1, 0));
}

static void test_generate_simulate_write(void **state)
{
    (void)state;
    zb_err_t err = {0};
    zb_costs_t *c = NULL;
    assert_int_equal(zb_api_costs_new(4, 1, 1, 1, 0, 1, 0, -1, INFINITY, &c, &err), ZB_OK);
    zb_schedule_t *s = NULL;
    char note[256];
    assert_int_equal(zb_api_generate("zb-h1", 4, 8, 0, c, 0, 0, &s, note, sizeof note, &err),
                     ZB_OK);
    int shape[5];
    zb_api_schedule_shape(s, shape);
    assert_int_equal(shape[0], 4);
    assert_int_equal(shape[1], 1);
    assert_int_equal(shape[3], 8);
    assert_int_equal(zb_api_schedule_len(s, 0), 24);
    assert_int_equal(zb_api_schedule_len(s, 4), -1);
    zb_sim_t *sim = NULL;
    assert_int_equal(zb_api_simulate(s, c, &sim, &err), ZB_OK);
    double tot[4];
    zb_api_sim_totals(sim, tot);
    assert_true(fabs(tot[0] - 27) < 1e-9); /* 3M + (P-1)(F+B-W) */

    /* every format comes back as a NUL-terminated string of the stated length */
    for (int f = ZB_API_CSV; f <= ZB_API_ASCII; f++) {
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(zb_api_write(f, s, c, sim, "t", f == ZB_API_TRACE ? 1000 : 0, &text,
                                      &len, &err), ZB_OK);
        assert_non_null(text);
        assert_int_equal(strlen(text), len);
        assert_true(len > 10);
        if (f == ZB_API_CSV)
            assert_int_equal(count(text, "\n"), 4);
        if (f == ZB_API_SVG_ARROWS) /* 3 boundaries x 8 mb x 2 directions */
            assert_int_equal(count(text, "<line x1") - count(text, "stroke=\"black\"/>"), 48);
        zb_api_text_free(text);
    }

    /* measured times put in: totals recomputed */
    int n = zb_api_schedule_len(s, 0);
    double *st = calloc((size_t)n, sizeof *st), *en = calloc((size_t)n, sizeof *en);
    assert_int_equal(zb_api_sim_times(sim, 0, st, en, &err), ZB_OK);
    for (int i = 0; i < n; i++) {
        st[i] *= 2;
        en[i] *= 2;
    }
    assert_int_equal(zb_api_sim_set_times(sim, 0, st, en, &err), ZB_OK);
    zb_api_sim_totals(sim, tot);
    assert_true(tot[0] > 27);
    en[0] = st[0] - 1;
    assert_int_equal(zb_api_sim_set_times(sim, 0, st, en, &err), ZB_ENUMERIC);
    free(st);
    free(en);

    zb_api_sim_free(sim);
    zb_schedule_free(s);
    zb_api_costs_free(c);
}

static void test_errors(void **state)
{
    (void)state;
    zb_err_t err = {0};
    zb_costs_t *c = NULL;
    assert_int_equal(zb_api_costs_new(2, 1, 1, 1, 0, 1, 1, 1, INFINITY, &c, &err), ZB_EINVAL);
    assert_null(c);
    assert_int_equal(zb_api_costs_new(2, 1, 1, 1, 0, 1, 0, -1, NAN, &c, &err), ZB_EINVAL);
    assert_int_equal(zb_api_costs_new(2, 1, 1, 1, 0, 1, 0, -1, INFINITY, &c, &err), ZB_OK);
    assert_int_equal(zb_api_costs_set_stage(c, 2, 1, 1, 1, 0, 1, 0, -1, &err), ZB_EINVAL);
    assert_int_equal(zb_api_costs_set_stage(c, 1, -1, 1, 1, 0, 1, 0, -1, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "stage 1"));
    zb_schedule_t *s = NULL;
    assert_int_equal(zb_api_generate("nope", 2, 2, 0, c, 0, 0, &s, NULL, 0, &err), ZB_EINVAL);
    assert_null(s);
    assert_int_equal(zb_api_write(99, NULL, NULL, NULL, NULL, 0, &(char *){NULL}, NULL, &err),
                     ZB_EINVAL);
    s = zb_schedule_new("x", 2, 1, ZB_PLACE_LOOP, 1);
    assert_int_equal(zb_api_schedule_push(s, 0, ZB_ACT_COUNT, 0, 0, &err), ZB_EINVAL);
    assert_int_equal(zb_api_schedule_push(s, 5, ZB_ACT_F, 0, 0, &err), ZB_EINVAL);
    zb_schedule_free(s);
    zb_api_costs_free(c);
    for (int i = 0; zb_api_family(i); i++)
        assert_true(strlen(zb_api_family(i)) > 0);
    assert_null(zb_api_family(-1));
}

static void test_plan_rows(void **state)
{
    (void)state;
    zb_err_t err = {0};
    zb_costs_t *c = NULL;
    assert_int_equal(zb_api_costs_new(4, 1, 1, 1, 0.1, 1, 0, -1, 5, &c, &err), ZB_OK);
    zb_plan_t *plan = NULL;
    assert_int_equal(zb_api_plan(4, 8, c, 0.5, &plan, &err), ZB_OK);
    int n = zb_api_plan_count(plan);
    assert_true(n > 5);
    zb_api_plan_row_t row, prev = {0};
    for (int i = 0; i < n; i++) {
        assert_int_equal(zb_api_plan_row(plan, i, &row, &err), ZB_OK);
        if (row.fits) {
            assert_true(row.peak_max <= 5 + 1e-9);
            assert_string_equal(row.reason, "");
            if (i)
                assert_true(row.makespan >= prev.makespan - 1e-12);
        } else {
            assert_true(strlen(row.reason) > 0);
        }
        prev = row;
    }
    assert_int_equal(zb_api_plan_row(plan, n, &row, &err), ZB_EINVAL);
    zb_api_plan_free(plan);
    zb_api_costs_free(c);
}

static void test_overlay_checks(void **state)
{
    (void)state;
    zb_err_t err = {0};
    zb_costs_t *c2 = NULL, *c3 = NULL;
    zb_schedule_t *s2 = NULL, *s3 = NULL;
    zb_sim_t *a = NULL, *b = NULL;
    assert_int_equal(zb_api_costs_new(2, 1, 1, 1, 0, 1, 0, -1, INFINITY, &c2, &err), ZB_OK);
    assert_int_equal(zb_api_costs_new(3, 1, 1, 1, 0, 1, 0, -1, INFINITY, &c3, &err), ZB_OK);
    assert_int_equal(zb_api_generate("1f1b", 2, 3, 1, c2, 0, 0, &s2, NULL, 0, &err), ZB_OK);
    assert_int_equal(zb_api_generate("1f1b", 3, 3, 1, c3, 0, 0, &s3, NULL, 0, &err), ZB_OK);
    assert_int_equal(zb_api_simulate(s2, c2, &a, &err), ZB_OK);
    assert_int_equal(zb_api_simulate(s3, c3, &b, &err), ZB_OK);
    char *text = NULL;
    assert_int_equal(zb_api_write_overlay(a, b, NULL, "s", &text, NULL, &err), ZB_EINVAL);
    assert_null(text);
    assert_int_equal(zb_api_write_overlay(a, a, "same", "s", &text, NULL, &err), ZB_OK);
    assert_non_null(strstr(text, "(1.00x)"));
    assert_non_null(strstr(text, "time (s)"));
    assert_non_null(strstr(text, "rank 1 measured"));
    zb_api_text_free(text);
    /* predicted_scale: the prediction shown 2x longer */
    FILE *f = tmpfile();
    zb_svg_opts_t o = {.predicted_scale = 2};
    assert_int_equal(zb_svg_write_overlay(a, a, &o, f, &err), ZB_OK);
    o.predicted_scale = -1;
    assert_int_equal(zb_svg_write_overlay(a, a, &o, f, &err), ZB_EINVAL);
    fclose(f);
    zb_api_sim_free(a);
    zb_api_sim_free(b);
    zb_schedule_free(s2);
    zb_schedule_free(s3);
    zb_api_costs_free(c2);
    zb_api_costs_free(c3);
}

static void test_metrics_parse(void **state)
{
    (void)state;
    zb_err_t err = {0};
    zb_metrics_t m;
    const char *ok = "{\"step\":0,\"loss\":5.5,\"lr\":1e-3,\"grad_norm\":null,\"x\":{\"a\":[1,\"}\"]},"
                     "\"tokens_per_s\":100.0,\"skipped\":false}\n"
                     "\n"
                     "{\"step\":1,\"loss\":null,\"lr\":2e-3}\r\n"
                     "{\"step\":1,\"val_loss\":5.0}";
    assert_int_equal(zb_metrics_parse(ok, strlen(ok), &m, &err), ZB_OK);
    assert_int_equal(m.count, 3);
    assert_true(m.has_loss && m.has_val_loss && m.has_lr && m.has_tokens_per_s);
    assert_true(m.loss[0] == 5.5 && isnan(m.loss[1]) && isnan(m.loss[2]));
    assert_true(m.val_loss[2] == 5.0 && m.step[2] == 1 && m.lr[1] == 2e-3);
    FILE *f = tmpfile();
    assert_int_equal(zb_metrics_svg_write(&m, "a<b", f, &err), ZB_OK);
    long size = ftell(f);
    assert_true(size > 1000);
    fclose(f);
    zb_metrics_free(&m);

    static const struct {
        const char *in, *msg;
    } bad[] = {
        {"{\"step\":0,\"loss\":1}\nxx\n", "line 2: not a JSON object"},
        {"{\"loss\":1}\n", "line 1: no numeric \"step\""},
        {"{\"step\":\"0\",\"loss\":1}\n", "line 1: \"step\" is not a number"},
        {"{\"step\":0,\"loss\":1} x\n", "line 1: junk after the object"},
        {"{\"step\":0,\"loss\":1,\n\"lr\":1}\n", "line 1:"},
        {"{\"step\":0,\"loss\":-}\n", "line 1: bad number"},
        {"{\"step\":0,\"lr\":1}\n", "no record has a loss"},
        {"\n\n", "no records"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        zb_err_clear(&err);
        assert_int_equal(zb_metrics_parse(bad[i].in, strlen(bad[i].in), &m, &err), ZB_EFORMAT);
        if (!strstr(err.msg, bad[i].msg))
            fail_msg("input %zu: '%s' lacks '%s'", i, err.msg, bad[i].msg);
        assert_int_equal(m.count, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_generate_simulate_write),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_plan_rows),
        cmocka_unit_test(test_overlay_checks),
        cmocka_unit_test(test_metrics_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
