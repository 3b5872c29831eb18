/* Schedule IR: allocation, copy/compare, placement, queries, costs, and the comm pass. */
#include "schedule_testutil.h"

#include <string.h>

static void test_new_rejects_bad_sizes(void **state)
{
    (void)state;
    assert_null(zb_schedule_new("x", 0, 1, ZB_PLACE_LOOP, 1));
    assert_null(zb_schedule_new("x", 2, 0, ZB_PLACE_LOOP, 1));
    assert_null(zb_schedule_new("x", 2, 1, ZB_PLACE_LOOP, 0));
    assert_null(zb_schedule_new("x", 2, 3, ZB_PLACE_V, 4));
    assert_null(zb_schedule_new("x", 2, 1, (zb_placement_t)7, 4));
    zb_schedule_t *s = zb_schedule_new("a-name-that-is-far-too-long-to-fit-in-48-bytes-of-room",
                                       3, 2, ZB_PLACE_V, 5);
    assert_non_null(s);
    assert_int_equal(s->stages, 6);
    assert_int_equal(strlen(s->name), sizeof s->name - 1);
    assert_int_equal(zb_schedule_push(s, 3, tu_act(ZB_ACT_F, 0, 0)), ZB_EINVAL);
    assert_int_equal(zb_schedule_push(s, -1, tu_act(ZB_ACT_F, 0, 0)), ZB_EINVAL);
    zb_schedule_free(s);
    zb_schedule_free(NULL);
}

static void test_push_clone_equal(void **state)
{
    (void)state;
    zb_schedule_t *a = zb_schedule_new("one", 2, 1, ZB_PLACE_LOOP, 40);
    for (int m = 0; m < 40; m++) { /* crosses several growth steps */
        assert_int_equal(zb_schedule_push(a, 0, tu_act(ZB_ACT_F, 0, m)), ZB_OK);
        assert_int_equal(zb_schedule_push(a, 1, tu_act(ZB_ACT_F, 1, m)), ZB_OK);
    }
    zb_schedule_t *b = zb_schedule_clone(a);
    assert_non_null(b);
    strcpy(b->name, "two");
    assert_true(zb_schedule_equal(a, b)); /* names are not compared */
    assert_int_equal(b->rank[0].len, 40);
    assert_int_equal(b->rank[1].actions[39].mb, 39);

    b->rank[1].actions[7].type = ZB_ACT_BW;
    assert_false(zb_schedule_equal(a, b));
    b->rank[1].actions[7].type = ZB_ACT_F;
    b->rank[1].actions[7].stage = 0;
    assert_false(zb_schedule_equal(a, b));
    b->rank[1].actions[7].stage = 1;
    assert_true(zb_schedule_equal(a, b));
    assert_int_equal(zb_schedule_push(b, 1, tu_act(ZB_ACT_BW, 1, 0)), ZB_OK);
    assert_false(zb_schedule_equal(a, b));

    zb_schedule_t *c = zb_schedule_new("one", 2, 1, ZB_PLACE_LOOP, 41);
    assert_false(zb_schedule_equal(a, c));
    assert_false(zb_schedule_equal(a, NULL));
    assert_true(zb_schedule_equal(NULL, NULL));
    zb_schedule_free(a);
    zb_schedule_free(b);
    zb_schedule_free(c);
}

static void test_placement(void **state)
{
    (void)state;
    /* loop: stage s on rank s mod P */
    for (int s = 0; s < 12; s++)
        assert_int_equal(zb_stage_rank_of(4, 3, ZB_PLACE_LOOP, s), s % 4);
    /* V: 0 1 2 3 | 3 2 1 0 */
    const int v_rank[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int s = 0; s < 8; s++)
        assert_int_equal(zb_stage_rank_of(4, 2, ZB_PLACE_V, s), v_rank[s]);
    assert_int_equal(zb_stage_rank_of(4, 2, ZB_PLACE_V, 8), -1);
    assert_int_equal(zb_stage_rank_of(4, 2, ZB_PLACE_V, -1), -1);
    zb_schedule_t *s = zb_schedule_new("v", 4, 2, ZB_PLACE_V, 1);
    assert_int_equal(zb_stage_rank(s, 5), 2);
    zb_schedule_free(s);
    assert_string_equal(zb_placement_name(ZB_PLACE_LOOP), "loop");
    assert_string_equal(zb_placement_name(ZB_PLACE_V), "v");
}

