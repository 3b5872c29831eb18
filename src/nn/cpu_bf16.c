/* Whether `--precision bf16` can run on the CPU, and if not, the one reason why. Three things
 * are needed: bf16 instructions (AVX512-BF16 or AMX-BF16; without them bf16 products are only
 * emulated, slower than fp32), a bf16 GEMM in the BLAS (OpenBLAS's cblas_sbgemm, present only in
 * builds with BUILD_BFLOAT16), and a CPU trainer that calls it. docs/compute.md, "bf16 on the
 * CPU". */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "zbpp/nn.h"

#include <dlfcn.h>

zb_status_t zb_cpu_bf16_check_for(unsigned features, int has_sbgemm, zb_err_t *err)
{
    char f[200];
    if (!(features & (ZB_CPU_AVX512_BF16 | ZB_CPU_AMX_BF16)))
        return zb_err_set(err, ZB_EUNSUPPORTED,
                          "this CPU has no AVX512-BF16 or AMX-BF16 instructions (it has: %s)",
                          zb_cpu_features_str(features, f, sizeof f));
    if (!has_sbgemm)
        return zb_err_set(err, ZB_EUNSUPPORTED,
                          "the BLAS has no bf16 GEMM (cblas_sbgemm: Debian's OpenBLAS 0.3.21 is "
                          "built without it)");
    return zb_err_set(err, ZB_EUNSUPPORTED,
                      "the CPU trainer computes in fp32 only (no bf16 path through cblas_sbgemm "
                      "yet)");
}

zb_status_t zb_cpu_bf16_check(zb_err_t *err)
{
    return zb_cpu_bf16_check_for(zb_cpu_features(), dlsym(RTLD_DEFAULT, "cblas_sbgemm") != NULL,
                                 err);
}
