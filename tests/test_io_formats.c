/* JSON summary, Chrome trace, SVG and ASCII writers, checked on a hand-built timeline (so the
 * expected output does not depend on the simulator) and on a simulated one. */
#include <math.h>
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

/* A 2-rank, 2-microbatch split schedule with fixed times:
 *   rank 0: F0 [0,1) F1 [1,2) idle B0 [4,5) W0 [5,6) B1 [6,7) W1 [7,8)
 *   rank 1: idle F0 [1,2) B0 [2,3) F1 [3,4) B1 [4,5) W0 [5,6) W1 [6,7) idle */
typedef struct {
    zb_schedule_t *s;
    zb_sim_t sim;
    int len[2];
    double st[2][6], en[2][6];
    double *pst[2], *pen[2];
    double span[2], busy[2], peak[2], peak_t[2];
} hand_t;

static void push(zb_schedule_t *s, int rank, zb_action_type_t t, int stage, int mb)
{
    zb_action_t a = {.type = (uint8_t)t, .stage = stage, .mb = mb};
    assert_int_equal(zb_schedule_push(s, rank, a), ZB_OK);
}

static hand_t *hand_new(void)
{
    hand_t *h = calloc(1, sizeof *h);
    assert_non_null(h);
    h->s = zb_schedule_new("hand", 2, 1, ZB_PLACE_LOOP, 2);
    static const zb_action_type_t t0[] = {ZB_ACT_F, ZB_ACT_F, ZB_ACT_B, ZB_ACT_W, ZB_ACT_B, ZB_ACT_W};
    static const int m0[] = {0, 1, 0, 0, 1, 1};
    static const double s0[] = {0, 1, 4, 5, 6, 7};
    static const zb_action_type_t t1[] = {ZB_ACT_F, ZB_ACT_B, ZB_ACT_F, ZB_ACT_B, ZB_ACT_W, ZB_ACT_W};
    static const int m1[] = {0, 0, 1, 1, 0, 1};
    static const double s1[] = {1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 6; i++) {
        push(h->s, 0, t0[i], 0, m0[i]);
        push(h->s, 1, t1[i], 1, m1[i]);
        h->st[0][i] = s0[i];
        h->en[0][i] = s0[i] + 1;
        h->st[1][i] = s1[i];
        h->en[1][i] = s1[i] + 1;
    }
    for (int r = 0; r < 2; r++) {
        h->len[r] = 6;
        h->pst[r] = h->st[r];
        h->pen[r] = h->en[r];
        h->busy[r] = 6;
        h->peak[r] = 2;
        h->peak_t[r] = r ? 4 : 2;
    }
    h->span[0] = 8;
    h->span[1] = 6;
    h->sim = (zb_sim_t){.ranks = 2, .len = h->len, .start = h->pst, .end = h->pen,
                        .makespan = 8, .span = h->span, .busy = h->busy, .span_max = 8,
                        .busy_max = 6, .bubble_rate = 0.25, .peak_mem = h->peak,
                        .peak_time = h->peak_t, .schedule = h->s};
    return h;
}

static void hand_free(hand_t *h)
{
    zb_schedule_free(h->s);
    free(h);
}

/* Capture a writer's output. */
typedef struct {
    char *buf;
    size_t len;
    FILE *f;
} capture_t;

static void cap_open(capture_t *c)
{
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    assert_non_null(c->f);
}

