/* Offload in the schedule IR: O/L through the validator, the simulator's copy channels (cases
 * worked out by hand), the CSV dialect and the writers, the offload pass and the planner's
 * none/all/auto step. */
#include "schedule_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/offload_internal.h"
#include "zbpp/plan.h"
#include "zbpp/workers.h"
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

/* P=2, M=2, one stage per rank; rank 0's program from `r0` (a string of tokens like "F0 O0"),
 * rank 1 plain: F0 F1 B0 W0 B1 W1. */
static zb_schedule_t *two_ranks(const char *r0)
{
    zb_schedule_t *s = zb_schedule_new("hand", 2, 1, ZB_PLACE_LOOP, 2);
    assert_non_null(s);
    const char *plain = "F0 F1 B0 W0 B1 W1";
    for (int r = 0; r < 2; r++)
        for (const char *p = r ? plain : r0; *p;) {
            while (*p == ' ')
                p++;
            if (!*p)
                break;
            zb_action_type_t t = *p == 'F'   ? ZB_ACT_F
                                 : *p == 'B' ? ZB_ACT_B
                                 : *p == 'W' ? ZB_ACT_W
                                 : *p == 'O' ? ZB_ACT_O
                                 : *p == 'L' ? ZB_ACT_L
                                             : ZB_ACT_R;
            assert_int_equal(zb_schedule_push(s, r, tu_act(t, r, p[1] - '0')), ZB_OK);
            p += 2;
        }
    return s;
}

/* F 1, B 1, W 1, comm 0; memory F +2, B -1, W -1; every copy 1 stash byte at `bw` bytes per time
 * unit after `lat`. */
static void hand_costs(zb_costs_t *c, double bw, double lat)
{
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(c, 2, 1, 1, 1, 0, 2, -1, -1, &e), ZB_OK);
    assert_int_equal(zb_costs_set_offload(c, 1, bw, bw, lat, &e), ZB_OK);
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

static void test_names_and_predicates(void **state)
{
    (void)state;
    assert_string_equal(zb_action_type_name(ZB_ACT_O), "O");
    assert_string_equal(zb_action_type_name(ZB_ACT_L), "L");
    for (int t = 0; t < ZB_ACT_COUNT; t++) {
        bool copy = t == ZB_ACT_O || t == ZB_ACT_L;
        assert_int_equal(zb_action_is_copy((zb_action_type_t)t), copy);
        assert_false(copy && (zb_action_is_compute((zb_action_type_t)t) ||
                              zb_action_is_comm((zb_action_type_t)t)));
    }
    zb_schedule_t *s = two_ranks("F0 O0 F1 L0 B0 W0 B1 W1");
    assert_true(zb_schedule_has_offload(s));
    assert_false(zb_schedule_has_comms(s)); /* copies are not messages */
    zb_offload_t o;
    zb_err_t e = {0};
    assert_int_equal(zb_offload_parse("auto", &o, &e), ZB_OK);
    assert_int_equal(o, ZB_OFFLOAD_AUTO);
    assert_int_equal(zb_offload_parse("some", &o, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "--offload"));
    zb_schedule_free(s);
}

