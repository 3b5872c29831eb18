/* GPT-2 training step on one GPU through the CUDA stage (docs/cuda.md): M microbatches of B
 * sequences of T tokens, then fold, grad norm, AdamW. Two orders of the same work, timed side by
 * side in one run: fused (F, B, W per microbatch) and deferred (every F and B, then every W at the
 * end of the step: "split backward costs nothing" holds when deferred / fused <= 1.02).
 * Prints median step times, tokens/s and model FLOP utilisation (6·params + 12·L·T·C FLOPs per
 * token, against H100 SXM's dense bf16 peak of 989 TFLOP/s), and the median time of the F, B and
 * W phases of a step measured apart, and the time of a fused step by kernel class (CUDA events
 * around every op: zb_cuda_stage_profile).
 * Usage: bench_cuda_step [precision=fp32|tf32|bf16] [B=0: largest that fits] [T=1024]
 *                        [steps=10] [layers=12] [M=2] [fp32 attention=fma|3xtf32]
 * Exit 77 with "skipped: no CUDA device" where there is none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zbpp/cuda.h"
#include "zbpp/gpt2.h"
#include "zbpp/optim.h"

#include "bench_common.h"

#define PEAK_BF16 989e12

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef struct {
    zb_cuda_stage_t *s;
    zb_cuda_stash_t *st[8];
    int M;
} rig_t;

static void rig_free(rig_t *r)
{
    for (int m = 0; m < r->M; m++)
        zb_cuda_stash_free(r->st[m]);
    zb_cuda_stage_free(r->s);
    memset(r, 0, sizeof *r);
}

static zb_status_t rig_new(rig_t *r, const zb_gpt2_config_t *cfg, int B, int T,
                           zb_cuda_precision_t prec, zb_cuda_fp32_attention_t attn, int M,
                           const zb_gpt2_params_t *p, zb_err_t *e)
{
    memset(r, 0, sizeof *r);
    zb_gpt2_span_t span = {0, cfg->layers, true, true};
    zb_status_t s = zb_cuda_stage_new(cfg, &span, B, T, prec, 0, &r->s, e);
    if (s == ZB_OK)
        s = zb_cuda_stage_set_fp32_attention(r->s, attn, e);
    for (int m = 0; m < M && s == ZB_OK; m++, r->M++)
        s = zb_cuda_stash_new(r->s, &r->st[m], e);
    if (s == ZB_OK) /* the head's F leaves the gradient at the backward's scale (phased, step) */
        s = zb_cuda_stage_fold_loss_grad(r->s, 1.0f / ((float)(B * T) * r->M), e);
    if (s == ZB_OK)
        s = zb_cuda_params_upload(r->s, p, e);
    if (s != ZB_OK)
        rig_free(r);
    return s;
}

static void die(const zb_err_t *e)
{
    fprintf(stderr, "bench_cuda_step: %s\n", e->msg);
    exit(1);
}

static void sync(rig_t *r)
{
    zb_err_t e;
    if (zb_cuda_sync(r->s, &e) != ZB_OK)
        die(&e);
}

/* Every F, then every B, then every W, each phase waited for: seconds of each in ph[0..2]. */
static void phased(rig_t *r, int *tokens, int *targets, int ntok, double ph[3])
{
    zb_err_t e;
    float l;
    sync(r);
    double t0 = now();
    for (int m = 0; m < r->M; m++)
        if (zb_cuda_forward(r->s, r->st[m], tokens + (size_t)m * ntok, NULL,
                            targets + (size_t)m * ntok, NULL, &l, &e) != ZB_OK)
            die(&e);
    sync(r);
    double t1 = now();
    for (int m = 0; m < r->M; m++)
        if (zb_cuda_backward_input(r->s, r->st[m], NULL, 1.0f / ((float)ntok * r->M), NULL, &e) !=
            ZB_OK)
            die(&e);
    sync(r);
    double t2 = now();
    for (int m = 0; m < r->M; m++)
        if (zb_cuda_backward_weight(r->s, r->st[m], &e) != ZB_OK)
            die(&e);
    sync(r);
    double t3 = now();
    ph[0] = t1 - t0, ph[1] = t2 - t1, ph[2] = t3 - t2;
}

