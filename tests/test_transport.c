/* Tests of the thread transport: matching by (source, tag), FIFO per tag, bounded mailboxes,
 * fixed-order collectives, exchange, size mismatch, timeout and abort propagation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "zbpp/transport.h"
#include "zbpp/util.h"

/* Run fn on P ranks; returns the world's overall status, fills err and per-rank statuses. */
static zb_status_t run(int P, int capacity, double timeout, zb_rank_fn fn, void **args,
                       zb_status_t *status, zb_err_t *err)
{
    zb_thread_world_t *w = NULL;
    assert_int_equal(zb_thread_world_new(P, capacity, timeout, &w, err), ZB_OK);
    zb_status_t st = zb_thread_world_run(w, fn, args, 0, status, err);
    zb_thread_world_free(w);
    return st;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- tag packing ---- */

static void test_tag_roundtrip(void **state)
{
    (void)state;
    uint32_t t = zb_tag(ZB_TAG_GRAD, 1023, 131071);
    assert_int_equal(zb_tag_kind(t), ZB_TAG_GRAD);
    assert_int_equal(zb_tag_stage(t), 1023);
    assert_int_equal(zb_tag_mb(t), 131071);
    assert_true(t <= 0x7FFFFFFFu); /* fits a non-negative int (MPI tag) */
    assert_true(zb_tag(ZB_TAG_ACT, 3, 5) != zb_tag(ZB_TAG_GRAD, 3, 5));
    assert_true(zb_tag(ZB_TAG_ACT, 3, 5) != zb_tag(ZB_TAG_ACT, 5, 3));
    zb_err_t err;
    assert_int_equal(zb_transport_check_sizes(1024, 8, &err), ZB_OK);
    assert_int_equal(zb_transport_check_sizes(1025, 8, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "1025 stages"));
    assert_int_equal(zb_transport_check_sizes(4, 131073, &err), ZB_EINVAL);
}

/* ---- matching: rank 0 sends tags A, B, A'; rank 1 receives B first, then A, A' in order ---- */

static zb_status_t matching_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    (void)arg;
    uint32_t A = zb_tag(ZB_TAG_ACT, 1, 0), B = zb_tag(ZB_TAG_ACT, 1, 1);
    zb_status_t st;
    if (t->rank == 0) {
        int v1 = 11, v2 = 22, v3 = 33;
        if ((st = zb_send(t, &v1, sizeof v1, 1, A, err)) != ZB_OK)
            return st;
        v1 = -1; /* the send copied it: changing the buffer afterwards must not matter */
        if ((st = zb_send(t, &v2, sizeof v2, 1, B, err)) != ZB_OK)
            return st;
        return zb_send(t, &v3, sizeof v3, 1, A, err);
    }
    int got[3] = {0};
    if ((st = zb_recv(t, &got[0], sizeof(int), 0, B, err)) != ZB_OK)
        return st;
    if ((st = zb_recv(t, &got[1], sizeof(int), 0, A, err)) != ZB_OK)
        return st;
    if ((st = zb_recv(t, &got[2], sizeof(int), 0, A, err)) != ZB_OK)
        return st;
    if (got[0] != 22 || got[1] != 11 || got[2] != 33)
        return zb_err_set(err, ZB_ECOMM, "got %d %d %d", got[0], got[1], got[2]);
    return ZB_OK;
}

static void test_matching_by_source_and_tag(void **state)
{
    (void)state;
    zb_err_t err;
    zb_status_t st[2];
    assert_int_equal(run(2, 8, 10, matching_rank, NULL, st, &err), ZB_OK);
}

/* ---- a mailbox of capacity 1: the sender waits, nothing is lost or reordered ---- */

