/* zbpp CLI — the device flags of `zbpp train` and `zbpp profile` (docs/cuda.md):
 *   --device cpu|cuda|cuda:N   where the compute runs (default cpu; cuda = cuda:0)
 *   --precision fp32|tf32|bf16 matrix-product precision on the GPU (default fp32; the CPU is fp32)
 *   --tf32                     the spelling of --precision tf32 (TF32 is off otherwise)
 *   --fp32-attention auto|fma|3xtf32 where fp32's attention runs (default auto: 3xtf32 where the head size has it)
 *   --sm-per-rank K            (train) SMs of each rank's partition when pipeline ranks share a
 *                              GPU (default: the even split)
 *   --gpu-messages host|device|none (train) how pipeline ranks on GPUs pass activations
 * Parsed here so the commands only put them in their getopt_long tables and forward them. */
#ifndef ZBPP_CLI_DEVICE_FLAGS_H
#define ZBPP_CLI_DEVICE_FLAGS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "zbpp/cuda.h"

typedef struct {
    const char *device;    /* --device value, NULL = cpu */
    const char *precision; /* --precision value, NULL = fp32 */
    bool tf32;             /* --tf32 */
    const char *fp32_attention; /* --fp32-attention value, NULL = fma */
    const char *sm_per_rank; /* --sm-per-rank value, NULL = even split */
    const char *gpu_messages; /* --gpu-messages host|device, NULL = host */
    /* resolved by zb_cli_device_resolve */
    bool cuda;
    zb_cuda_train_opts_t opts;
} zb_cli_device_t;

/* getopt_long codes of the device flags (above the shared ones of args.h and the pipeline's) */
enum {
    ZB_OPT_DEV_DEVICE = 1300,
    ZB_OPT_DEV_PRECISION,
    ZB_OPT_DEV_TF32,
    ZB_OPT_DEV_SM_PER_RANK,
    ZB_OPT_DEV_GPU_MESSAGES,
    ZB_OPT_DEV_FP32_ATTENTION,
};
/* getopt_long entries: those of train and profile, then those of train only */
#define ZB_CLI_DEVICE_OPTIONS                                                                  \
    {"device", required_argument, NULL, ZB_OPT_DEV_DEVICE},                                    \
    {"precision", required_argument, NULL, ZB_OPT_DEV_PRECISION},                              \
    {"tf32", no_argument, NULL, ZB_OPT_DEV_TF32},                                              \
    {"fp32-attention", required_argument, NULL, ZB_OPT_DEV_FP32_ATTENTION},
#define ZB_CLI_DEVICE_TRAIN_OPTIONS                                                            \
    {"sm-per-rank", required_argument, NULL, ZB_OPT_DEV_SM_PER_RANK},                          \
    {"gpu-messages", required_argument, NULL, ZB_OPT_DEV_GPU_MESSAGES},
/* Take device flag `id` (ZB_OPT_DEV_*) with value v (unused for --tf32): true, or false when
 * id is not a device flag. The values are checked together by zb_cli_device_resolve. */
bool zb_cli_device_option(zb_cli_device_t *d, int id, const char *v);
/* Check the combination and fill d->cuda / d->opts. Returns 0, or exit status 2 after one line
 * "zbpp <cmd>: ..." on stderr (unknown device or precision, --tf32 with bf16, a precision other
 * than fp32 on the CPU, --sm-per-rank not a positive integer or without --device cuda,
 * --fp32-attention unknown, without --device cuda or with a precision other than fp32). */
int zb_cli_device_resolve(zb_cli_device_t *d, const char *cmd);
/* After zb_cli_device_resolve, with the run's pipeline ranks: --sm-per-rank splits one GPU
 * between ranks, so with one rank it is refused (exit status 2 after one line); 0 otherwise. */
int zb_cli_device_check_ranks(const zb_cli_device_t *d, const char *cmd, int ranks);
/* The usage lines of the device flags. */
void zb_cli_device_usage(FILE *out);

#endif
