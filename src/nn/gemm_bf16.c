/* bf16 matrix products on the CPU: the rounding of the operands, the per-thread buffers they are
 * rounded into, and the dispatch to the backend or to the emulation (gemm_bf16.h). */
#include "nn/gemm_bf16.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "nn/par.h"
#include "zbpp/nn.h"

/* ---- rounding ---- */

/* One row, written so that the compiler vectorises it (no branch: the NaN case is a select).
 * The same rounding as util/bf16.h's zb_bf16_from_f32. */
static void round_row(uint16_t *restrict dst, const float *restrict src, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* ties to even */
        uint32_t quiet = (u >> 16) | 0x0040u;                       /* NaN stays a quiet NaN */
        dst[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
    }
}

typedef struct {
    uint16_t *dst;
    const float *src;
    int rows, cols, ld;
    size_t per;
} pack_t;

static void pack_chunk(void *ctx, size_t ch, int worker)
{
    (void)worker;
    const pack_t *p = ctx;
    size_t lo, hi;
    zb_chunk_range(ch, p->per, (size_t)p->rows, &lo, &hi);
    for (size_t r = lo; r < hi; r++)
        round_row(p->dst + r * (size_t)p->cols, p->src + r * (size_t)p->ld, p->cols);
}

void zb_bf16_pack(uint16_t *dst, const float *src, int rows, int cols, int ld)
{
    pack_t p = {.dst = dst, .src = src, .rows = rows, .cols = cols, .ld = ld,
                .per = zb_rows_per_chunk((size_t)cols)};
    zb_parallel_for(zb_div_up((size_t)rows, p.per), pack_chunk, &p);
}

/* ---- per-thread buffers: two for the rounded operands, two for the emulation's widened ones ---- */

#define SLOTS 4
typedef struct {
    void *buf[SLOTS];
    size_t bytes[SLOTS];
} buffers_t;

static pthread_key_t buffers_key;
static pthread_once_t buffers_once = PTHREAD_ONCE_INIT;

static void buffers_free(void *p)
{
    buffers_t *b = p;
    for (int i = 0; i < SLOTS; i++)
        free(b->buf[i]);
    free(b);
}

static void buffers_key_make(void) { pthread_key_create(&buffers_key, buffers_free); }

static void *buffer(int slot, size_t bytes)
{
    pthread_once(&buffers_once, buffers_key_make);
    buffers_t *b = pthread_getspecific(buffers_key);
    if (!b) {
        if (!(b = calloc(1, sizeof *b)) || pthread_setspecific(buffers_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (b->bytes[slot] < bytes) {
        free(b->buf[slot]);
        b->bytes[slot] = 0;
        if (!(b->buf[slot] = malloc(bytes)))
            return NULL;
        b->bytes[slot] = bytes;
    }
    return b->buf[slot];
}

/* The kernels return nothing, and a product that cannot run must not pass for one that did:
 * without memory for its operands the process ends with one line. */
static void *buffer_or_exit(int slot, size_t bytes)
{
    void *p = buffer(slot, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "zbpp: out of memory for a bf16 product's operands (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

uint16_t *zb_bf16_buffer(int slot, size_t n) { return buffer_or_exit(slot, n * sizeof(uint16_t)); }

/* ---- the products ---- */

static void backend_failed(int M, int N, int K)
{
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "zbpp: warning: the bf16 backend failed on a %dx%dx%d product; such "
                        "products are emulated (same numerics, slower)\n", M, N, K);
}

/* rows x cols of a bf16 matrix (leading dimension ld) widened into a dense fp32 one. */
static float *widen(int slot, const uint16_t *src, int rows, int cols, int ld)
{
    float *dst = buffer_or_exit(slot, (size_t)rows * cols * sizeof(float));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            uint32_t u = (uint32_t)src[(size_t)r * ld + c] << 16;
            memcpy(&dst[(size_t)r * cols + c], &u, sizeof u);
        }
    return dst;
}

/* The emulation: every product of two bf16 numbers is exact in fp32, so sgemm on the widened
 * operands computes what a bf16 GEMM with fp32 accumulation does, up to the order of the sums.
 * In the "onednn-f32" test mode oneDNN's fp32 matmul multiplies them instead. */
static void emulate(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                    const uint16_t *B, int ldb, float beta, float *C, int ldc, int onednn)
{
    const float *a = ta ? widen(2, A, K, M, lda) : widen(2, A, M, K, lda);
    const float *b = tb ? widen(3, B, N, K, ldb) : widen(3, B, K, N, ldb);
    int wa = ta ? M : K, wb = tb ? K : N; /* the widened copies' leading dimensions */
    if (onednn && zb_bf16_backend_gemm_f32(ta, tb, M, N, K, alpha, a, wa, b, wb, beta, C, ldc) == 0)
        return;
    if (onednn)
        backend_failed(M, N, K);
    zb_blas_init();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, a, wa, b, wb, beta, C, ldc);
}

void zb_gemm_bf16_packed(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A,
                         int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    int mode = zb_gemm_mode();
    if (mode == ZB_GEMM_MODE_BF16) {
        if (zb_bf16_backend_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 0)
            return;
        backend_failed(M, N, K);
    }
    emulate(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
            mode == ZB_GEMM_MODE_BF16_ONEDNN_F32);
}

void zb_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc)
{
    /* stored shapes: A is M x K (K x M transposed), B is K x N (N x K transposed) */
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    uint16_t *a = zb_bf16_buffer(0, (size_t)ar * ac), *b = zb_bf16_buffer(1, (size_t)br * bc);
    zb_bf16_pack(a, A, ar, ac, lda);
    zb_bf16_pack(b, B, br, bc, ldb);
    zb_gemm_bf16_packed(ta, tb, M, N, K, alpha, a, ac, b, bc, beta, C, ldc);
}

#ifndef ZB_HAVE_ONEDNN
/* Built without oneDNN (cmake/onednn.cmake): no backend. */
int zb_bf16_backend_probe(char *desc, size_t desc_n, char *why, size_t why_n)
{
    if (desc_n)
        desc[0] = '\0';
    snprintf(why, why_n, "zbpp was built without oneDNN (Debian's libdnnl-dev; scripts/setup.sh "
                         "installs it), which runs its bf16 products");
    return -1;
}

int zb_bf16_backend_gemm(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A,
                         int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B;
    (void)ldb, (void)beta, (void)C, (void)ldc;
    return -1;
}

int zb_bf16_backend_gemm_f32(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                             int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B;
    (void)ldb, (void)beta, (void)C, (void)ldc;
    return -1;
}
#endif
