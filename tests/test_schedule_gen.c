/* Generators: registry, argument checks, validity over a grid, and the closed forms
 * (bubble time and peak activations) checked with the simulator at zero comm cost. */
#include "schedule_testutil.h"

#include <stdio.h>
#include <string.h>

static void test_registry(void **state)
{
    (void)state;
    size_t n = 0;
    const zb_generator_info_t *g = zb_generators(&n);
    assert_true(n >= 5);
    const char *mine[] = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2"};
    for (size_t i = 0; i < 5; i++) {
        const zb_generator_info_t *f = zb_generator_find(mine[i]);
        assert_non_null(f);
        assert_string_equal(f->name, mine[i]);
        assert_non_null(f->summary);
        assert_non_null(f->fn);
    }
    for (size_t i = 0; i < n; i++)
        assert_ptr_equal(zb_generator_find(g[i].name), &g[i]);
    assert_null(zb_generator_find("2f2b"));
    assert_null(zb_generator_find(NULL));

    zb_gen_params_t gp = {.ranks = 2, .microbatches = 2};
    zb_schedule_t *s = (zb_schedule_t *)1;
    zb_err_t e;
    assert_int_equal(zb_generate("2f2b", &gp, &s, &e), ZB_EINVAL);
    assert_null(s);
    assert_non_null(strstr(e.msg, "2f2b"));
    assert_non_null(strstr(e.msg, "zb-h1")); /* lists the known families */
}

static void expect_einval(const char *family, int P, int M, int v, const char *needle)
{
    zb_gen_params_t gp = {.ranks = P, .microbatches = M, .chunks = v};
    zb_schedule_t *s = (zb_schedule_t *)1;
    zb_err_t e = {0};
    zb_status_t st = zb_generate(family, &gp, &s, &e);
    if (st != ZB_EINVAL)
        fail_msg("%s P=%d M=%d v=%d: status %d, expected ZB_EINVAL", family, P, M, v, st);
    assert_null(s);
    if (!strstr(e.msg, needle))
        fail_msg("%s: message '%s' lacks '%s'", family, e.msg, needle);
    assert_non_null(strstr(e.msg, family));
}

static void test_bad_arguments(void **state)
{
    (void)state;
    const char *one_chunk[] = {"gpipe", "1f1b", "zb-h1", "zb-h2"};
    for (int i = 0; i < 4; i++) {
        expect_einval(one_chunk[i], 4, 0, 0, "microbatches");
        expect_einval(one_chunk[i], 4, -3, 0, "microbatches");
        expect_einval(one_chunk[i], 0, 4, 0, "ranks");
        expect_einval(one_chunk[i], 4, 8, 2, "chunks");
    }
    expect_einval("interleaved-1f1b", 4, 8, 1, "chunks");
    expect_einval("interleaved-1f1b", 4, 3, 2, "at least");
    expect_einval("interleaved-zb", 4, 3, 2, "at least");
    expect_einval("interleaved-1f1b", 4, 0, 2, "microbatches");
    expect_einval("1f1b", 1 << 20, 4, 0, "ranks");
    expect_einval("1f1b", 4096, 1 << 20, 0, "actions");

    /* a cost model must match v·P stages */
    zb_costs_t c;
    tu_costs(&c, 3, 1, 1, 1, 0);
    zb_gen_params_t gp = {.ranks = 4, .microbatches = 8, .costs = &c};
    zb_schedule_t *s;
    zb_err_t e;
    assert_int_equal(zb_generate("zb-h1", &gp, &s, &e), ZB_EINVAL);
    assert_non_null(strstr(e.msg, "stages"));
    zb_costs_free(&c);
}

