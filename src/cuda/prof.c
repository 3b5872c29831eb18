/* zbpp — the per-kernel-class time breakdown (cuda/prof.h): a pool of CUDA event pairs recorded
 * around ops on the stage's stream, summed per class when collected. */
#include <stdlib.h>

#include "cuda/prof.h"

#define PROF_PAIRS 4096

struct zb_cu_prof {
    cudaEvent_t ev[2 * PROF_PAIRS];
    int cls[PROF_PAIRS];
    int n, open;                   /* pairs recorded; a begin without its end yet */
    double ms[ZB_CUDA_KCLASSES];   /* collected so far */
};

zb_status_t zb_cu_prof_new(zb_cu_prof_t **out, zb_err_t *err)
{
    zb_cu_prof_t *p = calloc(1, sizeof *p);
    if (!p)
        return zb_err_set(err, ZB_ENOMEM, "cannot allocate the kernel-class profile");
    for (int i = 0; i < 2 * PROF_PAIRS; i++) {
        cudaError_t e = cudaEventCreateWithFlags(&p->ev[i], cudaEventDefault);
        if (e != cudaSuccess) {
            cudaGetLastError();
            zb_cu_prof_free(p);
            return zb_err_set(err, ZB_EIO, "CUDA event for the kernel-class profile: %s",
                              cudaGetErrorString(e));
        }
    }
    *out = p;
    return ZB_OK;
}

void zb_cu_prof_free(zb_cu_prof_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < 2 * PROF_PAIRS; i++)
        if (p->ev[i])
            cudaEventDestroy(p->ev[i]);
    free(p);
}

/* Sum the recorded pairs into p->ms (waits for the last one). */
static zb_status_t drain(zb_cu_prof_t *p, zb_err_t *err)
{
    cudaError_t e = p->n ? cudaEventSynchronize(p->ev[2 * p->n - 1]) : cudaSuccess;
    for (int i = 0; i < p->n && e == cudaSuccess; i++) {
        float ms = 0.0f;
        e = cudaEventElapsedTime(&ms, p->ev[2 * i], p->ev[2 * i + 1]);
        p->ms[p->cls[i]] += ms;
    }
    p->n = 0;
    if (e != cudaSuccess) {
        cudaGetLastError();
        return zb_err_set(err, ZB_EIO, "CUDA kernel-class profile: %s", cudaGetErrorString(e));
    }
    return ZB_OK;
}

void zb_cu_prof_begin(zb_cu_ctx_t *c, int cls)
{
    zb_cu_prof_t *p = c->prof;
    if (!p || c->status != ZB_OK || p->open)
        return;
    if (p->n == PROF_PAIRS && drain(p, NULL) != ZB_OK)
        return;
    if (cudaEventRecord(p->ev[2 * p->n], c->stream) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    p->cls[p->n] = cls;
    p->open = 1;
}

void zb_cu_prof_end(zb_cu_ctx_t *c)
{
    zb_cu_prof_t *p = c->prof;
    if (!p || !p->open)
        return;
    p->open = 0;
    if (cudaEventRecord(p->ev[2 * p->n + 1], c->stream) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    p->n++;
}

zb_status_t zb_cu_prof_collect(zb_cu_prof_t *p, double *ms, zb_err_t *err)
{
    zb_status_t st = drain(p, err);
    for (int k = 0; k < ZB_CUDA_KCLASSES; k++) {
        ms[k] += p->ms[k];
        p->ms[k] = 0.0;
    }
    return st;
}
