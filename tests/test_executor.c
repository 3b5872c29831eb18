/* Tests of the executor with fake compute: a small numeric pipeline whose floating-point result
 * depends on the order of operations (W accumulates in microbatch order, B consumes what F kept,
 * messages carry real values). For every schedule family in the registry, P in {2, 4} and
 * M in {P, 2P, 8}, the ranks-as-threads run must give the same bits as a sequential reference;
 * an op that checks its inputs fails loudly if an action runs before its dependencies. A failing
 * op stops every rank with a message naming it. Deferred sends (send_ready: a "device" that
 * fills the send buffer later) give the same bits and still cannot deadlock. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "zbpp/executor.h"
#include "zbpp/schedule.h"
#include "zbpp/transport.h"

enum { VEC = 3 };

/* State of one rank (or of the sequential reference, which owns every stage). */
typedef struct {
    const zb_schedule_t *s;
    int rank; /* -1 = reference: owns everything */
    int S, M;
    float *x, *y, *dy, *dz, *dx; /* [S][M][VEC] */
    unsigned char *have_x, *done_f, *have_dy, *done_b, *done_w; /* [S][M] */
    float *grad;  /* [S][VEC] */
    float *loss;  /* [M] */
    int computes; /* compute actions run so far */
    int fail_at;  /* fail the compute with this index (-1 = never) */
    /* deferred sends: a send's buffer (staged, [2][S][M][VEC], NaN until filled) is filled
     * from src only when send_ready is told to wait or asked for the (1 + k mod 3)-th time
     * (k: the message's index): some at once, some after an action, some only when waited for */
    bool defer;
    float *staged;
    const float **src;          /* [2][S][M] */
    int *polls, *queued_at;     /* [2][S][M]: send_ready calls; computes when queued */
    int not_ready, late;        /* answers "not ready"; sends handed over after a compute */
} toy_t;

static size_t at(const toy_t *t, int s, int m) { return (size_t)s * (size_t)t->M + (size_t)m; }
static float *vec(float *base, const toy_t *t, int s, int m) { return base + at(t, s, m) * VEC; }

static float weight(int s, int k) { return 0.55f + 0.1f * (float)s - 0.07f * (float)k; }

static void toy_init(toy_t *t, const zb_schedule_t *s, int rank, int S, int M)
{
    memset(t, 0, sizeof *t);
    t->s = s;
    t->rank = rank;
    t->S = S;
    t->M = M;
    size_t n = (size_t)S * (size_t)M;
    t->x = calloc(n * VEC, sizeof(float));
    t->y = calloc(n * VEC, sizeof(float));
    t->dy = calloc(n * VEC, sizeof(float));
    t->dz = calloc(n * VEC, sizeof(float));
    t->dx = calloc(n * VEC, sizeof(float));
    t->have_x = calloc(n, 1);
    t->done_f = calloc(n, 1);
    t->have_dy = calloc(n, 1);
    t->done_b = calloc(n, 1);
    t->done_w = calloc(n, 1);
    t->grad = calloc((size_t)S * VEC, sizeof(float));
    t->loss = calloc((size_t)M, sizeof(float));
    t->fail_at = -1;
    t->staged = malloc(2 * n * VEC * sizeof(float));
    t->src = calloc(2 * n, sizeof *t->src);
    t->polls = calloc(2 * n, sizeof(int));
    t->queued_at = calloc(2 * n, sizeof(int));
    for (int m = 0; m < M; m++) { /* the pipeline's input, known to stage 0 */
        for (int k = 0; k < VEC; k++)
            vec(t->x, t, 0, m)[k] = sinf(1.3f * (float)m + (float)k);
        t->have_x[at(t, 0, m)] = 1;
    }
}

static void toy_free(toy_t *t)
{
    free(t->x), free(t->y), free(t->dy), free(t->dz), free(t->dx);
    free(t->have_x), free(t->done_f), free(t->have_dy), free(t->done_b), free(t->done_w);
    free(t->grad), free(t->loss);
    free(t->staged), free(t->src), free(t->polls), free(t->queued_at);
}

static bool owns(const toy_t *t, int stage)
{
    return t->rank < 0 || zb_stage_rank(t->s, stage) == t->rank;
}

