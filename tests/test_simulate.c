/* Simulator: hand-computed timelines, compute-only vs lowered agreement, comm latency, memory
 * peaks, and bad input. */
#include "schedule_testutil.h"

#include <string.h>

static zb_schedule_t *tiny_1f1b(void)
{
    return tu_gen("1f1b", 2, 1, 0);
}

/* P=2, M=1, F=1, B=2, W=3, comm=0.5:
 * rank 0: F 0..1,                BW 8..13   (gradient leaves rank 1 at 7.5, arrives 8)
 * rank 1: F 1.5..2.5, BW 2.5..7.5          (activation leaves rank 0 at 1, arrives 1.5) */
static void check_tiny(const zb_schedule_t *s, const zb_sim_t *sim)
{
    assert_close(sim->makespan, 13);
    assert_close(sim->span[0], 13);
    assert_close(sim->span[1], 6);
    assert_close(sim->busy[0], 6);
    assert_close(sim->busy[1], 6);
    assert_close(sim->span_max, 13);
    assert_close(sim->busy_max, 6);
    assert_close(sim->bubble_rate, 7.0 / 13.0);
    assert_close(sim->peak_mem[0], 2);
    assert_close(sim->peak_time[0], 0);
    assert_close(sim->peak_mem[1], 2);
    assert_close(sim->peak_time[1], 1.5);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            zb_action_t a = s->rank[r].actions[i];
            double want0 = -1;
            if (a.type == ZB_ACT_F)
                want0 = r == 0 ? 0 : 1.5;
            if (a.type == ZB_ACT_BW)
                want0 = r == 0 ? 8 : 2.5;
            if (a.type == ZB_ACT_RECV_B) /* blocks until the message arrives */
                want0 = 8;
            if (a.type == ZB_ACT_SEND_B)
                want0 = 7.5;
            if (want0 >= 0)
                assert_close(sim->start[r][i], want0);
            if (!zb_action_is_compute(a.type))
                assert_close(sim->end[r][i], sim->start[r][i]); /* comms take no time */
        }
}

static void test_hand_computed(void **state)
{
    (void)state;
    zb_schedule_t *s = tiny_1f1b(), *low;
    zb_costs_t c;
    zb_err_t e;
    assert_int_equal(zb_costs_init_uniform(&c, 2, 1, 2, 3, 0.5, 2, -0.5, -1.5, &e), ZB_OK);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    assert_ptr_equal(sim.schedule, s);
    assert_int_equal(sim.len[0], 2);
    check_tiny(s, &sim);
    zb_sim_free(&sim);

    assert_int_equal(zb_insert_comms(s, &low, &e), ZB_OK);
    assert_int_equal(zb_simulate(low, &c, &sim, &e), ZB_OK);
    assert_int_equal(sim.len[0], 4);
    check_tiny(low, &sim);
    zb_sim_free(&sim);
    zb_sim_free(&sim); /* idempotent */
    zb_schedule_free(low);
    zb_schedule_free(s);
    zb_costs_free(&c);
}

/* With comm latency, lowering changes nothing about compute timing. */
static void test_lowered_matches_compute_only(void **state)
{
    (void)state;
    const char *fam[] = {"gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b"};
    for (int f = 0; f < 5; f++) {
        zb_schedule_t *s = tu_gen(fam[f], 4, 8, 0), *low;
        zb_costs_t c;
        tu_costs(&c, s->stages, 1.25, 2, 0.75, 0.3);
        c.t_f[1] = 3; /* one slow stage */
        zb_sim_t a, b;
        zb_err_t e;
        assert_int_equal(zb_simulate(s, &c, &a, &e), ZB_OK);
        assert_int_equal(zb_insert_comms(s, &low, &e), ZB_OK);
        assert_int_equal(zb_simulate(low, &c, &b, &e), ZB_OK);
        assert_close(a.makespan, b.makespan);
        assert_close(a.bubble_rate, b.bubble_rate);
        for (int r = 0; r < 4; r++) {
            assert_close(a.span[r], b.span[r]);
            assert_close(a.busy[r], b.busy[r]);
            assert_close(a.peak_mem[r], b.peak_mem[r]);
            /* compute actions start at the same times in both programs */
            for (int i = 0, j = 0; i < s->rank[r].len; i++, j++) {
                while (!zb_action_is_compute(low->rank[r].actions[j].type))
                    j++;
                assert_close(a.start[r][i], b.start[r][j]);
            }
        }
        zb_sim_free(&a);
        zb_sim_free(&b);
        zb_schedule_free(low);
        zb_schedule_free(s);
        zb_costs_free(&c);
    }
}

/* One microbatch walks down and back up: every hop pays the latency once each way. */
static void test_comm_latency(void **state)
{
    (void)state;
    for (int P = 1; P <= 6; P++) {
        zb_schedule_t *s = tu_gen("zb-h1", P, 1, 0);
        zb_costs_t c;
        tu_costs(&c, P, 1, 2, 3, 0.25);
        zb_sim_t sim;
        assert_int_equal(zb_simulate(s, &c, &sim, NULL), ZB_OK);
        /* critical path: P forwards, P input-gradients, rank 0's W, 2(P-1) messages */
        assert_close(sim.makespan, P * 1.0 + P * 2.0 + 3.0 + 2 * (P - 1) * 0.25);
        zb_sim_free(&sim);
        zb_schedule_free(s);
        zb_costs_free(&c);
    }
}