static void test_queries_and_names(void **state)
{
    (void)state;
    const char *names[ZB_ACT_COUNT] = {"F", "B", "W", "BW", "SEND_F", "RECV_F", "SEND_B",
                                       "RECV_B", "R",      "O",      "L"};
    for (int t = 0; t < ZB_ACT_COUNT; t++) {
        assert_string_equal(zb_action_type_name((zb_action_type_t)t), names[t]);
        assert_int_equal(zb_action_is_compute((zb_action_type_t)t), t <= ZB_ACT_BW || t == ZB_ACT_R);
    }
    assert_string_equal(zb_action_type_name(ZB_ACT_COUNT), "?");

    zb_schedule_t *s = zb_schedule_new("q", 2, 1, ZB_PLACE_LOOP, 1);
    assert_false(zb_schedule_is_split(s));
    assert_false(zb_schedule_has_comms(s));
    zb_schedule_push(s, 0, tu_act(ZB_ACT_BW, 0, 0));
    assert_false(zb_schedule_is_split(s));
    zb_schedule_push(s, 1, tu_act(ZB_ACT_W, 1, 0));
    assert_true(zb_schedule_is_split(s));
    zb_schedule_push(s, 1, tu_act(ZB_ACT_RECV_B, 1, 0));
    assert_true(zb_schedule_has_comms(s));
    zb_schedule_free(s);
}

static void test_costs(void **state)
{
    (void)state;
    zb_costs_t c;
    zb_err_t e;
    assert_int_equal(zb_costs_init_uniform(&c, 3, 1, 2, 3, 0.5, 2, -0.5, -1.5, &e), ZB_OK);
    assert_int_equal(c.stages, 3);
    assert_true(isinf(c.mem_limit));
    assert_close(c.t_b[2], 2);
    assert_close(c.m_w[1], -1.5);
    assert_int_equal(zb_costs_check(&c, &e), ZB_OK);

    zb_costs_t d;
    assert_int_equal(zb_costs_clone(&d, &c, &e), ZB_OK);
    d.t_f[0] = 9;
    assert_close(c.t_f[0], 1); /* deep copy */
    d.m_f[1] = 5;              /* no longer sums to zero */
    assert_int_equal(zb_costs_check(&d, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "stage 1"));
    zb_costs_free(&d);
    zb_costs_free(&c);
    zb_costs_free(&c); /* freeing twice is harmless: arrays were reset */

    assert_int_equal(zb_costs_init_uniform(&c, 0, 1, 1, 1, 0, 1, 0, -1, &e), ZB_EINVAL);
    assert_int_equal(zb_costs_init_uniform(&c, 2, -1, 1, 1, 0, 1, 0, -1, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "F time"));
    assert_int_equal(zb_costs_init_uniform(&c, 2, 1, NAN, 1, 0, 1, 0, -1, &e), ZB_EINVAL);
    assert_int_equal(zb_costs_init_uniform(&c, 2, 1, 1, 1, INFINITY, 1, 0, -1, &e), ZB_EINVAL);
    assert_int_equal(zb_costs_init_uniform(&c, 2, 1, 1, 1, 0, 1, 0, -0.5, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "sum to 0"));
    assert_int_equal(zb_costs_init_uniform(&c, 2, 1, 1, 1, 0, INFINITY, 0, -1, &e), ZB_EINVAL);
    /* Relative tolerance: large deltas that cancel up to rounding are accepted. */
    assert_int_equal(zb_costs_init_uniform(&c, 1, 1, 1, 1, 0, 1e12, -0.3e12, -0.7e12 + 1e-3, &e),
                     ZB_OK);
    zb_costs_free(&c);
}

/* Count actions of one type on every rank. */
static int count_type(const zb_schedule_t *s, zb_action_type_t t)
{
    int n = 0;
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++)
            n += s->rank[r].actions[i].type == t;
    return n;
}