static void test_validator_rules(void **state)
{
    (void)state;
    static const struct {
        const char *r0, *needle;
    } cases[] = {
        {"F0 O0 F1 L0 B0 W0 B1 W1", NULL},
        {"O0 F0 F1 L0 B0 W0 B1 W1", "before the F"},
        {"F0 L0 O0 F1 B0 W0 B1 W1", "before its O"},
        {"F0 O0 F1 B0 L0 W0 B1 W1", "after the backward"},
        {"F0 O0 F1 B0 W0 B1 W1", "no L"},
        {"F0 F1 L0 B0 W0 B1 W1", "no O offloaded"},
        {"F0 O0 O0 F1 L0 L0 B0 W0 B1 W1", "more than once"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zb_schedule_t *s = two_ranks(cases[i].r0);
        expect(s, NULL, cases[i].needle ? ZB_ESCHEDULE : ZB_OK, cases[i].needle);
        zb_schedule_free(s);
    }
    /* a recomputed pair has no stash to move */
    zb_schedule_t *s = two_ranks("F0 O0 F1 L0 R0 B0 W0 B1 W1");
    zb_err_t e = {0};
    assert_int_equal(zb_schedule_mark_recompute(s, &e), ZB_OK);
    expect(s, NULL, ZB_ESCHEDULE, "also recomputed");
    zb_schedule_free(s);
    /* O/L on the wrong rank */
    s = two_ranks("F0 O0 F1 L0 B0 W0 B1 W1");
    assert_int_equal(zb_schedule_push(s, 0, tu_act(ZB_ACT_O, 1, 0)), ZB_OK);
    expect(s, NULL, ZB_ESCHEDULE, "belongs to rank 1");
    zb_schedule_free(s);
}

/* Copies slower than the compute: the backward waits for its reload.
 *   rank 1: F0 1-2, F1 2-3, B0 3-4, W0 4-5, B1 5-6, W1 6-7
 *   rank 0: F0 0-1; O0 issued at 1, d2h 1-4 (0.5 latency + 1 byte / (1/2.5)); F1 1-2;
 *           L0 issued at 2, waits for O0's end: h2d 4-7; B0 ready max(B1(0) end 4, L0 end 7) = 7,
 *           runs 7-8; W0 8-9; B1 ready 6, runs 9-10; W1 10-11.
 *   memory rank 0: +2 @0, +2 @1 (peak 4 first at t=1), O0 frees 2 @4 and L0 takes 2 @4 (the
 *           release first), B0 -1 @7, W0 -1 @8, B1 -1 @9, W1 -1 @10. */
static void test_sim_backward_waits_for_reload(void **state)
{
    (void)state;
    zb_schedule_t *s = two_ranks("F0 O0 F1 L0 B0 W0 B1 W1");
    zb_costs_t c;
    hand_costs(&c, 0.4, 0.5);
    zb_sim_t sim;
    zb_err_t e = {0};
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    const int o = find(s, 0, ZB_ACT_O, 0, 0), l = find(s, 0, ZB_ACT_L, 0, 0),
              b = find(s, 0, ZB_ACT_B, 0, 0), b1 = find(s, 0, ZB_ACT_B, 0, 1);
    assert_true(tu_close(sim.start[0][o], 1) && tu_close(sim.end[0][o], 4));
    assert_true(tu_close(sim.start[0][l], 4) && tu_close(sim.end[0][l], 7));
    assert_true(tu_close(sim.start[0][b], 7) && tu_close(sim.start[0][b1], 9));
    assert_true(tu_close(sim.makespan, 11));
    assert_true(tu_close(sim.busy[0], 6)); /* copies are not compute */
    assert_true(tu_close(sim.peak_mem[0], 4) && tu_close(sim.peak_time[0], 1));
    assert_true(tu_close(sim.span[0], 11) && tu_close(sim.span[1], 6));
    zb_sim_free(&sim);
    /* the same memory rule holds in the validator: a limit of 4 fits, 3.5 does not */
    c.mem_limit = 4;
    expect(s, &c, ZB_OK, NULL);
    c.mem_limit = 3.5;
    expect(s, &c, ZB_EMEMLIMIT, "at time 1");
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* Fast copies (0.25 each: 1 byte at 4 bytes per unit, no latency) share one channel per
 * direction.
 *   rank 0: F0 0-1; O0 d2h 1-1.25; F1 1-2; O1 d2h 2-2.25; L0 issued at 2, h2d 2-2.25;
 *           B0 waits for rank 1's B0 (end 4): 4-5; W0 5-6; L1 issued at 6: h2d 6-6.25;
 *           B1 ready max(6, 6.25): 6.25-7.25; W1 7.25-8.25.
 *   memory rank 0: 2 @0, 4 @1, 2 @1.25, 4 @2 (L0), 2 @2.25 (O1 ends), 1 @4, 0 @5, 2 @6,
 *           1 @6.25, 0 @7.25: peak 4 first at t=1, and never 6 (three stashes) at any time. */
static void test_sim_channels_and_memory_timeline(void **state)
{
    (void)state;
    zb_schedule_t *s = two_ranks("F0 O0 F1 O1 L0 B0 W0 L1 B1 W1");
    zb_costs_t c;
    hand_costs(&c, 4, 0);
    expect(s, NULL, ZB_OK, NULL);
    zb_sim_t sim;
    zb_err_t e = {0};
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    const int o1 = find(s, 0, ZB_ACT_O, 0, 1), l0 = find(s, 0, ZB_ACT_L, 0, 0),
              l1 = find(s, 0, ZB_ACT_L, 0, 1), b1 = find(s, 0, ZB_ACT_B, 0, 1);
    assert_true(tu_close(sim.start[0][o1], 2) && tu_close(sim.end[0][o1], 2.25));
    assert_true(tu_close(sim.start[0][l0], 2) && tu_close(sim.end[0][l0], 2.25));
    assert_true(tu_close(sim.start[0][l1], 6) && tu_close(sim.start[0][b1], 6.25));
    assert_true(tu_close(sim.makespan, 8.25));
    assert_true(tu_close(sim.peak_mem[0], 4) && tu_close(sim.peak_time[0], 1));
    zb_sim_free(&sim);
    /* without a bandwidth each copy takes the F's time (1): O0 1-2, L0 issued at 2 runs 2-3,
     * so B0 still starts at 4 */
    zb_costs_t d;
    assert_int_equal(zb_costs_init_uniform(&d, 2, 1, 1, 1, 0, 2, -1, -1, &e), ZB_OK);
    assert_int_equal(zb_simulate(s, &d, &sim, &e), ZB_OK);
    assert_true(tu_close(sim.end[0][l0], 3) && tu_close(sim.start[0][find(s, 0, ZB_ACT_B, 0, 0)], 4));
    zb_sim_free(&sim);
    zb_costs_free(&d);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

static void test_costs_checks(void **state)
{
    (void)state;
    zb_costs_t c, k;
    zb_err_t e = {0};
    hand_costs(&c, 4, 0.5);
    assert_true(tu_close(zb_costs_t_copy(&c, ZB_ACT_O, 0), 0.75));
    assert_int_equal(zb_costs_set_offload(&c, -1, -2, 1, 0, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "bandwidth"));
    assert_int_equal(zb_costs_set_offload(&c, NAN, 1, 1, 0, &e), ZB_EINVAL);
    assert_int_equal(zb_costs_clone(&k, &c, &e), ZB_OK);
    assert_true(tu_close(zb_costs_t_copy(&k, ZB_ACT_L, 1), 0.75));
    k.stash_bytes[1] = -1;
    assert_int_equal(zb_costs_check(&k, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "stash bytes"));
    zb_costs_free(&k);
    /* split over two chunks: each chunk moves half its rank's stash */
    assert_int_equal(zb_costs_rechunk(&c, 2, 2, ZB_PLACE_V, &k, &e), ZB_OK);
    assert_true(tu_close(k.stash_bytes[3], 0.5) && tu_close(k.bw_h2d, 4));
    zb_costs_free(&k);
    zb_costs_free(&c);
}

static void test_csv_round_trip_and_writers(void **state)
{
    (void)state;
    zb_schedule_t *s = two_ranks("F0 O0 F1 O1 L0 B0 W0 L1 B1 W1"), *back = NULL, *low = NULL;
    zb_err_t e = {0};
    for (int lowered = 0; lowered < 2; lowered++) {
        const zb_schedule_t *in = s;
        if (lowered) {
            assert_int_equal(zb_insert_comms(s, &low, &e), ZB_OK);
            expect(low, NULL, ZB_OK, NULL);
            in = low;
        }
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_int_equal(zb_csv_write(in, f, &e), ZB_OK);
        fclose(f);
        assert_non_null(strstr(buf, lowered ? "0F0,0SEND_F0,0O0" : "0F0,0O0,0F1,0O1,0L0,0I0"));
        assert_int_equal(zb_csv_read(buf, len, &back, &e), ZB_OK);
        assert_true(zb_schedule_equal(in, back));
        zb_schedule_free(back);
        free(buf);
    }
    /* stripping the comms keeps the copies */
    zb_schedule_t *strip = NULL;
    assert_int_equal(zb_strip_comms(low, &strip, &e), ZB_OK);
    assert_true(zb_schedule_equal(strip, s));
    zb_schedule_free(strip);
    zb_schedule_free(low);

    zb_costs_t c;
    hand_costs(&c, 4, 0);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(zb_trace_write(&sim, 1, f, &e), ZB_OK);
    assert_int_equal(zb_svg_write(&sim, "t", f, &e), ZB_OK);
    assert_int_equal(zb_ascii_write(&sim, 100, f, &e), ZB_OK);
    assert_int_equal(zb_json_write_summary(s, &c, &sim, f, &e), ZB_OK);
    fclose(f);
    /* trace: the copies on rank 0's copy thread (tid P + 0 = 2) */
    assert_non_null(strstr(buf, "\"name\": \"O s0 mb1\", \"cat\": \"copy\", \"ph\": \"X\", "
                                "\"pid\": 0, \"tid\": 2, \"ts\": 2.000000, \"dur\": 0.250000"));
    assert_non_null(strstr(buf, "\"rank 0 copies\""));
    assert_non_null(strstr(buf, "<title>L stage 0 mb 1 [6, 6.25]</title>"));
    assert_non_null(strstr(buf, "L reload (from host)"));
    assert_non_null(strstr(buf, "r0 O |"));
    assert_non_null(strstr(buf, "r0 L |"));
    assert_non_null(strstr(buf, "\"offloads\": 2"));
    assert_non_null(strstr(buf, "\"offload\": [0.25, 0.25]"));
    free(buf);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* Offload every stash of a family with fast copies: valid, and since no backward waits the
 * compute timeline and so the makespan stay those of the plain schedule; memory never grows. */
static void test_pass_all_families(void **state)
{
    (void)state;
    static const struct {
        const char *fam;
        int v;
    } fams[] = {{"1f1b", 1}, {"zb-h1", 1}, {"zb-h2", 1}, {"interleaved-1f1b", 2}, {"zb-v", 2},
                {"gpipe", 1}};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        zb_schedule_t *g = tu_gen(fams[i].fam, 4, 8, fams[i].v), *o = NULL;
        zb_costs_t c;
        zb_err_t e = {0};
        assert_int_equal(zb_costs_init_uniform(&c, g->stages, 1, 1, 1, 0.1, 1, 0, -1, &e), ZB_OK);
        assert_int_equal(zb_costs_set_offload(&c, 1, 8, 8, 0, &e), ZB_OK); /* 0.125 a copy */
        assert_int_equal(zb_add_offload(g, NULL, &c, &o, &e), ZB_OK);
        expect(o, &c, ZB_OK, NULL);
        zb_sim_t a, b;
        assert_int_equal(zb_simulate(g, &c, &a, &e), ZB_OK);
        assert_int_equal(zb_simulate(o, &c, &b, &e), ZB_OK);
        if (!tu_close(a.makespan, b.makespan))
            fail_msg("%s: makespan %g with offload, %g without", fams[i].fam, b.makespan,
                     a.makespan);
        for (int r = 0; r < 4; r++)
            assert_true(b.peak_mem[r] <= a.peak_mem[r] + 1e-9);
        if (strcmp(fams[i].fam, "gpipe")) /* gpipe's rank 0 has all M alive at its peak */
            assert_true(b.peak_mem[0] < a.peak_mem[0] - 0.5);
        zb_sim_free(&a);
        zb_sim_free(&b);
        zb_schedule_t *again = NULL;
        assert_int_equal(zb_add_offload(o, NULL, &c, &again, &e), ZB_EINVAL);
        assert_null(again);
        zb_schedule_free(o);
        zb_schedule_free(g);
        zb_costs_free(&c);
    }
}

/* Where the L of pair (stage, mb) is on rank r: how many actions of the rank's program lie
 * between it and its backward (B or BW); -1 when the pair has no L. */
static int actions_before_back(const zb_schedule_t *s, int r, int stage, int mb)
{
    int l = find(s, r, ZB_ACT_L, stage, mb);
    if (l < 0)
        return -1;
    int b = find(s, r, ZB_ACT_B, stage, mb);
    if (b < 0)
        b = find(s, r, ZB_ACT_BW, stage, mb);
    assert_true(b > l);
    return b - l - 1;
}

/* --offload all moves every stash off the device even where copies are too slow to come back
 * in time: such an L comes right before its backward (which waits for it), not right after its
 * O, where the stash would come straight back and `all` would free no slot. With fast copies
 * it is the in-time pass (zb_add_offload). */
static void test_plan_all_keeps_stashes_off(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("zb-h1", 4, 8, 1);
    zb_costs_t c;
    zb_err_t e = {0};
    char note[96];
    assert_int_equal(zb_costs_init_uniform(&c, 4, 1, 1, 1, 0.1, 1, -0.6, -0.4, &e), ZB_OK);
    for (int slow = 0; slow <= 1; slow++) {
        /* a copy of 2 time units: rank 0's first L cannot end before its B wherever it goes */
        double bw = slow ? 0.5 : 8;
        assert_int_equal(zb_costs_set_offload(&c, 1, bw, bw, 0, &e), ZB_OK);
        zb_schedule_t *all = NULL, *in_time = NULL;
        assert_int_equal(zb_plan_offload(g, ZB_OFFLOAD_ALL, &c, &all, note, &e), ZB_OK);
        assert_int_equal(zb_add_offload(g, NULL, &c, &in_time, &e), ZB_OK);
        expect(all, &c, ZB_OK, NULL);
        int right_after_o = 0, right_before_back = 0, differ = 0;
        for (int r = 0; r < 4; r++)
            for (int mb = 0; mb < 8; mb++) {
                int o = find(all, r, ZB_ACT_O, r, mb), l = find(all, r, ZB_ACT_L, r, mb);
                assert_true((o < 0) == (find(in_time, r, ZB_ACT_O, r, mb) < 0));
                if (o < 0)
                    continue;
                right_after_o += find(in_time, r, ZB_ACT_L, r, mb) ==
                                 find(in_time, r, ZB_ACT_O, r, mb) + 1;
                right_before_back += actions_before_back(all, r, r, mb) == 0;
                differ += actions_before_back(all, r, r, mb) !=
                          actions_before_back(in_time, r, r, mb);
                assert_true(l != o + 1 || actions_before_back(all, r, r, mb) == 0);
            }
        if (slow) { /* the in-time pass brings some back at once; `all` none of them */
            assert_true(right_after_o > 0 && differ > 0);
            assert_true(right_before_back >= right_after_o);
        } else {
            assert_int_equal(differ, 0);
        }
        zb_schedule_free(all);
        zb_schedule_free(in_time);
    }
    zb_schedule_free(g);
    zb_costs_free(&c);
}

/* The planner at 5/8 of zb-h1's activation memory: fast copies fit it by offloading alone at
 * zb-h1's speed; copies too slow to hide get recompute instead; an impossible limit is refused.
 * A B frees 0.6 of what its F added, the rest (what only W reads) stays until W: that part,
 * which zb-h1's last rank holds for up to three deferred W's (1 + 3 x 0.4 = 2.2), can be neither
 * offloaded nor recomputed. */
static void test_plan_auto(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("zb-h1", 4, 8, 1), *o = NULL;
    zb_costs_t c;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(&c, 4, 1, 1, 1, 0.1, 1, -0.6, -0.4, &e), ZB_OK);
    assert_int_equal(zb_costs_set_recompute(&c, 1, 0, &e), ZB_OK);
    zb_sim_t plain;
    assert_int_equal(zb_simulate(g, &c, &plain, &e), ZB_OK);
    assert_true(tu_close(plain.peak_mem[0], 4)); /* zb-h1: P stashes on rank 0 */
    c.mem_limit = 2.5;
    char note[96];

    /* a copy of 20 time units can never come back in time: recompute only */
    assert_int_equal(zb_costs_set_offload(&c, 1, 0.05, 0.05, 0, &e), ZB_OK);
    assert_int_equal(zb_plan_offload(g, ZB_OFFLOAD_AUTO, &c, &o, note, &e), ZB_OK);
    expect(o, &c, ZB_OK, NULL);
    assert_true(zb_schedule_has_recompute(o) && !zb_schedule_has_offload(o));
    assert_non_null(strstr(note, " 0 offloaded"));
    zb_sim_t slow;
    assert_int_equal(zb_simulate(o, &c, &slow, &e), ZB_OK);
    assert_true(slow.makespan > plain.makespan);
    zb_schedule_free(o);

    /* copies of 0.125: offloads replace most recomputes, and the step is faster */
    assert_int_equal(zb_costs_set_offload(&c, 1, 8, 8, 0, &e), ZB_OK);
    assert_int_equal(zb_plan_offload(g, ZB_OFFLOAD_AUTO, &c, &o, note, &e), ZB_OK);
    expect(o, &c, ZB_OK, NULL);
    assert_true(zb_schedule_has_offload(o));
    zb_sim_t fast;
    assert_int_equal(zb_simulate(o, &c, &fast, &e), ZB_OK);
    if (!(fast.makespan < slow.makespan))
        fail_msg("offload auto %g (%s) not faster than recompute alone %g", fast.makespan, note,
                 slow.makespan);
    for (int r = 0; r < 4; r++)
        assert_true(fast.peak_mem[r] <= 2.5 + 1e-9);
    zb_sim_free(&fast);
    zb_sim_free(&slow);
    zb_schedule_free(o);

    /* the descent's budget: one simulation cannot fit zb-h1 under 2.5; no bound can */
    assert_int_equal(zb_plan_offload_from(g, NULL, &c, 1, &o, note, &e), ZB_EMEMLIMIT);
    assert_null(o);
    assert_non_null(strstr(e.msg, "budget"));
    /* a start with stage 0 offloaded: its pairs never come back to the device */
    unsigned char start[4 * 8] = {0};
    for (int m = 0; m < 8; m++)
        start[m] = ZB_RELOAD_IN_TIME;
    assert_int_equal(zb_plan_offload_from(g, start, &c, 0, &o, note, &e), ZB_OK);
    expect(o, &c, ZB_OK, NULL);
    int kept = 0;
    for (int m = 0; m < 8; m++) {
        bool moved = false;
        for (int i = 0; i < o->rank[0].len; i++) {
            const zb_action_t *a = &o->rank[0].actions[i];
            moved |= a->stage == 0 && a->mb == m && (a->type == ZB_ACT_O || a->type == ZB_ACT_R);
        }
        kept += !moved;
    }
    assert_int_equal(kept, 0);
    zb_schedule_free(o);

    /* a limit only the in-flight stashes break (3 of zb-h1's 4 on rank 0, 3.4 on rank 1):
     * offloading alone fits it at zb-h1's speed */
    c.mem_limit = 3.2;
    assert_int_equal(zb_plan_offload(g, ZB_OFFLOAD_AUTO, &c, &o, note, &e), ZB_OK);
    expect(o, &c, ZB_OK, NULL);
    assert_false(zb_schedule_has_recompute(o));
    assert_int_equal(zb_simulate(o, &c, &fast, &e), ZB_OK);
    assert_true(tu_close(fast.makespan, plain.makespan));
    zb_sim_free(&fast);
    zb_schedule_free(o);

    /* below one stash nothing helps (recompute keeps 0 but the B still needs its stash) */
    c.mem_limit = 0.5;
    assert_int_equal(zb_plan_offload(g, ZB_OFFLOAD_AUTO, &c, &o, note, &e), ZB_EMEMLIMIT);
    assert_null(o);
    assert_non_null(strstr(e.msg, "rank"));
    /* ALL ignores the limit; NONE is a copy */
    assert_int_equal(zb_plan_offload(g, ZB_OFFLOAD_NONE, &c, &o, note, &e), ZB_OK);
    assert_true(zb_schedule_equal(o, g));
    zb_schedule_free(o);
    zb_sim_free(&plain);
    zb_costs_free(&c);
    zb_schedule_free(g);
}

static double gen_makespan_pm(int P, int M, const char *family, int chunks, zb_offload_t off,
                              zb_recompute_t rc, const zb_costs_t *c, char *note)
{
    zb_gen_params_t q = {.ranks = P, .microbatches = M, .chunks = chunks, .costs = c,
                         .recompute = rc};
    zb_schedule_t *s = NULL;
    zb_err_t e;
    zb_status_t st = off == ZB_OFFLOAD_NONE ? zb_generate(family, &q, &s, &e)
                                            : zb_generate_offload(family, &q, off, &s, &e);
    if (st != ZB_OK)
        return INFINITY;
    expect(s, c, ZB_OK, NULL); /* valid, and within the limit */
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, c, &sim, &e), ZB_OK);
    double mk = sim.makespan;
    zb_sim_free(&sim);
    if (note)
        snprintf(note, 96, "%.95s", q.note);
    zb_schedule_free(s);
    return mk;
}