static void test_peak_memory_time(void **state)
{
    (void)state;
    /* 1f1b P=2 M=4, rank 0: F0 F1 BW0 F2 BW1 F3 BW2 BW3; peak 2 first at the start of F1 */
    zb_schedule_t *s = tu_gen("1f1b", 2, 4, 0);
    zb_costs_t c;
    tu_costs(&c, 2, 1, 1, 1, 0);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, &c, &sim, NULL), ZB_OK);
    assert_close(sim.peak_mem[0], 2);
    assert_close(sim.peak_time[0], 1);
    assert_close(sim.peak_mem[1], 1);
    assert_close(sim.peak_time[1], 1);
    zb_sim_free(&sim);
    zb_schedule_free(s);
    zb_costs_free(&c);
}

/* Which ranks finish last: 1F1B's first rank (its last B comes after every other rank's);
 * with a tolerance of the whole makespan, every rank. */
static void test_last_ranks(void **state)
{
    (void)state;
    zb_gen_params_t gp = {.ranks = 4, .microbatches = 8};
    zb_schedule_t *s = NULL;
    zb_costs_t c;
    zb_err_t e;
    assert_int_equal(zb_generate("1f1b", &gp, &s, &e), ZB_OK);
    assert_int_equal(zb_costs_init_uniform(&c, 4, 1, 2, 0, 0, 1, 0, -1, &e), ZB_OK);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    unsigned char last[4];
    assert_int_equal(zb_sim_last_ranks(&sim, 0.01, last), 1);
    assert_int_equal(last[0], 1);
    assert_int_equal(zb_sim_last_ranks(&sim, 0.999, last), 4);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
}

/* Each rank's time in one kind of action: zb-h1 with F 1, B 2, W 3 holds 8 of each, BW none;
 * a schedule of another shape than the timeline gives nothing. */
static void test_type_time(void **state)
{
    (void)state;
    zb_gen_params_t gp = {.ranks = 4, .microbatches = 8};
    zb_schedule_t *s = NULL, *other = NULL;
    zb_costs_t c;
    zb_err_t e;
    assert_int_equal(zb_generate("zb-h1", &gp, &s, &e), ZB_OK);
    gp.microbatches = 4;
    assert_int_equal(zb_generate("zb-h1", &gp, &other, &e), ZB_OK);
    assert_int_equal(zb_costs_init_uniform(&c, 4, 1, 2, 3, 0.5, 1, 0, -1, &e), ZB_OK);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    for (int r = 0; r < 4; r++) {
        int n = -1;
        assert_true(tu_close(zb_sim_type_time(&sim, s, r, ZB_ACT_F, &n), 8));
        assert_int_equal(n, 8);
        assert_true(tu_close(zb_sim_type_time(&sim, s, r, ZB_ACT_B, &n), 16));
        assert_true(tu_close(zb_sim_type_time(&sim, s, r, ZB_ACT_W, &n), 24));
        assert_int_equal(n, 8);
        assert_true(zb_sim_type_time(&sim, s, r, ZB_ACT_BW, &n) == 0 && n == 0);
        assert_true(zb_sim_type_time(&sim, other, r, ZB_ACT_F, &n) == 0 && n == 0);
    }
    assert_true(zb_sim_type_time(&sim, s, 4, ZB_ACT_F, NULL) == 0);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
    zb_schedule_free(other);
}

static void test_bad_input(void **state)
{
    (void)state;
    zb_schedule_t *s = tiny_1f1b();
    zb_costs_t c;
    tu_costs(&c, 3, 1, 1, 1, 0);
    zb_sim_t sim;
    zb_err_t e;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "stages"));
    assert_null(sim.len);
    zb_costs_free(&c);

    tu_costs(&c, 2, 1, 1, 1, 0);
    c.t_b[1] = NAN;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_EINVAL);
    c.t_b[1] = 1;
    assert_int_equal(zb_simulate(NULL, &c, &sim, &e), ZB_EINVAL);
    assert_int_equal(zb_simulate(s, NULL, &sim, &e), ZB_EINVAL);
    assert_int_equal(zb_simulate(s, &c, NULL, &e), ZB_EINVAL);

    zb_schedule_push(s, 1, tu_act(ZB_ACT_W, 1, 7));
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_ESCHEDULE);
    assert_non_null(strstr(e.msg, "microbatch 7"));
    zb_schedule_free(s);

    /* a W whose B never comes: the rank waits forever */
    s = tiny_1f1b();
    zb_schedule_push(s, 0, tu_act(ZB_ACT_W, 0, 0));
    s->rank[0].actions[1].type = ZB_ACT_B; /* B exists, so this one completes... */
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    zb_sim_free(&sim);
    s->rank[0].actions[1].type = ZB_ACT_F; /* ...this one does not: F twice, no B */
    s->rank[0].actions[1].mb = 0;
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_EDEADLOCK);
    assert_non_null(strstr(e.msg, "rank 0 stuck at W(stage 0, mb 0)"));
    assert_null(sim.start);
    zb_schedule_free(s);

    /* an empty schedule simulates to nothing */
    s = zb_schedule_new("empty", 2, 1, ZB_PLACE_LOOP, 1);
    assert_int_equal(zb_simulate(s, &c, &sim, &e), ZB_OK);
    assert_close(sim.makespan, 0);
    assert_close(sim.bubble_rate, 0);
    zb_sim_free(&sim);
    zb_schedule_free(s);
    zb_costs_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_computed),
        cmocka_unit_test(test_lowered_matches_compute_only),
        cmocka_unit_test(test_comm_latency),
        cmocka_unit_test(test_last_ranks),
        cmocka_unit_test(test_type_time),
        cmocka_unit_test(test_peak_memory_time),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
