/* Internal: how the kernels cut their work for the current worker group (zbpp/workers.h).
 * Chunk sizes depend only on the shapes, and no two chunks write the same element, so a kernel
 * gives the same bits for any thread count (docs/threads.md). */
#ifndef ZBPP_NN_PAR_H
#define ZBPP_NN_PAR_H

#include <stddef.h>

#include "zbpp/workers.h"

/* About this many floats of work per chunk: enough to hide the hand-off (~1 µs), small enough
 * that the chunks of a B·T = 256 row kernel spread over many threads. */
#define ZB_CHUNK_FLOATS 4096
/* Columns per chunk of the kernels that reduce over rows (bias / LayerNorm weight gradients). */
#define ZB_CHUNK_COLS 64

static inline size_t zb_div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* Rows of `width` floats per chunk. */
static inline size_t zb_rows_per_chunk(size_t width)
{
    size_t r = ZB_CHUNK_FLOATS / (width ? width : 1);
    return r ? r : 1;
}

/* [lo, hi) of chunk c when `n` items are cut into pieces of `per`. */
static inline void zb_chunk_range(size_t c, size_t per, size_t n, size_t *lo, size_t *hi)
{
    *lo = c * per;
    *hi = *lo + per < n ? *lo + per : n;
}

#endif