static void test_insert_and_strip_comms(void **state)
{
    (void)state;
    zb_err_t e;
    const char *families[] = {"1f1b", "zb-h2", "interleaved-1f1b"};
    for (int f = 0; f < 3; f++) {
        zb_schedule_t *s = tu_gen(families[f], 3, 6, 0), *low, *back;
        assert_int_equal(zb_insert_comms(s, &low, &e), ZB_OK);
        int M = s->microbatches, S = s->stages;
        /* loop placement with P > 1: every stage boundary crosses ranks */
        assert_int_equal(count_type(low, ZB_ACT_SEND_F), (S - 1) * M);
        assert_int_equal(count_type(low, ZB_ACT_RECV_F), (S - 1) * M);
        assert_int_equal(count_type(low, ZB_ACT_SEND_B), (S - 1) * M);
        assert_int_equal(count_type(low, ZB_ACT_RECV_B), (S - 1) * M);
        /* each RECV sits right before its consumer, each SEND right after its producer */
        for (int r = 0; r < low->ranks; r++) {
            const zb_rank_program_t *p = &low->rank[r];
            for (int i = 0; i < p->len; i++) {
                zb_action_t a = p->actions[i];
                if (a.type == ZB_ACT_RECV_F || a.type == ZB_ACT_RECV_B) {
                    assert_true(i + 1 < p->len);
                    zb_action_t c = p->actions[i + 1];
                    assert_int_equal(c.stage, a.stage);
                    assert_int_equal(c.mb, a.mb);
                    assert_true(a.type == ZB_ACT_RECV_F ? c.type == ZB_ACT_F
                                                        : (c.type == ZB_ACT_B ||
                                                           c.type == ZB_ACT_BW));
                }
                if (a.type == ZB_ACT_SEND_F || a.type == ZB_ACT_SEND_B) {
                    assert_true(i > 0);
                    zb_action_t c = p->actions[i - 1];
                    assert_int_equal(c.stage, a.stage);
                    assert_int_equal(c.mb, a.mb);
                }
            }
        }
        assert_int_equal(zb_validate(low, NULL, &e), ZB_OK);
        /* lowering twice is refused; strip gives back the original */
        zb_schedule_t *again = (zb_schedule_t *)1;
        assert_int_equal(zb_insert_comms(low, &again, &e), ZB_EINVAL);
        assert_null(again);
        assert_non_null(strstr(e.msg, "already"));
        assert_int_equal(zb_strip_comms(low, &back, &e), ZB_OK);
        assert_true(zb_schedule_equal(s, back));
        zb_schedule_free(back);
        assert_int_equal(zb_strip_comms(s, &back, &e), ZB_OK);
        assert_true(zb_schedule_equal(s, back));
        zb_schedule_free(back);
        zb_schedule_free(low);
        zb_schedule_free(s);
    }
}

/* V placement: stages P-1 and P share the last rank, so no message crosses that boundary;
 * a single rank needs no messages at all. */
static void test_comms_skip_same_rank(void **state)
{
    (void)state;
    zb_err_t e;
    const int P = 3, M = 2;
    zb_schedule_t *s = zb_schedule_new("v-by-hand", P, 2, ZB_PLACE_V, M);
    for (int m = 0; m < M; m++)
        for (int st = 0; st < 2 * P; st++)
            zb_schedule_push(s, zb_stage_rank(s, st), tu_act(ZB_ACT_F, st, m));
    for (int m = 0; m < M; m++)
        for (int st = 2 * P - 1; st >= 0; st--)
            zb_schedule_push(s, zb_stage_rank(s, st), tu_act(ZB_ACT_BW, st, m));
    zb_schedule_t *low;
    assert_int_equal(zb_insert_comms(s, &low, &e), ZB_OK);
    assert_int_equal(count_type(low, ZB_ACT_SEND_F), (2 * P - 2) * M);
    for (int i = 0; i < low->rank[P - 1].len; i++) {
        zb_action_t a = low->rank[P - 1].actions[i];
        assert_false(a.type == ZB_ACT_SEND_F && a.stage == P - 1);
        assert_false(a.type == ZB_ACT_RECV_F && a.stage == P);
        assert_false(a.type == ZB_ACT_SEND_B && a.stage == P);
        assert_false(a.type == ZB_ACT_RECV_B && a.stage == P - 1);
    }
    assert_int_equal(zb_validate(low, NULL, &e), ZB_OK);
    zb_schedule_free(low);
    zb_schedule_free(s);

    s = tu_gen("zb-h1", 1, 4, 0);
    assert_int_equal(zb_insert_comms(s, &low, &e), ZB_OK);
    assert_true(zb_schedule_equal(s, low));
    zb_schedule_free(low);
    zb_schedule_free(s);
}

static void test_comm_pass_rejects_bad_input(void **state)
{
    (void)state;
    zb_err_t e;
    zb_schedule_t *s = zb_schedule_new("bad", 2, 1, ZB_PLACE_LOOP, 2), *out;
    zb_schedule_push(s, 0, tu_act(ZB_ACT_F, 5, 0));
    assert_int_equal(zb_insert_comms(s, &out, &e), ZB_ESCHEDULE);
    assert_non_null(strstr(e.msg, "stage 5"));
    assert_int_equal(zb_insert_comms(NULL, &out, &e), ZB_EINVAL);
    assert_int_equal(zb_strip_comms(NULL, &out, &e), ZB_EINVAL);
    zb_schedule_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_rejects_bad_sizes),
        cmocka_unit_test(test_push_clone_equal),
        cmocka_unit_test(test_placement),
        cmocka_unit_test(test_queries_and_names),
        cmocka_unit_test(test_costs),
        cmocka_unit_test(test_insert_and_strip_comms),
        cmocka_unit_test(test_comms_skip_same_rank),
        cmocka_unit_test(test_comm_pass_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
