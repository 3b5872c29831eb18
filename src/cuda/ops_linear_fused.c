/* The fp32-storage stage's linear layers with their elementwise neighbours in the product's
 * epilogue (cuda/gemm.h): the bias, bias + GELU (the pre-activation kept as the aux output B
 * reads), and GELU's gradient. Each saves a pass over the product's output and, in B, the
 * zeroed scratch the separate gradient kernel accumulated into. Where cuBLASLt has no fused
 * algorithm, zb_cu_gemm_ex runs the epilogue as one kernel after the product; where the aux
 * rows are not 32-byte multiples (4·C with C odd) cuBLASLt cannot take them and that kernel is
 * called here. Results are the same math as matmul + gelu (the epilogue's GELU is the tanh
 * form), not the same bits: docs/cuda.md ("fp32 epilogues"). */
#include "cuda/ctx.h"
#include "cuda/gemm.h"
#include "cuda/kernels_bf16.h"
#include "cuda/prof.h"

/* The product with its epilogue: fused by cuBLASLt (or after it by zb_cu_gemm_ex's fallback
 * kernel), or, where cuBLASLt cannot take the aux matrix (its row stride not a multiple of 8
 * elements: gemm.h refuses it), the plain product and then that kernel here. */
static void gemm_epilogue(zb_cu_ctx_t *c, const zb_cu_gemm_args_t *g, const char *what)
{
    if (g->ldaux % 8 == 0) {
        zb_cu_gemm_ex(c, g);
        return;
    }
    zb_cu_gemm_args_t plain = *g;
    plain.epilogue = ZB_CU_EPI_NONE;
    zb_cu_gemm_ex(c, &plain);
    if (c->status != ZB_OK)
        return;
    zb_cuk16_epilogue_apply(c->stream, g->epilogue, g->C, g->ldc, 0, g->aux, g->ldaux, g->bias, 0,
                            g->M, g->N);
    zb_cu_launch_check(c, what);
}

void zb_cu_matmul_gelu_forward(zb_cu_ctx_t *c, float *pre, float *out, const float *inp,
                               const float *weight, const float *bias, int N, int C, int OC)
{
    if (c->status != ZB_OK)
        return;
    zb_cu_prof_begin(c, ZB_CUDA_K_GEMM);
    gemm_epilogue(c,
                  &(zb_cu_gemm_args_t){.ta = 0, .tb = 1, .M = N, .N = OC, .K = C, .alpha = 1.0f,
                                       .beta = 0.0f, .A = inp, .lda = C, .B = weight, .ldb = C,
                                       .C = out, .ldc = OC, .ta_type = ZB_CU_F32,
                                       .tc_type = ZB_CU_F32, .epilogue = ZB_CU_EPI_GELU_AUX_BIAS,
                                       .bias = bias, .bias_type = ZB_CU_F32, .aux = pre,
                                       .ldaux = OC},
                  "matmul bias + gelu");
    zb_cu_prof_end(c);
}

void zb_cu_matmul_dgelu_backward_input(zb_cu_ctx_t *c, float *dinp, const float *dout,
                                       const float *weight, const float *pre, int N, int C,
                                       int OC)
{
    if (c->status != ZB_OK)
        return;
    zb_cu_prof_begin(c, ZB_CUDA_K_GEMM);
    gemm_epilogue(c,
                  &(zb_cu_gemm_args_t){.ta = 0, .tb = 0, .M = N, .N = C, .K = OC, .alpha = 1.0f,
                                       .beta = 0.0f, .A = dout, .lda = OC, .B = weight, .ldb = C,
                                       .C = dinp, .ldc = C, .ta_type = ZB_CU_F32,
                                       .tc_type = ZB_CU_F32, .epilogue = ZB_CU_EPI_DGELU,
                                       .aux = (void *)pre, .ldaux = C},
                  "matmul gelu gradient");
    zb_cu_prof_end(c);
}
