/* zbpp CLI — shared lines of the `zbpp train` report (train_report.h). */
#include <stdio.h>

#include "cli/train_report.h"
#include "zbpp/nn.h"

static char g_peak_source[256] = "--peak-tflops";

void zb_cli_set_peak_source(const char *source)
{
    snprintf(g_peak_source, sizeof g_peak_source, "%s", source);
}

void zb_cli_print_run_extras(const zb_train_config_t *c, const zb_train_summary_t *sum)
{
    if (sum->steps_run > 0 && sum->flops_per_token > 0) {
        double tflops = sum->flops_per_token * sum->median_tokens_per_s * 1e-12;
        printf("model FLOPs: %.4f TFLOP/s at the median step (6·N + attention per token)", tflops);
        if (c->peak_tflops > 0)
            printf(", mfu %.2f%% of %.4g TFLOP/s (%s)\n", 100 * tflops / c->peak_tflops,
                   c->peak_tflops, g_peak_source);
        else
            printf(", mfu n/a (give --peak-tflops)\n");
    }
    if (sum->has_val)
        printf("val loss %.4f (%d batches)\n", sum->val_loss, c->val_steps);
    if (sum->interrupted)
        printf("interrupted after step %ld of %ld%s\n", sum->first_step + sum->steps_run, c->steps,
               c->save_path || c->save_model_path ? "" : "; nothing saved (no --save)");
}

/* bf16 products that run slower than fp32 here get a warning even without --verbose: bf16 on
 * the CPU is there for speed (and the GPU's numerics), and not every bf16 CPU gains. */
static void print_bf16_header(bool verbose)
{
    if (zb_cpu_gemm_precision() != ZB_CPU_GEMM_BF16)
        return;
    double speed = zb_cpu_bf16_speed();
    if (verbose)
        fprintf(stderr, "zbpp train: CPU bf16 products: %s; %.2fx fp32's rate here (measured)\n",
                zb_cpu_bf16_backend(), speed);
    if (speed > 0 && speed < 1)
        fprintf(stderr, "zbpp train: warning: bf16 products run at %.2fx fp32's rate on this CPU "
                        "(measured): --precision fp32 trains faster here\n", speed);
}

void zb_cli_print_kernel_header(bool verbose)
{
    const zb_blas_kernel_t *k = zb_blas_kernel();
    bool warn = k->state == ZB_BLAS_CORE_LOW || k->state == ZB_BLAS_CORE_FAILED;
    if (verbose || warn) { /* else an error after this must stay the run's one stderr line */
        fprintf(stderr, "zbpp train: CPU kernels: %s\n", k->line);
        if (verbose) {
            char f[160];
            fprintf(stderr, "zbpp train: CPU features: %s\n",
                    zb_cpu_features_str(k->features, f, sizeof f));
        }
    }
    print_bf16_header(verbose);
}
