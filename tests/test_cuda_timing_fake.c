/* CUDA-event action timing (src/cuda/timing.c) against a fake CUDA runtime, no GPU: timing.c is
 * compiled into this test and its event calls land on fakes below, where a stream is a clock the
 * test advances and an event records the stream's time and its place in the stream's order;
 * elapsed times are refused until the event is complete (a stream completes in order, up to the
 * event last synchronised), as cudaEventElapsedTime refuses unfinished events. Checked: the
 * timeline has the CPU executor's shape and values (seconds from the step start, or from
 * another rank's step start, plus the origin); program-order misuse is refused and records
 * nothing; a new step forgets the last; failures leak no event. Skipped (77) without CUDA. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#ifndef ZB_HAVE_CUDA
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#else

#include "../src/cuda/timing.c" /* the code under test */
#include "zbpp/executor.h"

/* ---- fake runtime: streams are clocks, events stamp them ---- */
struct CUstream_st {
    double now_ms;
    long seq;  /* events recorded on this stream */
    long done; /* events completed (synchronised up to) */
};
struct CUevent_st {
    struct CUstream_st *s;
    long seq; /* 0: never recorded */
    double t_ms;
};

static int live_events, create_calls, fail_create_at, records;

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    assert_int_equal(flags, cudaEventDefault); /* timing must stay on */
    if (++create_calls == fail_create_at)
        return cudaErrorMemoryAllocation;
    *e = calloc(1, sizeof **e);
    live_events++;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    live_events--;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    e->s = s;
    e->seq = ++s->seq;
    e->t_ms = s->now_ms;
    records++;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (!e->seq)
        return cudaErrorInvalidResourceHandle;
    if (e->s->done < e->seq)
        e->s->done = e->seq;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a->seq || !b->seq)
        return cudaErrorInvalidResourceHandle;
    if (a->seq > a->s->done || b->seq > b->s->done)
        return cudaErrorNotReady;
    *ms = (float)(b->t_ms - a->t_ms);
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaErrorNotReady ? "fake: not ready" : "fake CUDA error";
}

/* ---- tests ---- */

#define assert_near(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

/* time action i from now + gap to + dur on stream s */
static void timed(zb_cuda_timer_t *t, struct CUstream_st *s, int i, double gap, double dur)
{
    zb_err_t err;
    s->now_ms += gap;
    assert_int_equal(zb_cuda_timer_begin(t, i, &err), ZB_OK);
    s->now_ms += dur;
    assert_int_equal(zb_cuda_timer_end(t, i, &err), ZB_OK);
}

static void test_timeline(void **state)
{
    (void)state;
    struct CUstream_st s = {.now_ms = 100.0};
    zb_cuda_timer_t *t = NULL;
    zb_err_t err;
    assert_int_equal(zb_cuda_timer_new(&s, 3, &t, &err), ZB_OK);
    assert_int_equal(live_events, 7); /* step start + 2 per action */
    zb_exec_timeline_t tl;
    assert_int_equal(zb_exec_timeline_alloc(&tl, 3, &err), ZB_OK);
    for (int step = 0; step < 2; step++) {
        assert_int_equal(zb_cuda_timer_step_begin(t, &err), ZB_OK);
        timed(t, &s, 0, 0.5, 2.0);  /* [0.5, 2.5] ms */
        timed(t, &s, 1, 0.0, 1.0);  /* [2.5, 3.5] */
        timed(t, &s, 2, 4.0, 0.25); /* [7.5, 7.75] */
        assert_int_equal(zb_cuda_timer_resolve(t, NULL, 10.0, tl.start, tl.end, tl.len, &err), ZB_OK);
        static const double want_start[3] = {0.5e-3, 2.5e-3, 7.5e-3};
        static const double want_end[3] = {2.5e-3, 3.5e-3, 7.75e-3};
        for (int i = 0; i < 3; i++) {
            assert_near(tl.start[i], 10.0 + want_start[i], 1e-9);
            assert_near(tl.end[i], 10.0 + want_end[i], 1e-9);
        }
        s.now_ms += 50.0; /* the next step starts later: times are per step */
    }
    zb_exec_timeline_free(&tl);
    zb_cuda_timer_free(t);
    assert_int_equal(live_events, 0);
}

