/* PyTorch pipelining CSV: exact text, round trips over every generator, accepted variants and
 * malformed inputs (each must give ZB_EFORMAT with a message naming the line and cell). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "zbpp/schedule.h"
#include "zbpp/schedule_io.h"

/* Write `s` as CSV into a malloc'd string. */
static char *to_csv(const zb_schedule_t *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    zb_err_t err = {0};
    assert_int_equal(zb_csv_write(s, f, &err), ZB_OK);
    fclose(f);
    return buf;
}

static zb_status_t read_str(const char *text, zb_schedule_t **out, zb_err_t *err)
{
    return zb_csv_read(text, strlen(text), out, err);
}

static void push(zb_schedule_t *s, int rank, zb_action_type_t t, int stage, int mb)
{
    zb_action_t a = {.type = (uint8_t)t, .stage = stage, .mb = mb};
    assert_int_equal(zb_schedule_push(s, rank, a), ZB_OK);
}

/* Every type, written with PyTorch's names: our B is I, our BW is B. */
static void test_write_all_types(void **state)
{
    (void)state;
    zb_schedule_t *s = zb_schedule_new("t", 2, 1, ZB_PLACE_LOOP, 3);
    push(s, 0, ZB_ACT_F, 0, 0);
    push(s, 0, ZB_ACT_SEND_F, 0, 0);
    push(s, 0, ZB_ACT_RECV_B, 0, 0);
    push(s, 0, ZB_ACT_B, 0, 0);
    push(s, 0, ZB_ACT_W, 0, 0);
    push(s, 0, ZB_ACT_BW, 0, 2);
    push(s, 1, ZB_ACT_RECV_F, 1, 0);
    push(s, 1, ZB_ACT_F, 1, 0);
    push(s, 1, ZB_ACT_B, 1, 0);
    push(s, 1, ZB_ACT_SEND_B, 1, 0);
    char *text = to_csv(s);
    assert_string_equal(text, "0F0,0SEND_F0,0RECV_B0,0I0,0W0,0B2\n"
                              "1RECV_F0,1F0,1I0,1SEND_B0\n");
    zb_schedule_t *back = NULL;
    zb_err_t err = {0};
    assert_int_equal(read_str(text, &back, &err), ZB_OK);
    assert_true(zb_schedule_equal(s, back));
    assert_string_equal(back->name, "csv");
    free(text);
    zb_schedule_free(back);
    zb_schedule_free(s);
}

/* The exact text of 1F1B with P=2, M=3: rank 0 warms up with one F, rank 1 alternates. */
static void test_exact_1f1b(void **state)
{
    (void)state;
    zb_gen_params_t p = {.ranks = 2, .microbatches = 3};
    zb_schedule_t *s = NULL;
    zb_err_t err = {0};
    assert_int_equal(zb_generate("1f1b", &p, &s, &err), ZB_OK);
    char *text = to_csv(s);
    assert_string_equal(text, "0F0,0F1,0B0,0F2,0B1,0B2\n"
                              "1F0,1B0,1F1,1B1,1F2,1B2\n");
    free(text);
    zb_schedule_free(s);
}