static double gen_makespan(const char *family, int chunks, zb_offload_t off, zb_recompute_t rc,
                           const zb_costs_t *c, char *note)
{
    return gen_makespan_pm(4, 8, family, chunks, off, rc, c, note);
}

/* auto with offload auto searches the fixed families' offload too: at two chunks per rank under
 * a tight limit (copies that hide behind the long F..B waits of looped placements) it is at
 * least as fast as every family's own offload plan and faster than recomputing alone. */
static void test_auto_offload_sees_families(void **state)
{
    (void)state;
    zb_costs_t rank, c;
    zb_err_t e = {0};
    /* per rank: F, B, W as an H100 stage of GPT-2 124M, stash 4, B frees 1.5, a copy of 0.3 */
    assert_int_equal(zb_costs_init_uniform(&rank, 4, 2.8, 3.8, 1.5, 0.05, 4, -1.5, -2.5, &e), ZB_OK);
    assert_int_equal(zb_costs_set_recompute(&rank, 2.8, 0.1, &e), ZB_OK);
    assert_int_equal(zb_costs_set_offload(&rank, 4, 13, 13, 0.01, &e), ZB_OK);
    rank.mem_limit = 8; /* half of zb-h1's 16 on rank 0 */
    assert_int_equal(zb_costs_rechunk(&rank, 4, 2, ZB_PLACE_LOOP, &c, &e), ZB_OK);
    char note[96] = "";
    double a = gen_makespan("auto", 2, ZB_OFFLOAD_AUTO, ZB_RECOMPUTE_NONE, &c, note);
    double rc = gen_makespan("auto", 2, ZB_OFFLOAD_NONE, ZB_RECOMPUTE_AUTO, &c, NULL);
    const char *fams[] = {"interleaved-1f1b", "looped-bfs", "interleaved-zb"};
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) {
        double f = gen_makespan(fams[i], 2, ZB_OFFLOAD_AUTO, ZB_RECOMPUTE_NONE, &c, NULL);
        if (!(a <= f * (1 + 1e-9)))
            fail_msg("auto --offload auto %g (%s) slower than %s+O %g", a, note, fams[i], f);
    }
    if (!(isfinite(a) && a < rc))
        fail_msg("auto --offload auto %g (%s) not faster than recompute alone %g", a, note, rc);
    print_message("    auto --offload auto %.2f (%s), recompute auto %.2f\n", a, note, rc);
    zb_costs_free(&c);
    zb_costs_free(&rank);
}

