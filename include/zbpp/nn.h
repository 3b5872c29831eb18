/* zbpp — neural-network kernels for GPT-2, each split into forward, backward_input (B, gradient
 * w.r.t. the op's input) and backward_weight (W, gradient w.r.t. its parameters).
 *
 * Conventions (llm.c style): outputs first, then inputs, then weights, then sizes; shapes in the
 * comment, with N = B·T rows. Every backward ACCUMULATES (+=) into its gradient outputs; callers
 * zero explicitly. The one documented exception is the loss (zb_crossentropy_backward), which
 * turns probabilities into logit gradients in place because nothing flows into it.
 * Kernels never allocate (attention takes a caller-provided scratch; helper threads grow their
 * own), never check their sizes, never spawn threads: they share their work over the calling
 * thread's current worker group (zbpp/workers.h), if it has one, in chunks fixed by the shapes, so
 * the same inputs give the same bits for any thread count (docs/threads.md). Matrix products go
 * through single-threaded CBLAS sgemm, large ones as fixed tiles (see docs/blas.md). */
#ifndef ZBPP_NN_H
#define ZBPP_NN_H

#include <stddef.h>
#include "zbpp/error.h"

/* ---- token + position embedding ---- */

/* out[B,T,C] = wte[tokens[b,t], :] + wpe[t, :]. tokens must lie in [0, rows of wte). */
void zb_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                        int T, int C);
/* dwte[tokens[b,t], :] += dout[b,t,:]; dwpe[t, :] += dout[b,t,:] (rows in (b,t) order).
 * There is no backward_input: tokens are not differentiable. */
void zb_encoder_backward_weight(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                int B, int T, int C);

/* ---- LayerNorm over the last dimension (eps 1e-5) ---- */

/* out[N,C] = (inp - mean) * rstd * weight[C] + bias[C]; writes mean[N], rstd[N] for backward. */
void zb_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int N, int C);
/* out[N,C] again from the forward's stored mean/rstd: the same bits as zb_layernorm_forward's
 * output (both use one row routine), e.g. to recompute it instead of keeping it. */
void zb_layernorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
                        const float *weight, const float *bias, int N, int C);
/* dinp[N,C] += d/dinp of the normalisation, given dout[N,C] and the forward's mean/rstd. */
void zb_layernorm_backward_input(float *dinp, const float *dout, const float *inp,
                                 const float *mean, const float *rstd, const float *weight, int N,
                                 int C);
/* dweight[C] += sum_n dout·xhat; dbias[C] += sum_n dout, xhat recomputed from inp/mean/rstd. */
void zb_layernorm_backward_weight(float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *mean, const float *rstd, int N,
                                  int C);

/* ---- linear layer: out = inp · weight^T + bias ---- */

/* out[N,OC] = inp[N,C] · weight[OC,C]^T + bias[OC]; bias may be NULL. */
void zb_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                       int N, int C, int OC);
/* dinp[N,C] += dout[N,OC] · weight[OC,C]. */
void zb_matmul_backward_input(float *dinp, const float *dout, const float *weight, int N, int C,
                              int OC);
/* dweight[OC,C] += dout^T · inp; dbias[OC] += column sums of dout (rows in order); dbias may be
 * NULL. W needs exactly the forward's input and the output gradient. */
void zb_matmul_backward_weight(float *dweight, float *dbias, const float *dout, const float *inp,
                               int N, int C, int OC);

/* ---- GELU, tanh approximation (GPT-2) ---- */

/* out[n] = 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x^3))). */
void zb_gelu_forward(float *out, const float *inp, size_t n);
/* dinp[n] += gelu'(inp) · dout. No weights, so no backward_weight. */
void zb_gelu_backward_input(float *dinp, const float *inp, const float *dout, size_t n);

/* ---- residual add ---- */

/* out[n] = a + b. */
void zb_residual_forward(float *out, const float *a, const float *b, size_t n);
/* da[n] += dout; db[n] += dout (the gradient of a sum flows to both inputs). */
void zb_residual_backward_input(float *da, float *db, const float *dout, size_t n);

/* ---- causal multi-head self-attention (no parameters: the projections are matmuls) ---- */

/* Floats of scratch zb_attention_backward_input needs: T·T. */
size_t zb_attention_scratch_floats(int T);
/* qkv[B,T,3C] holds q | k | v, each [NH heads × hs = C/NH]. Writes att[B,NH,T,T] (softmax
 * probabilities, the causal upper triangle zero) and out[B,T,C] (heads concatenated). */
void zb_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH);
/* dqkv[B,T,3C] += gradient w.r.t. qkv given dout[B,T,C] and the forward's att. scratch holds
 * zb_attention_scratch_floats(T) floats, contents irrelevant. */