static char *cap_close(capture_t *c)
{
    fclose(c->f);
    return c->buf;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void test_ascii_exact(void **state)
{
    (void)state;
    hand_t *h = hand_new();
    capture_t c;
    cap_open(&c);
    zb_err_t err = {0};
    assert_int_equal(zb_ascii_write(&h->sim, 0, c.f, &err), ZB_OK);
    char *out = cap_close(&c);
    assert_non_null(strstr(out, "hand: P=2 v=1 M=2, one cell = 1 time units\n"
                                "r0 |F0 F1 ......B0 W0 B1 W1 |\n"
                                "r1 |...F0 B0 F1 B1 W0 W1 ...|\n"));
    free(out);
    hand_free(h);
}

/* A two-cell action is drawn as its label then '-'; lowercase for a rank's second chunk. */
static void test_ascii_long_and_chunks(void **state)
{
    (void)state;
    zb_schedule_t *s = zb_schedule_new("v2", 1, 2, ZB_PLACE_LOOP, 1);
    push(s, 0, ZB_ACT_F, 0, 0);
    push(s, 0, ZB_ACT_F, 1, 0);
    push(s, 0, ZB_ACT_BW, 1, 0);
    push(s, 0, ZB_ACT_BW, 0, 0);
    double st[] = {0, 1, 2, 4}, en[] = {1, 2, 4, 6};
    double *pst[] = {st}, *pen[] = {en};
    int len[] = {4};
    double span[] = {6}, busy[] = {6}, peak[] = {2}, pt[] = {2};
    zb_sim_t sim = {.ranks = 1, .len = len, .start = pst, .end = pen, .makespan = 6, .span = span,
                    .busy = busy, .span_max = 6, .busy_max = 6, .peak_mem = peak,
                    .peak_time = pt, .schedule = s};
    capture_t c;
    cap_open(&c);
    zb_err_t err = {0};
    assert_int_equal(zb_ascii_write(&sim, 0, c.f, &err), ZB_OK);
    char *out = cap_close(&c);
    assert_non_null(strstr(out, "r0 |F0 f0 b0--- B0--- |\n"));
    free(out);
    /* Narrower: no spaces, then letters only. */
    cap_open(&c);
    assert_int_equal(zb_ascii_write(&sim, 12, c.f, &err), ZB_OK);
    out = cap_close(&c);
    assert_non_null(strstr(out, "r0 |F0f0b0--B0--|\n"));
    free(out);
    cap_open(&c);
    assert_int_equal(zb_ascii_write(&sim, 8, c.f, &err), ZB_OK);
    out = cap_close(&c);
    assert_non_null(strstr(out, "r0 |FfbbBB|\n"));
    free(out);
    zb_schedule_free(s);
}

/* Too wide: numbers dropped, then time scaled; every grid line fits the width. */
static void test_ascii_fallback(void **state)
{
    (void)state;
    zb_gen_params_t p = {.ranks = 4, .microbatches = 64};
    zb_schedule_t *s = NULL;
    zb_err_t err = {0};
    zb_costs_t costs;
    assert_int_equal(zb_generate("zb-h1", &p, &s, &err), ZB_OK);
    assert_int_equal(zb_costs_init_uniform(&costs, s->stages, 1, 1, 1, 0, 1, 0, -1, &err), ZB_OK);
    zb_sim_t sim;
    assert_int_equal(zb_simulate(s, &costs, &sim, &err), ZB_OK);
    for (int width = 40; width <= 400; width += 360) {
        capture_t c;
        cap_open(&c);
        assert_int_equal(zb_ascii_write(&sim, width, c.f, &err), ZB_OK);
        char *out = cap_close(&c);
        int rows = 0;
        for (char *line = out; line && *line;) {
            char *nl = strchr(line, '\n');
            size_t n = nl ? (size_t)(nl - line) : strlen(line);
            if (line[0] == 'r' && line[1] >= '0' && line[1] <= '9') {
                rows++;
                const char *bar = memchr(line, '|', n);
                assert_non_null(bar);
                size_t grid = n - (size_t)(bar - line) - 2;
                assert_true(grid <= (size_t)width);
                for (size_t k = 1; k <= grid; k++)
                    assert_true(strchr("FBW.", bar[k]) != NULL); /* letters only */
            }
            line = nl ? nl + 1 : NULL;
        }
        assert_int_equal(rows, 4);
        if (width == 40)
            assert_non_null(strstr(out, "scaled down"));
        free(out);
    }
    zb_sim_free(&sim);
    zb_costs_free(&costs);
    zb_schedule_free(s);
}

static void test_json_fields(void **state)
{
    (void)state;
    hand_t *h = hand_new();
    zb_costs_t costs;
    zb_err_t err = {0};
    assert_int_equal(zb_costs_init_uniform(&costs, 2, 1, 1, 1, 0.5, 1, 0, -1, &err), ZB_OK);
    capture_t c;
    cap_open(&c);
    assert_int_equal(zb_json_write_summary(h->s, &costs, &h->sim, c.f, &err), ZB_OK);
    char *out = cap_close(&c);
    static const char *const want[] = {
        "\"schedule\": \"hand\"", "\"ranks\": 2", "\"chunks\": 1", "\"placement\": \"loop\"",
        "\"microbatches\": 2", "\"stages\": 2", "\"actions\": 12", "\"makespan\": 8",
        "\"span\": 8", "\"spans\": [8, 6]", "\"bubble_rate\": 0.25", "\"peak_memory\": [2, 2]",
        "\"peak_memory_time\": [2, 4]", "\"busy\": [6, 6]", "\"mem_limit\": null",
        "\"comm\": [0.5, 0.5]", "\"split_backward\": true", "\"lowered\": false",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out, want[i]))
            fail_msg("json lacks %s:\n%s", want[i], out);
    assert_int_equal(count(out, "{"), count(out, "}"));
    assert_int_equal(count(out, "["), count(out, "]"));
    free(out);
    zb_costs_free(&costs);
    hand_free(h);
}

