/* Simulator with ranks sharing one device (zb_costs_t.share): timelines computed by hand (by
 * the number of others busy, and by what they run: the mix), the fixed-cost timeline when every
 * factor is 1 (every family, compute-only, lowered, with copies), a fused BW as its B part then
 * its W part, copies sharing a host link (one way and both ways), compute slowed while copies
 * run, and bad shares refused. */
#include "schedule_testutil.h"
#include "zbpp/plan.h"

#include <string.h>

/* Every phase: alone (no other rank computing) `alone` times its cost, beside one other 1. */
static void set_share(zb_costs_t *c, int n, double alone)
{
    c->share.n = n;
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < n; k++)
            c->share.f[p][k] = k == 0 ? alone : 1.0;
}

static zb_schedule_t *two_by_two(void)
{
    /* 1F1B order, P = 2, M = 2, fused BW */
    zb_schedule_t *s = zb_schedule_new("hand", 2, 1, ZB_PLACE_LOOP, 2);
    const zb_action_t r0[] = {tu_act(ZB_ACT_F, 0, 0), tu_act(ZB_ACT_F, 0, 1),
                              tu_act(ZB_ACT_BW, 0, 0), tu_act(ZB_ACT_BW, 0, 1)};
    const zb_action_t r1[] = {tu_act(ZB_ACT_F, 1, 0), tu_act(ZB_ACT_BW, 1, 0),
                              tu_act(ZB_ACT_F, 1, 1), tu_act(ZB_ACT_BW, 1, 1)};
    for (int i = 0; i < 4; i++) {
        zb_schedule_push(s, 0, r0[i]);
        zb_schedule_push(s, 1, r1[i]);
    }
    return s;
}

static void sim_ok(const zb_schedule_t *s, const zb_costs_t *c, zb_sim_t *sim)
{
    zb_err_t e = {0};
    if (zb_simulate(s, c, sim, &e) != ZB_OK)
        fail_msg("%s", e.msg);
}

/* A timeline of two ranks of four actions (two_by_two's, or any such): every start and end */
static void expect_two_by_two(const zb_sim_t *sim, const double start[2][4],
                              const double end[2][4])
{
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 4; i++) {
            assert_close(sim->start[r][i], start[r][i]);
            assert_close(sim->end[r][i], end[r][i]);
        }
}

/* F = 1, BW = 2 (B 2, W 0), comm 0; alone at twice the speed (0.5), beside the other at 1:
 *   r0 F(0,0)  0 .. 0.5   alone
 *   r0 F(0,1)  0.5 .. 1.5, r1 F(1,0) 0.5 .. 1.5   both busy
 *   r1 BW(1,0) 1.5 .. 2.5 alone (r0 waits for its gradient)
 *   r0 BW(0,0) 2.5 .. 4.5 and r1 F(1,1) 2.5 .. 3.5, both busy
 *   r1 BW(1,1) from 3.5: 1 of 2 done by 4.5 beside r0, the rest alone: ends 5.0
 *   r0 BW(0,1) 5.0 .. 6.0 alone */
