/* Predicted device memory of a one-GPU GPT-2 124M training run (T = 1024, M = 2 stashes) per
 * precision and batch size, from the CUDA stage's own layout figures (zb_cuda_stage_memory:
 * computed on the host, the same figures a stage allocates, checked by test_cuda_fake_stage16
 * and test_cuda_fake_pipeline), the workspace included (cuBLASLt's 32 MiB and the rest). Needs no
 * GPU; the real peak is bench_cuda_step's largest B on the device.
 * Usage: bench_cuda_memory [T=1024] [M=2] [GiB=79.1: the device's memory] */
#include <stdio.h>
#include <stdlib.h>

#include "zbpp/cuda.h"
#include "zbpp/gpt2.h"

#include "bench_common.h"

/* The stage's figures at B and the whole run's bytes (*total); 0 (after a message) on error. */
static int predict(zb_cuda_stage_mem_t *m, double *total, const zb_gpt2_config_t *cfg,
                   const zb_gpt2_span_t *whole, int B, int T, int M, zb_cuda_precision_t prec)
{
    zb_err_t e;
    if (zb_cuda_stage_memory(cfg, whole, B, T, prec, m, &e) != ZB_OK) {
        fprintf(stderr, "bench_cuda_memory: %s\n", e.msg);
        return 0;
    }
    /* params, grads, m, v; the bf16 copy; WTE accumulator; M stashes; the scratch; the
     * workspace */
    double state = 4.0 * m->state + m->weights16 + m->wte_head;
    *total = state + (double)M * m->stash + m->scratch + (double)m->workspace;
    return 1;
}

int main(int argc, char **argv)
{
    int T = bench_int_arg("bench_cuda_memory", argc, argv, 1, 1024, 1, 1024, "T");
    int M = bench_int_arg("bench_cuda_memory", argc, argv, 2, 2, 1, 64, "M");
    double cap = argc > 3 ? atof(argv[3]) : 79.1;
    if (!zb_cuda_built()) {
        printf("skipped: built without CUDA (the stage's layout is in the CUDA backend)\n");
        return 77;
    }
    zb_gpt2_config_t cfg = bench_gpt2_124m(12);
    zb_gpt2_span_t whole = {0, cfg.layers, true, true};
    static const int Bs[] = {20, 32, 48, 64, 96};
    static const zb_cuda_precision_t precs[] = {ZB_CUDA_FP32, ZB_CUDA_BF16};
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    printf("GPT-2 124M, T=%d, %d stashes (microbatches in flight), device %.1f GiB\n", T, M, cap);
    printf("%-5s %4s %9s %9s %9s %9s %9s  %s\n", "prec", "B", "state", "stash", "live F",
           "scratch", "total", "fits");
    for (int p = 0; p < 2; p++) {
        for (size_t b = 0; b < sizeof Bs / sizeof Bs[0]; b++) {
            double total;
            zb_cuda_stage_mem_t m;
            if (!predict(&m, &total, &cfg, &whole, Bs[b], T, M, precs[p]))
                return 1;
            printf("%-5s %4d %8.2fG %8.2fG %8.2fG %8.2fG %8.2fG  %s\n",
                   zb_cuda_precision_name(precs[p]), Bs[b],
                   (4.0 * m.state + m.weights16 + m.wte_head) / GiB, m.stash / GiB,
                   m.after_f / GiB, m.scratch / GiB, total / GiB, total / GiB <= cap ? "yes" : "no");
        }
        int most = 0; /* the largest B that fits, any B (bench_cuda_step tries a ladder) */
        for (int B = 1; B <= 512; B++) {
            double total;
            zb_cuda_stage_mem_t m;
            if (!predict(&m, &total, &cfg, &whole, B, T, M, precs[p]))
                return 1;
            if (total / GiB <= cap)
                most = B;
        }
        printf("%-5s largest B that fits: %d\n", zb_cuda_precision_name(precs[p]), most);
    }
    return 0;
}
