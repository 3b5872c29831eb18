/* zbpp CLI — the pipeline flags of `zbpp train`: parsing, usage, and whether they route the run
 * through the pipeline trainer (running: pipeline_run.c; printing: pipeline_print.c). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/pipeline_flags.h"
#include "zbpp/checkpoint_sharded.h"
#include "zbpp/schedule_io.h"
#include "zbpp/transport.h"
#include "zbpp/util.h"

void zb_cli_pipeline_init(zb_cli_pipeline_t *pc)
{
    memset(pc, 0, sizeof *pc);
    zb_pipeline_opts_defaults(&pc->opts);
    pc->opts.profile = true; /* --partition profile: measuring costs a few microbatches' time */
}

static int bad(const char *a, const char *v, const char *want)
{
    fprintf(stderr, "zbpp train: %s expects %s, got '%s'\n", a, want, v);
    return -1;
}

static int parse_pos_int(const char *a, const char *v, int hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 1 || x > hi)
        return bad(a, v, "a positive integer");
    *out = (int)x;
    return 1;
}

static int parse_bytes(const char *a, const char *v, double scale, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x > 0) || !isfinite(x))
        return bad(a, v, "a positive number");
    *out = x * scale;
    return 1;
}

/* Every flag zb_cli_pipeline_flag takes (keep the two together). */
const char *const zb_cli_pipeline_flag_names[] = {
    "ranks", "dp", "schedule", "schedule-file", "chunks", "optimizer-sync", "mem-limit",
    "mem-limit-mb", "trace", "trace-svg", "partition", "transport", "comm-timeout",
    "recompute", "keep-activations", "checkpoint-format", "offload", NULL};

/* Why training refuses offload (zbpp schedule/plan plan it; nothing runs it yet). */
static const char offload_refusal[] =
    "CPU ranks have no second memory to move activations to, and GPU ranks cannot run O/L "
    "actions yet (plan offload with zbpp schedule|plan --offload)";

