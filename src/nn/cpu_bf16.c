/* `--precision bf16` on the CPU: whether it can run (bf16 instructions, and a backend that runs
 * bf16 products on them), and the process-wide switch that routes every matrix product of the
 * kernels through the bf16 path (gemm_bf16.c). docs/compute.md, "bf16 on the CPU". */
#include "zbpp/nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gemm_bf16.h"

static int gemm_mode = ZB_GEMM_MODE_FP32;
static char backend_desc[160];

int zb_gemm_mode(void) { return __atomic_load_n(&gemm_mode, __ATOMIC_RELAXED); }

zb_status_t zb_cpu_bf16_check_for(unsigned features, const char *backend_why, zb_err_t *err)
{
    char f[200];
    if (!(features & (ZB_CPU_AVX512_BF16 | ZB_CPU_AMX_BF16)))
        return zb_err_set(err, ZB_EUNSUPPORTED,
                          "this CPU has no AVX512-BF16 or AMX-BF16 instructions (it has: %s)",
                          zb_cpu_features_str(features, f, sizeof f));
    if (backend_why)
        return zb_err_set(err, ZB_EUNSUPPORTED, "%s", backend_why);
    return ZB_OK;
}

/* The test hook's mode: "emulate" runs the bf16 path on any CPU, its products emulated by
 * sgemm; "onednn-f32" by oneDNN's fp32 matmul (the backend's code but the data type). */
static int test_mode(void)
{
    const char *v = getenv(ZB_CPU_BF16_TEST_ENV);
    if (v && !strcmp(v, "emulate"))
        return ZB_GEMM_MODE_BF16_EMULATED;
    if (v && !strcmp(v, "onednn-f32"))
        return ZB_GEMM_MODE_BF16_ONEDNN_F32;
    return ZB_GEMM_MODE_FP32;
}

/* The test mode's own check and description; ZB_OK or why not. */
static zb_status_t test_mode_check(int mode, char *desc, size_t desc_n, zb_err_t *err)
{
    if (mode == ZB_GEMM_MODE_BF16_EMULATED) {
        snprintf(desc, desc_n, "emulated: fp32 products of bf16-rounded operands (%s=emulate)",
                 ZB_CPU_BF16_TEST_ENV);
        return ZB_OK;
    }
#ifdef ZB_HAVE_ONEDNN
    (void)err;
    snprintf(desc, desc_n, "oneDNN's fp32 matmul on bf16-rounded operands (%s=onednn-f32)",
             ZB_CPU_BF16_TEST_ENV);
    return ZB_OK;
#else
    return zb_err_set(err, ZB_EUNSUPPORTED, "%s=onednn-f32: zbpp was built without oneDNN",
                      ZB_CPU_BF16_TEST_ENV);
#endif
}

static zb_status_t check(char *desc, size_t desc_n, zb_err_t *err)
{
    unsigned features = zb_cpu_features();
    if (!(features & (ZB_CPU_AVX512_BF16 | ZB_CPU_AMX_BF16))) /* the backend is not asked */
        return zb_cpu_bf16_check_for(features, NULL, err);
    char why[200];
    return zb_cpu_bf16_check_for(
        features, zb_bf16_backend_probe(desc, desc_n, why, sizeof why) ? why : NULL, err);
}

/* The mode bf16 products would run in here (a test hook's, else the backend's) and what runs
 * them; ZB_OK, or why they cannot. */
static zb_status_t bf16_mode(int *mode, char *desc, size_t desc_n, zb_err_t *err)
{
    *mode = test_mode();
    if (*mode != ZB_GEMM_MODE_FP32)
        return test_mode_check(*mode, desc, desc_n, err);
    *mode = ZB_GEMM_MODE_BF16;
    return check(desc, desc_n, err);
}

zb_status_t zb_cpu_bf16_check(zb_err_t *err)
{
    char desc[sizeof backend_desc];
    int mode;
    return bf16_mode(&mode, desc, sizeof desc, err);
}

zb_status_t zb_cpu_gemm_set_precision(zb_cpu_gemm_precision_t p, zb_err_t *err)
{
    if (p != ZB_CPU_GEMM_FP32 && p != ZB_CPU_GEMM_BF16)
        return zb_err_set(err, ZB_EINVAL, "unknown CPU matrix-product precision %d", (int)p);
    int mode = ZB_GEMM_MODE_FP32;
    char desc[sizeof backend_desc] = "";
    if (p == ZB_CPU_GEMM_BF16) {
        zb_status_t st = bf16_mode(&mode, desc, sizeof desc, err);
        if (st != ZB_OK)
            return st;
    }
    memcpy(backend_desc, desc, sizeof desc);
    __atomic_store_n(&gemm_mode, mode, __ATOMIC_RELAXED);
    return ZB_OK;
}

zb_cpu_gemm_precision_t zb_cpu_gemm_precision(void)
{
    return zb_gemm_bf16_on() ? ZB_CPU_GEMM_BF16 : ZB_CPU_GEMM_FP32;
}

const char *zb_cpu_bf16_backend(void) { return zb_gemm_bf16_on() ? backend_desc : ""; }