static zb_status_t toy_f(toy_t *t, int s, int m, zb_err_t *err)
{
    if (!t->have_x[at(t, s, m)] || t->done_f[at(t, s, m)])
        return zb_err_set(err, ZB_ESCHEDULE, "F(%d,%d): input missing or F repeated", s, m);
    const float *x = vec(t->x, t, s, m);
    float *y = vec(t->y, t, s, m);
    for (int k = 0; k < VEC; k++)
        y[k] = tanhf(weight(s, k) * x[k] + 0.3f * x[(k + 1) % VEC]);
    t->done_f[at(t, s, m)] = 1;
    if (s == t->S - 1) { /* loss = 0.5 |y|^2, its gradient y */
        float l = 0;
        for (int k = 0; k < VEC; k++) {
            l += 0.5f * y[k] * y[k];
            vec(t->dy, t, s, m)[k] = y[k];
        }
        t->loss[m] = l;
        t->have_dy[at(t, s, m)] = 1;
    } else if (owns(t, s + 1)) { /* same rank: hand over without a message */
        memcpy(vec(t->x, t, s + 1, m), y, sizeof(float) * VEC);
        t->have_x[at(t, s + 1, m)] = 1;
    }
    return ZB_OK;
}

static zb_status_t toy_b(toy_t *t, int s, int m, zb_err_t *err)
{
    if (!t->done_f[at(t, s, m)] || !t->have_dy[at(t, s, m)] || t->done_b[at(t, s, m)])
        return zb_err_set(err, ZB_ESCHEDULE, "B(%d,%d): F or output gradient missing", s, m);
    const float *y = vec(t->y, t, s, m), *dy = vec(t->dy, t, s, m);
    float *dz = vec(t->dz, t, s, m), *dx = vec(t->dx, t, s, m);
    for (int k = 0; k < VEC; k++)
        dz[k] = dy[k] * (1.0f - y[k] * y[k]);
    for (int k = 0; k < VEC; k++)
        dx[k] = dz[k] * weight(s, k) + 0.3f * dz[(k + VEC - 1) % VEC];
    t->done_b[at(t, s, m)] = 1;
    if (s > 0 && owns(t, s - 1)) {
        memcpy(vec(t->dy, t, s - 1, m), dx, sizeof(float) * VEC);
        t->have_dy[at(t, s - 1, m)] = 1;
    }
    return ZB_OK;
}

static zb_status_t toy_w(toy_t *t, int s, int m, zb_err_t *err)
{
    if (!t->done_b[at(t, s, m)] || t->done_w[at(t, s, m)])
        return zb_err_set(err, ZB_ESCHEDULE, "W(%d,%d): B missing or W repeated", s, m);
    const float *x = vec(t->x, t, s, m), *dz = vec(t->dz, t, s, m);
    for (int k = 0; k < VEC; k++) /* order-dependent float accumulation */
        t->grad[s * VEC + k] += dz[k] * x[k];
    t->done_w[at(t, s, m)] = 1;
    return ZB_OK;
}

static zb_status_t op_compute(void *ctx, const zb_action_t *a, zb_err_t *err)
{
    toy_t *t = ctx;
    if (!owns(t, a->stage))
        return zb_err_set(err, ZB_ESCHEDULE, "stage %d is not on rank %d", a->stage, t->rank);
    if (t->computes++ == t->fail_at)
        return zb_err_set(err, ZB_ENUMERIC, "injected failure");
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_F: return toy_f(t, a->stage, a->mb, err);
    case ZB_ACT_B: return toy_b(t, a->stage, a->mb, err);
    case ZB_ACT_W: return toy_w(t, a->stage, a->mb, err);
    case ZB_ACT_BW: {
        zb_status_t st = toy_b(t, a->stage, a->mb, err);
        return st != ZB_OK ? st : toy_w(t, a->stage, a->mb, err);
    }
    default: return zb_err_set(err, ZB_EINVAL, "not a compute action");
    }
}

static zb_status_t op_send(void *ctx, const zb_action_t *a, const void **buf, size_t *bytes,
                           zb_err_t *err)
{
    toy_t *t = ctx;
    int s = a->stage, m = a->mb;
    if (a->type == ZB_ACT_SEND_F) {
        if (!t->done_f[at(t, s, m)])
            return zb_err_set(err, ZB_ESCHEDULE, "SEND_F(%d,%d) before F", s, m);
        *buf = vec(t->y, t, s, m);
    } else {
        if (!t->done_b[at(t, s, m)])
            return zb_err_set(err, ZB_ESCHEDULE, "SEND_B(%d,%d) before B", s, m);
        *buf = vec(t->dx, t, s, m);
    }
    *bytes = sizeof(float) * VEC;
    if (t->defer) { /* hand over a buffer that is filled later (op_send_ready) */
        size_t k = (a->type == ZB_ACT_SEND_B) * at(t, t->S, 0) + at(t, s, m);
        float *b = t->staged + k * VEC;
        for (int i = 0; i < VEC; i++)
            b[i] = NAN;
        t->src[k] = *buf;
        t->polls[k] = 0;
        t->queued_at[k] = t->computes;
        *buf = b;
    }
    return ZB_OK;
}

