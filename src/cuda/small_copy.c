/* zbpp — small transfers by the SMs through page-locked memory (small_copy.h). */
#include "cuda/small_copy.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/kernels.h"

enum { RING_SLOTS = 16 };

struct zb_cu_ring {
    char *mem;         /* RING_SLOTS slots of slot_bytes, page-locked */
    size_t slot_bytes;
    int next;
    cudaEvent_t done[RING_SLOTS]; /* recorded after the kernel that read the slot */
    bool used[RING_SLOTS];
};

static void ring_fail(zb_cu_ctx_t *c, cudaError_t e, const char *what)
{
    zb_cu_fail(c, ZB_EIO, "CUDA %s: %s", what, cudaGetErrorString(e));
}

/* Every slot's last reader done, then the slots freed (the events stay). */
static void release_slots(struct zb_cu_ring *r)
{
    for (int i = 0; i < RING_SLOTS; i++)
        if (r->used[i])
            cudaEventSynchronize(r->done[i]), r->used[i] = false;
    if (r->mem)
        cudaFreeHost(r->mem);
    r->mem = NULL;
    r->slot_bytes = 0;
}

/* The ring with slots of at least `bytes`, made or grown on first need. */
static struct zb_cu_ring *ring_for(zb_cu_ctx_t *c, size_t bytes)
{
    struct zb_cu_ring *r = c->ring;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) {
            zb_cu_fail(c, ZB_ENOMEM, "out of memory for the small-transfer ring");
            return NULL;
        }
        for (int i = 0; i < RING_SLOTS; i++) {
            cudaError_t e = cudaEventCreateWithFlags(&r->done[i], cudaEventDisableTiming);
            if (e != cudaSuccess) {
                while (i-- > 0)
                    cudaEventDestroy(r->done[i]);
                free(r);
                ring_fail(c, e, "small-transfer events");
                return NULL;
            }
        }
        c->ring = r;
    }
    if (r->slot_bytes < bytes) {
        release_slots(r);
        size_t slot = (bytes + 255) / 256 * 256;
        void *p = NULL;
        /* read by kernels of any of the device's contexts (SM partitions are green contexts):
         * with unified addressing the host pointer is the device's too */
        cudaError_t e = cudaHostAlloc(&p, RING_SLOTS * slot,
                                      cudaHostAllocPortable | cudaHostAllocMapped);
        if (e != cudaSuccess) {
            ring_fail(c, e, "small-transfer ring");
            return NULL;
        }
        r->mem = p;
        r->slot_bytes = slot;
    }
    return r;
}

/* A transfer to do: the context is well and bytes > 0, a multiple of 4 (else it fails). */
static bool transfer_due(zb_cu_ctx_t *c, size_t bytes, const char *what)
{
    if (c->status != ZB_OK || bytes == 0)
        return false;
    if (bytes % 4) {
        zb_cu_fail(c, ZB_EINVAL, "%s of %zu bytes (a multiple of 4)", what, bytes);
        return false;
    }
    return true;
}

void zb_cu_upload_small(zb_cu_ctx_t *c, void *dst, const void *src, size_t bytes)
{
    if (!transfer_due(c, bytes, "small upload"))
        return;
    struct zb_cu_ring *r = ring_for(c, bytes);
    if (!r)
        return;
    const int i = r->next;
    r->next = (r->next + 1) % RING_SLOTS;
    cudaError_t e = r->used[i] ? cudaEventSynchronize(r->done[i]) : cudaSuccess;
    if (e != cudaSuccess) {
        ring_fail(c, e, "small upload wait");
        return;
    }
    char *slot = r->mem + (size_t)i * r->slot_bytes;
    memcpy(slot, src, bytes);
    zb_cuk_copy_words(c->stream, dst, slot, bytes / 4);
    zb_cu_launch_check(c, "small upload");
    if ((e = cudaEventRecord(r->done[i], c->stream)) != cudaSuccess)
        ring_fail(c, e, "small upload event");
    r->used[i] = e == cudaSuccess;
}

void zb_cu_download_small(zb_cu_ctx_t *c, void *dst, const void *src, size_t bytes)
{
    if (!transfer_due(c, bytes, "small download"))
        return;
    zb_cuk_copy_words(c->stream, dst, src, bytes / 4);
    zb_cu_launch_check(c, "small download");
}

void zb_cu_small_free(zb_cu_ctx_t *c)
{
    struct zb_cu_ring *r = c->ring;
    if (!r)
        return;
    release_slots(r);
    for (int i = 0; i < RING_SLOTS; i++)
        cudaEventDestroy(r->done[i]);
    free(r);
    c->ring = NULL;
}
