/* The host link and the copy engines of one GPU, as activation offload meets them
 * (docs/offload.md, "The host link in the prediction"). Three measurements:
 *  1. link: stash-sized copies (MiB each, default 96) to page-locked host memory and back with
 *     1..4 streams copying at once, each direction alone and both together: the aggregate
 *     bandwidth the simulator's shared link stands for (GB/s, all streams together);
 *  2. small transfers: a 4 KiB upload and download on another stream while a stash copy in the
 *     same direction runs, by cudaMemcpyAsync (a copy engine) and by a copy kernel through
 *     page-locked memory (src/cuda/small_copy.c's way), against each alone: how long a small
 *     transfer inside an action waits behind a stash;
 *  3. compute beside copies: an fp32 product (2048 x 4096 x 4096, compute-bound), 64 bf16
 *     products of a W's shape (1024 x 3072 x 768, a GPT-2 MLP's weight gradient: operands that
 *     live in L2), 64 copy kernels over 16 MiB (L2-resident) and one over 1 GiB (DRAM), each
 *     alone and while four streams copy stashes both ways: whether the copies slow the SMs,
 *     and whether through L2 (the copy engines' traffic passes through it).
 * Medians of `reps` runs (default 5), device events or the host clock around synchronised work.
 * Usage: bench_host_link [MiB=96] [reps=5]; exits 77 without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/cuda.h"
#include "zbpp/util.h"

#include "bench_common.h"

#ifndef ZB_HAVE_CUDA
int main(int argc, char **argv)
{
    bench_int_arg("bench_host_link", argc, argv, 1, 96, 1, 4096, "MiB");
    bench_int_arg("bench_host_link", argc, argv, 2, 5, 1, 1000, "reps");
    printf("skipped: no CUDA device (built without CUDA)\n");
    return 77;
}
#else

#include <cuda_runtime_api.h>

#include "cuda/ctx.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"

enum { STREAMS = 4, SMALL = 4096 };

static void must(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_host_link: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

typedef struct {
    size_t bytes;
    cudaStream_t s[STREAMS + 1]; /* the copies' streams, then the small transfers' / compute's */
    void *dev[STREAMS], *host[STREAMS];
} rig_t;

/* `copies` stash copies on each of the first k streams, direction d2h / h2d / both (one each
 * way a stream per round), queued at once; returns the seconds until all ended. */
static double copy_round(rig_t *r, int k, int dir, int copies)
{
    must(cudaDeviceSynchronize(), "sync");
    const double t0 = zb_now();
    for (int c = 0; c < copies; c++)
        for (int q = 0; q < k; q++) {
            if (dir != 1)
                must(cudaMemcpyAsync(r->host[q], r->dev[q], r->bytes / (dir == 2 ? 2 : 1),
                                     cudaMemcpyDeviceToHost, r->s[q]),
                     "copy down");
            if (dir != 0)
                must(cudaMemcpyAsync((char *)r->dev[q] + (dir == 2 ? r->bytes / 2 : 0),
                                     (char *)r->host[q] + (dir == 2 ? r->bytes / 2 : 0),
                                     r->bytes / (dir == 2 ? 2 : 1), cudaMemcpyHostToDevice,
                                     r->s[q]),
                     "copy up");
        }
    must(cudaDeviceSynchronize(), "sync");
    return zb_now() - t0;
}

static void link_table(rig_t *r, int reps)
{
    const char *names[3] = {"to the host", "from the host", "both ways"};
    printf("link: %zu MiB copies, GB/s of all streams together (median of %d)\n",
           r->bytes >> 20, reps);
    printf("%-14s %8s %8s %8s %8s\n", "", "1", "2", "3", "4");
    for (int dir = 0; dir < 3; dir++) {
        printf("%-14s", names[dir]);
        for (int k = 1; k <= STREAMS; k++) {
            double t[64];
            copy_round(r, k, dir, 1); /* warm */
            for (int i = 0; i < reps; i++)
                t[i] = copy_round(r, k, dir, 2);
            /* both ways moves bytes/2 each way a copy, bytes in all */
            printf(" %8.1f", (double)k * 2 * (double)r->bytes / bench_median(t, reps) / 1e9);
        }
        printf("\n");
    }
}

/* Milliseconds from just before a small transfer on the extra stream to its end, with (busy) or
 * without a stash copy in the same direction queued first on stream 0; by a copy engine or by
 * the copy kernel through page-locked memory. */
