/* The kernels' large matrix products, split into fixed tiles of the output that the current
 * worker group shares (docs/threads.md). Each tile is one single-threaded sgemm call on a view of
 * the operands; the tiles depend only on the shape, never on the number of threads, so every
 * thread count makes exactly the same sgemm calls and gets the same bits. With bf16 products on,
 * the whole operands are rounded to bf16 once (shared over the group) and the tiles are views of
 * the rounded copies; a weight operand (zb_sgemm_tiled_weight) may come rounded already from
 * the weight cache open on this thread (gemm_bf16_weights.c). */
#include <stddef.h>
#include <stdint.h>

#include "nn/gemm.h"
#include "zbpp/workers.h"

/* Below this many multiply-adds one call is cheaper than sharing (and the tiles would be small). */
#define TILE_MIN_MACS (1L << 22)
/* A tile is at least TILE_MIN_WIDTH rows and columns (unless it spans the whole dimension), in
 * multiples of TILE_ALIGN (OpenBLAS's micro-tiles divide 32). */
#define TILE_MIN_WIDTH 128
#define TILE_ALIGN 32
/* The preferred plan: a grid of exactly GRID_TILES tiles, which divide evenly among 1, 2, 4, 8 and
 * 16 threads. Of the grids that fit, the one that packs the fewest operand floats: every tile
 * packs its rows of op(A) and its columns of op(B), so a grid of mt x nt tiles packs A nt times
 * and B mt times (a whole-dimension split packs one of them once, the other per tile). */
#define GRID_TILES 16
/* Otherwise (small products) the longer of M and N is cut into at most LINE_MAX_TILES tiles:
 * 12 divides evenly among 1, 2, 3, 4, 6 and 12 threads. */
#define LINE_MAX_TILES 12

typedef struct {
    int ta, tb, M, N, K;
    float alpha, beta;
    const float *A, *B;
    const uint16_t *A16, *B16; /* the operands rounded to bf16 (bf16 products), else NULL */
    float *C;
    int lda, ldb, ldc;
    int rows, cols;   /* rows and columns per tile */
    int mt, nt;       /* tiles along M and N */
} tiled_t;

static void tile_run(void *ctx, size_t chunk, int worker)
{
    (void)worker;
    const tiled_t *g = ctx;
    int r0 = (int)(chunk / (size_t)g->nt) * g->rows, c0 = (int)(chunk % (size_t)g->nt) * g->cols;
    int m = g->M - r0 < g->rows ? g->M - r0 : g->rows;
    int n = g->N - c0 < g->cols ? g->N - c0 : g->cols;
    /* rows r0.. of op(A): A's row r0 (not transposed) or column r0 (transposed); columns c0.. of
     * op(B): B's column c0 (not transposed) or row c0 (transposed) */
    size_t a_off = g->ta ? (size_t)r0 : (size_t)r0 * g->lda;
    size_t b_off = g->tb ? (size_t)c0 * g->ldb : (size_t)c0;
    if (g->A16) {
        zb_gemm_bf16_packed(g->ta, g->tb, m, n, g->K, g->alpha, g->A16 + a_off, g->lda,
                            g->B16 + b_off, g->ldb, g->beta, g->C + (size_t)r0 * g->ldc + c0,
                            g->ldc);
        return;
    }
    const float *A = g->A + a_off, *B = g->B + b_off;
    zb_sgemm(g->ta, g->tb, m, n, g->K, g->alpha, A, g->lda, B, g->ldb, g->beta,
             g->C + (size_t)r0 * g->ldc + c0, g->ldc);
}

/* Width of each of `count` tiles over `dim` (aligned), and how many tiles that really makes. */
static int cut(int dim, int count, int *width)
{
    if (count <= 1) {
        *width = dim;
        return 1;
    }
    int w = (dim + count - 1) / count;
    w = (w + TILE_ALIGN - 1) / TILE_ALIGN * TILE_ALIGN;
    *width = w;
    return w < TILE_MIN_WIDTH ? 0 : (dim + w - 1) / w;
}