/* Every supported (P, M) gives a complete schedule that validates and simulates. */
static void test_all_valid(void **state)
{
    (void)state;
    const char *fam[] = {"gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b"};
    for (int f = 0; f < 5; f++)
        for (int P = 1; P <= 7; P++)
            for (int M = 1; M <= 3 * P + 2; M++) {
                bool inter = f == 4;
                if (inter && M < P)
                    continue;
                for (int v = inter ? 2 : 0; v <= (inter ? 4 : 0); v++) {
                    zb_schedule_t *s = tu_gen(fam[f], P, M, v);
                    zb_err_t e = {0};
                    if (zb_validate(s, NULL, &e) != ZB_OK)
                        fail_msg("%s P=%d M=%d v=%d: %s", fam[f], P, M, v, e.msg);
                    assert_int_equal(zb_schedule_is_split(s), f == 2 || f == 3);
                    assert_false(zb_schedule_has_comms(s));
                    size_t total = 0;
                    for (int r = 0; r < P; r++)
                        total += (size_t)s->rank[r].len;
                    assert_int_equal(total, (size_t)s->stages * M * (f == 2 || f == 3 ? 3 : 2));
                    zb_costs_t c;
                    tu_costs(&c, s->stages, 1, 2, 1, 0.25);
                    zb_sim_t sim;
                    if (zb_simulate(s, &c, &sim, &e) != ZB_OK)
                        fail_msg("%s P=%d M=%d: simulate: %s", fam[f], P, M, e.msg);
                    zb_sim_free(&sim);
                    zb_costs_free(&c);
                    zb_schedule_free(s);
                }
            }
}

/* Handcrafted families ignore the cost model. */
static void test_independent_of_costs(void **state)
{
    (void)state;
    const char *fam[] = {"gpipe", "1f1b", "zb-h1", "zb-h2"};
    for (int f = 0; f < 4; f++) {
        zb_costs_t c;
        tu_costs(&c, 4, 3, 0.5, 7, 2);
        zb_gen_params_t gp = {.ranks = 4, .microbatches = 9, .costs = &c};
        zb_schedule_t *a, *b = tu_gen(fam[f], 4, 9, 0);
        zb_err_t e;
        assert_int_equal(zb_generate(fam[f], &gp, &a, &e), ZB_OK);
        assert_true(zb_schedule_equal(a, b));
        assert_string_equal(a->name, fam[f]);
        zb_schedule_free(a);
        zb_schedule_free(b);
        zb_costs_free(&c);
    }
}

typedef struct {
    double bubble; /* span_max - busy_max */
    double peak0;  /* peak activations on rank 0 */
    double peak_max;
} result_t;

static result_t run(const char *family, int P, int M, int v, double F, double B, double W)
{
    zb_schedule_t *s = tu_gen(family, P, M, v);
    zb_costs_t c;
    tu_costs(&c, s->stages, F, B, W, 0);
    zb_sim_t sim;
    zb_err_t e;
    if (zb_simulate(s, &c, &sim, &e) != ZB_OK)
        fail_msg("%s: %s", family, e.msg);
    result_t r = {.bubble = sim.span_max - sim.busy_max, .peak0 = sim.peak_mem[0]};
    for (int i = 0; i < P; i++)
        r.peak_max = fmax(r.peak_max, sim.peak_mem[i]);
    assert_true(sim.makespan >= sim.span_max - 1e-9);
    zb_sim_free(&sim);
    zb_costs_free(&c);
    zb_schedule_free(s);
    return r;
}

/* Cost triples (F, B, W). The ZB closed forms are exact when W <= F: with W > F the bubble
 * before rank 0's first B is at least (P-1)·B (H1) or (P-1)(B-F) (H2), whatever the order,
 * which exceeds the formula (see docs/schedule.md). */
static const double costs_grid[][3] = {{1, 1, 1}, {2, 1.5, 1}, {2, 2, 1}, {1, 1, 0.5},
                                       {1.5, 3, 1.25}, {2, 1, 1}};
#define NCOSTS (sizeof costs_grid / sizeof costs_grid[0])

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond))                                                                          \
            fail_msg(__VA_ARGS__);                                                            \
    } while (0)

