/* The published dense peak of known GPUs (zbpp/train.h): the MFU denominator of a GPU run when
 * the user gives none. NVIDIA's data-sheet figures, dense (no sparsity), in TFLOP/s. */
#include <string.h>

#include "zbpp/train.h"

typedef struct {
    const char *name, *variant; /* both must occur in the device name (variant may be NULL) */
    double fp32, tf32, bf16;
} gpu_spec_t;

/* More specific rows first: "H100" with "PCIe" before the SXM row. */
static const gpu_spec_t specs[] = {
    {"H100", "PCIe", 51.2, 378.0, 756.0},
    {"H100", "NVL", 60.0, 417.5, 835.0},
    {"H100", NULL, 66.9, 494.7, 989.4}, /* SXM5 */
    {"H200", NULL, 66.9, 494.7, 989.4},
    {"A100", NULL, 19.5, 156.0, 312.0},
    {"L40S", NULL, 91.6, 183.0, 362.0},
};

double zb_gpu_spec_peak_tflops(const char *device_name, const char *precision)
{
    if (!device_name || !precision)
        return 0;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        const gpu_spec_t *g = &specs[i];
        if (!strstr(device_name, g->name) || (g->variant && !strstr(device_name, g->variant)))
            continue;
        if (!strcmp(precision, "bf16"))
            return g->bf16;
        if (!strcmp(precision, "tf32"))
            return g->tf32;
        return !strcmp(precision, "fp32") ? g->fp32 : 0;
    }
    return 0;
}
