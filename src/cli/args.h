/* zbpp CLI — argument parsing helpers shared by every command.
 *
 * Every parser is strict (the whole string must be consumed, numbers finite, ranges checked) and
 * reports one line through zb_err_t naming the flag ("--cost: 'x' is not a number"). Commands
 * print it with zb_cli_error and exit 2 (bad usage). */
#ifndef ZBPP_CLI_ARGS_H
#define ZBPP_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "zbpp/error.h"
#include "zbpp/schedule.h"
#include "zbpp/util.h"

/* Exit statuses of a command (see cli.h). */
enum { ZB_EXIT_OK = 0, ZB_EXIT_FAIL = 1, ZB_EXIT_USAGE = 2 };

/* The one status -> exit code mapping of every command: ZB_OK 0; what the flags asked for is
 * wrong or cannot be combined (ZB_EINVAL, ZB_EMISMATCH) 2; anything that failed while doing it,
 * including what this build or machine cannot do (ZB_EUNSUPPORTED: no GPU, no MPI), 1. */
int zb_cli_exit_code(zb_status_t st);

/* getopt_long codes of the long-only options shared by the commands (values above any char). */
enum {
    ZB_OPT_COST = 1000,
    ZB_OPT_MEM,
    ZB_OPT_MEM_LIMIT,
    ZB_OPT_COST_FILE,
    ZB_OPT_FORMAT,
    ZB_OPT_WIDTH,
    ZB_OPT_HELP,
    ZB_OPT_RECOMPUTE,      /* --recompute none|all|auto */
    ZB_OPT_MEM_RECOMPUTE,  /* --mem-recompute X */
    ZB_OPT_RECOMPUTE_TIME, /* --recompute-time X */
    ZB_OPT_MEM_LIMIT_RANKS, /* --mem-limit-ranks a,b,... */
    ZB_OPT_OFFLOAD,         /* --offload none|all|auto */
    ZB_OPT_STASH_BYTES,     /* --stash-bytes X */
    ZB_OPT_COPY_BW,         /* --copy-bw D2H[,H2D] */
    ZB_OPT_COPY_LATENCY,    /* --copy-latency X */
};

/* The long options of the cost model, for a command's option table: --cost and --cost-file;
 * --mem and --mem-limit; the recompute mode and its costs. */
#define ZB_CLI_COST_OPTIONS                                                                        \
    {"cost", required_argument, NULL, ZB_OPT_COST},                                                \
        {"cost-file", required_argument, NULL, ZB_OPT_COST_FILE}
#define ZB_CLI_MEM_OPTIONS                                                                         \
    {"mem", required_argument, NULL, ZB_OPT_MEM},                                                  \
        {"mem-limit", required_argument, NULL, ZB_OPT_MEM_LIMIT}
#define ZB_CLI_RECOMPUTE_OPTIONS                                                                   \
    {"recompute", required_argument, NULL, ZB_OPT_RECOMPUTE},                                      \
        {"mem-recompute", required_argument, NULL, ZB_OPT_MEM_RECOMPUTE},                          \
        {"recompute-time", required_argument, NULL, ZB_OPT_RECOMPUTE_TIME}

/* The long options of the offload mode and costs, for a command's option table. */
#define ZB_CLI_OFFLOAD_OPTIONS                                                                     \
    {"offload", required_argument, NULL, ZB_OPT_OFFLOAD},                                          \
        {"stash-bytes", required_argument, NULL, ZB_OPT_STASH_BYTES},                              \
        {"copy-bw", required_argument, NULL, ZB_OPT_COPY_BW},                                      \
        {"copy-latency", required_argument, NULL, ZB_OPT_COPY_LATENCY}

/* Every option of the cost model (plan and schedule take them all). */
#define ZB_CLI_ALL_COST_OPTIONS                                                                    \
    ZB_CLI_COST_OPTIONS, ZB_CLI_MEM_OPTIONS,                                                       \
        {"mem-limit-ranks", required_argument, NULL, ZB_OPT_MEM_LIMIT_RANKS},                      \
        ZB_CLI_RECOMPUTE_OPTIONS, ZB_CLI_OFFLOAD_OPTIONS

/* Print "zbpp <cmd>: <message>" and a newline on stderr. */
void zb_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The message for an option getopt_long rejected ('?' or ':' returned, opterr = 0, optstring
 * starting with ':'): unknown option or missing argument. Prints it; returns ZB_EXIT_USAGE. */
int zb_cli_bad_option(const char *cmd, int c, char **argv);

