/* zbpp — small transfers between the host and a stage's stream without the copy engines.
 *
 * A stage's actions move a few kilobytes between host and device: an F's tokens and targets, a
 * W's embedding buckets, a head's losses. As cudaMemcpyAsync copies those run on a copy engine,
 * in order with whatever else it carries; with activation offload that is a stash of ~100 MiB,
 * so a 4 KiB upload inside an F waited milliseconds for another rank's stash (docs/offload.md,
 * "Small transfers"). Here the SMs move them instead (zb_cuk_copy_words), reading or writing
 * page-locked host memory directly: uploads go through a ring of page-locked slots, downloads
 * write straight into the caller's page-locked buffer. Failures set the context's status. */
#ifndef ZBPP_CUDA_SMALL_COPY_H
#define ZBPP_CUDA_SMALL_COPY_H

#include <stddef.h>

#include "cuda/ctx.h"

/* `bytes` (a multiple of 4) from host memory `src` to device memory `dst`, in the order of c's
 * stream. `src` is copied into a ring slot before this returns (the caller may reuse it); a slot
 * is written again only after the kernel that read it has run (its event; by then long past). */
void zb_cu_upload_small(zb_cu_ctx_t *c, void *dst, const void *src, size_t bytes);

/* `bytes` (a multiple of 4) from device memory `src` into page-locked host memory `dst` (from
 * cudaHostAlloc), in the order of c's stream: an event recorded after it tells when it landed. */
void zb_cu_download_small(zb_cu_ctx_t *c, void *dst, const void *src, size_t bytes);

#endif