void zb_attention_backward_input(float *dqkv, float *scratch, const float *dout, const float *qkv,
                                 const float *att, int B, int T, int C, int NH);

/* ---- softmax cross-entropy over a padded vocabulary ---- */

/* In place on probs[N,Vp]: holds logits on entry, softmax probabilities over the first V columns
 * on return (columns V..Vp-1 set to 0, never read). losses[N] = -log p[target]. targets must lie
 * in [0, V). */
void zb_crossentropy_forward(float *losses, float *probs, const int *targets, int N, int V,
                             int Vp);
/* In place on probs[N,Vp]: turns probabilities into dlogits = (p - onehot(target)) · dloss,
 * padded columns 0. The loss is the end of the graph, so there is nothing to accumulate onto
 * and no second buffer of N·Vp floats is kept (the exception to the += rule). */
void zb_crossentropy_backward(float *probs, const int *targets, float dloss, int N, int V,
                              int Vp);

/* ---- BLAS ---- */

/* Make the BLAS library single-threaded (idempotent, thread-safe; the kernels call it before
 * their first sgemm). Returns a short name of the BLAS in use, e.g. "OpenBLAS Cooperlake". */
const char *zb_blas_init(void);
/* Under an address-space limit (RLIMIT_AS, `ulimit -v`), check that what `threads` compute
 * threads still need (BLAS work buffers, stacks, malloc arenas) can be mapped now: ZB_ENOMEM with
 * a message instead of OpenBLAS spinning forever on a failed mmap later. ZB_OK without a limit.
 * Call after the model and its buffers are allocated (docs/reliability.md). */
zb_status_t zb_blas_check_headroom(int threads, zb_err_t *err);

/* ---- CPU features and the BLAS kernel choice (docs/blas.md, "Kernel choice") ---- */

/* What the CPU can run, from CPUID, counting a vector extension only when the OS saves its
 * registers (XGETBV). ZB_CPU_AMD is the vendor, not an instruction set. */
enum {
    ZB_CPU_SSE3 = 1u << 0,
    ZB_CPU_SSE42 = 1u << 1,
    ZB_CPU_AVX = 1u << 2,
    ZB_CPU_AVX2 = 1u << 3,
    ZB_CPU_FMA = 1u << 4,
    ZB_CPU_AVX512F = 1u << 5,
    ZB_CPU_AVX512BW = 1u << 6,
    ZB_CPU_AVX512VL = 1u << 7,
    ZB_CPU_AVX512DQ = 1u << 8,
    ZB_CPU_AVX512_BF16 = 1u << 9,
    ZB_CPU_AMX_TILE = 1u << 10,
    ZB_CPU_AMX_BF16 = 1u << 11,
    ZB_CPU_AMD = 1u << 12,
};
/* The ZB_CPU_* bits of the CPU this runs on (0 on a CPU that is not x86-64). */
unsigned zb_cpu_features(void);
/* The bits' names, space-separated ("avx2 fma ..."), into buf (always terminated). */
const char *zb_cpu_features_str(unsigned features, char *buf, size_t size);

/* How the BLAS kernel in use compares with the best one the BLAS library has for this CPU. */
typedef enum {
    ZB_BLAS_CORE_BEST,     /* the library chose the best kernel it has for the CPU */
    ZB_BLAS_CORE_USER,     /* OPENBLAS_CORETYPE was set by the user: respected, never changed */
    ZB_BLAS_CORE_LOW,      /* below the CPU's best: set OPENBLAS_CORETYPE=best before the library
                            * loads (the zbpp CLI re-executes itself to do so) */
    ZB_BLAS_CORE_SWITCHED, /* zbpp set OPENBLAS_CORETYPE=best and the library took it */
    ZB_BLAS_CORE_FAILED,   /* zbpp set OPENBLAS_CORETYPE=best and the library did not take it */
    ZB_BLAS_CORE_UNKNOWN,  /* a kernel name missing from zbpp's table: left as it is */
    ZB_BLAS_CORE_OTHER,    /* not OpenBLAS, or not x86-64: nothing to choose */
} zb_blas_core_state_t;

typedef struct {
    zb_blas_core_state_t state;
    unsigned features; /* ZB_CPU_* */
    char in_use[32];   /* the kernel running now, e.g. "SkylakeX" ("" if not OpenBLAS) */
    char best[32];     /* the best kernel the library has for the CPU's features */
    char chosen[32];   /* what OpenBLAS chose on its own, when zbpp set the variable */
    char line[256];    /* one line saying all of the above, for run headers and warnings */
} zb_blas_kernel_t;

/* The environment variable through which zbpp tells its re-executed self that it set
 * OPENBLAS_CORETYPE: "<OpenBLAS's own choice>><the core zbpp set>". */
#define ZB_BLAS_CORE_ENV "ZBPP_BLAS_CORE_SET"