int zb_cli_pipeline_flag(zb_cli_pipeline_t *pc, const char *a, const char *v)
{
    zb_pipeline_opts_t *o = &pc->opts;
    int r = 0;
    if (!strcmp(a, "--ranks"))
        r = parse_pos_int(a, v, 1024, &o->ranks), pc->ranks_given = 1;
    else if (!strcmp(a, "--dp"))
        r = parse_pos_int(a, v, 1024, &o->dp), pc->dp_given = 1;
    else if (!strcmp(a, "--schedule")) {
        if (!zb_generator_find(v)) {
            const char *near = zb_cli_suggest_schedule(v);
            fprintf(stderr, "zbpp train: unknown schedule '%s'%s%s%s (see zbpp schedule --help)\n",
                    v, near ? ": did you mean " : "", near ? near : "", near ? "?" : "");
            return -1;
        }
        o->schedule = v, r = 1, pc->schedule_given = 1;
    }
    else if (!strcmp(a, "--schedule-file"))
        o->schedule_file = v, r = 1;
    else if (!strcmp(a, "--chunks"))
        r = parse_pos_int(a, v, 64, &o->chunks);
    else if (!strcmp(a, "--optimizer-sync")) {
        zb_err_t err;
        if (zb_opt_sync_parse(v, &o->opt_sync, &err) != ZB_OK) {
            fprintf(stderr, "zbpp train: %s\n", err.msg);
            return -1;
        }
        r = 1;
    } else if (!strcmp(a, "--mem-limit"))
        r = parse_bytes(a, v, 1.0, &o->mem_limit);
    else if (!strcmp(a, "--mem-limit-mb"))
        r = parse_bytes(a, v, 1024.0 * 1024.0, &o->mem_limit);
    else if (!strcmp(a, "--trace"))
        o->trace_path = v, r = 1;
    else if (!strcmp(a, "--trace-svg"))
        o->trace_svg_path = v, r = 1;
    else if (!strcmp(a, "--partition")) {
        if (strcmp(v, "flops") && strcmp(v, "profile"))
            return bad(a, v, "flops or profile");
        o->profile = !strcmp(v, "profile"), r = 1;
    }
    else if (!strcmp(a, "--transport")) {
        if (strcmp(v, "threads") && strcmp(v, "mpi"))
            return bad(a, v, "threads or mpi");
        pc->mpi = !strcmp(v, "mpi"), r = 1;
    } else if (!strcmp(a, "--comm-timeout")) {
        r = parse_bytes(a, v, 1.0, &o->timeout);
        if (r > 0 && o->timeout > ZB_TIMEOUT_MAX_S)
            r = bad(a, v, "a number of seconds up to 2592000 (30 days)");
        pc->timeout_given = 1;
    } else if (!strcmp(a, "--recompute")) {
        zb_err_t err;
        if (zb_recompute_parse(v, &o->recompute, &err) != ZB_OK) {
            fprintf(stderr, "zbpp train: %s\n", err.msg);
            return -1;
        }
        r = 1;
    } else if (!strcmp(a, "--offload")) {
        zb_err_t err;
        zb_offload_t mode;
        if (zb_offload_parse(v, &mode, &err) != ZB_OK) {
            fprintf(stderr, "zbpp train: %s\n", err.msg);
            return -1;
        }
        if (mode != ZB_OFFLOAD_NONE) {
            fprintf(stderr, "zbpp train: --offload %s: %s\n", v, offload_refusal);
            return -1;
        }
        r = 1;
    } else if (!strcmp(a, "--keep-activations")) {
        if (strcmp(v, "all") && strcmp(v, "selective"))
            return bad(a, v, "all or selective");
        o->keep = !strcmp(v, "selective") ? ZB_GPT2_KEEP_SELECTIVE : ZB_GPT2_KEEP_ALL, r = 1;
    } else if (!strcmp(a, "--checkpoint-format")) {
        if (strcmp(v, "file") && strcmp(v, "sharded"))
            return bad(a, v, "file or sharded");
        o->sharded_checkpoint = !strcmp(v, "sharded"), r = 1;
    }
    if (r != 0)
        pc->given = 1;
    if (r > 0 && (!strcmp(a, "--schedule") || !strcmp(a, "--chunks") || !strcmp(a, "--trace") ||
                  !strncmp(a, "--mem-limit", 11)))
        pc->routes = a;
    if (r > 0 && (!strcmp(a, "--optimizer-sync") || !strcmp(a, "--partition") ||
                  !strcmp(a, "--comm-timeout")))
        pc->inert = a;
    return r;
}

