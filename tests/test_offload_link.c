/* The host link offload's copies share (src/pipeline/offload_link.c): the copies' mean overlap
 * in a simulated plan (by hand, and against sampling a planned zb-h1), the
 * bandwidth a copy gets from the link's two profiled figures, and the planner's rounds: on a
 * link that one copy alone could fill four times faster than its busy-link share, --offload
 * all is planned with faster copies than the share and a makespan no longer than the share's,
 * its final bandwidths those its own overlap gives. */
#include "schedule_testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/offload_link.h"
#include "schedule/offload_internal.h"

/* A two-rank program of actions of the given types, simulated by hand: start/end per action. */
typedef struct {
    zb_schedule_t s;
    zb_rank_program_t prog[2];
    zb_action_t act[2][3];
    zb_sim_t sim;
    int len[2];
    double start0[3], end0[3], start1[3], end1[3];
    double *start[2], *end[2];
} hand_t;

static void hand(hand_t *h)
{
    memset(h, 0, sizeof *h);
    /* rank 0: O [0, 4], F [4, 6], O [6, 8]; rank 1: O [2, 6], L [1, 3] */
    const uint8_t types[2][3] = {{ZB_ACT_O, ZB_ACT_F, ZB_ACT_O}, {ZB_ACT_O, ZB_ACT_L, 0}};
    const double a[2][3] = {{0, 4, 6}, {2, 1, 0}}, b[2][3] = {{4, 6, 8}, {6, 3, 0}};
    h->len[0] = 3, h->len[1] = 2;
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < h->len[r]; i++)
            h->act[r][i] = (zb_action_t){types[r][i], 0, i, 0};
        h->prog[r] = (zb_rank_program_t){h->act[r], h->len[r], 3};
    }
    memcpy(h->start0, a[0], sizeof h->start0), memcpy(h->end0, b[0], sizeof h->end0);
    memcpy(h->start1, a[1], sizeof h->start1), memcpy(h->end1, b[1], sizeof h->end1);
    h->start[0] = h->start0, h->start[1] = h->start1, h->end[0] = h->end0, h->end[1] = h->end1;
    h->s.ranks = 2, h->s.rank = h->prog;
    h->sim.ranks = 2, h->sim.len = h->len, h->sim.start = h->start, h->sim.end = h->end;
    h->sim.schedule = &h->s;
}

static void test_overlap_by_hand(void **state)
{
    (void)state;
    hand_t h;
    hand(&h);
    /* O's: 4 + 2 + 4 = 10 of copying over [0, 8]: 1.25 at once; one L: 1 */
    assert_true(tu_close(pl_copy_overlap(&h.sim, ZB_ACT_O, 0, 1), 1.25));
    assert_true(tu_close(pl_copy_overlap(&h.sim, ZB_ACT_L, 0, 1), 1.0));
    /* two GPUs: rank 0's O's never overlap each other, rank 1 has one */
    assert_true(tu_close(pl_copy_overlap(&h.sim, ZB_ACT_O, 0, 2), 1.0));
    assert_true(tu_close(pl_copy_overlap(&h.sim, ZB_ACT_O, 1, 2), 1.0));
    assert_true(pl_copy_overlap(&h.sim, ZB_ACT_L, 0, 2) == 0.0); /* rank 0 has no L */
}

static void test_link_bandwidth(void **state)
{
    (void)state;
    /* 4 ranks at 6 each when all copy: a 24 link; alone a copy reaches 20 */
    assert_true(tu_close(pl_link_bandwidth(20, 6, 4, 1), 20));
    assert_true(tu_close(pl_link_bandwidth(20, 6, 4, 0.5), 20));
    assert_true(tu_close(pl_link_bandwidth(20, 6, 4, 2), 12));
    assert_true(tu_close(pl_link_bandwidth(20, 6, 4, 4), 6));
    assert_true(tu_close(pl_link_bandwidth(0, 6, 4, 1), 6)); /* no alone figure: the share */
    assert_true(tu_close(pl_link_bandwidth(20, 6, 1, 1), 6)); /* one rank per GPU */
}

/* the same mean by sampling: the copies' summed durations over the time, sampled at 10^5
 * instants of the plan, that at least one is in flight */
static bool in_flight(const zb_sim_t *sim, int type, double t)
{
    for (int r = 0; r < sim->ranks; r++)
        for (int i = 0; i < sim->len[r]; i++)
            if (sim->schedule->rank[r].actions[i].type == type && sim->start[r][i] <= t &&
                t < sim->end[r][i])
                return true;
    return false;
}

