/* Recompute in the schedule IR: the pass, the validator's rules for R, the simulator's time and
 * memory with R, and R through the CSV dialect and the comm pass. */
#include "schedule_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/schedule_io.h"

static void expect(const zb_schedule_t *s, const zb_costs_t *c, zb_status_t want,
                   const char *needle)
{
    zb_err_t e = {0};
    zb_status_t st = zb_validate(s, c, &e);
    if (st != want)
        fail_msg("validate: status %d (%s), expected %d", st, e.msg, want);
    if (needle && !strstr(e.msg, needle))
        fail_msg("validate: message '%s' lacks '%s'", e.msg, needle);
}

static zb_schedule_t *with_recompute(const zb_schedule_t *in, const bool *which)
{
    zb_schedule_t *o = NULL;
    zb_err_t e = {0};
    if (zb_add_recompute(in, which, &o, &e) != ZB_OK)
        fail_msg("add_recompute: %s", e.msg);
    return o;
}

static int find(const zb_schedule_t *s, int r, zb_action_type_t t, int stage, int mb)
{
    for (int i = 0; i < s->rank[r].len; i++) {
        zb_action_t a = s->rank[r].actions[i];
        if (a.type == t && a.stage == stage && a.mb == mb)
            return i;
    }
    return -1;
}

/* F F F / R B W three times: F (keep 0.25 each) then R adds the other 0.75 just before its B. */
static void test_pass_places_r_and_marks_f(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("gpipe", 1, 3, 0), *s = with_recompute(g, NULL);
    assert_true(zb_schedule_has_recompute(s));
    assert_false(zb_schedule_has_recompute(g));
    for (int m = 0; m < 3; m++) {
        int f = find(s, 0, ZB_ACT_F, 0, m), r = find(s, 0, ZB_ACT_R, 0, m);
        int b = find(s, 0, ZB_ACT_BW, 0, m);
        assert_true(f >= 0 && r > f && b == r + 1);
        assert_int_equal(s->rank[0].actions[f].flags, ZB_ACT_NOSAVE);
    }
    expect(s, NULL, ZB_OK, NULL);
    zb_err_t e = {0};
    zb_schedule_t *again = NULL;
    assert_int_equal(zb_add_recompute(s, NULL, &again, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "already"));

    /* only microbatch 1 chosen: the others keep saving F's and get no R */
    bool which[3] = {false, true, false};
    zb_schedule_t *one = with_recompute(g, which);
    assert_int_equal(find(one, 0, ZB_ACT_R, 0, 0), -1);
    assert_true(find(one, 0, ZB_ACT_R, 0, 1) >= 0);
    assert_int_equal(one->rank[0].actions[find(one, 0, ZB_ACT_F, 0, 0)].flags, 0);
    expect(one, NULL, ZB_OK, NULL);
    zb_schedule_free(one);
    zb_schedule_free(s);
    zb_schedule_free(g);
}

static void test_simulated_memory_and_time(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("gpipe", 1, 3, 0), *s = with_recompute(g, NULL);
    zb_costs_t c;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(&c, 1, 1, 2, 0, 0, 1, 0, -1, &e), ZB_OK);
    assert_int_equal(zb_costs_set_recompute(&c, 0.5, 0.25, &e), ZB_OK);
    zb_sim_t plain, rc;
    assert_int_equal(zb_simulate(g, &c, &plain, &e), ZB_OK);
    assert_int_equal(zb_simulate(s, &c, &rc, &e), ZB_OK);
    assert_close(plain.peak_mem[0], 3);
    assert_close(rc.peak_mem[0], 3 * 0.25 + 0.75); /* three inputs, one rebuilt microbatch */
    assert_close(plain.makespan, 3 * 1 + 3 * 2);
    assert_close(rc.makespan, 3 * 1 + 3 * (0.5 + 2)); /* each R charged t_r */
    assert_close(rc.busy[0], rc.makespan);             /* R is work, not bubble */
    /* the limit that refuses the saving schedule admits the recomputing one */
    c.mem_limit = 2;
    expect(g, &c, ZB_EMEMLIMIT, "limit 2");
    expect(s, &c, ZB_OK, NULL);
    /* default recompute time is F's, default kept memory 0 */
    zb_costs_t d;
    assert_int_equal(zb_costs_init_uniform(&d, 1, 1, 2, 0, 0, 1, 0, -1, &e), ZB_OK);
    zb_sim_t def;
    assert_int_equal(zb_simulate(s, &d, &def, &e), ZB_OK);
    assert_close(def.makespan, 3 * 1 + 3 * (1 + 2));
    assert_close(def.peak_mem[0], 1);
    zb_sim_free(&def);
    zb_costs_free(&d);
    zb_sim_free(&plain);
    zb_sim_free(&rc);
    zb_costs_free(&c);
    zb_schedule_free(s);
    zb_schedule_free(g);
}

/* Two ranks: the R of rank 0 runs while rank 1 works (it waits only for its own F). Each
 * rank's F is followed by its own backward here, so "all" (which == NULL) would add nothing:
 * the pairs are chosen explicitly. */