static void test_hand_computed(void **state)
{
    (void)state;
    zb_schedule_t *s = two_by_two();
    zb_costs_t c;
    tu_costs(&c, 2, 1, 2, 0, 0);
    set_share(&c, 2, 0.5);
    zb_sim_t sim;
    sim_ok(s, &c, &sim);
    const double start[2][4] = {{0, 0.5, 2.5, 5.0}, {0.5, 1.5, 2.5, 3.5}};
    const double end[2][4] = {{0.5, 1.5, 4.5, 6.0}, {1.5, 2.5, 3.5, 5.0}};
    expect_two_by_two(&sim, start, end);
    assert_close(sim.makespan, 6.0);
    assert_close(sim.busy[0], 4.5);
    assert_close(sim.busy[1], 4.5);
    zb_sim_free(&sim);
    /* the same schedule without the share: fixed costs, 9 */
    c.share.n = 0;
    sim_ok(s, &c, &sim);
    assert_close(sim.makespan, 9.0);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* A fused BW alone runs its B part at B's factor, then its W part at W's: P = 2, M = 1, F 1,
 * B 2, W 2, alone F and B at 0.5, W at 0.25: BW alone takes 2·0.5 + 2·0.25 = 1.5.
 *   r0 F 0 .. 0.5, r1 F 0.5 .. 1, r1 BW 1 .. 2.5, r0 BW 2.5 .. 4 */
static void test_bw_parts(void **state)
{
    (void)state;
    zb_schedule_t *s = tu_gen("1f1b", 2, 1, 0);
    zb_costs_t c;
    tu_costs(&c, 2, 1, 2, 2, 0);
    set_share(&c, 2, 0.5);
    c.share.f[2][0] = 0.25;
    zb_sim_t sim;
    sim_ok(s, &c, &sim);
    assert_close(sim.makespan, 4.0);
    assert_close(sim.busy[0], 2.0);
    assert_close(sim.busy[1], 2.0);
    zb_sim_free(&sim);
    /* a fused BW at half its B and W apart (share.bw): 0.75 each, ends 1.75 and 2.5 */
    c.share.bw = 0.5;
    sim_ok(s, &c, &sim);
    assert_close(sim.end[1][1], 1.75);
    assert_close(sim.makespan, 2.5);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* What the others run (the mix), by hand: two_by_two with F 1, B 1, W 1 (BW 2), comm 0, every
 * count factor 1; an F beside a B takes twice its time (mix F|B = 2), a W beside an F half
 * (mix W|F = 0.5), every other pair 1:
 *   r0 F(0,0) 0 .. 1 alone; r0 F(0,1) and r1 F(1,0) 1 .. 2 (F beside F: 1)
 *   r1 BW(1,0) 2 .. 4 alone
 *   from 4, r0 BW(0,0) beside r1 F(1,1): r0's B part 4 .. 5 (B beside F: 1) while r1's F does
 *   half its work (F beside B: 2); then r0's W part beside an F takes 0.5 and r1's F beside a W
 *   the other half in 0.5: both end at 5.5
 *   r1 BW(1,1) 5.5 .. 7.5 alone; r0 BW(0,1) 7.5 .. 9.5 alone (fixed costs: 9) */
static void test_mix_hand_computed(void **state)
{
    (void)state;
    zb_schedule_t *s = two_by_two();
    zb_costs_t c;
    tu_costs(&c, 2, 1, 1, 1, 0);
    set_share(&c, 2, 1.0);
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++)
            c.share.mix[p][q] = 1.0;
    c.share.mix[0][1] = 2.0;
    c.share.mix[2][0] = 0.5;
    zb_sim_t sim;
    sim_ok(s, &c, &sim);
    const double start[2][4] = {{0, 1, 4, 7.5}, {1, 2, 4, 5.5}};
    const double end[2][4] = {{1, 2, 5.5, 9.5}, {2, 4, 5.5, 7.5}};
    expect_two_by_two(&sim, start, end);
    assert_close(sim.makespan, 9.5);
    zb_sim_free(&sim);
    /* without the mix every factor is 1: the fixed timeline's 9 */
    memset(c.share.mix, 0, sizeof c.share.mix);
    sim_ok(s, &c, &sim);
    assert_close(sim.makespan, 9.0);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* With every factor 1 the shared simulation is the fixed one, action for action. */
static void expect_same_timeline(const zb_schedule_t *s, zb_costs_t *c, const char *what)
{
    zb_sim_t fixed, shared;
    zb_err_t e = {0};
    c->share.n = 0;
    if (zb_simulate(s, c, &fixed, &e) != ZB_OK)
        fail_msg("%s: %s", what, e.msg);
    set_share(c, s->ranks, 1.0);
    for (int p = 0; p < 3; p++) /* a mix of ones: the same */
        for (int q = 0; q < 3; q++)
            c->share.mix[p][q] = 1.0;
    if (zb_simulate(s, c, &shared, &e) != ZB_OK)
        fail_msg("%s (shared): %s", what, e.msg);
    for (int r = 0; r < s->ranks; r++) {
        for (int i = 0; i < s->rank[r].len; i++)
            if (!tu_close(fixed.start[r][i], shared.start[r][i]) ||
                !tu_close(fixed.end[r][i], shared.end[r][i]))
                fail_msg("%s: rank %d action %d: fixed %g..%g, shared %g..%g", what, r, i,
                         fixed.start[r][i], fixed.end[r][i], shared.start[r][i],
                         shared.end[r][i]);
        assert_close(fixed.peak_mem[r], shared.peak_mem[r]);
        assert_close(fixed.busy[r], shared.busy[r]);
    }
    assert_close(fixed.makespan, shared.makespan);
    zb_sim_free(&fixed);
    zb_sim_free(&shared);
    memset(&c->share, 0, sizeof c->share);
}

static void test_unit_factors_are_fixed_costs(void **state)
{
    (void)state;
    static const struct {
        const char *family;
        int v;
    } fams[] = {{"1f1b", 0}, {"gpipe", 0}, {"zb-h1", 0}, {"zb-h2", 0}, {"interleaved-1f1b", 2},
                {"interleaved-zb", 2}, {"zb-v", 0}, {"v-half", 0}, {"dualpipev", 0}};
    for (size_t k = 0; k < sizeof fams / sizeof *fams; k++) {
        zb_schedule_t *s = tu_gen(fams[k].family, 4, 8, fams[k].v);
        zb_costs_t c;
        tu_costs(&c, s->stages, 1.0, 1.3, 0.7, 0.05);
        expect_same_timeline(s, &c, fams[k].family);
        zb_schedule_t *low = NULL;
        zb_err_t e = {0};
        if (zb_insert_comms(s, &low, &e) != ZB_OK)
            fail_msg("lower %s: %s", fams[k].family, e.msg);
        expect_same_timeline(low, &c, "lowered");
        zb_schedule_free(low);
        zb_costs_free(&c);
        zb_schedule_free(s);
    }
    /* with copies: zb-h1 with every stash offloaded */
    zb_schedule_t *s = tu_gen("zb-h1", 4, 8, 0), *off = NULL;
    zb_costs_t c;
    tu_costs(&c, 4, 1.0, 1.0, 1.0, 0.0);
    zb_err_t e = {0};
    if (zb_add_offload(s, NULL, &c, &off, &e) != ZB_OK)
        fail_msg("offload: %s", e.msg);
    expect_same_timeline(off, &c, "zb-h1 offload all");
    zb_schedule_free(off);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* Slower neighbours make a fuller schedule relatively slower: 1f1b's fill and drain run
 * alone, so with alone at 0.9 it gains more than zb-h2, whose ranks overlap more. */
static void test_denser_schedule_gains_less(void **state)
{
    (void)state;
    double ratio[2];
    const char *fam[2] = {"1f1b", "zb-h2"};
    for (int k = 0; k < 2; k++) {
        zb_schedule_t *s = tu_gen(fam[k], 4, 8, 0);
        zb_costs_t c;
        tu_costs(&c, 4, 1.0, 1.0, 1.0, 0.0);
        zb_sim_t fixed, shared;
        zb_err_t e = {0};
        if (zb_simulate(s, &c, &fixed, &e) != ZB_OK)
            fail_msg("%s", e.msg);
        c.share.n = 4;
        for (int p = 0; p < 3; p++) {
            const double f[4] = {0.9, 0.94, 0.975, 1.0};
            memcpy(c.share.f[p], f, sizeof f);
        }
        if (zb_simulate(s, &c, &shared, &e) != ZB_OK)
            fail_msg("%s", e.msg);
        ratio[k] = shared.makespan / fixed.makespan;
        assert_true(ratio[k] < 1.0);
        zb_sim_free(&fixed);
        zb_sim_free(&shared);
        zb_costs_free(&c);
        zb_schedule_free(s);
    }
    assert_true(ratio[0] < ratio[1]);
}

/* Two ranks, one stage each, M = 1: F, O, L, BW on each (F 1, BW 1, W 0, comm 0); a copy moves
 * 1 byte at 0.5 a time unit (2 alone); every compute factor 1. With a host link of 0.5 (one
 * copy's bandwidth), two copies in flight in one direction run at half speed each:
 *   r0 F 0..1, r1 F 1..2
 *   r0 O from 1: alone to 2 (half done), beside r1's O to 4 (done)
 *   r1 O from 2: beside to 4 (half done), alone to 5
 *   r0 L from 4 (its O ended): alone to 5 (half), beside r1's L to 7
 *   r1 L from 5: beside to 7 (half), alone to 8
 *   r1 BW 8..9 (waits for its L), r0 BW 9..10 (waits for r1's gradient)
 * Each channel its own (no link): O's 1..3 and 2..4, L's 3..5 and 4..6, BW's 6..7 and 7..8. */
static void test_link_hand_computed(void **state)
{
    (void)state;
    zb_schedule_t *s = zb_schedule_new("hand", 2, 1, ZB_PLACE_LOOP, 1);
    for (int r = 0; r < 2; r++) {
        const zb_action_type_t t[] = {ZB_ACT_F, ZB_ACT_O, ZB_ACT_L, ZB_ACT_BW};
        for (int i = 0; i < 4; i++)
            assert_int_equal(zb_schedule_push(s, r, tu_act(t[i], r, 0)), ZB_OK);
    }
    zb_costs_t c;
    tu_costs(&c, 2, 1, 1, 0, 0);
    zb_err_t e = {0};
    assert_int_equal(zb_costs_set_offload(&c, 1, 0.5, 0.5, 0, &e), ZB_OK);
    set_share(&c, 2, 1.0);
    zb_sim_t sim;
    sim_ok(s, &c, &sim);
    const double own_start[2][4] = {{0, 1, 3, 7}, {1, 2, 4, 6}},
                 own_end[2][4] = {{1, 3, 5, 8}, {2, 4, 6, 7}};
    expect_two_by_two(&sim, own_start, own_end);
    zb_sim_free(&sim);
    c.share.link[0] = c.share.link[1] = 0.5;
    sim_ok(s, &c, &sim);
    const double start[2][4] = {{0, 1, 4, 9}, {1, 2, 5, 8}}, end[2][4] = {{1, 4, 7, 10}, {2, 5, 8, 9}};
    expect_two_by_two(&sim, start, end);
    assert_close(sim.makespan, 10);
    assert_close(sim.peak_mem[0], 1); /* the O's release comes before the L's take at 4 */
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* test_link_hand_computed's schedule and costs (F 1, BW 1, a copy 1 byte at 0.5), with a host
 * link of 100 each way: never binding by itself. */
static zb_schedule_t *copy_pairs(zb_costs_t *c)
{
    zb_schedule_t *s = zb_schedule_new("hand", 2, 1, ZB_PLACE_LOOP, 1);
    for (int r = 0; r < 2; r++) {
        const zb_action_type_t t[] = {ZB_ACT_F, ZB_ACT_O, ZB_ACT_L, ZB_ACT_BW};
        for (int i = 0; i < 4; i++)
            assert_int_equal(zb_schedule_push(s, r, tu_act(t[i], r, 0)), ZB_OK);
    }
    tu_costs(c, 2, 1, 1, 0, 0);
    zb_err_t e = {0};
    assert_int_equal(zb_costs_set_offload(c, 1, 0.5, 0.5, 0, &e), ZB_OK);
    set_share(c, 2, 1.0);
    c->share.link[0] = c->share.link[1] = 100;
    return s;
}

/* Compute 1.5x slower while any copy is in flight (copy_slow): r1's F (1..) runs beside r0's O
 * (1..3): 1.5 long, ends 2.5; everything after it on r1 shifts by 0.5, and r0's BW waits for
 * r1's. Without the factor the timeline is the channels' own (test_link_hand_computed).
 *   r0 F 0..1, O 1..3, L 3..5, BW 7.5..8.5;  r1 F 1..2.5, O 2.5..4.5, L 4.5..6.5, BW 6.5..7.5 */
static void test_compute_beside_copies(void **state)
{
    (void)state;
    zb_costs_t c;
    zb_schedule_t *s = copy_pairs(&c);
    zb_sim_t sim;
    sim_ok(s, &c, &sim);
    assert_close(sim.makespan, 8); /* the link never binds: the channels' own timeline */
    zb_sim_free(&sim);
    for (int p = 0; p < 3; p++)
        c.share.copy_slow[p] = 1.5;
    sim_ok(s, &c, &sim);
    const double start[2][4] = {{0, 1, 3, 7.5}, {1, 2.5, 4.5, 6.5}},
                 end[2][4] = {{1, 3, 5, 8.5}, {2.5, 4.5, 6.5, 7.5}};
    expect_two_by_two(&sim, start, end);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* A link that carries 0.5 both ways together (one copy's bandwidth), each direction alone
 * unbounded: from 3, r1's O (half done) and r0's L share it, 0.25 each; at 5 r1's O ends and
 * r0's L (half done) goes on beside r1's L, both one way, 0.5 each:
 *   r0 F 0..1, O 1..3, L 3..6, BW 8..9;  r1 F 1..2, O 2..5, L 5..7, BW 7..8 */
static void test_link_both_ways(void **state)
{
    (void)state;
    zb_costs_t c;
    zb_schedule_t *s = copy_pairs(&c);
    c.share.link_both = 0.5;
    zb_sim_t sim;
    sim_ok(s, &c, &sim);
    const double start[2][4] = {{0, 1, 3, 8}, {1, 2, 5, 7}},
                 end[2][4] = {{1, 3, 6, 9}, {2, 5, 7, 8}};
    expect_two_by_two(&sim, start, end);
    zb_sim_free(&sim);
    /* a total both ways no pair of copies reaches changes nothing */
    c.share.link_both = 1.0;
    sim_ok(s, &c, &sim);
    assert_close(sim.makespan, 8);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* A link no set of copies can fill (all four ranks' copies at their own bandwidth at once) gives
 * the timeline of channels of their own, for 1f1b and zb-h1 with every stash offloaded. */
static void test_link_that_never_binds(void **state)
{
    (void)state;
    const char *fam[] = {"1f1b", "zb-h1"};
    for (int f = 0; f < 2; f++) {
        zb_schedule_t *plain = tu_gen(fam[f], 4, 8, 0), *s = NULL;
        zb_costs_t c;
        tu_costs(&c, 4, 1, 1, 1, 0.1);
        zb_err_t e = {0};
        assert_int_equal(zb_costs_set_offload(&c, 1, 0.7, 0.9, 0.05, &e), ZB_OK);
        char note[96];
        if (zb_plan_offload(plain, ZB_OFFLOAD_ALL, &c, &s, note, &e) != ZB_OK)
            fail_msg("%s", e.msg);
        assert_true(zb_schedule_has_offload(s));
        set_share(&c, 4, 0.8);
        zb_sim_t own, linked;
        sim_ok(s, &c, &own);
        c.share.link[0] = 4 * 0.7, c.share.link[1] = 4 * 0.9;
        sim_ok(s, &c, &linked);
        for (int r = 0; r < 4; r++)
            for (int i = 0; i < s->rank[r].len; i++) {
                assert_close(linked.start[r][i], own.start[r][i]);
                assert_close(linked.end[r][i], own.end[r][i]);
            }
        assert_close(linked.peak_mem[0], own.peak_mem[0]);
        /* and a link of one copy's bandwidth makes it longer */
        zb_sim_free(&linked);
        c.share.link[0] = 0.7, c.share.link[1] = 0.9;
        sim_ok(s, &c, &linked);
        assert_true(linked.makespan > own.makespan * 1.01);
        zb_sim_free(&own);
        zb_sim_free(&linked);
        zb_costs_free(&c);
        zb_schedule_free(s);
        zb_schedule_free(plain);
    }
}

/* Splitting each rank's costs over chunks (zb_costs_rechunk) keeps the share: the chunks of a
 * rank are still on the device the ranks share, and copy over its link. */
static void test_rechunk_keeps_share(void **state)
{
    (void)state;
    zb_costs_t c, split;
    tu_costs(&c, 4, 1, 1, 1, 0);
    set_share(&c, 4, 0.7);
    c.share.link[0] = 2, c.share.link[1] = 3;
    zb_err_t e = {0};
    assert_int_equal(zb_costs_rechunk(&c, 4, 2, ZB_PLACE_LOOP, &split, &e), ZB_OK);
    assert_int_equal(split.stages, 8);
    assert_memory_equal(&split.share, &c.share, sizeof c.share);
    zb_schedule_t *s = tu_gen("interleaved-1f1b", 4, 8, 2);
    zb_sim_t sim;
    sim_ok(s, &split, &sim); /* 4 ranks sharing, the schedule's 4 ranks */
    zb_sim_free(&sim);
    zb_schedule_free(s);
    zb_costs_free(&split);
    zb_costs_free(&c);
}

static void test_bad_share(void **state)
{
    (void)state;
    zb_schedule_t *s = tu_gen("1f1b", 2, 2, 0);
    zb_costs_t c;
    tu_costs(&c, 2, 1, 1, 1, 0);
    zb_sim_t sim;
    zb_err_t e = {0};
    set_share(&c, 3, 0.5); /* three ranks share it, the schedule has two */
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "shared by 3 ranks"));
    set_share(&c, 2, 0.5);
    c.share.f[1][0] = 0;
    assert_int_equal(zb_costs_check(&c, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "B with 0 others"));
    c.share.f[1][0] = NAN;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_EINVAL);
    c.share.f[1][0] = 0.5;
    c.share.n = ZB_SHARE_MAX + 1;
    assert_int_equal(zb_costs_check(&c, &e), ZB_EINVAL);
    c.share.n = -1;
    assert_int_equal(zb_costs_check(&c, &e), ZB_EINVAL);
    c.share.n = 2;
    c.share.mix[1][2] = 1.5; /* a mix is all there or all 0 */
    assert_int_equal(zb_costs_check(&c, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "mix of F beside F's is 0"));
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++)
            c.share.mix[p][q] = p == 1 && q == 2 ? 1.5 : 1.0;
    assert_int_equal(zb_costs_check(&c, &e), ZB_OK);
    c.share.mix[2][2] = INFINITY;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "mix of W beside W's"));
    c.share.mix[2][2] = 1.0;
    c.share.bw = -1;
    assert_int_equal(zb_costs_check(&c, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "fused BW is -1"));
    c.share.bw = 0.9;
    c.share.link[1] = -2;
    assert_int_equal(zb_costs_check(&c, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "host link bandwidth host to device is -2"));
    c.share.link[1] = NAN;
    assert_int_equal(zb_costs_check(&c, &e), ZB_EINVAL);
    c.share.link[1] = 3;
    c.share.link_both = -1;
    assert_int_equal(zb_costs_check(&c, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "host link bandwidth both ways is -1"));
    c.share.link_both = 5;
    c.share.copy_slow[2] = NAN;
    assert_int_equal(zb_costs_check(&c, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "factor of W beside copies"));
    c.share.copy_slow[2] = 1.2;
    zb_costs_t copy;
    if (zb_costs_clone(&copy, &c, &e) != ZB_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(copy.share.n, 2);
    assert_close(copy.share.f[0][0], 0.5);
    assert_close(copy.share.mix[1][2], 1.5);
    assert_close(copy.share.bw, 0.9);
    assert_close(copy.share.link[1], 3);
    assert_close(copy.share.link_both, 5);
    assert_close(copy.share.copy_slow[2], 1.2);
    zb_costs_free(&copy);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_computed),
        cmocka_unit_test(test_bw_parts),
        cmocka_unit_test(test_mix_hand_computed),
        cmocka_unit_test(test_unit_factors_are_fixed_costs),
        cmocka_unit_test(test_denser_schedule_gains_less),
        cmocka_unit_test(test_link_hand_computed),
        cmocka_unit_test(test_link_that_never_binds),
        cmocka_unit_test(test_compute_beside_copies),
        cmocka_unit_test(test_link_both_ways),
        cmocka_unit_test(test_rechunk_keeps_share),
        cmocka_unit_test(test_bad_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
