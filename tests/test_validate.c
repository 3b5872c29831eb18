/* Validator: each rule rejects what it names, deadlocks are reported as wait-for cycles, and the
 * validator and the simulator agree on random perturbations of valid schedules. */
#include "schedule_testutil.h"

#include <stdlib.h>
#include <string.h>

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

/* A small valid split schedule to break in various ways. */
static zb_schedule_t *base(void)
{
    return tu_gen("zb-h1", 3, 4, 0);
}

/* Find the index of an action on a rank (fails the test if absent). */
static int find(const zb_schedule_t *s, int r, zb_action_type_t t, int stage, int mb)
{
    for (int i = 0; i < s->rank[r].len; i++) {
        zb_action_t a = s->rank[r].actions[i];
        if (a.type == t && a.stage == stage && a.mb == mb)
            return i;
    }
    fail_msg("action %s(%d,%d) not on rank %d", zb_action_type_name(t), stage, mb, r);
    return -1;
}

static void remove_at(zb_schedule_t *s, int r, int i)
{
    zb_rank_program_t *p = &s->rank[r];
    memmove(&p->actions[i], &p->actions[i + 1], (size_t)(p->len - i - 1) * sizeof *p->actions);
    p->len--;
}

static void swap(zb_schedule_t *s, int r, int i, int j)
{
    zb_action_t t = s->rank[r].actions[i];
    s->rank[r].actions[i] = s->rank[r].actions[j];
    s->rank[r].actions[j] = t;
}

static void test_accepts_generated(void **state)
{
    (void)state;
    zb_schedule_t *s = base();
    expect(s, NULL, ZB_OK, NULL);
    zb_schedule_free(s);
}

static void test_completeness_rules(void **state)
{
    (void)state;
    zb_schedule_t *s = base();
    remove_at(s, 1, find(s, 1, ZB_ACT_F, 1, 2));
    expect(s, NULL, ZB_ESCHEDULE, "F(stage 1, mb 2) is missing");
    zb_schedule_free(s);

    s = base();
    zb_schedule_push(s, 2, tu_act(ZB_ACT_B, 2, 3));
    expect(s, NULL, ZB_ESCHEDULE, "B(stage 2, mb 3) appears more than once");
    zb_schedule_free(s);

    s = base();
    remove_at(s, 0, find(s, 0, ZB_ACT_W, 0, 1));
    expect(s, NULL, ZB_ESCHEDULE, "W(stage 0, mb 1) is missing");
    zb_schedule_free(s);

    s = base(); /* W without B */
    remove_at(s, 0, find(s, 0, ZB_ACT_B, 0, 1));
    expect(s, NULL, ZB_ESCHEDULE, "B(stage 0, mb 1) is missing");
    zb_schedule_free(s);

    s = base(); /* fused and split backward for the same (stage, mb) */
    zb_schedule_push(s, 1, tu_act(ZB_ACT_BW, 1, 0));
    expect(s, NULL, ZB_ESCHEDULE, "BW(stage 1, mb 0) is mixed");
    zb_schedule_free(s);

    s = base(); /* W before its B on the same rank */
    swap(s, 2, find(s, 2, ZB_ACT_B, 2, 0), find(s, 2, ZB_ACT_W, 2, 0));
    expect(s, NULL, ZB_ESCHEDULE, "W(stage 2, mb 0) comes before its B");
    zb_schedule_free(s);

    s = base(); /* a BW schedule may replace a B/W pair per (stage, mb) */
    int b = find(s, 2, ZB_ACT_B, 2, 3);
    s->rank[2].actions[b].type = ZB_ACT_BW;
    remove_at(s, 2, find(s, 2, ZB_ACT_W, 2, 3));
    expect(s, NULL, ZB_OK, NULL);
    zb_schedule_free(s);
}

