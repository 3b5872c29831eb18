/* bench_pipeline — median step time and bubble (measured vs simulator with the costs measured at
 * start-up) of every schedule family on the pipeline trainer, side by side with 1F1B.
 *
 * usage: [ZB_SOURCE_DIR=repo] bench_pipeline [P M layers channels seq steps [rounds]
 *                                             [families...]]
 *        defaults: 2 8 8 256 128 8 3, every family
 * B = M sequences (one per microbatch). Rank threads are pinned to cores when there are enough;
 * each run profiles the model first (zbpp profile, --partition profile). The schedules take turns:
 * every round runs each of them for `steps` steps, so a drift in the machine's speed (other
 * tenants, clocks) hits all of them alike. Columns:
 *   step ms      median over rounds of a run's median step wall time (compute, messages,
 *                optimizer: all of it)
 *   vs 1f1b      median over rounds of (this run's median / the same round's 1F1B median)
 *   bubble       measured on the last step of the last round (ZB definition), and the
 *                simulator's prediction
 *   span/pred    measured span T over the predicted one: how much slower the ranks ran than the
 *                profile said (load from other programs shows here first)
 *   busy/pred    same for the largest per-rank compute time
 * Figures are noisy on a shared machine: run it alone for numbers you quote. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/pipeline.h"
#include "zbpp/util.h"

#define MAX_ROUNDS 15
#define MAX_FAMILIES 32

static int arg(int argc, char **argv, int i, int def)
{
    return argc > i ? atoi(argv[i]) : def;
}

/* Families named after the numeric arguments (from `first`), or all when none are named. */
static bool wanted(int argc, char **argv, int first, const char *name)
{
    if (argc <= first)
        return true;
    for (int i = first; i < argc; i++)
        if (!strcmp(argv[i], name))
            return true;
    return false;
}

/* One run of `steps` steps of schedule `name`; false (with a line printed) if it is rejected. */
static bool run_once(const zb_train_config_t *c, int P, const char *name,
                     zb_pipeline_report_t *rep)
{
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = P;
    o.schedule = name;
    o.profile = true;
    o.pin = true;
    zb_train_summary_t sum;
    zb_err_t err;
    if (zb_pipeline_train(c, &o, NULL, &sum, rep, NULL, &err) != ZB_OK) {
        printf("%-17s rejected: %s\n", name, err.msg);
        return false;
    }
    return true;
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

    int first_family = 7, rounds = 3;
    if (argc > 7 && strspn(argv[7], "0123456789") == strlen(argv[7])) {
        rounds = atoi(argv[7]);
        first_family = 8;
    }
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_pipeline: rounds must be 1..%d\n", MAX_ROUNDS);
        return 2;
    }

    /* 1f1b first, so every other line can be compared to it */
    size_t n = 0, nf = 0;
    const zb_generator_info_t *gens = zb_generators(&n);
    const char *fam[MAX_FAMILIES];
    fam[nf++] = "1f1b";
    for (size_t g = 0; g < n && nf < MAX_FAMILIES; g++)
        if (strcmp(gens[g].name, "1f1b") && wanted(argc, argv, first_family, gens[g].name))
            fam[nf++] = gens[g].name;

    printf("pipeline bench: P=%d M=%d, GPT-2 L=%d C=%d T=%d, B=%d, %d rounds x %d steps, costs "
           "profiled at start-up\n",
           P, M, L, C, T, M, rounds, steps);
    static double step_ms[MAX_FAMILIES][MAX_ROUNDS], ratio[MAX_FAMILIES][MAX_ROUNDS];
    static zb_pipeline_report_t last[MAX_FAMILIES];
    static bool ok[MAX_FAMILIES];
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    if (!rep)
        return 1;
    for (int r = 0; r < rounds; r++)
        for (size_t f = 0; f < nf; f++) {
            if (r > 0 && !ok[f])
                continue;
            ok[f] = run_once(&c, P, fam[f], rep);
            if (!ok[f])
                continue;
            step_ms[f][r] = rep->step_ms_median;
            ratio[f][r] = step_ms[0][r] > 0 ? rep->step_ms_median / step_ms[0][r] : 0;
            last[f] = *rep; /* the figures printed below; the per-rank arrays stay rep's */
            last[f].ranks = 0;
            last[f].peak_stash_bytes = last[f].predicted_stash_bytes = NULL;
            last[f].mem_predicted = last[f].mem_measured = NULL;
        }
    zb_pipeline_report_free(rep), free(rep);

    printf("%-17s %-6s %9s %8s %9s %9s %9s %9s\n", "schedule", "chunks", "step ms", "vs 1f1b",
           "bubble", "predicted", "span/pred", "busy/pred");
    for (size_t f = 0; f < nf; f++) {
        if (!ok[f])
            continue;
        const zb_pipeline_report_t *p = &last[f];
        const char *v = strstr(p->note, " v=");
        printf("%-17s %-6d %9.1f %7.3fx %8.1f%% %8.1f%% %9.2f %9.2f\n", fam[f],
               v ? atoi(v + 3) : 0, zb_median(step_ms[f], (size_t)rounds),
               ok[0] ? zb_median(ratio[f], (size_t)rounds) : 0, 100 * p->bubble_measured,
               100 * p->bubble_predicted,
               p->span_predicted > 0 ? p->span_measured / p->span_predicted : 0,
               p->busy_predicted > 0 ? p->busy_measured / p->busy_predicted : 0);
    }
    return 0;
}
