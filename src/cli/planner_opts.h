/* zbpp CLI — the option loop of the planner commands (plan, schedule, simulate, validate):
 * -h prints the help, the cost model's options fill a zb_cli_costs_t, the command's own options
 * go to its callback, and the first bad option or value ends the loop with its message. */
#ifndef ZBPP_CLI_PLANNER_OPTS_H
#define ZBPP_CLI_PLANNER_OPTS_H

#include <getopt.h>
#include <stdio.h>

#include "cli/args.h"
#include "zbpp/schedule.h"

/* A command's own option `c` (not -h, not a cost option) with its argument (NULL when it takes
 * none): store it in `own`; a bad value returns the status with err set. */
typedef zb_status_t (*zb_cli_own_option_fn)(void *own, int c, const char *arg, zb_err_t *err);

/* What the loop needs to know of a command. */
typedef struct {
    const char *name;                 /* "plan": messages say "zbpp plan: ..." */
    const char *optstring;            /* getopt_long's, starting with ':' and holding "h" */
    const struct option *longopts;    /* with {"help", ..., 'h'} */
    void (*help)(FILE *out);
    zb_cli_own_option_fn own;         /* NULL: the command has no options of its own */
    void *own_ctx;                    /* passed to `own` */
} zb_cli_command_t;

enum { ZB_CLI_OPTIONS_READ = -1 };

/* Read the options of argv (getopt_long from the start; operands begin at optind after) into
 * *copt, which it initialises first (free it with zb_cli_costs_free whatever this returns).
 * Returns ZB_CLI_OPTIONS_READ when all were read, else the exit status to return: ZB_EXIT_OK
 * after -h, that of zb_cli_bad_option or zb_cli_bad_value after a bad option or value (the
 * message printed). */
int zb_cli_planner_options(const zb_cli_command_t *cmd, int argc, char **argv,
                           zb_cli_costs_t *copt);

/* What simulate and validate read: the cost options, the FILE.csv operand, its schedule and
 * the cost model of its stages. */
typedef struct {
    zb_cli_costs_t copt;
    const char *file;
    zb_schedule_t *s;
    zb_costs_t costs;
    bool loaded; /* s and costs are set */
} zb_cli_csv_input_t;

/* The options (as zb_cli_planner_options), then the one FILE.csv operand, read with the cost
 * model they give (zb_cli_load_csv) and checked (zb_validate). Returns ZB_CLI_OPTIONS_READ with
 * all of *in set, else the exit status (the error printed; ZB_EXIT_FAIL for a schedule that is
 * not valid). Free *in with zb_cli_csv_input_free whatever it returns. */
int zb_cli_read_csv_command(const zb_cli_command_t *cmd, int argc, char **argv,
                            zb_cli_csv_input_t *in);
void zb_cli_csv_input_free(zb_cli_csv_input_t *in);

/* -o FILE, --format FMT and --width N of the commands that write a schedule (schedule,
 * simulate). zb_cli_output_option is a zb_cli_own_option_fn over a zb_cli_output_t. */
typedef struct {
    const char *path;     /* -o: NULL = standard output */
    zb_cli_format_t fmt;  /* default ascii */
    int width;            /* 0 = the ascii grid's default */
} zb_cli_output_t;

zb_status_t zb_cli_output_option(void *output, int c, const char *arg, zb_err_t *err);

#endif