static void test_closed_forms_1f1b_gpipe(void **state)
{
    (void)state;
    for (size_t k = 0; k < NCOSTS; k++) {
        double F = costs_grid[k][0], B = costs_grid[k][1], W = costs_grid[k][2];
        for (int P = 2; P <= 8; P++)
            for (int M = P; M <= 3 * P; M++) {
                double want = (P - 1) * (F + B + W);
                result_t a = run("1f1b", P, M, 0, F, B, W);
                CHECK(tu_close(a.bubble, want), "1f1b P=%d M=%d: bubble %g, want %g", P, M,
                      a.bubble, want);
                CHECK(tu_close(a.peak0, P) && tu_close(a.peak_max, P), "1f1b peak %g", a.peak0);
                result_t g = run("gpipe", P, M, 0, F, B, W);
                CHECK(tu_close(g.bubble, want), "gpipe P=%d M=%d: bubble %g, want %g", P, M,
                      g.bubble, want);
                CHECK(tu_close(g.peak0, M), "gpipe P=%d M=%d: peak %g, want M", P, M, g.peak0);
            }
    }
    /* fewer microbatches than ranks: 1F1B peak is min(P, M) on rank 0 */
    assert_close(run("1f1b", 6, 3, 0, 1, 1, 1).peak0, 3);
}

static void test_closed_form_zbh1(void **state)
{
    (void)state;
    for (size_t k = 0; k < NCOSTS; k++) {
        double F = costs_grid[k][0], B = costs_grid[k][1], W = costs_grid[k][2];
        for (int P = 2; P <= 8; P++)
            for (int M = P; M <= 3 * P; M++) {
                double want = (P - 1) * (F + B - W);
                result_t r = run("zb-h1", P, M, 0, F, B, W);
                CHECK(tu_close(r.bubble, want), "zb-h1 P=%d M=%d F=%g B=%g W=%g: bubble %g, "
                      "want %g", P, M, F, B, W, r.bubble, want);
                /* same activation memory as 1F1B */
                CHECK(tu_close(r.peak0, P) && tu_close(r.peak_max, P),
                      "zb-h1 P=%d M=%d: peak %g / %g, want %d", P, M, r.peak0, r.peak_max, P);
            }
    }
    assert_close(run("zb-h1", 6, 4, 0, 1, 1, 1).peak0, 4);
}

static void test_closed_form_zbh2(void **state)
{
    (void)state;
    for (size_t k = 0; k < NCOSTS; k++) {
        double F = costs_grid[k][0], B = costs_grid[k][1], W = costs_grid[k][2];
        for (int P = 2; P <= 8; P++)
            for (int M = 2 * P - 1; M <= 3 * P + 4; M++) {
                double want = fmax(0.0, (P - 1) * (F + B - 2 * W));
                result_t r = run("zb-h2", P, M, 0, F, B, W);
                CHECK(tu_close(r.bubble, want), "zb-h2 P=%d M=%d F=%g B=%g W=%g: bubble %g, "
                      "want %g", P, M, F, B, W, r.bubble, want);
                CHECK(tu_close(r.peak0, 2 * P - 1) && tu_close(r.peak_max, 2 * P - 1),
                      "zb-h2 P=%d M=%d: peak %g, want %d", P, M, r.peak0, 2 * P - 1);
            }
    }
    /* zero bubble at F = B = W, and a case where F+B-2W < 0 still gives zero */
    assert_close(run("zb-h2", 5, 40, 0, 1, 1, 1).bubble, 0);
    assert_close(run("zb-h2", 5, 40, 0, 2, 0.5, 1.5).bubble, 0);
    /* below M = 2P-1 it stays valid, only the memory is capped by M */
    assert_close(run("zb-h2", 5, 4, 0, 1, 1, 1).peak0, 4);
}

static void test_closed_form_interleaved(void **state)
{
    (void)state;
    for (size_t k = 0; k < NCOSTS; k++) {
        double F = costs_grid[k][0], B = costs_grid[k][1], W = costs_grid[k][2];
        for (int P = 2; P <= 6; P++)
            for (int v = 2; v <= 4; v++)
                for (int M = P; M <= 3 * P; M += P) {
                    /* per-chunk costs: a rank's model is split into v chunks */
                    double want = (P - 1) * (F + B + W) / v;
                    result_t r = run("interleaved-1f1b", P, M, v, F / v, B / v, W / v);
                    CHECK(tu_close(r.bubble, want),
                          "interleaved P=%d M=%d v=%d: bubble %g, want %g", P, M, v, r.bubble,
                          want);
                }
    }
}