static zb_status_t capacity_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    (void)arg;
    uint32_t tag = zb_tag(ZB_TAG_USER, 0, 0);
    zb_status_t st;
    for (int i = 0; i < 20; i++) {
        int v = i;
        if (t->rank == 0) {
            if ((st = zb_send(t, &v, sizeof v, 1, tag, err)) != ZB_OK)
                return st;
        } else {
            if (i % 5 == 0)
                sleep_ms(5); /* let the sender hit the full mailbox */
            if ((st = zb_recv(t, &v, sizeof v, 0, tag, err)) != ZB_OK)
                return st;
            if (v != i)
                return zb_err_set(err, ZB_ECOMM, "message %d arrived as %d", i, v);
        }
    }
    return ZB_OK;
}

static void test_bounded_mailbox(void **state)
{
    (void)state;
    zb_err_t err;
    assert_int_equal(run(2, 1, 10, capacity_rank, NULL, NULL, &err), ZB_OK);
}

/* ---- collectives: same bits on every rank, rank order regardless of arrival ---- */

typedef struct {
    double gathered[4 * 3];
    double reduced[3];
} coll_out_t;

static zb_status_t coll_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    coll_out_t *out = arg;
    /* Values whose sum depends on the order of addition. */
    static const double vals[4][3] = {
        {1e16, 1.0, 0.1}, {1.0, -1e16, 0.2}, {-1e16, 1e16, 0.3}, {1.0, 1.0, 1e-17}};
    sleep_ms(3 * (t->size - t->rank)); /* higher ranks arrive first */
    zb_status_t st = zb_allgather(t, vals[t->rank], 3, out->gathered, err);
    if (st != ZB_OK)
        return st;
    memcpy(out->reduced, vals[t->rank], sizeof out->reduced);
    if ((st = zb_allreduce_sum(t, out->reduced, 3, err)) != ZB_OK)
        return st;
    return zb_barrier(t, err);
}

static void test_collectives_fixed_order(void **state)
{
    (void)state;
    static const double vals[4][3] = {
        {1e16, 1.0, 0.1}, {1.0, -1e16, 0.2}, {-1e16, 1e16, 0.3}, {1.0, 1.0, 1e-17}};
    coll_out_t out[4];
    void *args[4] = {&out[0], &out[1], &out[2], &out[3]};
    zb_err_t err;
    assert_int_equal(run(4, 4, 10, coll_rank, args, NULL, &err), ZB_OK);
    for (int i = 0; i < 3; i++) {
        double want = 0.0;
        for (int r = 0; r < 4; r++)
            want += vals[r][i];
        for (int r = 0; r < 4; r++) {
            assert_memory_equal(&out[r].reduced[i], &want, sizeof want);
            for (int q = 0; q < 4; q++)
                assert_memory_equal(&out[r].gathered[q * 3 + i], &vals[q][i], sizeof(double));
        }
    }
}

/* 64-bit integers that no double holds exactly arrive bit for bit. */
static const uint64_t U64[3][2] = {{UINT64_MAX, 0x8000000000000001u},
                                   {0x0123456789abcdefu, 0},
                                   {(1ull << 53) + 1, 0xfedcba9876543210u}};

static zb_status_t u64_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    return zb_allgather_u64(t, U64[t->rank], 2, arg, err);
}

static void test_allgather_u64_exact(void **state)
{
    (void)state;
    uint64_t out[3][6];
    void *args[3] = {out[0], out[1], out[2]};
    zb_err_t err;
    assert_int_equal(run(3, 4, 10, u64_rank, args, NULL, &err), ZB_OK);
    for (int r = 0; r < 3; r++)
        assert_memory_equal(out[r], U64, sizeof out[r]);
}

/* Rows of an odd byte count (not a multiple of any value size) land at r·bytes, by rank. */
static zb_status_t bytes_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    unsigned char mine[5];
    for (int i = 0; i < 5; i++)
        mine[i] = (unsigned char)(0xA0 + 16 * t->rank + i);
    return zb_allgather_bytes(t, mine, sizeof mine, arg, err);
}