/* The grid of exactly GRID_TILES tiles that packs least, if one fits. */
static int plan_grid(tiled_t *g)
{
    double best = -1;
    for (int mt = 1; mt <= GRID_TILES; mt *= 2) {
        int nt = GRID_TILES / mt, rows, cols;
        if (cut(g->M, mt, &rows) != mt || cut(g->N, nt, &cols) != nt)
            continue;
        double packed = (double)nt * g->M * g->K + (double)mt * g->K * g->N;
        if (best < 0 || packed < best) {
            best = packed;
            g->mt = mt, g->nt = nt, g->rows = rows, g->cols = cols;
        }
    }
    return best < 0 ? 0 : GRID_TILES;
}

/* How a shape is cut: the number of tiles (1 = one plain call). */
static int plan_tiles(tiled_t *g)
{
    g->mt = g->nt = 1, g->rows = g->M, g->cols = g->N;
    if ((long)g->M * g->N * g->K < TILE_MIN_MACS)
        return 1;
    if (plan_grid(g))
        return GRID_TILES;
    int split_rows = g->M > g->N, dim = split_rows ? g->M : g->N;
    int count = dim / TILE_MIN_WIDTH;
    if (count > LINE_MAX_TILES)
        count = LINE_MAX_TILES;
    if (count <= 1)
        return 1;
    int w, tiles = cut(dim, count, &w);
    if (split_rows)
        g->mt = tiles, g->rows = w;
    else
        g->nt = tiles, g->cols = w;
    return tiles;
}

int zb_sgemm_tile_count(int M, int N, int K)
{
    tiled_t g = {.M = M, .N = N, .K = K};
    return plan_tiles(&g);
}

/* bf16 products: op(A) and op(B) rounded once into the calling thread's buffers, dense (the
 * tiles' leading dimensions become the stored widths); B_weight: B is a weight, whose rounded
 * copy the open weight cache may hold already. */
static void round_operands(tiled_t *g, int b_weight)
{
    int ar = g->ta ? g->K : g->M, ac = g->ta ? g->M : g->K;
    int br = g->tb ? g->N : g->K, bc = g->tb ? g->K : g->N;
    uint16_t *a = zb_bf16_buffer(0, (size_t)ar * ac);
    zb_bf16_pack(a, g->A, ar, ac, g->lda);
    const uint16_t *b = b_weight ? zb_bf16_weight_rounded(g->B, br, bc, g->ldb) : NULL;
    if (!b) {
        uint16_t *own = zb_bf16_buffer(1, (size_t)br * bc);
        zb_bf16_pack(own, g->B, br, bc, g->ldb);
        b = own;
    }
    g->A16 = a, g->B16 = b, g->lda = ac, g->ldb = bc;
}

static void tiled(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc, int b_weight)
{
    tiled_t g = {.ta = trans_a, .tb = trans_b, .M = M, .N = N, .K = K, .alpha = alpha,
                 .beta = beta, .A = A, .B = B, .C = C, .lda = lda, .ldb = ldb, .ldc = ldc};
    int tiles = plan_tiles(&g);
    if (zb_gemm_bf16_on())
        round_operands(&g, b_weight);
    if (tiles > 1)
        zb_parallel_for((size_t)tiles, tile_run, &g);
    else if (g.A16) /* one bf16 call on the rounded operands, on this thread */
        zb_gemm_bf16_packed(trans_a, trans_b, M, N, K, alpha, g.A16, g.lda, g.B16, g.ldb, beta,
                            C, ldc);
    else
        zb_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void zb_sgemm_tiled(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                    int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    tiled(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 0);
}

void zb_sgemm_tiled_weight(int trans_a, int trans_b, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *W, int ldw, float beta, float *C,
                           int ldc)
{
    tiled(trans_a, trans_b, M, N, K, alpha, A, lda, W, ldw, beta, C, ldc, 1);
}