/* An option value the parser rejected (err filled by it): prints the message; returns the exit
 * status: ZB_EXIT_FAIL for an unreadable file (ZB_EIO, e.g. --cost-file), else ZB_EXIT_USAGE. */
int zb_cli_bad_value(const char *cmd, zb_status_t st, const zb_err_t *err);

/* Operands left after the options, argv[first..argc-1]. zb_cli_no_operands: true when there are
 * none, else prints "unexpected argument '...'". zb_cli_one_file: the single FILE.csv operand,
 * or NULL after printing that it is missing or that there are several. */
bool zb_cli_no_operands(const char *cmd, int argc, char **argv, int first);
const char *zb_cli_one_file(const char *cmd, int argc, char **argv, int first);

/* Check, before any work starts, that `path` (given with `flag`) can be written as
 * zb_atomic_open writes it (zb_atomic_check: no dangling symlink, no directory, no FIFO nobody
 * reads, an existing writable directory). ZB_EIO with a message naming the flag otherwise, so a
 * long run never ends in "cannot write". A FIFO with a reader is kept open for writing until
 * the process exits (its reader must not see end-of-file before the real write). */
zb_status_t zb_cli_check_writable(const char *flag, const char *path, zb_err_t *err);

/* The schedule family `name` was probably meant to be ("zb-h1" for "zbh1" or "zb-hh1"): the
 * nearest family name by edit distance when it is close and unique, else NULL. */
const char *zb_cli_suggest_schedule(const char *name);

/* A finite number; with nonneg also >= 0. `what` names the flag in the message. */
zb_status_t zb_cli_parse_number(const char *s, bool nonneg, const char *what, double *out,
                                zb_err_t *err);
/* A decimal integer in [lo, hi]. */
zb_status_t zb_cli_parse_int(const char *s, int lo, int hi, const char *what, int *out,
                             zb_err_t *err);
/* A comma-separated list of min_n..max_n finite numbers (each >= 0 with nonneg), e.g. "1,1,1"
 * or "1,1,0.7,0.05". *n receives the count. */
zb_status_t zb_cli_parse_list(const char *s, int min_n, int max_n, bool nonneg, const char *what,
                              double *out, int *n, zb_err_t *err);

/* The training flags' values (flag_values.c): the whole word, in range, or one line
 * "<flag> expects <what>, got '<word>'" (ZB_EINVAL). */
/* An integer in [lo, hi]. */
zb_status_t zb_cli_flag_long(const char *s, long lo, long hi, const char *flag, long *out,
                             zb_err_t *err);
zb_status_t zb_cli_flag_int(const char *s, int lo, int hi, const char *flag, int *out,
                            zb_err_t *err);
/* An integer in [1, hi], said as "a positive integer" (a count of ranks, replicas, chunks). */
zb_status_t zb_cli_flag_count(const char *s, int hi, const char *flag, int *out, zb_err_t *err);
/* A finite number >= lo. */
zb_status_t zb_cli_flag_float(const char *s, float lo, const char *flag, float *out,
                              zb_err_t *err);
/* A finite number > 0. */
zb_status_t zb_cli_flag_positive(const char *s, const char *flag, double *out, zb_err_t *err);
/* A non-negative integer up to 2^64 - 1 (a seed). */
zb_status_t zb_cli_flag_u64(const char *s, const char *flag, uint64_t *out, zb_err_t *err);
/* One of names (NULL-terminated): its index; else "expects a, b or c". */
zb_status_t zb_cli_flag_choice(const char *s, const char *const names[], const char *flag,
                               int *out, zb_err_t *err);

/* Output formats of the planner commands. */
typedef enum {
    ZB_FMT_ASCII,
    ZB_FMT_CSV,
    ZB_FMT_CSV_COMMS,
    ZB_FMT_JSON,
    ZB_FMT_TRACE,
    ZB_FMT_SVG,
} zb_cli_format_t;

/* "ascii" -> ZB_FMT_ASCII, ...; the message lists the known names. */
zb_status_t zb_cli_parse_format(const char *s, zb_cli_format_t *out, zb_err_t *err);
/* "ascii|csv|csv-comms|json|trace|svg" for --help. */
const char *zb_cli_format_names(void);

/* -o FILE: an atomic file (nothing appears at `path` until commit; an existing file is untouched
 * on failure) or stdout when path is NULL or "-". */
typedef struct {
    zb_atomic_file_t af;
    FILE *f;       /* write here */
    bool atomic;
} zb_cli_out_t;