static void test_recompute_overlaps_the_wait(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("zb-h1", 2, 1, 0);
    zb_schedule_t *none = with_recompute(g, NULL);
    assert_false(zb_schedule_has_recompute(none)); /* adjacent F and B: nothing to gain */
    zb_schedule_free(none);
    const bool both[2] = {true, true};
    zb_schedule_t *s = with_recompute(g, both);
    zb_costs_t c;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(&c, 2, 1, 1, 1, 0, 1, -0.5, -0.5, &e), ZB_OK);
    assert_int_equal(zb_costs_set_recompute(&c, 2, 0.25, &e), ZB_OK);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    /* rank 1: F 1..2, R 2..4, B 4..5, W 5..6; rank 0: F 0..1, R 1..3, B 5..6, W 6..7 */
    int r0 = find(s, 0, ZB_ACT_R, 0, 0), r1 = find(s, 1, ZB_ACT_R, 1, 0);
    assert_close(sim.start[0][r0], 1);
    assert_close(sim.start[1][r1], 2);
    assert_close(sim.makespan, 7);
    assert_close(sim.peak_mem[0], 1);
    assert_close(sim.peak_time[0], 1);
    zb_sim_free(&sim);
    zb_costs_free(&c);

    /* lowered: R lands before the RECV_B, and both forms simulate alike */
    zb_schedule_t *low = NULL, *low_r = NULL;
    assert_int_equal(zb_insert_comms(g, &low, &e), ZB_OK);
    low_r = with_recompute(low, both);
    int r = find(low_r, 0, ZB_ACT_R, 0, 0), rb = find(low_r, 0, ZB_ACT_RECV_B, 0, 0);
    assert_true(r >= 0 && rb == r + 1);
    expect(low_r, NULL, ZB_OK, NULL);
    zb_schedule_t *low2 = NULL;
    assert_int_equal(zb_insert_comms(s, &low2, &e), ZB_OK);
    expect(low2, NULL, ZB_OK, NULL);
    assert_true(zb_schedule_has_recompute(low2));
    zb_schedule_t *back = NULL;
    assert_int_equal(zb_strip_comms(low2, &back, &e), ZB_OK);
    assert_true(zb_schedule_equal(back, s));
    zb_schedule_free(back);
    zb_schedule_free(low2);
    zb_schedule_free(low_r);
    zb_schedule_free(low);
    zb_schedule_free(s);
    zb_schedule_free(g);
}

static void test_validator_rules(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("zb-h1", 3, 4, 0);
    zb_schedule_t *s = with_recompute(g, NULL);
    expect(s, NULL, ZB_OK, NULL);
    int rank = 1, f = find(s, rank, ZB_ACT_F, 1, 2), r = find(s, rank, ZB_ACT_R, 1, 2);
    int b = find(s, rank, ZB_ACT_B, 1, 2);

    zb_schedule_t *x = zb_schedule_clone(s); /* R before its F */
    zb_action_t tmp = x->rank[rank].actions[r];
    memmove(&x->rank[rank].actions[f + 1], &x->rank[rank].actions[f],
            (size_t)(r - f) * sizeof tmp);
    x->rank[rank].actions[f] = tmp;
    expect(x, NULL, ZB_ESCHEDULE, "R(stage 1, mb 2) comes before its F");
    zb_schedule_free(x);

    x = zb_schedule_clone(s); /* R after its B */
    tmp = x->rank[rank].actions[r];
    x->rank[rank].actions[r] = x->rank[rank].actions[b];
    x->rank[rank].actions[b] = tmp;
    expect(x, NULL, ZB_ESCHEDULE, "R(stage 1, mb 2) comes after the backward");
    zb_schedule_free(x);

    x = zb_schedule_clone(s); /* two R's */
    zb_schedule_push(x, rank, tu_act(ZB_ACT_R, 1, 2));
    expect(x, NULL, ZB_ESCHEDULE, "R(stage 1, mb 2) appears more than once");
    zb_schedule_free(x);

    x = zb_schedule_clone(s); /* R without a non-saving F */
    x->rank[rank].actions[f].flags = 0;
    expect(x, NULL, ZB_ESCHEDULE, "F(stage 1, mb 2) has an R but is not marked non-saving");
    zb_schedule_free(x);

    x = zb_schedule_clone(g); /* non-saving F nobody recomputes */
    x->rank[rank].actions[find(x, rank, ZB_ACT_F, 1, 2)].flags = ZB_ACT_NOSAVE;
    expect(x, NULL, ZB_ESCHEDULE, "F(stage 1, mb 2) is non-saving but no R");
    zb_schedule_free(x);

    x = zb_schedule_clone(g); /* the flag on a B */
    x->rank[rank].actions[find(x, rank, ZB_ACT_B, 1, 2)].flags = ZB_ACT_NOSAVE;
    expect(x, NULL, ZB_ESCHEDULE, "B(stage 1, mb 2) carries a flag only an F may carry");
    zb_schedule_free(x);

    /* equal compares flags too */
    x = zb_schedule_clone(s);
    assert_true(zb_schedule_equal(x, s));
    x->rank[rank].actions[f].flags = 0;
    assert_false(zb_schedule_equal(x, s));
    zb_schedule_free(x);
    zb_schedule_free(s);
    zb_schedule_free(g);
}