static void test_allgather_bytes_by_rank(void **state)
{
    (void)state;
    unsigned char out[3][15];
    void *args[3] = {out[0], out[1], out[2]};
    zb_err_t err;
    assert_int_equal(run(3, 4, 10, bytes_rank, args, NULL, &err), ZB_OK);
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 15; k++)
            assert_int_equal(out[r][k], 0xA0 + 16 * (k / 5) + k % 5);
}

/* ---- exchange between ranks 0 and 2 of 3 ---- */

static zb_status_t exchange_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    (void)arg;
    if (t->rank == 1)
        return ZB_OK;
    float mine[100], theirs[100];
    for (int i = 0; i < 100; i++)
        mine[i] = (float)(t->rank * 1000 + i);
    int peer = 2 - t->rank;
    zb_status_t st = zb_exchange(t, mine, theirs, 100, peer, zb_tag(ZB_TAG_EXCHANGE, 0, 0), err);
    if (st != ZB_OK)
        return st;
    for (int i = 0; i < 100; i++)
        if (theirs[i] != (float)(peer * 1000 + i))
            return zb_err_set(err, ZB_ECOMM, "element %d is %g", i, (double)theirs[i]);
    return ZB_OK;
}

static void test_exchange(void **state)
{
    (void)state;
    zb_err_t err;
    assert_int_equal(run(3, 2, 10, exchange_rank, NULL, NULL, &err), ZB_OK);
}

/* ---- failures ---- */

static zb_status_t size_mismatch_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    (void)arg;
    uint32_t tag = zb_tag(ZB_TAG_ACT, 1, 2);
    double buf[4] = {0};
    if (t->rank == 0)
        return zb_send(t, buf, 3 * sizeof(double), 1, tag, err);
    return zb_recv(t, buf, 4 * sizeof(double), 0, tag, err);
}

static void test_size_mismatch(void **state)
{
    (void)state;
    zb_err_t err;
    zb_status_t st[2];
    assert_int_equal(run(2, 2, 10, size_mismatch_rank, NULL, st, &err), ZB_ECOMM);
    assert_int_equal(st[1], ZB_ECOMM);
    assert_non_null(strstr(err.msg, "has 24 bytes, expected 32"));
    assert_non_null(strstr(err.msg, "stage 1, microbatch 2"));
}

static zb_status_t timeout_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    (void)arg;
    int v;
    if (t->rank == 1) /* waits for a message rank 0 never sends */
        return zb_recv(t, &v, sizeof v, 0, zb_tag(ZB_TAG_GRAD, 0, 7), err);
    /* rank 0 starts waiting later, so rank 1 times out first and its abort wakes rank 0 */
    sleep_ms(100);
    return zb_recv(t, &v, sizeof v, 1, zb_tag(ZB_TAG_USER, 0, 0), err);
}

static void test_timeout_no_hang(void **state)
{
    (void)state;
    zb_err_t err;
    zb_status_t st[2];
    double t0 = zb_now();
    zb_status_t s = run(2, 2, 0.2, timeout_rank, NULL, st, &err);
    double took = zb_now() - t0;
    assert_int_equal(s, ZB_ETIMEOUT);
    assert_true(took < 5.0);
    assert_non_null(strstr(err.msg, "timed out"));
    assert_int_equal(st[1], ZB_ETIMEOUT);
    assert_int_equal(st[0], ZB_EABORT);
    assert_non_null(strstr(err.msg, "rank 1: timed out after 0.2 s waiting for a gradient "
                                    "message from rank 0 (stage 0, microbatch 7)"));
}

/* Rank 2 fails while the others are blocked in recv / collectives: all stop, the message names
 * rank 2 and the cause. */
typedef struct {
    zb_err_t seen;
} abort_out_t;