static zb_status_t op_send_ready(void *ctx, const zb_action_t *a, bool wait, bool *ready,
                                 zb_err_t *err)
{
    (void)err;
    toy_t *t = ctx;
    size_t k = (a->type == ZB_ACT_SEND_B) * at(t, t->S, 0) + at(t, a->stage, a->mb);
    *ready = wait || t->polls[k]++ >= (int)(k % 3);
    if (!*ready) {
        t->not_ready++;
        return ZB_OK;
    }
    memcpy(t->staged + k * VEC, t->src[k], sizeof(float) * VEC);
    t->late += t->computes > t->queued_at[k];
    return ZB_OK;
}

static zb_status_t op_recv(void *ctx, const zb_action_t *a, void **buf, size_t *bytes,
                           zb_err_t *err)
{
    (void)err;
    toy_t *t = ctx;
    int s = a->stage, m = a->mb;
    /* Mark as present now: the executor fills the buffer before the next action runs. */
    if (a->type == ZB_ACT_RECV_F) {
        *buf = vec(t->x, t, s, m);
        t->have_x[at(t, s, m)] = 1;
    } else {
        *buf = vec(t->dy, t, s, m);
        t->have_dy[at(t, s, m)] = 1;
    }
    *bytes = sizeof(float) * VEC;
    return ZB_OK;
}

static size_t op_recv_bytes(void *ctx, const zb_action_t *a)
{
    (void)ctx, (void)a;
    return sizeof(float) * VEC;
}

/* Sequential reference: per microbatch, forward through every stage, then backward, B then W. */
static void reference(toy_t *ref)
{
    zb_err_t err;
    for (int m = 0; m < ref->M; m++) {
        for (int s = 0; s < ref->S; s++)
            assert_int_equal(toy_f(ref, s, m, &err), ZB_OK);
        for (int s = ref->S - 1; s >= 0; s--) {
            assert_int_equal(toy_b(ref, s, m, &err), ZB_OK);
            assert_int_equal(toy_w(ref, s, m, &err), ZB_OK);
        }
    }
}

typedef struct {
    const zb_schedule_t *s;
    toy_t toy;
    zb_exec_timeline_t tl;
    int lookahead;
    bool defer;
} rank_arg_t;

static zb_status_t rank_main(zb_transport_t *t, void *arg, zb_err_t *err)
{
    rank_arg_t *ra = arg;
    zb_exec_ops_t ops = {.ctx = &ra->toy,
                         .compute = op_compute,
                         .send_payload = op_send,
                         .recv_payload = op_recv,
                         .recv_bytes = op_recv_bytes,
                         .send_ready = ra->defer ? op_send_ready : NULL};
    zb_exec_opts_t opts = {.recv_lookahead = ra->lookahead, .t0 = 0};
    return zb_execute(ra->s, t, &ops, &opts, &ra->tl, err);
}

/* Run lowered schedule `low` on threads; fail_rank/fail_at inject a failing compute; defer:
 * every rank's sends are deferred (*late_sends = how many went out after a later compute).
 * Fills statuses; returns the overall status. Compares to the reference when it succeeds. */
