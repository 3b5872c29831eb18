/* Internal: the bf16 storage type, on its own so that both the C launchers' header
 * (kernels_bf16.h) and the device helpers (kernels_bf16_device.h) can name it. zb_bf16_t is the
 * raw 16 bits of an IEEE bfloat16 (C has no bf16 type). */
#ifndef ZBPP_CUDA_BF16_TYPE_H
#define ZBPP_CUDA_BF16_TYPE_H

#include <stdint.h>

typedef uint16_t zb_bf16_t;

#endif