static zb_status_t abort_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    abort_out_t *out = arg;
    zb_status_t st;
    if (t->rank == 2) {
        sleep_ms(20);
        st = zb_err_set(err, ZB_ENUMERIC, "loss is NaN at microbatch 3");
    } else if (t->rank == 0) {
        int v;
        st = zb_recv(t, &v, sizeof v, 3, zb_tag(ZB_TAG_ACT, 0, 0), err);
    } else {
        st = zb_barrier(t, err);
    }
    out->seen = *err;
    return st;
}

static void test_abort_propagates(void **state)
{
    (void)state;
    abort_out_t out[4];
    void *args[4] = {&out[0], &out[1], &out[2], &out[3]};
    zb_status_t st[4];
    zb_err_t err;
    assert_int_equal(run(4, 4, 0, abort_rank, args, st, &err), ZB_ENUMERIC); /* no timeout */
    assert_string_equal(err.msg, "loss is NaN at microbatch 3");
    for (int r = 0; r < 4; r++) {
        if (r == 2)
            continue;
        assert_int_equal(st[r], ZB_EABORT);
        assert_string_equal(out[r].seen.msg, "rank 2 failed: loss is NaN at microbatch 3");
    }
}

static zb_status_t after_abort_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    (void)arg;
    int v = 1;
    if (t->rank == 0) {
        zb_transport_abort(t, "first");
        zb_transport_abort(t, "second"); /* the first reason wins */
        zb_status_t st = zb_send(t, &v, sizeof v, 1, 0, err);
        if (st != ZB_EABORT)
            return ZB_OK;
        char seen[sizeof err->msg];
        memcpy(seen, err->msg, sizeof seen);
        return zb_err_set(err, ZB_EIO, "%s", seen);
    }
    return zb_recv(t, &v, sizeof v, 0, 0, err);
}

static void test_calls_after_abort_fail(void **state)
{
    (void)state;
    zb_status_t st[2];
    zb_err_t err;
    run(2, 2, 0, after_abort_rank, NULL, st, &err);
    assert_int_equal(st[0], ZB_EIO); /* its own send failed with the abort */
    assert_int_equal(st[1], ZB_EABORT);
    assert_non_null(strstr(err.msg, "rank 0 failed: first"));
}

static void test_bad_arguments(void **state)
{
    (void)state;
    zb_thread_world_t *w = NULL;
    zb_err_t err;
    assert_int_equal(zb_thread_world_new(0, 1, 1, &w, &err), ZB_EINVAL);
    assert_int_equal(zb_thread_world_new(2, 0, 1, &w, &err), ZB_EINVAL);
    assert_int_equal(zb_thread_world_new(2, 1, 1, &w, &err), ZB_OK);
    zb_transport_t *t = zb_thread_world_rank(w, 0);
    assert_non_null(t);
    assert_null(zb_thread_world_rank(w, 2));
    int v = 0;
    assert_int_equal(zb_send(t, &v, sizeof v, 0, 0, &err), ZB_EINVAL); /* to itself */
    assert_non_null(strstr(err.msg, "invalid peer 0"));
    assert_int_equal(zb_send(t, &v, sizeof v, 5, 0, &err), ZB_EINVAL);
    assert_int_equal(zb_recv(t, NULL, 4, 1, 0, &err), ZB_EINVAL);
    double x[5000];
    assert_int_equal(zb_allreduce_sum(t, x, 5000, &err), ZB_EINVAL);
    zb_thread_world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tag_roundtrip),
        cmocka_unit_test(test_matching_by_source_and_tag),
        cmocka_unit_test(test_bounded_mailbox),
        cmocka_unit_test(test_collectives_fixed_order),
        cmocka_unit_test(test_allgather_u64_exact),
        cmocka_unit_test(test_allgather_bytes_by_rank),
        cmocka_unit_test(test_exchange),
        cmocka_unit_test(test_size_mismatch),
        cmocka_unit_test(test_timeout_no_hang),
        cmocka_unit_test(test_abort_propagates),
        cmocka_unit_test(test_calls_after_abort_fail),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