/* Megatron's original interleaved order for M a multiple of P (groups of P microbatches), written
 * out independently: the generator must still give exactly this for those M. */
static zb_schedule_t *ref_interleaved_groups_of_p(int P, int M, int v)
{
    zb_schedule_t *s = zb_schedule_new("ref", P, v, ZB_PLACE_LOOP, M);
    assert_non_null(s);
    const int total = M * v;
    for (int r = 0; r < P; r++) {
        int warm = 2 * (P - 1 - r) + (v - 1) * P;
        if (warm > total)
            warm = total;
        /* forward k: chunk (k mod Pv) / P, mb (k / Pv)·P + k mod P; backward: chunks reversed */
        int order[2 * 64 * 64 * 3], n = 0; /* +k forward, -(k+1) backward */
        int f = 0, b = 0;
        while (f < warm)
            order[n++] = f++;
        while (f < total) {
            order[n++] = f++;
            order[n++] = -(++b);
        }
        while (b < total)
            order[n++] = -(++b);
        for (int i = 0; i < n; i++) {
            bool bwd = order[i] < 0;
            int k = bwd ? -order[i] - 1 : order[i];
            int c = (k % (P * v)) / P, mb = (k / (P * v)) * P + k % P;
            if (bwd)
                c = v - 1 - c;
            zb_action_t a = tu_act(bwd ? ZB_ACT_BW : ZB_ACT_F, c * P + r, mb);
            assert_int_equal(zb_schedule_push(s, r, a), ZB_OK);
        }
    }
    return s;
}

/* Interleaved 1F1B and interleaved ZB for any M >= P (not only multiples of P): complete, valid
 * (the validator also rules out a deadlock of the lowered program), simulable; unchanged for
 * multiples of P; interleaved-zb keeps interleaved-1f1b's F/B order and memory peak. */
static void test_interleaved_any_m(void **state)
{
    (void)state;
    for (int P = 2; P <= 6; P++)
        for (int v = 2; v <= 3; v++)
            for (int M = P; M <= 3 * P; M++) {
                zb_schedule_t *a = tu_gen("interleaved-1f1b", P, M, v);
                zb_schedule_t *z = tu_gen("interleaved-zb", P, M, v);
                zb_err_t e = {0};
                if (zb_validate(a, NULL, &e) != ZB_OK)
                    fail_msg("interleaved-1f1b P=%d v=%d M=%d: %s", P, v, M, e.msg);
                if (zb_validate(z, NULL, &e) != ZB_OK)
                    fail_msg("interleaved-zb P=%d v=%d M=%d: %s", P, v, M, e.msg);
                if (M % P == 0) {
                    zb_schedule_t *ref = ref_interleaved_groups_of_p(P, M, v);
                    CHECK(zb_schedule_equal(a, ref), "P=%d v=%d M=%d: order changed", P, v, M);
                    zb_schedule_free(ref);
                }
                /* interleaved-zb's F and B (as BW) are interleaved-1f1b's, in the same order */
                for (int r = 0; r < P; r++) {
                    int j = 0;
                    for (int i = 0; i < z->rank[r].len; i++) {
                        zb_action_t x = z->rank[r].actions[i];
                        if (x.type == ZB_ACT_W)
                            continue;
                        zb_action_t y = a->rank[r].actions[j++];
                        CHECK(y.stage == x.stage && y.mb == x.mb &&
                                  (y.type == x.type || (y.type == ZB_ACT_BW && x.type == ZB_ACT_B)),
                              "interleaved-zb P=%d v=%d M=%d rank %d: F/B order differs at %d", P,
                              v, M, r, i);
                    }
                    assert_int_equal(j, a->rank[r].len);
                }
                zb_costs_t c;
                tu_costs(&c, a->stages, 1, 1, 1, 0.1);
                zb_sim_t sa, sz;
                assert_int_equal(zb_simulate(a, &c, &sa, &e), ZB_OK);
                assert_int_equal(zb_simulate(z, &c, &sz, &e), ZB_OK);
                CHECK(sz.span_max <= sa.span_max + 1e-9, "P=%d v=%d M=%d: zb span %g > %g", P, v,
                      M, sz.span_max, sa.span_max);
                zb_sim_free(&sa);
                zb_sim_free(&sz);
                zb_costs_free(&c);
                zb_schedule_free(a);
                zb_schedule_free(z);
            }
}