static double sampled_overlap(const zb_sim_t *sim, int type)
{
    double busy = 0, t0 = INFINITY, t1 = -INFINITY;
    for (int r = 0; r < sim->ranks; r++)
        for (int i = 0; i < sim->len[r]; i++)
            if (sim->schedule->rank[r].actions[i].type == type) {
                busy += sim->end[r][i] - sim->start[r][i];
                t0 = fmin(t0, sim->start[r][i]), t1 = fmax(t1, sim->end[r][i]);
            }
    if (busy <= 0)
        return 0;
    const int n = 100000;
    double dt = (t1 - t0) / n, covered = 0;
    for (int k = 0; k < n; k++)
        covered += in_flight(sim, type, t0 + (k + 0.5) * dt) ? dt : 0;
    return busy / covered;
}

static zb_schedule_t *zbh1(zb_costs_t *c)
{
    zb_gen_params_t q = {.ranks = 4, .microbatches = 8, .costs = c};
    zb_schedule_t *s = NULL;
    zb_err_t e;
    assert_int_equal(zb_generate("zb-h1", &q, &s, &e), ZB_OK);
    return s;
}

static double makespan(const zb_schedule_t *s, const zb_costs_t *c)
{
    zb_sim_t sim;
    zb_err_t e;
    assert_int_equal(zb_simulate(s, c, &sim, &e), ZB_OK);
    double mk = sim.makespan;
    zb_sim_free(&sim);
    return mk;
}

/* Four stages of time 1 (F, B, W), a stash of 1 byte per stage, copies at bw bytes a unit. */
static void unit_costs(zb_costs_t *c, double bw)
{
    zb_err_t e;
    assert_int_equal(zb_costs_init_uniform(c, 4, 1, 1, 1, 0, 1, 0, -1, &e), ZB_OK);
    assert_int_equal(zb_costs_set_offload(c, 1, bw, bw, 0, &e), ZB_OK);
}

/* The four ranks share the device with every compute factor 1 and a host link of `link`. */
static void share_link(zb_costs_t *c, double link)
{
    c->share.n = 4;
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < 4; k++)
            c->share.f[p][k] = 1.0;
    c->share.link[0] = c->share.link[1] = link;
}

static void test_planned_rounds(void **state)
{
    (void)state;
    zb_costs_t c;
    zb_err_t e;
    /* stages of time 1, a stash of 1 byte per stage; the share: 0.25 B/s (a copy 4 units) */
    unit_costs(&c, 0.25);
    zb_schedule_t *plain = zbh1(&c), *shared = NULL, *linked = NULL;
    char note[96];
    assert_int_equal(zb_plan_offload(plain, ZB_OFFLOAD_ALL, &c, &shared, note, &e), ZB_OK);

    /* the brute-force sweep agrees with pl_copy_overlap on a real plan */
    zb_sim_t sim;
    assert_int_equal(zb_simulate(shared, &c, &sim, &e), ZB_OK);
    for (int type = ZB_ACT_O; type <= ZB_ACT_L; type++) {
        double k = pl_copy_overlap(&sim, type, 0, 1), want = sampled_overlap(&sim, type);
        if (fabs(k - want) > 1e-2 * want)
            fail_msg("overlap of %s: %g, sampled %g", type == ZB_ACT_O ? "O" : "L", k, want);
        assert_true(k >= 1.0 && k <= 4.0);
    }
    zb_sim_free(&sim);

    zb_costs_t d;
    assert_int_equal(zb_costs_clone(&d, &c, &e), ZB_OK);
    const pl_link_t link = {1.0, 1.0, 0.25, 0.25, 4, 1};
    assert_int_equal(pl_plan_offload_on_link(plain, ZB_OFFLOAD_ALL, &d, &link, &linked, note, &e),
                     ZB_OK);
    assert_true(d.bw_d2h > 0.25 && d.bw_h2d > 0.25);
    double mk_shared = makespan(shared, &c), mk_linked = makespan(linked, &d);
    print_message("    zb-h1 --offload all: share %.2f B/s, makespan %.2f; on the link %.2f / %.2f "
                  "B/s, makespan %.2f\n",
                  c.bw_d2h, mk_shared, d.bw_d2h, d.bw_h2d, mk_linked);
    assert_true(mk_linked <= mk_shared + 1e-9);
    /* the last plan's bandwidths are those its own overlap gives (within the rounds' 2 %, or the
     * rounds ran out) */
    assert_int_equal(zb_simulate(linked, &d, &sim, &e), ZB_OK);
    double want = pl_link_bandwidth(1.0, 0.25, 4, pl_copy_overlap(&sim, ZB_ACT_O, 0, 1));
    zb_sim_free(&sim);
    print_message("    the last plan's overlap gives %.3f B/s to the host\n", want);
    assert_true(fabs(d.bw_d2h / want - 1) < 0.05);

    /* without an alone figure: one plan at the share */
    zb_schedule_t *same = NULL;
    zb_costs_t f;
    assert_int_equal(zb_costs_clone(&f, &c, &e), ZB_OK);
    const pl_link_t none = {0, 0, 0.25, 0.25, 4, 1};
    assert_int_equal(pl_plan_offload_on_link(plain, ZB_OFFLOAD_ALL, &f, &none, &same, note, &e),
                     ZB_OK);
    assert_true(f.bw_d2h == 0.25 && tu_close(makespan(same, &f), mk_shared));

    zb_schedule_free(same), zb_schedule_free(linked), zb_schedule_free(shared);
    zb_schedule_free(plain);
    zb_costs_free(&f), zb_costs_free(&d), zb_costs_free(&c);
}