/* Export then import is the identity, compute-only and lowered, for every family on a grid. */
static void test_round_trip_all_generators(void **state)
{
    (void)state;
    size_t n;
    const zb_generator_info_t *g = zb_generators(&n);
    int checked = 0;
    for (size_t i = 0; i < n; i++) {
        for (int P = 1; P <= 5; P++) {
            for (int M = 1; M <= 9; M += 2) {
                for (int v = 0; v <= 2; v++) {
                    zb_costs_t costs;
                    zb_err_t err = {0};
                    zb_schedule_t *s = NULL, *low = NULL, *back = NULL;
                    zb_gen_params_t p = {.ranks = P, .microbatches = M, .chunks = v};
                    if (zb_generate(g[i].name, &p, &s, &err) != ZB_OK)
                        continue; /* (P, M, v) not supported by this family */
                    /* V placement with P = 1 looks exactly like loop in a CSV: nothing to infer. */
                    if (s->placement == ZB_PLACE_V && P == 1) {
                        zb_schedule_free(s);
                        continue;
                    }
                    assert_int_equal(zb_costs_init_uniform(&costs, s->stages, 1, 1, 1, 0, 1, 0, -1,
                                                           &err), ZB_OK);
                    char *text = to_csv(s);
                    if (read_str(text, &back, &err) != ZB_OK)
                        fail_msg("%s P=%d M=%d v=%d: %s", g[i].name, P, M, v, err.msg);
                    if (!zb_schedule_equal(s, back))
                        fail_msg("%s P=%d M=%d v=%d: round trip differs", g[i].name, P, M, v);
                    free(text);
                    zb_schedule_free(back);
                    back = NULL;
                    assert_int_equal(zb_insert_comms(s, &low, &err), ZB_OK);
                    text = to_csv(low);
                    if (read_str(text, &back, &err) != ZB_OK)
                        fail_msg("%s P=%d M=%d v=%d lowered: %s", g[i].name, P, M, v, err.msg);
                    if (!zb_schedule_equal(low, back))
                        fail_msg("%s P=%d M=%d v=%d lowered: round trip differs", g[i].name, P, M,
                                 v);
                    free(text);
                    zb_schedule_free(back);
                    zb_schedule_free(low);
                    zb_schedule_free(s);
                    zb_costs_free(&costs);
                    checked++;
                }
            }
        }
    }
    assert_true(checked >= 20);
}

/* What real files contain: CRLF (Python's csv.writer), spaces, idle cells, trailing blank lines,
 * legacy BW, quoted cells. */
static void test_accepted_variants(void **state)
{
    (void)state;
    zb_schedule_t *ref = zb_schedule_new("r", 2, 1, ZB_PLACE_LOOP, 2);
    push(ref, 0, ZB_ACT_F, 0, 0);
    push(ref, 0, ZB_ACT_F, 0, 1);
    push(ref, 0, ZB_ACT_BW, 0, 0);
    push(ref, 0, ZB_ACT_BW, 0, 1);
    push(ref, 1, ZB_ACT_F, 1, 0);
    push(ref, 1, ZB_ACT_BW, 1, 0);
    push(ref, 1, ZB_ACT_F, 1, 1);
    push(ref, 1, ZB_ACT_BW, 1, 1);
    const char *variants[] = {
        "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n",
        "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n",
        "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1",
        " 0F0 , 0F1,\t0B0 ,0B1\n1F0,1B0,1F1,1B1\n\n\r\n  \n",
        "0F0,,0F1,,,0B0,0B1,\n,1F0,1B0,,1F1,1B1\n",
        "0F0,0F1,0BW0,0BW1\n1F0,1BW0,1F1,1B1\n",
        "\"0F0\",0F1,0B0,\"0B1\"\n1F0,1B0,1F1,1B1\n",
        "00F0,0F01,0B0,0B1\n1F0,1B0,1F1,1B1\n",
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        zb_schedule_t *s = NULL;
        zb_err_t err = {0};
        if (read_str(variants[i], &s, &err) != ZB_OK)
            fail_msg("variant %zu rejected: %s", i, err.msg);
        if (!zb_schedule_equal(ref, s))
            fail_msg("variant %zu parsed differently", i);
        zb_schedule_free(s);
    }
    zb_schedule_free(ref);
}

/* Shape inference: loop vs V placement, v from S / P, M from the largest mb. */
static void test_infer_placement(void **state)
{
    (void)state;
    zb_schedule_t *s = NULL;
    zb_err_t err = {0};
    /* P=2, S=4 in V: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2. */
    assert_int_equal(read_str("0F0,3F0\n1F0,2F0\n", &s, &err), ZB_OK);
    assert_int_equal(s->ranks, 2);
    assert_int_equal(s->chunks, 2);
    assert_int_equal(s->stages, 4);
    assert_int_equal(s->placement, ZB_PLACE_V);
    assert_int_equal(s->microbatches, 1);
    zb_schedule_free(s);
    /* Same shape, loop: rank 0 holds 0 and 2. */
    assert_int_equal(read_str("0F0,2F0\n1F0,3F0\n", &s, &err), ZB_OK);
    assert_int_equal(s->placement, ZB_PLACE_LOOP);
    assert_int_equal(s->chunks, 2);
    zb_schedule_free(s);
    /* v = 3 loop. */
    assert_int_equal(read_str("0F0,2F0,4F0\n1F0,3F0,5F0\n", &s, &err), ZB_OK);
    assert_int_equal(s->chunks, 3);
    assert_int_equal(s->placement, ZB_PLACE_LOOP);
    zb_schedule_free(s);
}

