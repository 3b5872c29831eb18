/* Host-only parts of the CUDA backend, compiled in every build: precision names and the shape
 * checks zb_cuda_stage_new runs before it touches a device. */
#include <string.h>

#include "zbpp/cuda.h"
#ifdef ZB_HAVE_CUDA
#include "cuda/flash_attn.h"
#endif

zb_status_t zb_cuda_precision_parse(const char *s, zb_cuda_precision_t *out, zb_err_t *err)
{
    if (s && !strcmp(s, "fp32"))
        *out = ZB_CUDA_FP32;
    else if (s && !strcmp(s, "tf32"))
        *out = ZB_CUDA_TF32;
    else if (s && !strcmp(s, "bf16"))
        *out = ZB_CUDA_BF16;
    else
        return zb_err_set(err, ZB_EINVAL, "unknown precision '%s' (fp32, tf32 or bf16)",
                          s ? s : "(null)");
    return ZB_OK;
}

const char *zb_cuda_precision_name(zb_cuda_precision_t p)
{
    switch (p) {
    case ZB_CUDA_FP32:
        return "fp32";
    case ZB_CUDA_TF32:
        return "tf32";
    case ZB_CUDA_BF16:
        return "bf16";
    }
    return "unknown";
}

zb_status_t zb_cuda_fp32_attention_parse(const char *s, zb_cuda_fp32_attention_t *out,
                                         zb_err_t *err)
{
    if (s && !strcmp(s, "auto"))
        *out = ZB_CUDA_ATTN_AUTO;
    else if (s && !strcmp(s, "fma"))
        *out = ZB_CUDA_ATTN_FMA;
    else if (s && !strcmp(s, "3xtf32"))
        *out = ZB_CUDA_ATTN_3XTF32;
    else
        return zb_err_set(err, ZB_EINVAL, "unknown fp32 attention '%s' (auto, fma or 3xtf32)",
                          s ? s : "(null)");
    return ZB_OK;
}

const char *zb_cuda_fp32_attention_name(zb_cuda_fp32_attention_t a)
{
    switch (a) {
    case ZB_CUDA_ATTN_AUTO:
        return "auto";
    case ZB_CUDA_ATTN_FMA:
        return "fma";
    case ZB_CUDA_ATTN_3XTF32:
        return "3xtf32";
    }
    return "unknown";
}

/* Shapes the bf16 kernels run: rows of C channels in 128-bit pieces (8 bf16), and a head size
 * the flash attention kernel has. */
static zb_status_t bf16_shape_check(const zb_gpt2_config_t *cfg, zb_err_t *err)
{
    if (cfg->channels % 8)
        return zb_err_set(err, ZB_EINVAL,
                          "cuda stage: bf16 needs channels a multiple of 8 (%d); use fp32 or tf32",
                          cfg->channels);
    int hs = cfg->channels / cfg->heads;
#ifdef ZB_HAVE_CUDA
    int has_kernel = zb_cuk_flash_supported(hs);
#else
    int has_kernel = 1; /* no kernels in this build: zb_cuda_stage_new refuses anyway */
#endif
    if (!has_kernel)
        return zb_err_set(err, ZB_EINVAL,
                          "cuda stage: bf16 flash attention has no kernel for head size %d "
                          "(channels / heads; 16, 32, 64 or 128); use fp32 or tf32",
                          hs);
    return ZB_OK;
}

zb_status_t zb_cuda_stage_check(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int B,
                                int T, zb_cuda_precision_t prec, zb_err_t *err)
{
    if (!cfg || !span)
        return zb_err_set(err, ZB_EINVAL, "cuda stage: config and span are required");
    zb_status_t s = zb_gpt2_config_check(cfg, err);
    if (s != ZB_OK)
        return s;
    if (span->layer_begin < 0 || span->layer_begin > span->layer_end ||
        span->layer_end > cfg->layers)
        return zb_err_set(err, ZB_EINVAL, "cuda stage: layers [%d, %d) not within [0, %d)",
                          span->layer_begin, span->layer_end, cfg->layers);
    if (span->embed && span->layer_begin != 0)
        return zb_err_set(err, ZB_EINVAL, "cuda stage: embedding stage must start at layer 0");
    if (span->head && span->layer_end != cfg->layers)
        return zb_err_set(err, ZB_EINVAL, "cuda stage: head stage must end at layer %d",
                          cfg->layers);
    if (span->layer_begin == span->layer_end && !span->embed && !span->head)
        return zb_err_set(err, ZB_EINVAL, "cuda stage: empty stage (no layers, embed or head)");
    if (B <= 0 || B > (1 << 16))
        return zb_err_set(err, ZB_EINVAL, "cuda stage: batch size %d not in [1, 65536]", B);
    if (T <= 0 || T > cfg->max_seq)
        return zb_err_set(err, ZB_EINVAL, "cuda stage: sequence length %d not in [1, %d]", T,
                          cfg->max_seq);
    /* the kernels index rows of B·T tokens and B·NH·T attention rows with int grids */
    if ((long long)B * T * cfg->heads > (1LL << 30))
        return zb_err_set(err, ZB_EINVAL, "cuda stage: B·T·heads = %lld too large",
                          (long long)B * T * cfg->heads);
    if (prec != ZB_CUDA_FP32 && prec != ZB_CUDA_TF32 && prec != ZB_CUDA_BF16)
        return zb_err_set(err, ZB_EINVAL, "cuda stage: unknown precision %d", (int)prec);
    if (prec == ZB_CUDA_BF16)
        return bf16_shape_check(cfg, err);
    return ZB_OK;
}

zb_status_t zb_cuda_require_device(int device, zb_err_t *err)
{
    if (!zb_cuda_built())
        return zb_err_set(err, ZB_EUNSUPPORTED,
                          "--device cuda: zbpp was built without CUDA (ZB_CUDA=OFF)");
    int n = 0;
    zb_status_t st = zb_cuda_device_count(&n, err);
    if (st != ZB_OK)
        return st;
    if (n == 0)
        return zb_err_set(err, ZB_EUNSUPPORTED,
                          "--device cuda: no CUDA device (no NVIDIA GPU or driver visible)");
    if (device < 0 || device >= n)
        return zb_err_set(err, ZB_EUNSUPPORTED, "--device cuda: no CUDA device %d (%d found)",
                          device, n);
    return ZB_OK;
}

const char *zb_cuda_kclass_name(zb_cuda_kclass_t k)
{
    static const char *names[ZB_CUDA_KCLASSES] = {"gemm",       "attention",  "norm",
                                                  "elementwise", "classifier", "optimizer"};
    return (unsigned)k < ZB_CUDA_KCLASSES ? names[k] : "unknown";
}