/* An origin timer that has not begun a step cannot be the clock. */
static void test_shared_origin(void **state)
{
    (void)state;
    struct CUstream_st s0 = {.now_ms = 0.0}, s1 = {.now_ms = 0.0};
    zb_cuda_timer_t *t0 = NULL, *t1 = NULL;
    zb_err_t err;
    assert_int_equal(zb_cuda_timer_new(&s0, 1, &t0, &err), ZB_OK);
    assert_int_equal(zb_cuda_timer_new(&s1, 2, &t1, &err), ZB_OK);
    zb_exec_timeline_t tl;
    assert_int_equal(zb_exec_timeline_alloc(&tl, 2, &err), ZB_OK);
    assert_int_equal(zb_cuda_timer_step_begin(t1, &err), ZB_OK);
    timed(t1, &s1, 0, 1.0, 1.0);
    timed(t1, &s1, 1, 0.0, 2.0);
    assert_int_equal(zb_cuda_timer_resolve(t1, t0, 0.0, tl.start, tl.end, tl.len, &err), ZB_EINVAL);
    assert_non_null(strstr(err.msg, "before a step began"));
    assert_int_equal(zb_cuda_timer_resolve(t1, NULL, 0.0, tl.start, tl.end, tl.len, &err), ZB_OK);
    assert_near(tl.end[1], 4e-3, 1e-9);
    zb_exec_timeline_free(&tl);
    zb_cuda_timer_free(t0);
    zb_cuda_timer_free(t1);
}

/* Two ranks' timers on one clock: rank 1's times are measured from rank 0's step start. */
static void test_shared_origin_values(void **state)
{
    (void)state;
    struct CUstream_st s0 = {.now_ms = 0.0}, s1 = {.now_ms = 0.0};
    zb_cuda_timer_t *t0 = NULL, *t1 = NULL;
    zb_err_t err;
    assert_int_equal(zb_cuda_timer_new(&s0, 1, &t0, &err), ZB_OK);
    assert_int_equal(zb_cuda_timer_new(&s1, 2, &t1, &err), ZB_OK);
    zb_exec_timeline_t tl;
    assert_int_equal(zb_exec_timeline_alloc(&tl, 2, &err), ZB_OK);
    assert_int_equal(zb_cuda_timer_step_begin(t0, &err), ZB_OK);
    timed(t0, &s0, 0, 0.0, 1.0);
    s1.now_ms = 3.0;
    assert_int_equal(zb_cuda_timer_step_begin(t1, &err), ZB_OK);
    timed(t1, &s1, 0, 1.0, 1.0);
    timed(t1, &s1, 1, 0.0, 2.0);
    assert_int_equal(zb_cuda_timer_resolve(t1, t0, 1.0, tl.start, tl.end, tl.len, &err), ZB_OK);
    assert_near(tl.start[0], 1.0 + 4e-3, 1e-9);
    assert_near(tl.end[0], 1.0 + 5e-3, 1e-9);
    assert_near(tl.start[1], 1.0 + 5e-3, 1e-9);
    assert_near(tl.end[1], 1.0 + 7e-3, 1e-9);
    zb_exec_timeline_free(&tl);
    zb_cuda_timer_free(t0);
    zb_cuda_timer_free(t1);
}

/* expect ZB_EINVAL with `needle`, and no event queued */
static void misuse(zb_status_t got, const zb_err_t *err, const char *needle, int records_before)
{
    assert_int_equal(got, ZB_EINVAL);
    if (!strstr(err->msg, needle))
        fail_msg("message '%s' lacks '%s'", err->msg, needle);
    assert_int_equal(records, records_before);
}