/* One step; deferred: W of every microbatch after all F and B. Returns the mean loss. */
static float step(rig_t *r, const zb_gpt2_config_t *cfg, int *tokens, int *targets, int ntok,
                  int deferred, long t)
{
    zb_err_t e;
    float loss = 0, l;
    if (zb_cuda_grads_zero(r->s, &e) != ZB_OK)
        die(&e);
    for (int m = 0; m < r->M; m++) {
        if (zb_cuda_forward(r->s, r->st[m], tokens + (size_t)m * ntok, NULL,
                            targets + (size_t)m * ntok, NULL, &l, &e) != ZB_OK ||
            zb_cuda_backward_input(r->s, r->st[m], NULL, 1.0f / ((float)ntok * r->M), NULL, &e) !=
                ZB_OK)
            die(&e);
        loss += l / r->M;
        if (!deferred && zb_cuda_backward_weight(r->s, r->st[m], &e) != ZB_OK)
            die(&e);
    }
    for (int m = 0; deferred && m < r->M; m++)
        if (zb_cuda_backward_weight(r->s, r->st[m], &e) != ZB_OK)
            die(&e);
    int nu = zb_gpt2_num_units(cfg), units[1100];
    double part[1100];
    if (zb_cuda_fold_tied(r->s, &e) != ZB_OK) /* unit 0's norm needs the folded WTE */
        die(&e);
    for (int u = 0; u < nu; u++) {
        units[u] = u;
        if (zb_cuda_grad_unit_sumsq(r->s, u, &part[u], &e) != ZB_OK)
            die(&e);
    }
    float clip = zb_grad_clip_scale(zb_grad_norm_total(part, nu), 1.0f);
    zb_adamw_hparams_t h = zb_adamw_defaults();
    if (zb_cuda_adamw_update_units(r->s, &h, h.lr, t, clip, units, nu, &e) != ZB_OK ||
        zb_cuda_sync(r->s, &e) != ZB_OK)
        die(&e);
    return loss;
}