typedef struct {
    const char *text;
    const char *expect; /* substring of the message */
} bad_case_t;

static void test_malformed(void **state)
{
    (void)state;
    static const bad_case_t cases[] = {
        {"", "no actions"},
        {"\n\n", "no actions"},
        {",,\n", "line 1: the row of rank 0 has only empty cells"},
        {"0F0\n , ,\n", "line 2: the row of rank 1 has only empty cells"},
        {"0F0,0X1\n", "line 1, cell 2"},
        {"0F0,0X1\n", "no known action type"},
        {"F0\n", "line 1, cell 1: 'F0' does not start with a stage"},
        {"0F\n", "no microbatch number"},
        {"0F0\n1F\n", "line 2, cell 1"},
        {"0F0x\n", "junk after the microbatch"},
        {"0F0 1\n", "junk"},
        {"-1F0\n", "does not start with a stage"},
        {"0F-1\n", "no microbatch number"},
        {"99999999999999999999F0\n", "stage number above"},
        {"0F99999999999999999999\n", "microbatch number above"},
        {"0F1000001\n", "microbatch number above"},
        {"0f0\n", "no known action type"},
        {"0UNSHARD\n", "no known action type"},
        {"0F0\n\n1F0\n", "line 2: blank line between rows"},
        {"0F0\r1F0\n", "junk"},
        {"0F0,\"0F1\n", "does not start with a stage"},
        {"0F0,1F0\n0F0,1F0\n", "no stage placement fits"},
        {"0F0,1F0,2F0\n3F0,4F0\n", "do not divide evenly"},
        {"1F0\n0F0\n", "no stage placement fits"},
        {"0F0\n1F0\n2F0\n3F0\n\n4F0", "blank line"},
        {"0F900000\n", "incomplete schedule"},
        {"0SEND_F\n", "no microbatch number"},
        {"0SEND_X0\n", "no known action type"},
        {"0F0\0,1F0\n", "junk"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zb_schedule_t *s = (zb_schedule_t *)&s; /* must be reset to NULL */
        zb_err_t err = {0};
        size_t len = strlen(cases[i].text);
        if (i == sizeof cases / sizeof cases[0] - 1)
            len = 9; /* the embedded NUL case */
        zb_status_t st = zb_csv_read(cases[i].text, len, &s, &err);
        if (st != ZB_EFORMAT)
            fail_msg("case %zu '%s': status %d, want ZB_EFORMAT", i, cases[i].text, st);
        assert_null(s);
        if (!strstr(err.msg, cases[i].expect))
            fail_msg("case %zu: message '%s' lacks '%s'", i, err.msg, cases[i].expect);
        assert_null(strchr(err.msg, '\n'));
    }
}

/* Over the size limit: refused before parsing. */
static void test_too_large(void **state)
{
    (void)state;
    size_t len = (size_t)ZB_CSV_MAX_BYTES + 1;
    char *big = malloc(len);
    assert_non_null(big);
    memset(big, ',', len);
    zb_schedule_t *s = NULL;
    zb_err_t err = {0};
    assert_int_equal(zb_csv_read(big, len, &s, &err), ZB_EFORMAT);
    assert_non_null(strstr(err.msg, "limit"));
    free(big);
}

/* More rows than the rank limit. */
static void test_too_many_rows(void **state)
{
    (void)state;
    size_t n = ZB_CSV_MAX_RANKS + 1;
    char *text = malloc(n * 4 + 1);
    assert_non_null(text);
    for (size_t i = 0; i < n; i++)
        memcpy(text + 4 * i, "0F0\n", 4);
    zb_schedule_t *s = NULL;
    zb_err_t err = {0};
    assert_int_equal(zb_csv_read(text, n * 4, &s, &err), ZB_EFORMAT);
    assert_non_null(strstr(err.msg, "more than"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_all_types),
        cmocka_unit_test(test_exact_1f1b),
        cmocka_unit_test(test_round_trip_all_generators),
        cmocka_unit_test(test_accepted_variants),
        cmocka_unit_test(test_infer_placement),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_too_many_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