/* auto's list scheduler sees offload: with one chunk per rank at half of zb-h1's memory (P=8,
 * M=16, H100-like stage times, a bf16 stash whose copy takes 0.8 F), no schedule made without
 * copies in mind and offloaded afterwards beats recomputing, but the greedy with the copies
 * folded into its costs (the first ranks send their stashes out, the last keep theirs) is
 * clearly faster. Without start (5) of zb_generate_offload both are the same schedule. */
static void test_auto_offload_folds_copies(void **state)
{
    (void)state;
    zb_costs_t c;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(&c, 8, 2.8, 3.84, 1.46, 0.05, 1, -0.375, -0.625, &e),
                     ZB_OK);
    assert_int_equal(zb_costs_set_offload(&c, 108, 47.5, 47.5, 0, &e), ZB_OK);
    c.mem_limit = 4;
    char note[96] = "";
    double a = gen_makespan_pm(8, 16, "auto", 1, ZB_OFFLOAD_AUTO, ZB_RECOMPUTE_NONE, &c, note);
    double rc = gen_makespan_pm(8, 16, "auto", 1, ZB_OFFLOAD_NONE, ZB_RECOMPUTE_AUTO, &c, NULL);
    if (!(isfinite(a) && a < 0.97 * rc))
        fail_msg("auto --offload auto %g (%s) not 3%% faster than recompute alone %g", a, note,
                 rc);
    assert_non_null(strstr(note, "auto's greedy"));
    print_message("    P=8 M=16: auto --offload auto %.2f (%s), recompute auto %.2f\n", a, note,
                  rc);
    zb_costs_free(&c);
}