static void test_order_rules(void **state)
{
    (void)state;
    struct CUstream_st s = {.now_ms = 0.0};
    zb_cuda_timer_t *t = NULL;
    zb_err_t err;
    assert_int_equal(zb_cuda_timer_new(&s, 4, &t, &err), ZB_OK);
    int r = records;
    misuse(zb_cuda_timer_begin(t, 0, &err), &err, "action 0 begun before the step", r);
    assert_int_equal(zb_cuda_timer_step_begin(t, &err), ZB_OK);
    r = records;
    misuse(zb_cuda_timer_end(t, 0, &err), &err, "action 0 ended but no action is open", r);
    misuse(zb_cuda_timer_begin(t, 4, &err), &err, "action 4 not in [0, 4)", r);
    misuse(zb_cuda_timer_begin(t, -1, &err), &err, "not in [0, 4)", r);
    assert_int_equal(zb_cuda_timer_begin(t, 1, &err), ZB_OK); /* gaps are allowed here... */
    r = records;
    misuse(zb_cuda_timer_begin(t, 2, &err), &err, "action 2 begun while action 1 is open", r);
    misuse(zb_cuda_timer_end(t, 2, &err), &err, "another action is open", r);
    assert_int_equal(zb_cuda_timer_end(t, 1, &err), ZB_OK);
    r = records;
    misuse(zb_cuda_timer_begin(t, 1, &err), &err, "action 1 begun after action 1", r);
    misuse(zb_cuda_timer_begin(t, 0, &err), &err, "(program order)", r);
    zb_exec_timeline_t tl;
    assert_int_equal(zb_exec_timeline_alloc(&tl, 4, &err), ZB_OK);
    /* ...but resolve wants every action */
    misuse(zb_cuda_timer_resolve(t, NULL, 0.0, tl.start, tl.end, tl.len, &err), &err, "action 0 of 4 was not timed", r);
    assert_int_equal(zb_cuda_timer_begin(t, 3, &err), ZB_OK);
    misuse(zb_cuda_timer_resolve(t, NULL, 0.0, tl.start, tl.end, tl.len, &err), &err, "action 3 was never ended",
           records);
    assert_int_equal(zb_cuda_timer_end(t, 3, &err), ZB_OK);
    misuse(zb_cuda_timer_resolve(t, NULL, 0.0, tl.start, tl.end, tl.len, &err), &err, "action 0 of 4 was not timed (2 "
                                                                 "of 4 were)", records);
    /* a new step forgets the last one: 0..3 in order now resolve */
    assert_int_equal(zb_cuda_timer_step_begin(t, &err), ZB_OK);
    for (int i = 0; i < 4; i++)
        timed(t, &s, i, 1.0, 1.0);
    zb_exec_timeline_t short_tl;
    assert_int_equal(zb_exec_timeline_alloc(&short_tl, 3, &err), ZB_OK);
    misuse(zb_cuda_timer_resolve(t, NULL, 0.0, short_tl.start, short_tl.end, short_tl.len, &err), &err,
           "timeline of 3 actions for a program of 4", records);
    zb_exec_timeline_free(&short_tl);
    assert_int_equal(zb_cuda_timer_resolve(t, NULL, 0.0, tl.start, tl.end, tl.len, &err), ZB_OK);
    for (int i = 0; i < 4; i++) {
        assert_true(tl.start[i] < tl.end[i]);
        assert_true(i == 0 || tl.end[i - 1] <= tl.start[i]);
    }
    zb_exec_timeline_free(&tl);
    zb_cuda_timer_free(t);
    assert_int_equal(live_events, 0);
}

static void test_create_failures(void **state)
{
    (void)state;
    struct CUstream_st s = {.now_ms = 0.0};
    zb_cuda_timer_t *t = (zb_cuda_timer_t *)&s;
    zb_err_t err;
    assert_int_equal(zb_cuda_timer_new(&s, 0, &t, &err), ZB_EINVAL);
    assert_null(t);
    for (int at = 1; at <= 5; at++) {
        create_calls = 0;
        fail_create_at = at;
        t = (zb_cuda_timer_t *)&s;
        assert_int_equal(zb_cuda_timer_new(&s, 2, &t, &err), ZB_EIO);
        assert_null(t);
        assert_non_null(strstr(err.msg, "cudaEventCreate"));
        assert_int_equal(live_events, 0);
    }
    fail_create_at = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeline),          cmocka_unit_test(test_shared_origin),
        cmocka_unit_test(test_shared_origin_values), cmocka_unit_test(test_order_rules),
        cmocka_unit_test(test_create_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