static void test_structure_rules(void **state)
{
    (void)state;
    zb_schedule_t *s = base();
    zb_schedule_push(s, 0, tu_act(ZB_ACT_F, 1, 0)); /* stage 1 lives on rank 1 */
    expect(s, NULL, ZB_ESCHEDULE, "stage 1 belongs to rank 1");
    zb_schedule_free(s);

    s = base();
    zb_schedule_push(s, 0, tu_act(ZB_ACT_F, 3, 0));
    expect(s, NULL, ZB_ESCHEDULE, "stage 3 out of range");
    zb_schedule_free(s);

    s = base();
    zb_schedule_push(s, 0, tu_act(ZB_ACT_F, 0, 4));
    expect(s, NULL, ZB_ESCHEDULE, "microbatch 4 out of range");
    zb_schedule_free(s);

    s = base();
    zb_schedule_push(s, 0, tu_act(ZB_ACT_F, 0, -1));
    expect(s, NULL, ZB_ESCHEDULE, "out of range");
    zb_schedule_free(s);

    s = base();
    s->rank[1].actions[0].type = 200;
    expect(s, NULL, ZB_ESCHEDULE, "unknown type");
    zb_schedule_free(s);

    s = base();
    zb_costs_t c;
    tu_costs(&c, 4, 1, 1, 1, 0); /* wrong stage count */
    expect(s, &c, ZB_EINVAL, "stages");
    zb_costs_free(&c);
    expect(NULL, NULL, ZB_EINVAL, NULL);
    zb_schedule_free(s);
}

static void test_memory_limit(void **state)
{
    (void)state;
    const int P = 4;
    zb_schedule_t *s = tu_gen("zb-h2", P, 12, 0);
    zb_costs_t c;
    tu_costs(&c, P, 1, 1, 1, 0);
    expect(s, &c, ZB_OK, NULL); /* no limit */
    c.mem_limit = 2 * P - 1;
    expect(s, &c, ZB_OK, NULL);
    c.mem_limit = 2 * P - 2;
    expect(s, &c, ZB_EMEMLIMIT, "rank 0 needs 7");
    zb_costs_free(&c);
    /* float noise: 0.1 + 0.1 + 0.1 > 0.3 in binary, yet a peak of three 0.1s fits 0.3 */
    zb_schedule_t *t = tu_gen("1f1b", 3, 6, 0);
    zb_costs_init_uniform(&c, 3, 1, 1, 1, 0, 0.1, 0, -0.1, NULL);
    assert_true(0.1 + 0.1 + 0.1 > 0.3);
    c.mem_limit = 0.3;
    expect(t, &c, ZB_OK, NULL);
    c.mem_limit = 0.29;
    expect(t, &c, ZB_EMEMLIMIT, "limit 0.29");
    zb_costs_free(&c);
    zb_schedule_free(t);
    zb_schedule_free(s);
}

/* Rank 0 waits for the backward of mb 0 before sending mb 1 forward; rank 1 insists on doing
 * mb 1's forward before mb 0's backward: a two-rank cycle. */
static void test_deadlock_cycle_message(void **state)
{
    (void)state;
    zb_schedule_t *s = zb_schedule_new("cycle", 2, 1, ZB_PLACE_LOOP, 2);
    const zb_action_t r0[] = {tu_act(ZB_ACT_F, 0, 0), tu_act(ZB_ACT_BW, 0, 0),
                              tu_act(ZB_ACT_F, 0, 1), tu_act(ZB_ACT_BW, 0, 1)};
    const zb_action_t r1[] = {tu_act(ZB_ACT_F, 1, 0), tu_act(ZB_ACT_F, 1, 1),
                              tu_act(ZB_ACT_BW, 1, 0), tu_act(ZB_ACT_BW, 1, 1)};
    for (int i = 0; i < 4; i++) {
        zb_schedule_push(s, 0, r0[i]);
        zb_schedule_push(s, 1, r1[i]);
    }
    expect(s, NULL, ZB_EDEADLOCK, "rank 0 waits at RECV_B(stage 0, mb 0) for rank 1");
    expect(s, NULL, ZB_EDEADLOCK, "rank 1 waits at RECV_F(stage 1, mb 1) for rank 0");

    zb_costs_t c;
    tu_costs(&c, 2, 1, 1, 1, 0);
    zb_sim_t sim;
    zb_err_t e;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_EDEADLOCK);
    assert_null(sim.start);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* B before its own F on the same rank: the rank waits on itself. */
