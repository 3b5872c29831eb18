/* The kernels' large matrix products, split into fixed tiles of the output that the current
 * worker group shares (docs/threads.md). Each tile is one single-threaded sgemm call on a view of
 * the operands; the tiles depend only on the shape, never on the number of threads, so every
 * thread count makes exactly the same sgemm calls and gets the same bits. */
#include <stddef.h>

#include "nn/gemm.h"
#include "zbpp/workers.h"

/* Below this many multiply-adds one call is cheaper than sharing (and the tiles would be small). */
#define TILE_MIN_MACS (1L << 22)
/* The split dimension is cut into at most this many tiles of at least TILE_MIN_WIDTH (a multiple
 * of 32, OpenBLAS's micro-tile sizes): 12 divides evenly among 1, 2, 3, 4, 6 and 12 threads. */
#define TILE_MAX_COUNT 12
#define TILE_MIN_WIDTH 128

typedef struct {
    int ta, tb, M, N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int lda, ldb, ldc;
    int split_rows; /* tiles cut M (else N) */
    int width;      /* rows or columns per tile */
    int dim;        /* M or N */
} tiled_t;

static void tile_run(void *ctx, size_t chunk, int worker)
{
    (void)worker;
    const tiled_t *g = ctx;
    int lo = (int)chunk * g->width;
    int len = g->dim - lo < g->width ? g->dim - lo : g->width;
    if (g->split_rows) {
        /* rows lo.. of C and of op(A): A's row lo (not transposed) or column lo (transposed) */
        const float *A = g->ta ? g->A + lo : g->A + (size_t)lo * g->lda;
        zb_sgemm(g->ta, g->tb, len, g->N, g->K, g->alpha, A, g->lda, g->B, g->ldb, g->beta,
                 g->C + (size_t)lo * g->ldc, g->ldc);
    } else {
        /* columns lo.. of C and of op(B): B's column lo (not transposed) or row lo (transposed) */
        const float *B = g->tb ? g->B + (size_t)lo * g->ldb : g->B + lo;
        zb_sgemm(g->ta, g->tb, g->M, len, g->K, g->alpha, g->A, g->lda, B, g->ldb, g->beta,
                 g->C + lo, g->ldc);
    }
}

/* How a shape is cut: the number of tiles (1 = one plain call). */
static int plan_tiles(tiled_t *g)
{
    if ((long)g->M * g->N * g->K < TILE_MIN_MACS)
        return 1;
    g->split_rows = g->M > g->N;
    g->dim = g->split_rows ? g->M : g->N;
    int count = g->dim / TILE_MIN_WIDTH;
    if (count > TILE_MAX_COUNT)
        count = TILE_MAX_COUNT;
    if (count <= 1)
        return 1;
    int w = (g->dim + count - 1) / count;
    g->width = (w + 31) & ~31;
    return (g->dim + g->width - 1) / g->width;
}

int zb_sgemm_tile_count(int M, int N, int K)
{
    tiled_t g = {.M = M, .N = N, .K = K};
    return plan_tiles(&g);
}

void zb_sgemm_tiled(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                    int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    tiled_t g = {.ta = trans_a, .tb = trans_b, .M = M, .N = N, .K = K, .alpha = alpha,
                 .beta = beta, .A = A, .B = B, .C = C, .lda = lda, .ldb = ldb, .ldc = ldc};
    int tiles = plan_tiles(&g);
    if (tiles <= 1) {
        zb_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    zb_parallel_for((size_t)tiles, tile_run, &g);
}
