/* Per-action timing with CUDA events (include/zbpp/cuda.h, "action timing"): an event pair
 * around every action of a rank's program, queued on the rank's stream, and a step-start event;
 * after the step the elapsed times become the executor's timeline (zb_exec_timeline_t), the
 * shape the CPU executor fills, so `--trace` writes GPU and CPU runs alike.
 *
 * Recording is host bookkeeping plus cudaEventRecord (asynchronous); the order rules are
 * checked on the host before anything is queued, so a misuse records nothing. Events are
 * created once, with timing on (cudaEventDefault), and reused every step. */
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "cuda/stream.h"
#include "zbpp/cuda.h"

struct zb_cuda_timer {
    cudaStream_t stream;
    int n;
    cudaEvent_t start;     /* step start */
    cudaEvent_t *ev;       /* [2n]: begin of action i at 2i, end at 2i + 1 */
    unsigned char *state;  /* [n]: 0 untimed, 1 begun, 2 ended (this step) */
    int last;              /* highest action begun this step, -1 none */
    int open;              /* action begun and not ended, -1 none */
    int in_step;           /* step_begin called */
    int timed;             /* actions ended this step */
    int last_event;        /* index into ev of the step's last recorded event, -1 none */
};

static zb_status_t cuda_fail(zb_err_t *err, const char *what, cudaError_t e)
{
    cudaGetLastError(); /* not sticky: the caller decides */
    return zb_err_set(err, ZB_EIO, "CUDA timing: %s: %s", what, cudaGetErrorString(e));
}

void zb_cuda_timer_free(zb_cuda_timer_t *t)
{
    if (!t)
        return;
    if (t->ev)
        for (int i = 0; i < 2 * t->n; i++)
            if (t->ev[i])
                cudaEventDestroy(t->ev[i]);
    if (t->start)
        cudaEventDestroy(t->start);
    free(t->ev);
    free(t->state);
    free(t);
}

zb_status_t zb_cuda_timer_new(struct CUstream_st *stream, int n, zb_cuda_timer_t **out,
                              zb_err_t *err)
{
    *out = NULL;
    if (n < 1)
        return zb_err_set(err, ZB_EINVAL, "CUDA timing: a program of %d actions", n);
    zb_cuda_timer_t *t = calloc(1, sizeof *t);
    if (t) {
        t->ev = calloc((size_t)n * 2, sizeof *t->ev);
        t->state = calloc((size_t)n, sizeof *t->state);
    }
    if (!t || !t->ev || !t->state) {
        zb_cuda_timer_free(t);
        return zb_err_set(err, ZB_ENOMEM, "CUDA timing: out of memory for %d actions", n);
    }
    t->stream = stream;
    t->n = n;
    t->last = t->open = t->last_event = -1;
    cudaError_t e = cudaEventCreateWithFlags(&t->start, cudaEventDefault);
    for (int i = 0; e == cudaSuccess && i < 2 * n; i++)
        e = cudaEventCreateWithFlags(&t->ev[i], cudaEventDefault);
    if (e != cudaSuccess) {
        zb_status_t st = cuda_fail(err, "cudaEventCreate", e);
        zb_cuda_timer_free(t);
        return st;
    }
    *out = t;
    return ZB_OK;
}

zb_status_t zb_cuda_timer_step_begin(zb_cuda_timer_t *t, zb_err_t *err)
{
    cudaError_t e = cudaEventRecord(t->start, t->stream);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaEventRecord (step start)", e);
    for (int i = 0; i < t->n; i++)
        t->state[i] = 0;
    t->last = t->open = t->last_event = -1;
    t->timed = 0;
    t->in_step = 1;
    return ZB_OK;
}

zb_status_t zb_cuda_timer_begin(zb_cuda_timer_t *t, int i, zb_err_t *err)
{
    if (!t->in_step)
        return zb_err_set(err, ZB_EINVAL, "CUDA timing: action %d begun before the step", i);
    if (i < 0 || i >= t->n)
        return zb_err_set(err, ZB_EINVAL, "CUDA timing: action %d not in [0, %d)", i, t->n);
    if (t->open >= 0)
        return zb_err_set(err, ZB_EINVAL, "CUDA timing: action %d begun while action %d is open",
                          i, t->open);
    if (i <= t->last)
        return zb_err_set(err, ZB_EINVAL,
                          "CUDA timing: action %d begun after action %d (program order)", i,
                          t->last);
    cudaError_t e = cudaEventRecord(t->ev[2 * i], t->stream);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaEventRecord", e);
    t->state[i] = 1;
    t->open = t->last = i;
    t->last_event = 2 * i;
    return ZB_OK;
}

zb_status_t zb_cuda_timer_end(zb_cuda_timer_t *t, int i, zb_err_t *err)
{
    if (i < 0 || i >= t->n || t->open != i)
        return zb_err_set(err, ZB_EINVAL, "CUDA timing: action %d ended but %s", i,
                          t->open < 0 ? "no action is open" : "another action is open");
    cudaError_t e = cudaEventRecord(t->ev[2 * i + 1], t->stream);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaEventRecord", e);
    t->state[i] = 2;
    t->open = -1;
    t->timed++;
    t->last_event = 2 * i + 1;
    return ZB_OK;
}

/* seconds from `from` to `to` (both complete) */
static zb_status_t seconds(cudaEvent_t from, cudaEvent_t to, double *s, zb_err_t *err)
{
    float ms = 0.0f;
    cudaError_t e = cudaEventElapsedTime(&ms, from, to);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaEventElapsedTime", e);
    *s = (double)ms * 1e-3;
    return ZB_OK;
}

zb_status_t zb_cuda_timer_resolve(zb_cuda_timer_t *t, const zb_cuda_timer_t *origin,
                                  double origin_s, double *start, double *end, int n,
                                  zb_err_t *err)
{
    if (!origin)
        origin = t;
    if (!start || !end || n != t->n)
        return zb_err_set(err, ZB_EINVAL, "CUDA timing: timeline of %d actions for a program "
                                          "of %d", start && end ? n : -1, t->n);
    if (!t->in_step || !origin->in_step)
        return zb_err_set(err, ZB_EINVAL, "CUDA timing: resolve before a step began");
    if (t->open >= 0)
        return zb_err_set(err, ZB_EINVAL, "CUDA timing: action %d was never ended", t->open);
    if (t->timed != t->n) {
        int i = 0;
        while (i < t->n && t->state[i] == 2)
            i++;
        return zb_err_set(err, ZB_EINVAL, "CUDA timing: action %d of %d was not timed (%d of %d "
                                          "were)", i, t->n, t->timed, t->n);
    }
    /* a stream's events complete in order: its last one done means all are */
    cudaError_t e = cudaEventSynchronize(t->ev[t->last_event]);
    if (e == cudaSuccess && origin != t)
        e = cudaEventSynchronize(origin->start);
    if (e != cudaSuccess)
        return cuda_fail(err, "cudaEventSynchronize", e);
    for (int i = 0; i < t->n; i++) {
        double a = 0.0, b = 0.0;
        zb_status_t st = seconds(origin->start, t->ev[2 * i], &a, err);
        if (st == ZB_OK)
            st = seconds(origin->start, t->ev[2 * i + 1], &b, err);
        if (st != ZB_OK)
            return st;
        start[i] = origin_s + a;
        end[i] = origin_s + b;
    }
    return ZB_OK;
}