zb_status_t zb_cli_out_open(zb_cli_out_t *o, const char *path, zb_err_t *err);
/* Finish: rename into place (file) or flush (stdout). On failure nothing is left behind. */
zb_status_t zb_cli_out_commit(zb_cli_out_t *o, zb_err_t *err);
/* Drop what was written (the temp file is removed; stdout output cannot be taken back). */
void zb_cli_out_abort(zb_cli_out_t *o);

/* Cost and memory options: --cost F,B,W[,C] --mem F,B,W --mem-limit X --cost-file FILE. */
typedef struct {
    double t[4];          /* F, B, W, C (comm); default 1,1,1,0 */
    double mem[3];        /* M_F, M_B, M_W; default 1,0,-1 */
    double mem_limit;     /* INFINITY = none */
    double *rank_limits;  /* --mem-limit-ranks: one limit per rank (NULL = none) */
    int n_rank_limits;
    bool cost_given;      /* --cost seen (conflicts with --cost-file) */
    const char *cost_file;
    int file_stages;      /* stages in the cost file (0 = none loaded) */
    double *file_t;       /* [file_stages][4]: F, B, W, C per stage */
    /* Recompute: the mode (schedule, plan) and its two costs (every planner command). */
    zb_recompute_t recompute; /* default none */
    double mem_keep;          /* --mem-recompute: memory a non-saving F keeps (default 0) */
    double r_time;            /* --recompute-time: R's duration; NAN = each stage's F time */
    bool recompute_given;     /* --mem-recompute or --recompute-time seen */
    /* Offload: the mode (schedule, plan) and the copy costs (every planner command). */
    zb_offload_t offload;     /* default none */
    double stash_bytes;       /* --stash-bytes: one rank's share; NAN = M_F (memory units) */
    double copy_bw[2];        /* --copy-bw: device->host, host->device; 0 = a copy takes T_F */
    double copy_latency;      /* --copy-latency */
} zb_cli_costs_t;

void zb_cli_costs_init(zb_cli_costs_t *c);
void zb_cli_costs_free(zb_cli_costs_t *c);
/* Handle one of ZB_OPT_COST, ZB_OPT_MEM, ZB_OPT_MEM_LIMIT, ZB_OPT_MEM_LIMIT_RANKS (one limit
 * per rank, each >= 0 or "inf"; they replace --mem-limit), ZB_OPT_COST_FILE (and the three
 * recompute options: the mode, the kept memory >= 0, the R time >= 0; and the four offload
 * options: the mode, stash bytes, bandwidths and latency, each >= 0) with its argument.
 * --cost-file is read and checked here: rows "stage,F,B,W,C" ('#' comments, blank lines and an
 * optional header "stage,F,B,W,C" allowed), every stage 0..S-1 exactly once. */
zb_status_t zb_cli_costs_option(zb_cli_costs_t *c, int opt, const char *arg, zb_err_t *err);
/* Build the cost model for `stages` stages, `chunks` per rank. The uniform flags (--cost F,B,W,
 * --mem, --recompute-time, --mem-recompute) are one rank's share of the model, so each stage gets
 * them divided by `chunks` (C and --mem-limit are not divided); a cost file's rows are per stage
 * and must cover exactly `stages` stages. Memory deltas, limit and offload costs (stash bytes
 * divided by `chunks` too) included; with a recompute mode
 * other than none or a recompute cost given, also t_r and m_keep (ZB_EINVAL when the kept
 * memory exceeds an F's). --mem-limit-ranks must give stages/chunks limits (ZB_EINVAL naming
 * both counts otherwise). Free with zb_costs_free. */
zb_status_t zb_cli_costs_build(const zb_cli_costs_t *c, int stages, int chunks, zb_costs_t *out,
                               zb_err_t *err);
/* The --help text for the four cost options (shared wording). */
void zb_cli_costs_help(FILE *out, bool with_times);
/* The --help text for --recompute (with_mode), --mem-recompute and --recompute-time. */
void zb_cli_recompute_help(FILE *out, bool with_mode, bool with_time);
/* The --help text for --offload (with_mode) and the copy costs. */
void zb_cli_offload_help(FILE *out, bool with_mode);
/* The three above in full: every cost, recompute and offload option (schedule, simulate). */
void zb_cli_all_costs_help(FILE *out);
/* A ZB_OPT_OFFLOAD/STASH_BYTES/COPY_BW/COPY_LATENCY option (zb_cli_costs_option handles them). */
bool zb_cli_is_offload_option(int opt);
/* Any option zb_cli_costs_option handles (cost, memory, recompute and offload options). */
bool zb_cli_is_costs_option(int opt);

#endif
