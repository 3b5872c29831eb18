/* Internal helpers shared by the GPT-2 model files (not part of the public API). */
#ifndef ZBPP_MODEL_GPT2_INTERNAL_H
#define ZBPP_MODEL_GPT2_INTERNAL_H

#include "zbpp/gpt2.h"

/* Largest accepted dimensions: far beyond any GPT-2, small enough that every size product
 * below fits comfortably in size_t and int indexing stays safe. */
#define ZB_GPT2_MAX_CHANNELS (1 << 15)
#define ZB_GPT2_MAX_LAYERS (1 << 10)
#define ZB_GPT2_MAX_VOCAB (1 << 22)
#define ZB_GPT2_MAX_SEQ (1 << 16)

/* Element counts of the 16 tensors for a checked config. */
void zb_gpt2_tensor_sizes(const zb_gpt2_config_t *cfg, size_t sizes[ZB_GPT2_NUM_TENSORS]);

/* Count a buffer of `bytes` as held (into p->accounted, released by zb_gpt2_params_free). */
void zb_gpt2_account(zb_gpt2_params_t *p, size_t bytes);

#endif