static void expect_same_programs(const zb_schedule_t *a, const zb_schedule_t *b, const char *what)
{
    assert_int_equal(a->ranks, b->ranks);
    for (int r = 0; r < a->ranks; r++) {
        if (a->rank[r].len != b->rank[r].len)
            fail_msg("%s: rank %d has %d actions, not %d", what, r, b->rank[r].len,
                     a->rank[r].len);
        for (int i = 0; i < a->rank[r].len; i++) {
            const zb_action_t *x = &a->rank[r].actions[i], *y = &b->rank[r].actions[i];
            if (x->type != y->type || x->stage != y->stage || x->mb != y->mb ||
                x->flags != y->flags)
                fail_msg("%s: rank %d action %d differs", what, r, i);
        }
    }
}

/* With the link in the costs' simulation (share.link, each copy at the alone bandwidth): ALL is
 * placed by the rounds on the busy share with the link out, and the costs get their link and
 * alone bandwidths back; AUTO is planned on the simulated link directly, and under these limits
 * chooses better than the rounds at the share (27 against 32 on the link). */
static void test_planned_on_a_simulated_link(void **state)
{
    (void)state;
    zb_costs_t c, d, r;
    zb_err_t e;
    unit_costs(&c, 1.0);
    share_link(&c, 4 * 0.25);
    const pl_link_t link = {1.0, 1.0, 0.25, 0.25, 4, 1};
    zb_schedule_t *plain = zbh1(&c), *got = NULL, *want = NULL;
    char note[96];
    /* ALL: what the rounds give without the link, at the share */
    assert_int_equal(zb_costs_clone(&d, &c, &e), ZB_OK);
    assert_int_equal(pl_plan_offload_on_link(plain, ZB_OFFLOAD_ALL, &d, &link, &got, note, &e),
                     ZB_OK);
    assert_int_equal(zb_costs_clone(&r, &c, &e), ZB_OK);
    r.share.link[0] = r.share.link[1] = 0;
    r.bw_d2h = r.bw_h2d = 0.25;
    assert_int_equal(pl_plan_offload_on_link(plain, ZB_OFFLOAD_ALL, &r, &link, &want, note, &e),
                     ZB_OK);
    expect_same_programs(want, got, "ALL on a simulated link");
    assert_true(d.share.link[0] == 1.0 && d.share.link[1] == 1.0);
    assert_true(d.bw_d2h == 1.0 && d.bw_h2d == 1.0);
    print_message("    zb-h1 --offload all on one link of 1 B/s: makespan %.2f (channels of their "
                  "own at the rounds' bandwidth: %.2f)\n",
                  makespan(got, &d), makespan(want, &r));
    assert_true(makespan(got, &d) > makespan(plain, &c)); /* the link holds the copies back */
    zb_schedule_free(got), zb_schedule_free(want);
    zb_costs_free(&r), zb_costs_free(&d);
    /* AUTO under a limit: zb_plan_offload on the costs as they are, the link in them */
    zb_sim_t sim;
    assert_int_equal(zb_simulate(plain, &c, &sim, &e), ZB_OK);
    double lim[4]; /* rank 0 two stashes under its peak, rank 1 one, the others at theirs */
    for (int k = 0; k < 4; k++)
        lim[k] = sim.peak_mem[k] - (k == 0 ? 2 : k == 1 ? 1 : 0);
    zb_sim_free(&sim);
    assert_int_equal(zb_costs_set_rank_limits(&c, 4, lim, &e), ZB_OK);
    assert_int_equal(zb_costs_clone(&d, &c, &e), ZB_OK);
    if (pl_plan_offload_on_link(plain, ZB_OFFLOAD_AUTO, &d, &link, &got, note, &e) != ZB_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(zb_plan_offload(plain, ZB_OFFLOAD_AUTO, &c, &want, note, &e), ZB_OK);
    assert_true(zb_schedule_has_offload(got) || zb_schedule_has_recompute(got));
    expect_same_programs(want, got, "AUTO on a simulated link");
    assert_true(d.bw_d2h == 1.0 && d.share.link[0] == 1.0);
    /* ... which chooses better here than the rounds at the share with the link out */
    zb_schedule_t *rounds = NULL;
    assert_int_equal(zb_costs_clone(&r, &c, &e), ZB_OK);
    r.share.link[0] = r.share.link[1] = 0;
    r.bw_d2h = r.bw_h2d = 0.25;
    assert_int_equal(pl_plan_offload_on_link(plain, ZB_OFFLOAD_AUTO, &r, &link, &rounds, note, &e),
                     ZB_OK);
    const double mk_link = makespan(got, &c), mk_rounds = makespan(rounds, &c);
    print_message("    zb-h1 --offload auto under the limits, on the link: planned on it %.2f, "
                  "planned at the share %.2f\n", mk_link, mk_rounds);
    assert_true(mk_link < mk_rounds);
    zb_schedule_free(rounds), zb_costs_free(&r);
    zb_schedule_free(got), zb_schedule_free(want), zb_schedule_free(plain);
    zb_costs_free(&d), zb_costs_free(&c);
}

/* On a shared link zb_plan_offload pulls a reload whose backward waited for it earlier
 * (offload_pull.c): --offload all on zb-h1 with copies as long as a stage and a link one copy
 * fills ends sooner than zb_add_offload's placement; on zb-h2, where pulling freely raises a
 * peak, --offload all keeps every rank within the placement's peak; without a link the plan is
 * zb_add_offload's. */
static void test_reloads_pulled_on_a_shared_link(void **state)
{
    (void)state;
    zb_costs_t c;
    zb_err_t e;
    unit_costs(&c, 1.0);
    zb_schedule_t *plain = zbh1(&c), *placed = NULL, *pulled = NULL;
    char note[96];
    /* no link: the planner's plan is the placement itself */
    assert_int_equal(zb_add_offload_all(plain, &c, &placed, &e), ZB_OK);
    assert_int_equal(zb_plan_offload(plain, ZB_OFFLOAD_ALL, &c, &pulled, note, &e), ZB_OK);
    expect_same_programs(placed, pulled, "ALL without a link");
    zb_schedule_free(placed), zb_schedule_free(pulled);
    share_link(&c, 1.0);
    assert_int_equal(zb_add_offload_all(plain, &c, &placed, &e), ZB_OK);
    assert_int_equal(zb_plan_offload(plain, ZB_OFFLOAD_ALL, &c, &pulled, note, &e), ZB_OK);
    const double before = makespan(placed, &c), after = makespan(pulled, &c);
    print_message("    zb-h1 --offload all on one link a copy fills: makespan %.2f placed, %.2f "
                  "with reloads pulled\n", before, after);
    assert_true(after < before);
    assert_int_equal(zb_validate(pulled, &c, &e), ZB_OK);
    zb_schedule_free(placed), zb_schedule_free(pulled), zb_schedule_free(plain);
    /* zb-h2 with B 1.5, where pulling freely would raise a rank's peak (1 stash): --offload all
     * keeps every rank within the peak the placement left it, and is no longer */
    c.t_b[0] = c.t_b[1] = c.t_b[2] = c.t_b[3] = 1.5;
    zb_gen_params_t q = {.ranks = 4, .microbatches = 8, .costs = &c};
    assert_int_equal(zb_generate("zb-h2", &q, &plain, &e), ZB_OK);
    assert_int_equal(zb_add_offload_all(plain, &c, &placed, &e), ZB_OK);
    assert_int_equal(zb_plan_offload(plain, ZB_OFFLOAD_ALL, &c, &pulled, note, &e), ZB_OK);
    zb_sim_t a, b;
    assert_int_equal(zb_simulate(placed, &c, &a, &e), ZB_OK);
    assert_int_equal(zb_simulate(pulled, &c, &b, &e), ZB_OK);
    for (int r = 0; r < 4; r++)
        if (b.peak_mem[r] > a.peak_mem[r])
            fail_msg("rank %d: peak %g after pulling, %g placed", r, b.peak_mem[r], a.peak_mem[r]);
    print_message("    zb-h2 --offload all: makespan %.2f placed, %.2f pulled within its peaks\n",
                  a.makespan, b.makespan);
    assert_true(b.makespan <= a.makespan);
    zb_sim_free(&a), zb_sim_free(&b);
    zb_schedule_free(placed), zb_schedule_free(pulled), zb_schedule_free(plain);
    zb_costs_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overlap_by_hand),
        cmocka_unit_test(test_link_bandwidth),
        cmocka_unit_test(test_planned_rounds),
        cmocka_unit_test(test_planned_on_a_simulated_link),
        cmocka_unit_test(test_reloads_pulled_on_a_shared_link),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