static double small_ms(rig_t *r, void *dev_small, void *host_small, bool up, bool busy,
                       bool kernel)
{
    cudaStream_t s = r->s[STREAMS];
    cudaEvent_t a, b;
    must(cudaEventCreate(&a), "event");
    must(cudaEventCreate(&b), "event");
    must(cudaDeviceSynchronize(), "sync");
    if (busy)
        must(cudaMemcpyAsync(up ? r->dev[0] : r->host[0], up ? r->host[0] : r->dev[0], r->bytes,
                             up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, r->s[0]),
             "stash copy");
    must(cudaEventRecord(a, s), "record");
    if (kernel)
        zb_cuk_copy_words(s, up ? dev_small : host_small, up ? host_small : dev_small, SMALL / 4);
    else
        must(cudaMemcpyAsync(up ? dev_small : host_small, up ? host_small : dev_small, SMALL,
                             up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s),
             "small copy");
    must(cudaEventRecord(b, s), "record");
    must(cudaDeviceSynchronize(), "sync");
    float ms = 0;
    must(cudaEventElapsedTime(&ms, a, b), "elapsed");
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms;
}

static void small_table(rig_t *r, int reps)
{
    void *dev_small, *host_small;
    must(cudaMalloc(&dev_small, SMALL), "malloc");
    must(cudaHostAlloc(&host_small, SMALL, cudaHostAllocPortable | cudaHostAllocMapped),
         "host alloc");
    printf("small transfers: %d bytes, ms from issue to end (median of %d)\n", SMALL, reps);
    printf("%-34s %10s %16s\n", "", "alone", "beside a stash");
    for (int up = 0; up < 2; up++)
        for (int kernel = 0; kernel < 2; kernel++) {
            double t[2][64];
            for (int busy = 0; busy < 2; busy++)
                for (int i = 0; i < reps; i++)
                    t[busy][i] = small_ms(r, dev_small, host_small, up, busy, kernel);
            printf("%-34s %10.3f %16.3f\n",
                   up ? (kernel ? "up, copy kernel (small_copy.c)" : "up, cudaMemcpyAsync")
                      : (kernel ? "down, copy kernel (small_copy.c)" : "down, cudaMemcpyAsync"),
                   bench_median(t[0], reps), bench_median(t[1], reps));
        }
    cudaFree(dev_small);
    cudaFreeHost(host_small);
}

typedef enum { LOAD_FP32_PRODUCT, LOAD_BF16_PRODUCTS, LOAD_L2_COPIES, LOAD_DRAM_COPY, LOADS } load_kind_t;

static const char *const LOAD_NAMES[LOADS] = {
    "fp32 product 2048x4096x4096 (SMs)", "64 bf16 products 1024x3072x768 (L2)",
    "64 copy kernels 16 MiB (L2)", "copy kernel 1 GiB (DRAM)"};

enum { BF16_M = 1024, BF16_N = 3072, BF16_K = 768, REPEATS = 64, L2_WORDS = 1 << 22 };

typedef struct {
    zb_cu_ctx_t ctx, ctx16;
    float *a, *w, *out;       /* the fp32 product */
    void *a16, *w16, *out16;  /* the bf16 products (bf16 operands, fp32 result) */
    float *src, *dst;         /* the copy kernels' 1 GiB (its first 16 MiB for L2) */
} load_t;

static void run_load(load_t *l, load_kind_t kind)
{
    switch (kind) {
    case LOAD_FP32_PRODUCT:
        zb_cu_matmul_forward(&l->ctx, l->out, l->a, l->w, NULL, 2048, 4096, 4096);
        break;
    case LOAD_BF16_PRODUCTS:
        for (int i = 0; i < REPEATS; i++) {
            zb_cu_gemm_args_t g = {.M = BF16_M, .N = BF16_N, .K = BF16_K, .alpha = 1.0f,
                                   .A = l->a16, .B = l->w16, .C = l->out16, .lda = BF16_K,
                                   .ldb = BF16_N, .ldc = BF16_N, .ta_type = ZB_CU_BF16,
                                   .tc_type = ZB_CU_F32};
            zb_cu_gemm_ex(&l->ctx16, &g);
        }
        break;
    case LOAD_L2_COPIES:
        for (int i = 0; i < REPEATS; i++)
            zb_cuk_copy_words(l->ctx.stream, l->dst, l->src, L2_WORDS);
        break;
    default: zb_cuk_copy_words(l->ctx.stream, l->dst, l->src, (size_t)1 << 28);
    }
}

static double load_ms(load_t *l, load_kind_t kind, bool copies_beside, rig_t *r)
{
    cudaEvent_t a, b;
    must(cudaEventCreate(&a), "event");
    must(cudaEventCreate(&b), "event");
    must(cudaDeviceSynchronize(), "sync");
    if (copies_beside) /* enough stash copies both ways on four streams to outlast the load */
        for (int c = 0; c < 6; c++)
            for (int q = 0; q < STREAMS; q++) {
                must(cudaMemcpyAsync(r->host[q], r->dev[q], r->bytes / 2,
                                     cudaMemcpyDeviceToHost, r->s[q]),
                     "copy down");
                must(cudaMemcpyAsync((char *)r->dev[q] + r->bytes / 2,
                                     (char *)r->host[q] + r->bytes / 2, r->bytes / 2,
                                     cudaMemcpyHostToDevice, r->s[q]),
                     "copy up");
            }
    /* the bf16 products queue on their own context's stream: it waits for the same start */
    cudaStream_t s = kind == LOAD_BF16_PRODUCTS ? l->ctx16.stream : l->ctx.stream;
    must(cudaEventRecord(a, s), "record");
    run_load(l, kind);
    must(cudaEventRecord(b, s), "record");
    must(cudaEventSynchronize(b), "sync");
    float ms = 0;
    must(cudaEventElapsedTime(&ms, a, b), "elapsed");
    must(cudaDeviceSynchronize(), "sync");
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms;
}