static zb_status_t run_toy_on(const zb_schedule_t *low, int fail_rank, int fail_at, bool defer,
                              int *late_sends, zb_status_t *status, zb_err_t *err)
{
    int P = low->ranks, S = low->stages, M = low->microbatches;
    rank_arg_t *ra = calloc((size_t)P, sizeof *ra);
    void **args = calloc((size_t)P, sizeof *args);
    for (int r = 0; r < P; r++) {
        ra[r].s = low;
        ra[r].lookahead = r % 2 ? 2 : 0;
        ra[r].defer = defer;
        toy_init(&ra[r].toy, low, r, S, M);
        ra[r].toy.defer = defer;
        if (r == fail_rank)
            ra[r].toy.fail_at = fail_at;
        assert_int_equal(zb_exec_timeline_alloc(&ra[r].tl, low->rank[r].len, err), ZB_OK);
        args[r] = &ra[r];
    }
    zb_thread_world_t *w = NULL;
    assert_int_equal(zb_thread_world_new(P, 2 * S * M, 20.0, &w, err), ZB_OK);
    zb_status_t st = zb_thread_world_run(w, rank_main, args, 0, status, err);
    zb_thread_world_free(w);

    if (st == ZB_OK) {
        toy_t ref;
        toy_init(&ref, low, -1, S, M);
        reference(&ref);
        for (int s = 0; s < S; s++) {
            const toy_t *mine = &ra[zb_stage_rank(low, s)].toy;
            for (int m = 0; m < M; m++) {
                assert_true(mine->done_w[at(mine, s, m)]);
                assert_memory_equal(vec(mine->y, mine, s, m), vec(ref.y, &ref, s, m),
                                    sizeof(float) * VEC);
            }
            assert_memory_equal(&mine->grad[s * VEC], &ref.grad[s * VEC], sizeof(float) * VEC);
        }
        const toy_t *last = &ra[zb_stage_rank(low, S - 1)].toy;
        assert_memory_equal(last->loss, ref.loss, sizeof(float) * (size_t)M);
        toy_free(&ref);

        /* the measured timeline is ordered and gives a sane bubble rate */
        for (int r = 0; r < P; r++)
            for (int i = 0; i < ra[r].tl.len; i++) {
                assert_true(ra[r].tl.start[i] <= ra[r].tl.end[i]);
                if (i + 1 < ra[r].tl.len)
                    assert_true(ra[r].tl.end[i] <= ra[r].tl.start[i + 1]);
            }
        zb_exec_timeline_t *tls = calloc((size_t)P, sizeof *tls);
        for (int r = 0; r < P; r++)
            tls[r] = ra[r].tl;
        zb_sim_t sim;
        assert_int_equal(zb_exec_fill_sim(low, tls, NULL, &sim, err), ZB_OK);
        assert_true(sim.bubble_rate >= 0 && sim.bubble_rate < 1);
        assert_true(sim.makespan > 0);
        assert_int_equal(sim.len[P - 1], low->rank[P - 1].len);
        zb_exec_sim_free(&sim);
        free(tls);
    }
    for (int r = 0; r < P; r++) {
        if (late_sends)
            *late_sends += ra[r].toy.late;
        toy_free(&ra[r].toy);
        zb_exec_timeline_free(&ra[r].tl);
    }
    free(ra);
    free(args);
    return st;
}

static zb_status_t run_toy(const zb_schedule_t *low, int fail_rank, int fail_at,
                           zb_status_t *status, zb_err_t *err)
{
    return run_toy_on(low, fail_rank, fail_at, false, NULL, status, err);
}

/* Generate family `name`; returns NULL (with the rejection checked) if it refuses (P, M). */
static zb_schedule_t *generate_lowered(const char *name, int P, int M)
{
    zb_err_t err;
    zb_schedule_t *sched = NULL;
    zb_gen_params_t gp = {.ranks = P, .microbatches = M};
    zb_status_t st = zb_generate(name, &gp, &sched, &err);
    if (st != ZB_OK) {
        /* families that need a cost model (auto, optimal): give them uniform costs */
        for (int v = 1; v <= 2 && st != ZB_OK; v++) {
            zb_costs_t c;
            assert_int_equal(zb_costs_init_uniform(&c, v * P, 1, 1, 1, 0, 1, 0.5, -1.5, &err),
                             ZB_OK);
            zb_gen_params_t gc = {.ranks = P, .microbatches = M, .chunks = v, .costs = &c};
            st = zb_generate(name, &gc, &sched, &err);
            zb_costs_free(&c);
        }
    }
    if (st != ZB_OK) {
        /* the documented rejection: ZB_EINVAL with a message saying why */
        assert_int_equal(st, ZB_EINVAL);
        assert_true(strlen(err.msg) > 0);
        print_message("    %-18s P=%d M=%-2d rejected: %s\n", name, P, M, err.msg);
        return NULL;
    }
    zb_schedule_t *low = NULL;
    assert_int_equal(zb_insert_comms(sched, &low, &err), ZB_OK);
    zb_schedule_free(sched);
    return low;
}

