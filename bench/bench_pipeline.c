/* bench_pipeline — median step time and bubble (measured vs simulator) of every schedule family
 * on the pipeline trainer, side by side with 1F1B.
 *
 * usage: [ZB_SOURCE_DIR=repo] bench_pipeline [P M layers channels seq steps]   (defaults 2 8 8 256 128 6)
 * B = M sequences (one per microbatch). Ranks are threads pinned to cores when there are enough.
 * Figures are noisy on a shared machine: run it alone for numbers you quote. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/pipeline.h"

static int arg(int argc, char **argv, int i, int def)
{
    return argc > i ? atoi(argv[i]) : def;
}

int main(int argc, char **argv)
{
    int P = arg(argc, argv, 1, 2), M = arg(argc, argv, 2, 8), L = arg(argc, argv, 3, 8);
    int C = arg(argc, argv, 4, 256), T = arg(argc, argv, 5, 128), steps = arg(argc, argv, 6, 6);
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    /* run from the source tree, or point ZB_SOURCE_DIR at it */
    static char corpus[4096];
    const char *root = getenv("ZB_SOURCE_DIR");
    snprintf(corpus, sizeof corpus, "%s/data/demo_corpus.txt", root ? root : ".");
    c.text_path = corpus;
    c.model.layers = L;
    c.model.channels = C;
    c.model.heads = C % 64 == 0 ? C / 64 : 1;
    c.model.max_seq = T;
    c.seq = T;
    c.batch = M;
    c.microbatches = M;
    c.steps = steps;
    c.quiet = true;

    printf("pipeline bench: P=%d M=%d, GPT-2 L=%d C=%d T=%d, B=%d, %d steps (median)\n", P, M, L,
           C, T, M, steps);
    printf("%-18s %12s %10s %10s %10s\n", "schedule", "step ms", "vs 1f1b", "bubble", "predicted");
    size_t n = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    double base = 0;
    /* 1f1b first, so every other line can be compared to it */
    for (int pass = 0; pass < 2; pass++)
        for (size_t g = 0; g < n; g++) {
            bool is_1f1b = !strcmp(gens[g].name, "1f1b");
            if ((pass == 0) != is_1f1b)
                continue;
            zb_pipeline_opts_t o;
            zb_pipeline_opts_defaults(&o);
            o.ranks = P;
            o.schedule = gens[g].name;
            zb_train_summary_t sum;
            zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
            zb_err_t err;
            zb_status_t st = rep ? zb_pipeline_train(&c, &o, NULL, &sum, rep, NULL, &err)
                                 : ZB_ENOMEM;
            if (st != ZB_OK) {
                printf("%-18s rejected: %s\n", gens[g].name, rep ? err.msg : "out of memory");
                free(rep);
                continue;
            }
            if (is_1f1b)
                base = rep->step_ms_median;
            printf("%-18s %12.1f %9.3fx %9.1f%% %9.1f%%\n", gens[g].name, rep->step_ms_median,
                   base > 0 ? rep->step_ms_median / base : 0, 100 * rep->bubble_measured,
                   100 * rep->bubble_predicted);
            fflush(stdout);
            free(rep);
        }
    return 0;
}
