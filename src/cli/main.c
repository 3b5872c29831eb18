/* zbpp — command-line entry point: dispatch to a subcommand. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "zbpp/version.h"
#include "zbpp/workers.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    bool planner; /* runs on a worker group of every core it may use (the offload planner's
                     tries, schedule/offload_plan.c); the results do not depend on it */
} command_t;

static const command_t commands[] = {
    {"schedule", zb_cmd_schedule, "generate a pipeline schedule and show or export it", true},
    {"simulate", zb_cmd_simulate, "simulate a schedule read from a PyTorch CSV file", true},
    {"validate", zb_cmd_validate, "check a schedule CSV: completeness, dependencies, memory, deadlock", true},
    {"train", zb_cmd_train, "train a GPT-2 model (demo corpus, llm.c shards or text)", false},
    {"plan", zb_cmd_plan, "compare every schedule family under a memory limit, best first", true},
    {"profile", zb_cmd_profile, "measure a model's F/B/W per block and the schedules they imply", false},
    {"plot", zb_cmd_plot, "draw a training metrics file (loss, lr, tokens/s) as an SVG chart", false},
    {"generate", zb_cmd_generate, "sample text from a trained model (llm.c checkpoint, KV cache)", false},
};

/* A planner command on a worker group (unpinned: the helpers sleep when there is nothing to
 * share); without one (a single core, or threads that cannot start) it runs alone. */
static int run_planner(const command_t *c, int argc, char **argv)
{
    zb_workers_t *w = NULL;
    int n = zb_workers_default_threads(1);
    if (n > 1 && zb_workers_new(n, NULL, &w, NULL) != ZB_OK)
        w = NULL;
    zb_workers_t *prev = zb_workers_enter(w);
    int rc = c->run(argc, argv);
    zb_workers_enter(prev);
    zb_workers_free(w);
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: zbpp <command> [options]    (zbpp <command> --help for its flags)\n"
                 "       zbpp --version | version\n\n"
                 "Zero-bubble pipeline-parallel planning and training.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    zb_cli_blas_env(argv); /* may re-execute with OPENBLAS_NUM_THREADS=1 (cli/blas_env.c) */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        if (argc > 2) {
            fprintf(stderr, "zbpp: %s takes no arguments\n", argv[1]);
            return 2;
        }
        printf("zbpp %s\n", zb_version()); /* the library's; the headers' is the same build */
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].planner ? run_planner(&commands[i], argc - 1, argv + 1)
                                       : commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "zbpp: unknown command '%s' (see zbpp --help)\n", argv[1]);
    return 2;
}
