/* bench_pipeline — median step time and bubble (measured vs simulator with the costs measured at
 * start-up) of every schedule family on the pipeline trainer, side by side with 1F1B.
 *
 * usage: [ZB_SOURCE_DIR=repo] bench_pipeline [P M layers channels seq steps [families...]]
 *        defaults: 2 8 8 256 128 8, every family
 * B = M sequences (one per microbatch). Rank threads are pinned to cores when there are enough;
 * each run profiles the model first (zbpp profile, --partition profile). Columns:
 *   step ms      median wall time of a step (all of it: compute, messages, optimizer)
 *   vs 1f1b      ratio of the medians
 *   bubble       measured on the last step (ZB definition), and the simulator's prediction
 *   span/pred    measured span T over the predicted one: how much slower the ranks ran than the
 *                profile said (load from other programs shows here first)
 *   busy/pred    same for the largest per-rank compute time
 * Figures are noisy on a shared machine: run it alone for numbers you quote. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/pipeline.h"

static int arg(int argc, char **argv, int i, int def)
{
    return argc > i ? atoi(argv[i]) : def;
}

static bool wanted(int argc, char **argv, const char *name)
{
    if (argc <= 7)
        return true;
    for (int i = 7; i < argc; i++)
        if (!strcmp(argv[i], name))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    int P = arg(argc, argv, 1, 2), M = arg(argc, argv, 2, 8), L = arg(argc, argv, 3, 8);
    int C = arg(argc, argv, 4, 256), T = arg(argc, argv, 5, 128), steps = arg(argc, argv, 6, 8);
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

    printf("pipeline bench: P=%d M=%d, GPT-2 L=%d C=%d T=%d, B=%d, %d steps (median), costs "
           "profiled at start-up\n",
           P, M, L, C, T, M, steps);
    printf("%-17s %-6s %9s %8s %9s %9s %9s %9s\n", "schedule", "chunks", "step ms", "vs 1f1b",
           "bubble", "predicted", "span/pred", "busy/pred");
    size_t n = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    double base = 0;
    /* 1f1b first, so every other line can be compared to it */
    for (int pass = 0; pass < 2; pass++)
        for (size_t g = 0; g < n; g++) {
            bool is_1f1b = !strcmp(gens[g].name, "1f1b");
            if ((pass == 0) != is_1f1b || (!is_1f1b && !wanted(argc, argv, gens[g].name)))
                continue;
            zb_pipeline_opts_t o;
            zb_pipeline_opts_defaults(&o);
            o.ranks = P;
            o.schedule = gens[g].name;
            o.profile = true;
            o.pin = true;
            zb_train_summary_t sum;
            zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
            zb_err_t err;
            zb_status_t st = rep ? zb_pipeline_train(&c, &o, NULL, &sum, rep, NULL, &err)
                                 : ZB_ENOMEM;
            if (st != ZB_OK) {
                printf("%-17s rejected: %s\n", gens[g].name, rep ? err.msg : "out of memory");
                free(rep);
                continue;
            }
            if (is_1f1b)
                base = rep->step_ms_median;
            const char *v = strstr(rep->note, " v=");
            printf("%-17s %-6d %9.1f %7.3fx %8.1f%% %8.1f%% %9.2f %9.2f\n", gens[g].name,
                   v ? atoi(v + 3) : 0, rep->step_ms_median,
                   base > 0 ? rep->step_ms_median / base : 0, 100 * rep->bubble_measured,
                   100 * rep->bubble_predicted,
                   rep->span_predicted > 0 ? rep->span_measured / rep->span_predicted : 0,
                   rep->busy_predicted > 0 ? rep->busy_measured / rep->busy_predicted : 0);
            fflush(stdout);
            free(rep);
        }
    return 0;
}