/* zbpp plan's auto+O row is at least as fast as every fitting +O row, as auto's plain row is
 * among the plain ones: when auto's bounded descents run out (made to here, at P=4 M=8, by the
 * test hook; at P=16 M=64 the real bound does, and looped-bfs+O beat auto+O by 4.6 %), the row
 * takes the fastest family's plan and says so. */
static void test_plan_auto_row_is_best(void **state)
{
    (void)state;
    zb_costs_t c;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(&c, 4, 2.8, 3.84, 1.46, 0.05, 1, -0.375, -0.625, &e),
                     ZB_OK);
    assert_int_equal(zb_costs_set_offload(&c, 108, 47.5, 47.5, 0, &e), ZB_OK);
    c.mem_limit = 2;
    for (int starved = 0; starved < 2; starved++) {
        if (starved)
            setenv(ZB_TEST_DESCENT_WORK_ENV, "1", 1);
        zb_plan_t plan;
        zb_plan_opts_t o = {.offload = ZB_OFFLOAD_AUTO};
        assert_int_equal(zb_plan_compare_opts(4, 8, &c, &o, &plan, &e), ZB_OK);
        unsetenv(ZB_TEST_DESCENT_WORK_ENV);
        const zb_plan_row_t *autorow = NULL;
        double best = INFINITY;
        for (int i = 0; i < plan.count; i++) {
            const zb_plan_row_t *r = &plan.rows[i];
            size_t n = strlen(r->family);
            if (n < 2 || strcmp(r->family + n - 2, "+O"))
                continue;
            if (!strcmp(r->family, "auto+O"))
                autorow = r;
            else if (r->fits)
                best = fmin(best, r->makespan);
        }
        assert_non_null(autorow);
        assert_true(isfinite(best));
        if (!(autorow->fits && autorow->makespan <= best))
            fail_msg("starved=%d: auto+O %g (%s) slower than the best +O row %g", starved,
                     autorow->fits ? autorow->makespan : INFINITY, autorow->note, best);
        if (starved) /* its own search could not have found looped-bfs's plan on 16 actions */
            assert_non_null(strstr(autorow->note, "auto+O took"));
        print_message("    starved=%d: auto+O %.2f (%s)\n", starved, autorow->makespan,
                      autorow->note);
        zb_plan_free(&plan);
    }
    zb_costs_free(&c);
}