static void load_table(rig_t *r, int reps)
{
    load_t l;
    zb_err_t e;
    if (zb_cu_ctx_init(&l.ctx, 0, ZB_CUDA_FP32, &e) != ZB_OK ||
        zb_cu_ctx_init(&l.ctx16, 0, ZB_CUDA_BF16, &e) != ZB_OK) {
        fprintf(stderr, "bench_host_link: %s\n", e.msg);
        exit(1);
    }
    must(cudaMalloc((void **)&l.a, (size_t)2048 * 4096 * 4), "malloc");
    must(cudaMalloc((void **)&l.w, (size_t)4096 * 4096 * 4), "malloc");
    must(cudaMalloc((void **)&l.out, (size_t)2048 * 4096 * 4), "malloc");
    must(cudaMalloc(&l.a16, (size_t)BF16_M * BF16_K * 2), "malloc");
    must(cudaMalloc(&l.w16, (size_t)BF16_K * BF16_N * 2), "malloc");
    must(cudaMalloc(&l.out16, (size_t)BF16_M * BF16_N * 4), "malloc");
    must(cudaMalloc((void **)&l.src, (size_t)1 << 30), "malloc");
    must(cudaMalloc((void **)&l.dst, (size_t)1 << 30), "malloc");
    must(cudaMemset(l.a, 0, (size_t)2048 * 4096 * 4), "memset");
    must(cudaMemset(l.w, 0, (size_t)4096 * 4096 * 4), "memset");
    must(cudaMemset(l.a16, 0, (size_t)BF16_M * BF16_K * 2), "memset");
    must(cudaMemset(l.w16, 0, (size_t)BF16_K * BF16_N * 2), "memset");
    must(cudaMemset(l.src, 0, (size_t)1 << 30), "memset");
    printf("compute beside copies: ms (median of %d)\n", reps);
    printf("%-40s %10s %18s %8s\n", "", "alone", "beside 4x2 copies", "ratio");
    for (int kind = 0; kind < LOADS; kind++) {
        double t[2][64];
        load_ms(&l, kind, false, r); /* warm (the products' plans) */
        for (int beside = 0; beside < 2; beside++)
            for (int i = 0; i < reps; i++)
                t[beside][i] = load_ms(&l, kind, beside, r);
        double m0 = bench_median(t[0], reps), m1 = bench_median(t[1], reps);
        printf("%-40s %10.3f %18.3f %8.3f\n", LOAD_NAMES[kind], m0, m1, m1 / m0);
    }
    if (zb_cu_ctx_check(&l.ctx, "bench_host_link", &e) != ZB_OK ||
        zb_cu_ctx_check(&l.ctx16, "bench_host_link", &e) != ZB_OK)
        fprintf(stderr, "bench_host_link: %s\n", e.msg);
    cudaFree(l.a), cudaFree(l.w), cudaFree(l.out), cudaFree(l.src), cudaFree(l.dst);
    cudaFree(l.a16), cudaFree(l.w16), cudaFree(l.out16);
    zb_cu_ctx_destroy(&l.ctx);
    zb_cu_ctx_destroy(&l.ctx16);
}

int main(int argc, char **argv)
{
    const int mib = bench_int_arg("bench_host_link", argc, argv, 1, 96, 1, 4096, "MiB");
    const int reps = bench_int_arg("bench_host_link", argc, argv, 2, 5, 1, 64, "reps");
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    char desc[256];
    zb_err_t e;
    if (zb_cuda_device_describe(0, desc, sizeof desc, &e) == ZB_OK)
        printf("bench_host_link: %s\n", desc);
    rig_t r = {.bytes = (size_t)mib << 20};
    for (int q = 0; q <= STREAMS; q++)
        must(cudaStreamCreateWithFlags(&r.s[q], cudaStreamNonBlocking), "stream");
    for (int q = 0; q < STREAMS; q++) {
        must(cudaMalloc(&r.dev[q], r.bytes), "malloc");
        must(cudaHostAlloc(&r.host[q], r.bytes, cudaHostAllocDefault), "host alloc");
    }
    link_table(&r, reps);
    small_table(&r, reps);
    load_table(&r, reps);
    for (int q = 0; q < STREAMS; q++) {
        cudaFree(r.dev[q]);
        cudaFreeHost(r.host[q]);
    }
    for (int q = 0; q <= STREAMS; q++)
        cudaStreamDestroy(r.s[q]);
    return 0;
}
#endif