static void test_costs_recompute_checks(void **state)
{
    (void)state;
    zb_costs_t c, k;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(&c, 2, 1, 1, 1, 0, 1, -0.5, -0.5, &e), ZB_OK);
    assert_int_equal(zb_costs_set_recompute(&c, -1, 0, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "recompute time"));
    assert_int_equal(zb_costs_set_recompute(&c, 1, 2, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "non-saving F"));
    assert_int_equal(zb_costs_set_recompute(&c, 0.7, 0.1, &e), ZB_OK);
    assert_int_equal(zb_costs_clone(&k, &c, &e), ZB_OK);
    assert_close(zb_costs_t_r(&k, 1), 0.7);
    assert_close(zb_costs_m_keep(&k, 1), 0.1);
    k.m_keep[1] = 5; /* more than F keeps */
    assert_int_equal(zb_costs_check(&k, &e), ZB_EINVAL);
    zb_costs_free(&k);
    zb_costs_free(&c);
}

/* R is a zbpp extension of the CSV dialect: written as <stage>R<mb>, read back with the F's
 * marked non-saving, and a bad placement is named by the validator. */
static void test_csv_round_trip(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("zb-v", 2, 4, 0), *s = with_recompute(g, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    zb_err_t e = {0};
    assert_int_equal(zb_csv_write(s, f, &e), ZB_OK);
    fclose(f);
    assert_non_null(strstr(buf, "R0"));
    zb_schedule_t *back = NULL;
    assert_int_equal(zb_csv_read(buf, len, &back, &e), ZB_OK);
    assert_true(zb_schedule_equal(back, s));
    expect(back, NULL, ZB_OK, NULL);
    zb_schedule_free(back);
    free(buf);

    const char *late = "0F0,1F0,1I0,0R0,0I0,0W0,1W0\n"; /* P=1, two stages: R after... fine */
    assert_int_equal(zb_csv_read(late, strlen(late), &back, &e), ZB_OK);
    expect(back, NULL, ZB_OK, NULL);
    zb_schedule_free(back);
    const char *bad = "0F0,1F0,1I0,0I0,0R0,0W0,1W0\n";
    assert_int_equal(zb_csv_read(bad, strlen(bad), &back, &e), ZB_OK);
    expect(back, NULL, ZB_ESCHEDULE, "R(stage 0, mb 0) comes after the backward");
    zb_schedule_free(back);
    zb_schedule_free(s);
    zb_schedule_free(g);
}

static char *written(int which, const zb_sim_t *sim, const zb_schedule_t *s,
                     const zb_costs_t *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    zb_err_t e = {0};
    zb_status_t st = which == 0   ? zb_svg_write(sim, "rc", f, &e)
                     : which == 1 ? zb_trace_write(sim, 1000, f, &e)
                     : which == 2 ? zb_ascii_write(sim, 120, f, &e)
                                  : zb_json_write_summary(s, c, sim, f, &e);
    fclose(f);
    if (st != ZB_OK)
        fail_msg("writer %d: %s", which, e.msg);
    return buf;
}

/* Every writer shows R: its own SVG colour and legend entry, trace events named R, an R letter
 * and legend line in ASCII, the count and the recompute costs in the JSON summary. */
static void test_writers_show_r(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("1f1b", 2, 4, 0), *s = with_recompute(g, NULL);
    zb_costs_t c;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(&c, 2, 1, 1, 1, 0.1, 1, -0.5, -0.5, &e), ZB_OK);
    assert_int_equal(zb_costs_set_recompute(&c, 0.8, 0.1, &e), ZB_OK);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    char *svg = written(0, &sim, s, &c), *tr = written(1, &sim, s, &c);
    char *asc = written(2, &sim, s, &c), *js = written(3, &sim, s, &c);
    assert_non_null(strstr(svg, "#b07aa1"));
    assert_non_null(strstr(svg, "R recompute"));
    assert_non_null(strstr(tr, "\"R s0 mb0\""));
    assert_non_null(strstr(asc, "R recompute"));
    assert_non_null(strstr(js, "\"recomputes\": 4")); /* rank 0 only: rank 1 runs each B after its F */
    assert_non_null(strstr(js, "\"mem_keep\": [0.10000000000000001, 0.10000000000000001]"));
    /* without R the legend does not mention it */
    zb_sim_t plain;
    assert_int_equal(zb_simulate(g, &c, &plain, &e), ZB_OK);
    char *svg2 = written(0, &plain, g, &c);
    assert_null(strstr(svg2, "R recompute"));
    free(svg), free(tr), free(asc), free(js), free(svg2);
    zb_sim_free(&plain);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
    zb_schedule_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_places_r_and_marks_f),
        cmocka_unit_test(test_simulated_memory_and_time),
        cmocka_unit_test(test_recompute_overlaps_the_wait),
        cmocka_unit_test(test_validator_rules),
        cmocka_unit_test(test_costs_recompute_checks),
        cmocka_unit_test(test_csv_round_trip),
        cmocka_unit_test(test_writers_show_r),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