static void test_trace(void **state)
{
    (void)state;
    hand_t *h = hand_new();
    capture_t c;
    cap_open(&c);
    zb_err_t err = {0};
    assert_int_equal(zb_trace_write(&h->sim, 1000.0, c.f, &err), ZB_OK);
    char *out = cap_close(&c);
    assert_non_null(strstr(out, "\"traceEvents\""));
    assert_int_equal(count(out, "\"ph\": \"X\""), 12);
    assert_int_equal(count(out, "\"thread_name\""), 2);
    assert_non_null(strstr(out, "\"args\": {\"name\": \"rank 1\"}"));
    /* rank 0's B0 starts at 4 time units = 4000 us. */
    assert_non_null(strstr(out, "\"name\": \"B s0 mb0\", \"cat\": \"compute\", \"ph\": \"X\", "
                                "\"pid\": 0, \"tid\": 0, \"ts\": 4000.000000, \"dur\": 1000.000000"));
    assert_non_null(strstr(out, "\"args\": {\"stage\": 1, \"mb\": 1, \"type\": \"W\"}"));
    assert_int_equal(count(out, "\"cname\": \"good\""), 4); /* the four W */
    free(out);

    cap_open(&c);
    assert_int_equal(zb_trace_write(&h->sim, 0.0, c.f, &err), ZB_EINVAL);
    assert_int_equal(zb_trace_write(&h->sim, NAN, c.f, &err), ZB_EINVAL);
    free(cap_close(&c));
    hand_free(h);
}

/* Extra intervals (a training step's phases) on their own process row; bad ones refused. */
static void test_trace_spans(void **state)
{
    (void)state;
    hand_t *h = hand_new();
    capture_t c;
    cap_open(&c);
    zb_err_t err = {0};
    const zb_trace_span_t spans[2] = {{1, "optimizer", 9.0, 9.5}, {0, "norm \"sync\"", 8, 8}};
    assert_int_equal(zb_trace_write_spans(&h->sim, 1000.0, spans, 2, c.f, &err), ZB_OK);
    char *out = cap_close(&c);
    assert_int_equal(count(out, "\"ph\": \"X\""), 14); /* the 12 actions and the 2 spans */
    assert_non_null(strstr(out, "\"args\": {\"name\": \"step phases\"}"));
    assert_non_null(strstr(out, "{\"name\": \"optimizer\", \"cat\": \"phase\", \"ph\": \"X\", "
                                "\"pid\": 1, \"tid\": 1, \"ts\": 9000.000000, \"dur\": 500.000000}"));
    assert_non_null(strstr(out, "\"name\": \"norm \\\"sync\\\"\""));
    free(out);

    const zb_trace_span_t bad_rank = {2, "x", 0, 1}, backwards = {0, "x", 2, 1},
                          no_name = {0, NULL, 0, 1}, inf = {0, "x", 0, INFINITY};
    const zb_trace_span_t *bad[] = {&bad_rank, &backwards, &no_name, &inf};
    for (int k = 0; k < 4; k++) {
        cap_open(&c);
        assert_int_equal(zb_trace_write_spans(&h->sim, 1000.0, bad[k], 1, c.f, &err), ZB_EINVAL);
        free(cap_close(&c));
    }
    cap_open(&c);
    assert_int_equal(zb_trace_write_spans(&h->sim, 1000.0, NULL, 1, c.f, &err), ZB_EINVAL);
    free(cap_close(&c));
    hand_free(h);
}

static void test_svg(void **state)
{
    (void)state;
    hand_t *h = hand_new();
    capture_t c;
    cap_open(&c);
    zb_err_t err = {0};
    assert_int_equal(zb_svg_write(&h->sim, "a<b & \"c\"", c.f, &err), ZB_OK);
    char *out = cap_close(&c);
    assert_int_equal(strncmp(out, "<?xml", 5), 0);
    assert_non_null(strstr(out, "</svg>\n"));
    assert_int_equal(count(out, "<title>"), 12);
    assert_int_equal(count(out, "fill=\"#59a14f\""), 4 + 1); /* W rects + legend */
    assert_non_null(strstr(out, "a&lt;b &amp; &quot;c&quot;"));
    assert_non_null(strstr(out, "bubble 25.0%"));
    assert_non_null(strstr(out, ">rank 1</text>"));
    free(out);
    hand_free(h);
}

/* A timeline that does not match its schedule is refused, not drawn. */
static void test_inconsistent_sim(void **state)
{
    (void)state;
    hand_t *h = hand_new();
    zb_err_t err = {0};
    capture_t c;
    cap_open(&c);
    h->len[1] = 5;
    assert_int_equal(zb_ascii_write(&h->sim, 0, c.f, &err), ZB_EINVAL);
    assert_int_equal(zb_svg_write(&h->sim, NULL, c.f, &err), ZB_EINVAL);
    assert_int_equal(zb_trace_write(&h->sim, 1, c.f, &err), ZB_EINVAL);
    h->len[1] = 6;
    h->en[0][2] = NAN;
    assert_int_equal(zb_svg_write(&h->sim, NULL, c.f, &err), ZB_ENUMERIC);
    free(cap_close(&c));
    hand_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ascii_exact),     cmocka_unit_test(test_ascii_long_and_chunks),
        cmocka_unit_test(test_ascii_fallback),  cmocka_unit_test(test_json_fields),
        cmocka_unit_test(test_trace),           cmocka_unit_test(test_trace_spans),
        cmocka_unit_test(test_svg),
        cmocka_unit_test(test_inconsistent_sim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