/* M = 6 on P = 4 (not a multiple): PyTorch's ScheduleInterleaved1F1B runs one round of 6
 * microbatches; rank r warms up with (v-1)·6 + 2(P-1-r) forwards. Rows worked out by hand from
 * that rule (idle slots dropped). */
static void test_interleaved_pytorch_m6(void **state)
{
    (void)state;
    zb_schedule_t *s = tu_gen("Interleaved1F1B", 4, 6, 2);
    const char *row1[] = {"1F0", "1F1", "1F2", "1F3", "1F4", "1F5", "5F0", "5F1", "5F2",
                          "5F3", "5F4", "5B0", "5F5", "5B1", "5B2", "5B3", "5B4", "5B5",
                          "1B0", "1B1", "1B2", "1B3", "1B4", "1B5"};
    const char *row3[] = {"3F0", "3F1", "3F2", "3F3", "3F4", "3F5", "7F0", "7B0", "7F1",
                          "7B1", "7F2", "7B2", "7F3", "7B3", "7F4", "7B4", "7F5", "7B5",
                          "3B0", "3B1", "3B2", "3B3", "3B4", "3B5"};
    const char **rows[] = {row1, row3};
    const int ranks[] = {1, 3};
    for (int k = 0; k < 2; k++) {
        const zb_rank_program_t *rp = &s->rank[ranks[k]];
        assert_int_equal(rp->len, 24);
        for (int i = 0; i < 24; i++) {
            char cell[32];
            const zb_action_t *a = &rp->actions[i];
            snprintf(cell, sizeof cell, "%d%s%d", a->stage, a->type == ZB_ACT_F ? "F" : "B",
                     a->mb);
            CHECK(!strcmp(cell, rows[k][i]), "rank %d action %d: %s, PyTorch has %s", ranks[k],
                  i, cell, rows[k][i]);
        }
    }
    /* rank 0 runs every forward first (warm-up 12 = all of them) */
    for (int i = 0; i < 12; i++)
        assert_int_equal(s->rank[0].actions[i].type, ZB_ACT_F);
    zb_schedule_free(s);
}

/* Looped BFS: exact order (PyTorch's ScheduleLoopedBFS, but each stage's backwards in
 * microbatch order, see gen_looped_bfs.c), valid over a grid, GPipe's memory v·M,
 * and for M >= P a bubble of (P-1) chunk steps of F+B+W (no wait between forward chunks). */