/* The descent's tries run on the caller's worker group: the plan is the same with 1 or 3
 * threads (the step is chosen in pair order from all tries, whichever thread ran each). */
static void test_plan_same_on_threads(void **state)
{
    (void)state;
    zb_schedule_t *g = tu_gen("zb-h1", 4, 8, 1), *alone = NULL, *shared = NULL;
    zb_costs_t c;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_init_uniform(&c, 4, 1, 1, 1, 0.1, 1, -0.6, -0.4, &e), ZB_OK);
    assert_int_equal(zb_costs_set_recompute(&c, 1, 0, &e), ZB_OK);
    assert_int_equal(zb_costs_set_offload(&c, 1, 1.5, 1.5, 0, &e), ZB_OK);
    c.mem_limit = 2.5;
    char note[96], note3[96];
    assert_int_equal(zb_plan_offload(g, ZB_OFFLOAD_AUTO, &c, &alone, note, &e), ZB_OK);
    zb_workers_t *w = NULL;
    assert_int_equal(zb_workers_new(3, NULL, &w, &e), ZB_OK);
    zb_workers_t *prev = zb_workers_enter(w);
    assert_int_equal(zb_plan_offload(g, ZB_OFFLOAD_AUTO, &c, &shared, note3, &e), ZB_OK);
    zb_workers_enter(prev);
    zb_workers_free(w);
    assert_true(zb_schedule_has_offload(alone) && zb_schedule_has_recompute(alone));
    assert_true(zb_schedule_equal(alone, shared));
    assert_string_equal(note, note3);
    print_message("    %s\n", note);
    zb_schedule_free(alone);
    zb_schedule_free(shared);
    zb_schedule_free(g);
    zb_costs_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_predicates),
        cmocka_unit_test(test_validator_rules),
        cmocka_unit_test(test_sim_backward_waits_for_reload),
        cmocka_unit_test(test_sim_channels_and_memory_timeline),
        cmocka_unit_test(test_costs_checks),
        cmocka_unit_test(test_csv_round_trip_and_writers),
        cmocka_unit_test(test_pass_all_families),
        cmocka_unit_test(test_plan_auto),
        cmocka_unit_test(test_plan_all_keeps_stashes_off),
        cmocka_unit_test(test_auto_offload_sees_families),
        cmocka_unit_test(test_auto_offload_folds_copies),
        cmocka_unit_test(test_plan_same_on_threads),
        cmocka_unit_test(test_plan_auto_row_is_best),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
