/* zbpp — command-line entry point: dispatch to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "zbpp/version.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command_t;

static const command_t commands[] = {
    {"schedule", zb_cmd_schedule, "generate a pipeline schedule and show or export it"},
    {"simulate", zb_cmd_simulate, "simulate a schedule read from a PyTorch CSV file"},
    {"validate", zb_cmd_validate, "check a schedule CSV: completeness, dependencies, memory, deadlock"},
    {"train", zb_cmd_train, "train a GPT-2 model (demo corpus, llm.c shards or text)"},
    {"plan", zb_cmd_plan, "compare every schedule family under a memory limit, best first"},
    {"profile", zb_cmd_profile, "measure a model's F/B/W per block and the schedules they imply"},
    {"plot", zb_cmd_plot, "draw a training metrics file (loss, lr, tokens/s) as an SVG chart"},
    {"generate", zb_cmd_generate, "sample text from a trained model (llm.c checkpoint, KV cache)"},
};

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
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "zbpp: unknown command '%s' (see zbpp --help)\n", argv[1]);
    return 2;
}