static void test_self_deadlock(void **state)
{
    (void)state;
    zb_schedule_t *s = zb_schedule_new("self", 1, 1, ZB_PLACE_LOOP, 2);
    zb_schedule_push(s, 0, tu_act(ZB_ACT_F, 0, 0));
    zb_schedule_push(s, 0, tu_act(ZB_ACT_BW, 0, 1));
    zb_schedule_push(s, 0, tu_act(ZB_ACT_F, 0, 1));
    zb_schedule_push(s, 0, tu_act(ZB_ACT_BW, 0, 0));
    expect(s, NULL, ZB_EDEADLOCK, "rank 0 waits at BW(stage 0, mb 1) for its own F(stage 0, mb 1)");
    zb_schedule_free(s);
}

static void test_lowered_pairing(void **state)
{
    (void)state;
    zb_err_t e;
    zb_schedule_t *s = base(), *low;
    assert_int_equal(zb_insert_comms(s, &low, &e), ZB_OK);
    expect(low, NULL, ZB_OK, NULL);

    zb_schedule_t *t = zb_schedule_clone(low);
    remove_at(t, 1, find(t, 1, ZB_ACT_RECV_F, 1, 2));
    expect(t, NULL, ZB_ESCHEDULE, "RECV_F(stage 1, mb 2) is missing");
    zb_schedule_free(t);

    t = zb_schedule_clone(low);
    remove_at(t, 2, find(t, 2, ZB_ACT_SEND_B, 2, 0));
    expect(t, NULL, ZB_ESCHEDULE, "SEND_B(stage 2, mb 0) is missing");
    zb_schedule_free(t);

    t = zb_schedule_clone(low);
    zb_schedule_push(t, 0, tu_act(ZB_ACT_SEND_F, 0, 1));
    expect(t, NULL, ZB_ESCHEDULE, "SEND_F(stage 0, mb 1) appears more than once");
    zb_schedule_free(t);

    t = zb_schedule_clone(low); /* RECV moved after the F that consumes it */
    int i = find(t, 1, ZB_ACT_RECV_F, 1, 1);
    swap(t, 1, i, i + 1);
    expect(t, NULL, ZB_ESCHEDULE, "RECV_F(stage 1, mb 1) comes after");
    zb_schedule_free(t);

    t = zb_schedule_clone(low); /* no peer stage */
    zb_schedule_push(t, 2, tu_act(ZB_ACT_SEND_F, 2, 0));
    expect(t, NULL, ZB_ESCHEDULE, "no peer stage");
    zb_schedule_free(t);
    zb_schedule_free(low);
    zb_schedule_free(s);

    /* a message between two stages on the same rank (V placement, stages P-1 and P) */
    s = zb_schedule_new("v", 2, 2, ZB_PLACE_V, 1);
    const zb_action_t prog0[] = {tu_act(ZB_ACT_F, 0, 0), tu_act(ZB_ACT_SEND_F, 0, 0),
                                 tu_act(ZB_ACT_RECV_B, 0, 0), tu_act(ZB_ACT_BW, 0, 0),
                                 tu_act(ZB_ACT_RECV_F, 3, 0), tu_act(ZB_ACT_F, 3, 0),
                                 tu_act(ZB_ACT_BW, 3, 0), tu_act(ZB_ACT_SEND_B, 3, 0)};
    const zb_action_t prog1[] = {tu_act(ZB_ACT_RECV_F, 1, 0), tu_act(ZB_ACT_F, 1, 0),
                                 tu_act(ZB_ACT_SEND_F, 1, 0), tu_act(ZB_ACT_RECV_F, 2, 0),
                                 tu_act(ZB_ACT_F, 2, 0),      tu_act(ZB_ACT_SEND_F, 2, 0),
                                 tu_act(ZB_ACT_RECV_B, 2, 0), tu_act(ZB_ACT_BW, 2, 0),
                                 tu_act(ZB_ACT_BW, 1, 0),     tu_act(ZB_ACT_SEND_B, 1, 0)};
    for (size_t k = 0; k < sizeof prog0 / sizeof *prog0; k++)
        zb_schedule_push(s, 0, prog0[k]);
    for (size_t k = 0; k < sizeof prog1 / sizeof *prog1; k++)
        zb_schedule_push(s, 1, prog1[k]);
    expect(s, NULL, ZB_ESCHEDULE, "links two stages on the same rank");
    zb_schedule_free(s);
}

