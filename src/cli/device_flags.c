/* The device flags of zbpp train / profile (cli/device_flags.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/device_flags.h"
#include "zbpp/nn.h"

bool zb_cli_device_option(zb_cli_device_t *d, int id, const char *v)
{
    switch (id) {
    case ZB_OPT_DEV_DEVICE: d->device = v; return true;
    case ZB_OPT_DEV_PRECISION: d->precision = v; return true;
    case ZB_OPT_DEV_TF32: d->tf32 = true; return true;
    case ZB_OPT_DEV_FP32_ATTENTION: d->fp32_attention = v; return true;
    case ZB_OPT_DEV_SM_PER_RANK: d->sm_per_rank = v; return true;
    case ZB_OPT_DEV_GPU_MESSAGES: d->gpu_messages = v; return true;
    default: return false;
    }
}

static int parse_device(const char *s, bool *cuda, int *index)
{
    *cuda = false;
    *index = 0;
    if (!s || !strcmp(s, "cpu"))
        return 0;
    if (!strcmp(s, "cuda")) {
        *cuda = true;
        return 0;
    }
    if (strncmp(s, "cuda:", 5) != 0 || s[5] < '0' || s[5] > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s + 5, &end, 10);
    if (errno || *end != '\0' || v < 0 || v > 1023)
        return -1;
    *cuda = true;
    *index = (int)v;
    return 0;
}

int zb_cli_device_resolve(zb_cli_device_t *d, const char *cmd)
{
    if (parse_device(d->device, &d->cuda, &d->opts.device) != 0) {
        fprintf(stderr, "zbpp %s: --device: '%s' is not cpu, cuda or cuda:N\n", cmd, d->device);
        return 2;
    }
    d->opts.precision = ZB_CUDA_FP32;
    zb_err_t err;
    zb_err_clear(&err);
    if (d->precision && zb_cuda_precision_parse(d->precision, &d->opts.precision, &err) != ZB_OK) {
        fprintf(stderr, "zbpp %s: --precision: %s\n", cmd, err.msg);
        return 2;
    }
    if (d->tf32) {
        if (d->opts.precision == ZB_CUDA_BF16) {
            fprintf(stderr, "zbpp %s: --tf32 turns TF32 on in fp32 mode; --precision bf16 "
                            "already uses bf16 tensor cores (give one of them)\n", cmd);
            return 2;
        }
        d->opts.precision = ZB_CUDA_TF32;
    }
    d->opts.fp32_attention = ZB_CUDA_ATTN_AUTO;
    if (d->fp32_attention) {
        if (zb_cuda_fp32_attention_parse(d->fp32_attention, &d->opts.fp32_attention, &err) !=
            ZB_OK) {
            fprintf(stderr, "zbpp %s: --fp32-attention: %s\n", cmd, err.msg);
            return 2;
        }
        if (!d->cuda || d->opts.precision != ZB_CUDA_FP32) {
            fprintf(stderr, "zbpp %s: --fp32-attention is for --device cuda with --precision "
                            "fp32 (tf32 and bf16 run their own attention)\n", cmd);
            return 2;
        }
    }
    d->opts.sm_per_rank = 0;
    if (d->sm_per_rank) {
        char *end;
        errno = 0;
        long k = strtol(d->sm_per_rank, &end, 10);
        if (errno || end == d->sm_per_rank || *end != '\0' || k < 1 || k > 65536) {
            fprintf(stderr, "zbpp %s: --sm-per-rank: '%s' is not a positive integer (SMs per "
                            "rank)\n", cmd, d->sm_per_rank);
            return 2;
        }
        if (!d->cuda) {
            fprintf(stderr, "zbpp %s: --sm-per-rank needs --device cuda (it splits a GPU's SMs "
                            "between pipeline ranks)\n", cmd);
            return 2;
        }
        d->opts.sm_per_rank = (int)k;
    }
    d->opts.device_messages = d->opts.null_messages = false;
    if (d->gpu_messages) {
        if (strcmp(d->gpu_messages, "host") && strcmp(d->gpu_messages, "device") &&
            strcmp(d->gpu_messages, "none")) {
            fprintf(stderr, "zbpp %s: --gpu-messages must be host, device or none (got '%s')\n",
                    cmd, d->gpu_messages);
            return 2;
        }
        if (!d->cuda) {
            fprintf(stderr, "zbpp %s: --gpu-messages needs --device cuda (it says how pipeline "
                            "ranks on GPUs pass activations)\n", cmd);
            return 2;
        }
        d->opts.null_messages = !strcmp(d->gpu_messages, "none");
        d->opts.device_messages = d->opts.null_messages || !strcmp(d->gpu_messages, "device");
    }
    if (!d->cuda && d->opts.precision == ZB_CUDA_BF16 && !d->tf32) {
        /* bf16 products on the CPU (docs/compute.md): from here on, for the whole process */
        zb_err_t bf16_err;
        if (zb_cpu_gemm_set_precision(ZB_CPU_GEMM_BF16, &bf16_err) != ZB_OK) {
            fprintf(stderr, "zbpp %s: --precision bf16 on the CPU: %s (or use --device cuda)\n",
                    cmd, bf16_err.msg);
            return 2;
        }
    } else if (!d->cuda && d->opts.precision != ZB_CUDA_FP32) {
        fprintf(stderr, "zbpp %s: %s needs --device cuda (the CPU computes in fp32 or bf16)\n",
                cmd, d->tf32 ? "--tf32" : "--precision tf32");
        return 2;
    }
    return 0;
}