int main(int argc, char **argv)
{
    zb_err_t e;
    zb_cuda_precision_t prec = ZB_CUDA_FP32;
    if (argc > 1 && zb_cuda_precision_parse(argv[1], &prec, &e) != ZB_OK) {
        fprintf(stderr, "bench_cuda_step: %s\n", e.msg);
        return 2;
    }
    int B = bench_int_arg("bench_cuda_step", argc, argv, 2, 0, 0, 256, "B");
    int T = bench_int_arg("bench_cuda_step", argc, argv, 3, 1024, 1, 1024, "T");
    int steps = bench_int_arg("bench_cuda_step", argc, argv, 4, 10, 1, 1000, "steps");
    int L = bench_int_arg("bench_cuda_step", argc, argv, 5, 12, 1, 48, "layers");
    int M = bench_int_arg("bench_cuda_step", argc, argv, 6, 2, 1, 8, "M");
    zb_cuda_fp32_attention_t attn = ZB_CUDA_ATTN_FMA;
    if (argc > 7 && zb_cuda_fp32_attention_parse(argv[7], &attn, &e) != ZB_OK) {
        fprintf(stderr, "bench_cuda_step: %s\n", e.msg);
        return 2;
    }
    int ndev = 0;
    if (zb_cuda_device_count(&ndev, &e) != ZB_OK)
        die(&e);
    if (ndev == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    char desc[256];
    if (zb_cuda_device_describe(0, desc, sizeof desc, &e) != ZB_OK)
        die(&e);
    zb_gpt2_config_t cfg = bench_gpt2_124m(L);
    zb_gpt2_params_t p;
    if (zb_gpt2_params_alloc(&p, &cfg, &e) != ZB_OK)
        die(&e);
    zb_gpt2_params_init_random(&p, 42);

    rig_t r;
    if (B > 0) {
        if (rig_new(&r, &cfg, B, T, prec, attn, M, &p, &e) != ZB_OK)
            die(&e);
    } else { /* the largest B (of a fixed ladder) whose stage and M stashes fit */
        static const int ladder[] = {128, 96, 80, 64, 48, 40, 36, 32, 28, 24, 20, 16, 12, 8, 6, 4, 2, 1};
        zb_status_t s = ZB_ENOMEM;
        for (size_t i = 0; i < sizeof ladder / sizeof ladder[0] && s != ZB_OK; i++) {
            B = ladder[i];
            s = rig_new(&r, &cfg, B, T, prec, attn, M, &p, &e);
            if (s != ZB_OK && s != ZB_ENOMEM)
                die(&e);
        }
        if (s != ZB_OK)
            die(&e);
    }
    int ntok = B * T;
    int *tokens = malloc((size_t)ntok * M * sizeof(int)), *targets = malloc((size_t)ntok * M * 4);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < (size_t)ntok * M; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tokens[i] = (int)(x % (uint64_t)cfg.vocab);
        targets[i] = (int)((x >> 20) % (uint64_t)cfg.vocab);
    }
    /* warm-up: cuBLASLt plans, module load */
    step(&r, &cfg, tokens, targets, ntok, 0, 1);
    step(&r, &cfg, tokens, targets, ntok, 1, 2);
    double *tf = malloc(steps * sizeof(double)), *td = malloc(steps * sizeof(double));
    float loss = 0;
    for (int i = 0; i < steps; i++) { /* alternate so drift hits both alike */
        double t0 = now();
        loss = step(&r, &cfg, tokens, targets, ntok, 0, 3 + 2 * i);
        double t1 = now();
        step(&r, &cfg, tokens, targets, ntok, 1, 4 + 2 * i);
        double t2 = now();
        tf[i] = t1 - t0;
        td[i] = t2 - t1;
    }
    /* phases, measured separately (the syncs between them cost a little) */
    double *pf = malloc(steps * sizeof(double)), *pb = malloc(steps * sizeof(double)),
           *pw = malloc(steps * sizeof(double));
    for (int i = 0; i < steps; i++) {
        double ph[3];
        phased(&r, tokens, targets, ntok, ph);
        pf[i] = ph[0], pb[i] = ph[1], pw[i] = ph[2];
    }
    qsort(pf, steps, sizeof *pf, bench_cmp_double);
    qsort(pb, steps, sizeof *pb, bench_cmp_double);
    qsort(pw, steps, sizeof *pw, bench_cmp_double);
    qsort(tf, steps, sizeof *tf, bench_cmp_double);
    qsort(td, steps, sizeof *td, bench_cmp_double);
    double mf = tf[steps / 2], md = td[steps / 2];
    double params = 0;
    for (int k = 0; k < ZB_GPT2_NUM_TENSORS; k++)
        params += (double)p.sizes[k];
    params -= (double)(cfg.padded_vocab - cfg.vocab) * cfg.channels; /* padding rows */
    double flops_tok = 6.0 * params + 12.0 * L * T * cfg.channels;
    double tok = (double)ntok * M;
    printf("device: %s\n", desc);
    printf("zbpp cuda %s%s: L=%d B=%d T=%d M=%d (%.0f tokens/step), loss %.4f\n",
           zb_cuda_precision_name(prec), attn == ZB_CUDA_ATTN_3XTF32 ? " (3xtf32 attention)" : "",
           L, B, T, M, tok, loss);
    printf("  fused    %8.2f ms/step  %9.0f tokens/s  MFU %5.1f%% of bf16 peak\n", mf * 1e3,
           tok / mf, 100.0 * flops_tok * tok / mf / PEAK_BF16);
    printf("  deferred %8.2f ms/step  %9.0f tokens/s  deferred/fused %.4f\n", md * 1e3, tok / md,
           md / mf);
    printf("  phases   F %.2f ms, B %.2f ms, W %.2f ms per step (%d microbatches each)\n",
           pf[steps / 2] * 1e3, pb[steps / 2] * 1e3, pw[steps / 2] * 1e3, M);
    /* the time by kernel class: events around every op, on only for these steps (the events
     * themselves cost a little, so the figures above are taken without them) */
    double kms[ZB_CUDA_KCLASSES] = {0}, ksum = 0.0;
    if (zb_cuda_stage_profile(r.s, true, &e) != ZB_OK)
        die(&e);
    for (int i = 0; i < steps; i++)
        step(&r, &cfg, tokens, targets, ntok, 0, 3 + 2 * steps + i);
    if (zb_cuda_stage_profile_read(r.s, kms, &e) != ZB_OK ||
        zb_cuda_stage_profile(r.s, false, &e) != ZB_OK)
        die(&e);
    printf("  by kernel class (ms per fused step, share of it):");
    for (int k = 0; k < ZB_CUDA_KCLASSES; k++) {
        double ms = kms[k] / steps;
        ksum += ms;
        printf("%s %s %.2f (%.0f%%)", k ? "," : "", zb_cuda_kclass_name((zb_cuda_kclass_t)k), ms,
               100.0 * ms / (mf * 1e3));
    }
    printf(", other %.2f\n", mf * 1e3 - ksum);
    free(tf), free(td), free(pf), free(pb), free(pw), free(tokens), free(targets);
    rig_free(&r);
    zb_gpt2_params_free(&p);
    return 0;
}