static void test_looped_bfs(void **state)
{
    (void)state;
    zb_schedule_t *s = tu_gen("LoopedBFS", 2, 3, 2);
    assert_string_equal(s->name, "looped-bfs");
    /* rank 1 holds stages 1 and 3 */
    const zb_action_t want[] = {
        tu_act(ZB_ACT_F, 1, 0),  tu_act(ZB_ACT_F, 1, 1),  tu_act(ZB_ACT_F, 1, 2),
        tu_act(ZB_ACT_F, 3, 0),  tu_act(ZB_ACT_F, 3, 1),  tu_act(ZB_ACT_F, 3, 2),
        tu_act(ZB_ACT_BW, 3, 0), tu_act(ZB_ACT_BW, 3, 1), tu_act(ZB_ACT_BW, 3, 2),
        tu_act(ZB_ACT_BW, 1, 0), tu_act(ZB_ACT_BW, 1, 1), tu_act(ZB_ACT_BW, 1, 2)};
    assert_int_equal(s->rank[1].len, 12);
    for (int i = 0; i < 12; i++) {
        const zb_action_t *a = &s->rank[1].actions[i];
        CHECK(a->type == want[i].type && a->stage == want[i].stage && a->mb == want[i].mb,
              "looped-bfs rank 1 action %d: %s(%d, %d)", i, zb_action_type_name(a->type),
              a->stage, a->mb);
    }
    zb_schedule_free(s);
    for (int P = 1; P <= 5; P++)
        for (int v = 1; v <= 3; v++)
            for (int M = 1; M <= 2 * P + 1; M++) {
                s = tu_gen("looped-bfs", P, M, v);
                zb_err_t e = {0};
                if (zb_validate(s, NULL, &e) != ZB_OK)
                    fail_msg("looped-bfs P=%d v=%d M=%d: %s", P, v, M, e.msg);
                zb_schedule_free(s);
                double F = 1, B = 2, W = 0.5;
                result_t r = run("looped-bfs", P, M, v, F, B, W);
                CHECK(tu_close(r.peak0, v * M) && tu_close(r.peak_max, v * M),
                      "looped-bfs P=%d v=%d M=%d: peak %g, want %d", P, v, M, r.peak_max, v * M);
                if (M >= P)
                    CHECK(tu_close(r.bubble, (P - 1) * (F + B + W)),
                          "looped-bfs P=%d v=%d M=%d: bubble %g, want %g", P, v, M, r.bubble,
                          (P - 1) * (F + B + W));
            }
    expect_einval("looped-bfs", 4, 8, 65, "chunks");
    expect_einval("looped-bfs", 4, 0, 2, "microbatches");
}

/* PyTorch's schedule class names find the same family, in any case; unknown names still fail. */
static void test_pytorch_aliases(void **state)
{
    (void)state;
    const char *pairs[][2] = {{"GPipe", "gpipe"},
                              {"ScheduleGPipe", "gpipe"},
                              {"1F1B", "1f1b"},
                              {"schedule1f1b", "1f1b"},
                              {"Interleaved1F1B", "interleaved-1f1b"},
                              {"INTERLEAVEDZEROBUBBLE", "interleaved-zb"},
                              {"ZBVZeroBubble", "zb-v"},
                              {"DualPipeV", "dualpipev"},
                              {"LoopedBFS", "looped-bfs"},
                              {"ScheduleLoopedBFS", "looped-bfs"},
                              {"ZB-H1", "zb-h1"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const zb_generator_info_t *g = zb_generator_find(pairs[i][0]);
        assert_non_null(g);
        assert_string_equal(g->name, pairs[i][1]);
    }
    assert_null(zb_generator_find("Schedule"));
    assert_null(zb_generator_find("1F1Bx"));
    /* generating through an alias gives the family's own schedule, named canonically */
    zb_gen_params_t p = {.ranks = 4, .microbatches = 8};
    zb_schedule_t *a = NULL, *b = NULL;
    zb_err_t e = {0};
    assert_int_equal(zb_generate("ZBVZeroBubble", &p, &a, &e), ZB_OK);
    assert_int_equal(zb_generate("zb-v", &p, &b, &e), ZB_OK);
    assert_true(zb_schedule_equal(a, b));
    assert_string_equal(a->name, "zb-v");
    zb_schedule_free(a);
    zb_schedule_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_pytorch_aliases),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_all_valid),
        cmocka_unit_test(test_independent_of_costs),
        cmocka_unit_test(test_closed_forms_1f1b_gpipe),
        cmocka_unit_test(test_closed_form_zbh1),
        cmocka_unit_test(test_closed_form_zbh2),
        cmocka_unit_test(test_closed_form_interleaved),
        cmocka_unit_test(test_interleaved_any_m),
        cmocka_unit_test(test_interleaved_pytorch_m6),
        cmocka_unit_test(test_looped_bfs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