void zb_cli_pipeline_usage(FILE *out)
{
    fprintf(out,
            "pipeline (ranks are threads, or MPI processes with --transport mpi; bit-identical to --ranks 1):\n"
            "  --ranks P            pipeline ranks (default 1: the single-process trainer)\n"
            "  --dp N               N data-parallel replicas of the P-rank pipeline (N·P ranks;\n"
            "                       --batch is global, B/N sequences per replica; docs/runtime.md)\n"
            "  --schedule NAME      schedule family (default 1f1b; see zbpp schedule --help)\n"
            "  --schedule-file FILE train with a PyTorch pipelining CSV (compute-only or with\n"
            "                       comms; validated first); --ranks and --microbatches default\n"
            "                       to the file's and must agree with it\n"
            "  --chunks V           stages per rank (default: the family's)\n"
            "  --optimizer-sync post-validation|barrier   (default post-validation)\n"
            "  --mem-limit BYTES | --mem-limit-mb X   a limit on each rank's whole memory\n"
            "                       (parameters, gradients, optimizer state, messages and the\n"
            "                       activation peak): schedules that would exceed it are refused\n"
            "  --trace FILE         timeline of the last step, measured (FILE, Chrome trace JSON)\n"
            "                       and predicted (STEM.predicted.json), and both as SVG\n"
            "                       (STEM.svg, STEM.predicted.svg); STEM = FILE without .json\n"
            "  --trace-svg FILE.svg the last step measured vs predicted in one SVG chart (also\n"
            "                       at --ranks 1: the run then goes through the pipeline trainer)\n"
            "  --partition profile|flops   stage costs measured at start-up (a thread per core)\n"
            "                       (default) or from a FLOP model: they balance the partition,\n"
            "                       plan --schedule auto and give the predicted bubble\n"
            "  --transport threads|mpi   ranks as threads (default) or one per MPI process:\n"
            "                       mpirun -np P zbpp train --transport mpi ... (docs/mpi.md)\n"
            "  --comm-timeout S     a rank waiting longer than S seconds for another stops the\n"
            "                       run (default 60 with mpi, 600 with threads)\n"
            "  --recompute none|all|auto   activation recomputation: a non-saving F keeps only\n"
            "                       its input and an R redoes it before the backward (all), or\n"
            "                       only when the schedule would not fit --mem-limit (auto);\n"
            "                       same bits as none (default none)\n"
            "  --keep-activations all|selective   what a forward keeps: everything (default),\n"
            "                       or not the LayerNorm and GELU outputs, which the weight\n"
            "                       gradient (W) recomputes (selective recompute; same bits)\n"
            "  --checkpoint-format file|sharded   --save as one file (default) or one shard per\n"
            "                       rank + a manifest at the --save path (--resume reads both)\n");
}

int zb_cli_pipeline_wanted(const zb_cli_pipeline_t *pc, const zb_train_config_t *c)
{
    return pc->opts.ranks > 1 || pc->opts.dp > 1 || pc->mpi || pc->opts.sharded_checkpoint ||
           pc->opts.schedule_file || pc->opts.trace_svg_path || pc->routes ||
           pc->opts.recompute != ZB_RECOMPUTE_NONE || pc->opts.keep != ZB_GPT2_KEEP_ALL ||
           (c->resume_path && zb_ckpt_is_sharded(c->resume_path));
}

int zb_cli_pipeline_schedule_file(zb_cli_pipeline_t *pc, zb_train_config_t *c,
                                  bool microbatches_given)
{
    const char *path = pc->opts.schedule_file;
    if (!path)
        return 0;
    if (pc->schedule_given) {
        fprintf(stderr, "zbpp train: use either --schedule or --schedule-file, not both\n");
        return 2;
    }
    char *data = NULL;
    size_t len = 0;
    zb_err_t err;
    zb_schedule_t *s = NULL;
    zb_status_t st = zb_read_file(path, (size_t)256 << 20, &data, &len, &err);
    if (st == ZB_OK) {
        zb_err_t perr;
        if ((st = zb_csv_read(data, len, &s, &perr)) != ZB_OK)
            zb_err_set(&err, st, "schedule file %s: %s", path, perr.msg);
        free(data);
    }
    if (st != ZB_OK) {
        fprintf(stderr, "zbpp train: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (zb_schedule_has_offload(s)) {
        fprintf(stderr, "zbpp train: schedule file %s has offload (O/L) actions: %s\n", path,
                offload_refusal);
        rc = 2;
    } else if (pc->ranks_given && pc->opts.ranks != s->ranks) {
        fprintf(stderr, "zbpp train: schedule file %s has %d ranks (rows) but --ranks is %d\n",
                path, s->ranks, pc->opts.ranks);
        rc = 2;
    } else if (microbatches_given && c->microbatches != s->microbatches) {
        fprintf(stderr,
                "zbpp train: schedule file %s has %d microbatches but --microbatches is %d\n",
                path, s->microbatches, c->microbatches);
        rc = 2;
    } else {
        pc->opts.ranks = s->ranks;
        c->microbatches = s->microbatches;
    }
    zb_schedule_free(s);
    return rc;
}