static void test_every_family_matches_reference(void **state)
{
    (void)state;
    size_t n = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    assert_true(n >= 2);
    int ran = 0;
    for (size_t g = 0; g < n; g++) {
        static const int Ps[] = {2, 4};
        for (int pi = 0; pi < 2; pi++) {
            int P = Ps[pi];
            int Ms[] = {P, 2 * P, 8};
            for (int mi = 0; mi < 3; mi++) {
                if (mi == 2 && Ms[2] == Ms[1])
                    continue; /* P = 4: 2P == 8 */
                zb_schedule_t *low = generate_lowered(gens[g].name, P, Ms[mi]);
                if (!low)
                    continue;
                zb_err_t err;
                zb_status_t st = run_toy(low, -1, -1, NULL, &err);
                if (st != ZB_OK)
                    fail_msg("%s P=%d M=%d: %s", gens[g].name, P, Ms[mi], err.msg);
                ran++;
                zb_schedule_free(low);
            }
        }
    }
    print_message("    %d (family, P, M) combinations matched the reference bit for bit\n", ran);
    assert_true(ran >= 6);
}

/* Deferred sends: every family, P in {2, 4}, M = 2P, each rank's send buffers filled only when
 * asked up to three times (or told to wait): the reference's bits (a buffer handed over unfilled carries
 * NaN), no deadlock (a rank that blocked in a receive with its own sends held back would wait
 * for its 20 s timeout and fail), and sends really went out after later computes. */
static void test_deferred_sends_match_reference(void **state)
{
    (void)state;
    size_t n = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    int ran = 0, late = 0;
    for (size_t g = 0; g < n; g++)
        for (int P = 2; P <= 4; P += 2) {
            zb_schedule_t *low = generate_lowered(gens[g].name, P, 2 * P);
            if (!low)
                continue;
            zb_err_t err;
            if (run_toy_on(low, -1, -1, true, &late, NULL, &err) != ZB_OK)
                fail_msg("%s P=%d deferred: %s", gens[g].name, P, err.msg);
            ran++;
            zb_schedule_free(low);
        }
    print_message("    %d (family, P) runs with deferred sends matched; %d sends went out late\n",
                  ran, late);
    assert_true(ran >= 6);
    assert_true(late > 0);
}

static void test_failing_op_stops_every_rank(void **state)
{
    (void)state;
    zb_schedule_t *low = generate_lowered("1f1b", 4, 8);
    assert_non_null(low);
    zb_status_t st[4];
    zb_err_t err;
    /* rank 2 fails on its 5th compute, in the middle of the steady state */
    assert_int_equal(run_toy(low, 2, 4, st, &err), ZB_ENUMERIC);
    assert_non_null(strstr(err.msg, "rank 2, "));
    assert_non_null(strstr(err.msg, "injected failure"));
    for (int r = 0; r < 4; r++)
        assert_int_equal(st[r], r == 2 ? ZB_ENUMERIC : ZB_EABORT);
    zb_schedule_free(low);
}

static void test_rejects_bad_setups(void **state)
{
    (void)state;
    zb_err_t err;
    zb_schedule_t *sched = NULL;
    zb_gen_params_t gp = {.ranks = 2, .microbatches = 2};
    assert_int_equal(zb_generate("1f1b", &gp, &sched, &err), ZB_OK);
    toy_t toy;
    toy_init(&toy, sched, 0, sched->stages, 2);
    zb_exec_ops_t ops = {.ctx = &toy, .compute = op_compute};
    zb_thread_world_t *w = NULL;
    assert_int_equal(zb_thread_world_new(2, 4, 1.0, &w, &err), ZB_OK);
    /* not lowered */
    assert_int_equal(zb_execute(sched, zb_thread_world_rank(w, 0), &ops, NULL, NULL, &err),
                     ZB_EINVAL);
    assert_non_null(strstr(err.msg, "not lowered"));
    zb_thread_world_free(w);
    /* world of the wrong size */
    assert_int_equal(zb_thread_world_new(3, 4, 1.0, &w, &err), ZB_OK);
    assert_int_equal(zb_execute(sched, zb_thread_world_rank(w, 0), &ops, NULL, NULL, &err),
                     ZB_EMISMATCH);
    zb_thread_world_free(w);
    toy_free(&toy);
    zb_schedule_free(sched);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family_matches_reference),
        cmocka_unit_test(test_deferred_sends_match_reference),
        cmocka_unit_test(test_failing_op_stops_every_rank),
        cmocka_unit_test(test_rejects_bad_setups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