/* The decision, without side effects (tested table by table): `features` are ZB_CPU_* bits,
 * `has_core(name)` says whether the library has that kernel (NULL: every kernel), `in_use` the
 * kernel OpenBLAS runs, `user_env` the value of OPENBLAS_CORETYPE (NULL if unset) and `zbpp_env`
 * that of ZB_BLAS_CORE_ENV (NULL if unset). An OPENBLAS_CORETYPE that zbpp did not set is never
 * overridden. Fills every field of *out. */
void zb_blas_core_decide(zb_blas_kernel_t *out, unsigned features, int (*has_core)(const char *),
                         const char *in_use, const char *user_env, const char *zbpp_env);
/* The best kernel of zbpp's table for `features` that has_core accepts (NULL: any), or NULL
 * when none fits. */
const char *zb_blas_best_core(unsigned features, int (*has_core)(const char *));
/* The decision for this process (computed once; never touches the BLAS's threads or buffers,
 * so it is safe before zb_blas_init). */
const zb_blas_kernel_t *zb_blas_kernel(void);

/* ---- bf16 matrix products on the CPU (docs/compute.md, "bf16 on the CPU") ----
 * Autocast's numerics: every matrix product (linear layers, attention) rounds its operands to
 * bf16 (round to nearest even) and sums the exact products in fp32 into an fp32 output; weights,
 * activations, gradients and AdamW state stay fp32. Needs AVX512-BF16 or AMX-BF16 and zbpp built
 * with oneDNN, which runs the products. */

/* Whether bf16 products can run here: ZB_OK, or ZB_EUNSUPPORTED and the one reason in err (no
 * AVX512-BF16/AMX-BF16 instructions; zbpp built without oneDNN; oneDNN has no bf16 product for
 * this CPU), checked in that order. */
zb_status_t zb_cpu_bf16_check(zb_err_t *err);
/* The same decision for given ZB_CPU_* features, backend_why being the backend's reason to
 * refuse (NULL: it runs). */
zb_status_t zb_cpu_bf16_check_for(unsigned features, const char *backend_why, zb_err_t *err);

typedef enum { ZB_CPU_GEMM_FP32 = 0, ZB_CPU_GEMM_BF16 = 1 } zb_cpu_gemm_precision_t;
/* Process-wide: the precision of every matrix product the kernels of this header compute from
 * now on (every thread, every rank of the process). BF16 fails as zb_cpu_bf16_check does and
 * leaves the setting as it was. Set it before training starts, not during a step. */
zb_status_t zb_cpu_gemm_set_precision(zb_cpu_gemm_precision_t p, zb_err_t *err);
zb_cpu_gemm_precision_t zb_cpu_gemm_precision(void);
/* What runs the bf16 products ("oneDNN 2.6.3 brg:avx512_core_amx"); "" in fp32. */
const char *zb_cpu_bf16_backend(void);
/* How many times faster a bf16 product runs here than an fp32 one (below 1: slower), measured
 * once per mode on one thread (a 256x768x768 product, best of 3, a few milliseconds); 0 in fp32.
 * Not every bf16 CPU gains: without AMX, some run bf16 dot products at half the fp32 rate. */
double zb_cpu_bf16_speed(void);
/* Weights rounded once per step (gemm_bf16_weights.c). In bf16 mode a linear layer's product
 * rounds its weight on every call, 2M times a step with M microbatches. Between open and close
 * on one thread, the layers' weights are rounded at their first product and reused after: open
 * it where the weights cannot change until close (a step's F, B and W; not the optimizer, a
 * load or a rollback). The cache (made at the first open, *cache NULL before) keeps its copies
 * across spans and rounds each weight again in every span. Same bits as without it. No-ops in
 * fp32. */
typedef struct zb_bf16_weight_cache zb_bf16_weight_cache_t;
void zb_bf16_weight_cache_open(zb_bf16_weight_cache_t **cache);
void zb_bf16_weight_cache_close(void);
void zb_bf16_weight_cache_free(zb_bf16_weight_cache_t *cache);
/* Bytes of the rounded copies a cache holds (a rank's memory table: its "workspace"), and
 * whether products use a cache at all (bf16 products on, the test hook below not set). */
size_t zb_bf16_weight_cache_bytes(const zb_bf16_weight_cache_t *cache);
int zb_bf16_weight_cache_used(void);
/* Test hook, so the path is tested where no bf16 CPU is: "emulate" makes bf16 products run on
 * any CPU as sgemm on the rounded operands (the same numerics up to the order of the sums);
 * "onednn-f32" as oneDNN's fp32 matmul on them (the oneDNN backend's code, but its data type).
 * Not for users: both are slower than fp32. */
#define ZB_CPU_BF16_TEST_ENV "ZBPP_TEST_CPU_BF16"

#endif