int zb_cli_device_check_ranks(const zb_cli_device_t *d, const char *cmd, int ranks)
{
    if (d->gpu_messages && ranks <= 1) {
        fprintf(stderr, "zbpp %s: --gpu-messages is for messages between pipeline ranks; with one "
                        "rank there are none (give --ranks P > 1)\n", cmd);
        return 2;
    }
    return 0;
}

void zb_cli_device_usage(FILE *out)
{
    fprintf(out,
            "device (docs/cuda.md):\n"
            "  --device cpu|cuda|cuda:N   where the compute runs (default cpu; cuda = cuda:0);\n"
            "                       cuda with --ranks P: rank r on GPU r mod (visible GPUs),\n"
            "                       threads of one process (not --transport mpi)\n"
            "  --precision fp32|tf32|bf16 fp32 (TF32 off, default), tf32 products, or bf16\n"
            "                       activations and products (channels a multiple of 8, head\n"
            "                       size 16/32/64/128); gradients, master weights and AdamW\n"
            "                       state stay fp32; on the CPU, bf16 rounds the operands\n"
            "                       of the matrix products only and needs AVX512-BF16 or\n"
            "                       AMX (docs/compute.md)\n"
            "  --tf32               same as --precision tf32\n"
            "  --fp32-attention auto|fma|3xtf32 where --precision fp32's attention runs: the\n"
            "                       TF32 tensor cores in 3xTF32 (fp32-level error, as PyTorch's;\n"
            "                       head size 16/32/64), the fp32 FMA units (fma), or auto\n"
            "                       (default): 3xtf32 where the head size has it, else fma\n"
            "  --sm-per-rank K      (train) SMs of each rank's partition when pipeline ranks\n"
            "                       share a GPU (default: the even split; a multiple of the\n"
            "                       GPU's granularity, 8 on Hopper); the run prints the split;\n"
            "                       with one rank on a GPU: that rank in a partition of K SMs\n"
            "                       (the reference a partitioned pipeline is compared with)\n"
            "  --gpu-messages host|device|none  (train, --ranks P on cuda) activations between\n"
            "                       ranks staged through host buffers (default), or device\n"
            "                       copies after the sender's event (no host round trip); none:\n"
            "                       a benchmark baseline, the waits without the copies after\n"
            "                       step 1 (losses then not meaningful)\n");
}
