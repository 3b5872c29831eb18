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
        {"0UNSHARD\n", "only UNSHARD/RESHARD/REDUCE_GRAD actions"},
        {"0F0,0UNSHARDx\n", "junk after the action type"},
        {"0F0,0RESHARD1x\n", "junk after the microbatch"},
        {"0F0,UNSHARD\n", "does not start with a stage"},
        {"0F0,(0F1;0B0\n", "never closes"},
        {"0F0,(0F1;0B0)OVERLAP\n", "must be '(<action>;<action>)OVERLAP_F_B'"},
        {"0F0,(0F1;0B0)OVERLAP_F_Bx\n", "must be"},
        {"0F0,()OVERLAP_F_B\n", "no action inside"},
        {"0F0,( ; )OVERLAP_F_B\n", "no action inside"},
        {"0F0,((0F1);0B0)OVERLAP_F_B\n", "nests parentheses"},
        {"0F0,(0F1;0SEND_F1)OVERLAP_F_B\n", "only compute actions"},
        {"0F0,(0F1;0UNSHARD)OVERLAP_F_B\n", "only compute actions"},
        {"0F0,(0F1;0X1)OVERLAP_F_B\n", "line 1, cell 2"},
        {"0F0,0OVERLAP_F_B\n", "no known action type"},
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

/* Read tests/fixtures/<name> into a malloc'd string. */
static char *read_fixture(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", ZB_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = malloc(1 << 16);
    assert_non_null(buf);
    *len = fread(buf, 1, (1 << 16) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* A runtime-lowered dump with FSDP actions (written in PyTorch's format: `<stage>UNSHARD`,
 * `<stage>RESHARD`, `<stage>REDUCE_GRAD`, no microbatch): they are dropped and counted, and what
 * is left is exactly zbpp's own lowered interleaved-1f1b (P=2, v=2, M=2). */
static void test_fsdp_actions_ignored(void **state)
{
    (void)state;
    size_t len;
    char *text = read_fixture("pytorch_fsdp_lowered_p2_v2_m2.csv", &len);
    zb_schedule_t *s = NULL, *gen = NULL, *low = NULL;
    zb_csv_info_t info = {.ignored_fsdp = -1, .composite = -1};
    zb_err_t err = {0};
    if (zb_csv_read_info(text, len, &s, &info, &err) != ZB_OK)
        fail_msg("fixture rejected: %s", err.msg);
    assert_int_equal(info.ignored_fsdp, 12);
    assert_int_equal(info.composite, 0);
    zb_gen_params_t p = {.ranks = 2, .microbatches = 2, .chunks = 2};
    assert_int_equal(zb_generate("interleaved-1f1b", &p, &gen, &err), ZB_OK);
    assert_int_equal(zb_insert_comms(gen, &low, &err), ZB_OK);
    assert_true(zb_schedule_equal(s, low));
    assert_int_equal(zb_validate(s, NULL, &err), ZB_OK);
    zb_schedule_free(s);
    /* the plain reader gives the same schedule; a microbatch after an FSDP type is allowed */
    assert_int_equal(zb_csv_read(text, len, &s, &err), ZB_OK);
    assert_true(zb_schedule_equal(s, low));
    zb_schedule_free(s);
    assert_int_equal(read_str("0UNSHARD3,0F0,0B0,0REDUCE_GRAD,0RESHARD7\n", &s, &err), ZB_OK);
    assert_int_equal(s->rank[0].len, 2);
    assert_int_equal(s->microbatches, 1); /* FSDP microbatch numbers do not count */
    zb_schedule_free(s);
    /* R (recompute, zbpp) still parses next to RECV/RESHARD/REDUCE_GRAD, which start with R */
    const char *rtext = "0F0,0RESHARD,0R0,0REDUCE_GRAD,0B0\n";
    assert_int_equal(zb_csv_read_info(rtext, strlen(rtext), &s, &info, &err), ZB_OK);
    assert_int_equal(info.ignored_fsdp, 2);
    assert_int_equal(s->rank[0].len, 3);
    assert_int_equal(s->rank[0].actions[1].type, ZB_ACT_R);
    zb_schedule_free(s);
    zb_schedule_free(gen);
    zb_schedule_free(low);
    free(text);
}

/* DualPipeV's composite cells `(0F3;3B1)OVERLAP_F_B` are their sub-actions in the order written
 * (the forward, then the full backward, PyTorch's B = our BW): the fixture reads exactly like
 * the same file with each composite written as two cells, and validates. */
static void test_overlap_f_b_cells(void **state)
{
    (void)state;
    size_t len;
    char *text = read_fixture("pytorch_dualpipev_overlap_p2_m4.csv", &len);
    zb_schedule_t *s = NULL, *flat = NULL;
    zb_csv_info_t info;
    zb_err_t err = {0};
    if (zb_csv_read_info(text, len, &s, &info, &err) != ZB_OK)
        fail_msg("fixture rejected: %s", err.msg);
    assert_int_equal(info.composite, 6);
    assert_int_equal(info.ignored_fsdp, 0);
    assert_int_equal(s->placement, ZB_PLACE_V);
    assert_int_equal(s->microbatches, 4);
    if (zb_validate(s, NULL, &err) != ZB_OK)
        fail_msg("fixture does not validate: %s", err.msg);
    /* the same text with "(a;b)OVERLAP_F_B" rewritten as "a,b" */
    char *two = malloc(len + 1);
    assert_non_null(two);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '(')
            continue;
        if (text[i] == ';') {
            two[o++] = ',';
            continue;
        }
        if (text[i] == ')') {
            i += strlen("OVERLAP_F_B");
            continue;
        }
        two[o++] = text[i];
    }
    two[o] = '\0';
    assert_null(strchr(two, '('));
    assert_int_equal(read_str(two, &flat, &err), ZB_OK);
    assert_true(zb_schedule_equal(s, flat));
    /* rank 0's 8th action is the composite's forward F(0, 3), the 9th its backward BW(3, 1) */
    zb_action_t f = s->rank[0].actions[7], b = s->rank[0].actions[8];
    assert_int_equal(f.type, ZB_ACT_F);
    assert_int_equal(f.stage, 0);
    assert_int_equal(f.mb, 3);
    assert_int_equal(b.type, ZB_ACT_BW);
    assert_int_equal(b.stage, 3);
    assert_int_equal(b.mb, 1);
    zb_schedule_free(s);
    zb_schedule_free(flat);
    /* blanks and an empty sub-action are tolerated, as PyTorch does; a lone sub-action is fine */
    assert_int_equal(read_str("0F0,( 0F1 ; ;0B0 )OVERLAP_F_B,0B1\n", &s, &err), ZB_OK);
    assert_int_equal(s->rank[0].len, 4);
    assert_int_equal(s->rank[0].actions[2].type, ZB_ACT_BW);
    zb_schedule_free(s);
    free(two);
    free(text);
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
        cmocka_unit_test(test_fsdp_actions_ignored),
        cmocka_unit_test(test_overlap_f_b_cells),
        cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_too_many_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