/* Random swaps inside one rank of a valid schedule: whatever the validator says about deadlock,
 * the simulator must agree. Both lowered and compute-only programs are perturbed. */
static void test_agrees_with_simulator(void **state)
{
    (void)state;
    const char *fam[] = {"1f1b", "zb-h1", "zb-h2", "interleaved-1f1b", "gpipe"};
    unsigned seed = 12345;
    int deadlocks = 0, oks = 0;
    for (int trial = 0; trial < 600; trial++) {
        seed = seed * 1103515245u + 12345u;
        const char *f = fam[(seed >> 16) % 5];
        int P = 2 + (int)((seed >> 8) % 3);
        int M = P * (1 + (int)((seed >> 4) % 2));
        zb_schedule_t *s = tu_gen(f, P, M, 0);
        bool lower = trial % 2;
        if (lower) {
            zb_schedule_t *low;
            assert_int_equal(zb_insert_comms(s, &low, NULL), ZB_OK);
            zb_schedule_free(s);
            s = low;
        }
        int swaps = 1 + trial % 3;
        for (int k = 0; k < swaps; k++) {
            seed = seed * 1103515245u + 12345u;
            int r = (int)((seed >> 16) % (unsigned)P);
            int n = s->rank[r].len;
            seed = seed * 1103515245u + 12345u;
            int i = (int)((seed >> 16) % (unsigned)n), j = (int)((seed >> 3) % (unsigned)n);
            swap(s, r, i, j);
        }
        zb_costs_t c;
        tu_costs(&c, s->stages, 1, 1.5, 0.5, 0.1);
        zb_err_t ev = {0}, es = {0};
        zb_status_t v = zb_validate(s, NULL, &ev);
        zb_sim_t sim;
        zb_status_t sm = zb_simulate(s, &c, &sim, &es);
        if (v == ZB_OK)
            if (sm != ZB_OK)
                fail_msg("trial %d: validator accepts, simulator says %s", trial, es.msg);
        if (v == ZB_EDEADLOCK && sm != ZB_EDEADLOCK)
            fail_msg("trial %d: validator: %s; simulator status %d", trial, ev.msg, sm);
        if (sm == ZB_EDEADLOCK && v == ZB_OK)
            fail_msg("trial %d: simulator deadlocks, validator accepts", trial);
        deadlocks += v == ZB_EDEADLOCK;
        oks += v == ZB_OK;
        if (sm == ZB_OK)
            zb_sim_free(&sim);
        zb_costs_free(&c);
        zb_schedule_free(s);
    }
    /* the experiment must exercise both outcomes */
    assert_true(deadlocks > 20);
    assert_true(oks > 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_generated),
        cmocka_unit_test(test_completeness_rules),
        cmocka_unit_test(test_structure_rules),
        cmocka_unit_test(test_memory_limit),
        cmocka_unit_test(test_deadlock_cycle_message),
        cmocka_unit_test(test_self_deadlock),
        cmocka_unit_test(test_lowered_pairing),
        cmocka_unit_test(test_agrees_with_simulator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
