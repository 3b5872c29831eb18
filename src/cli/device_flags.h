/* zbpp CLI — the device flags of `zbpp train` and `zbpp profile` (docs/cuda.md):
 *   --device cpu|cuda|cuda:N   where the compute runs (default cpu; cuda = cuda:0)
 *   --precision fp32|tf32|bf16 matrix-product precision on the GPU (default fp32; the CPU is fp32)
 *   --tf32                     the spelling of --precision tf32 (TF32 is off otherwise)
 *   --sm-per-rank K            (train) SMs of each rank's partition when pipeline ranks share a
 *                              GPU (issue 13; default: the even split)
 *   --gpu-messages host|device (train) how pipeline ranks on GPUs pass activations (issue 13)
 * Parsed here so the commands only forward the flags and dispatch. */
#ifndef ZBPP_CLI_DEVICE_FLAGS_H
#define ZBPP_CLI_DEVICE_FLAGS_H

#include <stdbool.h>
#include <stdio.h>

#include "zbpp/cuda.h"

typedef struct {
    const char *device;    /* --device value, NULL = cpu */
    const char *precision; /* --precision value, NULL = fp32 */
    bool tf32;             /* --tf32 */
    const char *sm_per_rank; /* --sm-per-rank value, NULL = even split */
    const char *gpu_messages; /* --gpu-messages host|device, NULL = host */
    /* resolved by zb_cli_device_resolve */
    bool cuda;
    zb_cuda_train_opts_t opts;
} zb_cli_device_t;

/* The names (without "--") of the flags zb_cli_device_flag takes: with a value, and switches;
 * NULL-terminated (zbpp train builds its getopt_long table from them). */
extern const char *const zb_cli_device_value_flags[];
extern const char *const zb_cli_device_switches[];
/* Try flag `a` with value `v` (v unused for --tf32): 1 = consumed a value, 2 = consumed --tf32
 * (no value), 0 = not a device flag. */
int zb_cli_device_flag(zb_cli_device_t *d, const char *a, const char *v);
/* Check the combination and fill d->cuda / d->opts. Returns 0, or exit status 2 after one line
 * "zbpp <cmd>: ..." on stderr (unknown device or precision, --tf32 with bf16, a precision other
 * than fp32 on the CPU, --sm-per-rank not a positive integer or without --device cuda). */
int zb_cli_device_resolve(zb_cli_device_t *d, const char *cmd);
/* After zb_cli_device_resolve, with the run's pipeline ranks: --sm-per-rank splits one GPU
 * between ranks, so with one rank it is refused (exit status 2 after one line); 0 otherwise. */
int zb_cli_device_check_ranks(const zb_cli_device_t *d, const char *cmd, int ranks);
/* The usage lines of the device flags. */
void zb_cli_device_usage(FILE *out);

#endif
