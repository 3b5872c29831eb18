/* The GPU pipeline's memory goal as the memory model predicts it, without a GPU: the device
 * memory of each rank of P thread ranks on one GPU against the same model run as one rank
 * (`--ranks 1`), for the goal's model (GPT-2 124M-like, LAYERS blocks, T tokens, one sequence per
 * microbatch). The figures are zb_pipeline_predict_gpu_memory's, which test_cuda_fake_pipeline
 * checks field by field against what a run predicts and allocates; bench_gpu_pipeline.sh
 * measures the same rows on a GPU. Layers are split evenly over the stages (a run with
 * `--partition profile` may move a layer off the head's stage).
 * Usage: bench_gpu_memory_plan [LAYERS=16] [T=1024] [P=4] [PRECISION=bf16] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/cuda.h"
#include "zbpp/pipeline.h"
#include "zbpp/schedule.h"

#include "bench_common.h"

static const double MiB = 1024.0 * 1024.0;

/* The ranks' predicted memory for `family` at P ranks and M microbatches; the largest total
 * (its rank in *at), or a negative value after a message. */
static double predict(const char *family, int P, int M, zb_opt_sync_t sync,
                      const zb_cuda_train_opts_t *dev, const zb_gpt2_config_t *cfg, int T,
                      zb_rank_mem_t *out, int *at)
{
    zb_gen_params_t gp = {.ranks = P, .microbatches = M};
    zb_schedule_t *s = NULL;
    zb_costs_t costs;
    zb_err_t e;
    if (zb_generate(family, &gp, &s, &e) != ZB_OK ||
        zb_costs_init_uniform(&costs, s->stages, 1, 1, 1, 0, 1, 0, -1, &e) != ZB_OK) {
        fprintf(stderr, "bench_gpu_memory_plan: %s: %s\n", family, e.msg);
        zb_schedule_free(s);
        return -1;
    }
    int first[1025];
    for (int k = 0; k <= s->stages; k++) /* even: stage k gets layers [first[k], first[k+1]) */
        first[k] = k * cfg->layers / s->stages;
    double most = -1;
    if (zb_pipeline_predict_gpu_memory(dev, cfg, first, s, &costs, 1, T, sync, out, &e) != ZB_OK)
        fprintf(stderr, "bench_gpu_memory_plan: %s: %s\n", family, e.msg);
    else
        for (int r = 0; r < P; r++)
            if (out[r].total > most)
                most = out[r].total, *at = r;
    zb_costs_free(&costs);
    zb_schedule_free(s);
    return most;
}

static void row(const char *what, const zb_rank_mem_t *m, double one)
{
    printf("%-26s %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %8.0f %7.3f\n", what,
           m->params / MiB, m->grads / MiB, m->optimizer / MiB, m->backup / MiB,
           m->messages / MiB, m->activations / MiB, m->workspace / MiB, m->stash_alloc / MiB,
           m->total / MiB, one > 0 ? m->total / one : 1.0);
}

int main(int argc, char **argv)
{
    int L = bench_int_arg("bench_gpu_memory_plan", argc, argv, 1, 16, 2, 96, "LAYERS");
    int T = bench_int_arg("bench_gpu_memory_plan", argc, argv, 2, 1024, 16, 1024, "T");
    int P = bench_int_arg("bench_gpu_memory_plan", argc, argv, 3, 4, 2, 8, "P");
    const char *prec_name = argc > 4 ? argv[4] : "bf16";
    zb_cuda_train_opts_t dev = {.precision = ZB_CUDA_BF16, .device_messages = true};
    if (!strcmp(prec_name, "fp32"))
        dev.precision = ZB_CUDA_FP32;
    else if (strcmp(prec_name, "bf16") != 0) {
        fprintf(stderr, "bench_gpu_memory_plan: PRECISION is bf16 or fp32, not '%s'\n", prec_name);
        return 2;
    }
    if (!zb_cuda_built()) {
        printf("skipped: built without CUDA (the stage's layout is in the CUDA backend)\n");
        return 77;
    }
    zb_gpt2_config_t cfg = bench_gpt2_124m(L);
    zb_rank_mem_t one[1], ranks[8];
    int at = 0;
    double ref = predict("1f1b", 1, 8, ZB_OPT_SYNC_BARRIER, &dev, &cfg, T, one, &at);
    if (ref < 0)
        return 1;
    printf("GPT-2 124M-like, L=%d, T=%d, %s, one sequence per microbatch, device messages; "
           "MiB per rank, predicted (no GPU)\n", L, T, prec_name);
    printf("%-26s %7s %7s %7s %7s %7s %7s %7s %7s %8s %7s\n", "run (largest rank)", "params",
           "grads", "optim", "backup", "msgs", "act", "work", "stash", "total", "x r1");
    row("--ranks 1, M=8", one, ref);
    static const char *const fams[] = {"1f1b", "zb-h1", "zb-h2", "zb-v"};
    static const struct {
        zb_opt_sync_t sync;
        const char *name;
    } syncs[] = {{ZB_OPT_SYNC_BARRIER, "barrier"}, {ZB_OPT_SYNC_POST_VALIDATION, "post-val"}};
    int bad = 0;
    for (int M = 8; M <= 16; M *= 2)
        for (size_t k = 0; k < sizeof syncs / sizeof syncs[0]; k++)
            for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
                double most = predict(fams[f], P, M, syncs[k].sync, &dev, &cfg, T, ranks, &at);
                if (most < 0) {
                    bad = 1;
                    continue;
                }
                char what[64];
                snprintf(what, sizeof what, "P=%d %s M=%d %s, r%d", P, fams[f], M, syncs[k].name,
                         at);
                row(what, &ranks[at], ref);
            }
    return bad;
}
