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

/* "--name" of a pipeline flag, for the warnings that name it */
static const char *flag_name(int id)
{
#define ZB_CLI_PIPELINE_NAME(fid, name) case ZB_OPT_PIPE_##fid: return "--" name;
    switch (id) {
    ZB_CLI_PIPELINE_FLAGS(ZB_CLI_PIPELINE_NAME)
    default: return "?";
    }
#undef ZB_CLI_PIPELINE_NAME
}

/* Why a CPU run refuses offload. */
static const char offload_refusal[] =
    "a CPU rank has no second memory to offload activations to (GPU ranks: --device cuda)";

/* --mem-limit / --mem-limit-mb: one value for every rank, or one per rank separated by commas
 * (rank 0 first; the pipeline checks that there are as many as ranks), times `unit` bytes. */
static zb_status_t mem_limits(zb_cli_pipeline_t *pc, const char *v, const char *a, double unit,
                              zb_err_t *err)
{
    zb_pipeline_opts_t *o = &pc->opts;
    const int cap = (int)(sizeof pc->mem_limits / sizeof *pc->mem_limits);
    o->mem_limit_ranks = NULL, o->mem_limit_ranks_n = 0, o->mem_limit = 0;
    if (!strchr(v, ',')) {
        zb_status_t st = zb_cli_flag_positive(v, a, &o->mem_limit, err);
        o->mem_limit *= unit;
        return st;
    }
    int n = 0;
    for (const char *p = v;; n++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[64];
        if (n == cap)
            return zb_err_set(err, ZB_EINVAL, "%s: more than %d values", a, cap);
        if (len == 0 || len >= sizeof item)
            return zb_err_set(err, ZB_EINVAL,
                              "%s expects one positive number, or one per rank separated by "
                              "commas, got '%s'", a, v);
        memcpy(item, p, len);
        item[len] = '\0';
        zb_status_t st = zb_cli_flag_positive(item, a, &pc->mem_limits[n], err);
        if (st != ZB_OK)
            return st;
        pc->mem_limits[n] *= unit;
        if (!end)
            break;
        p = end + 1;
    }
    o->mem_limit_ranks = pc->mem_limits, o->mem_limit_ranks_n = n + 1;
    return ZB_OK;
}

zb_status_t zb_cli_pipeline_option(zb_cli_pipeline_t *pc, int id, const char *v, zb_err_t *err)
{
    static const char *const partitions[] = {"flops", "profile", NULL};
    static const char *const transports[] = {"threads", "mpi", NULL};
    static const char *const keeps[] = {"all", "selective", NULL};
    static const char *const formats[] = {"file", "sharded", NULL};
    zb_pipeline_opts_t *o = &pc->opts;
    const char *a = flag_name(id);
    zb_status_t st = ZB_OK;
    int k = 0;
    switch (id) {
    case ZB_OPT_PIPE_RANKS:
        st = zb_cli_flag_count(v, 1024, a, &o->ranks, err);
        pc->ranks_given = 1;
        break;
    case ZB_OPT_PIPE_DP:
        st = zb_cli_flag_count(v, 1024, a, &o->dp, err);
        pc->dp_given = 1;
        break;
    case ZB_OPT_PIPE_SCHEDULE:
        if (!zb_generator_find(v)) {
            const char *near = zb_cli_suggest_schedule(v);
            return zb_err_set(err, ZB_EINVAL,
                              "unknown schedule '%s'%s%s%s (see zbpp schedule --help)", v,
                              near ? ": did you mean " : "", near ? near : "", near ? "?" : "");
        }
        o->schedule = v;
        pc->schedule_given = 1;
        break;
    case ZB_OPT_PIPE_SCHEDULE_FILE: o->schedule_file = v; break;
    case ZB_OPT_PIPE_CHUNKS: st = zb_cli_flag_count(v, 64, a, &o->chunks, err); break;
    case ZB_OPT_PIPE_OPTIMIZER_SYNC: st = zb_opt_sync_parse(v, &o->opt_sync, err); break;
    case ZB_OPT_PIPE_MEM_LIMIT: st = mem_limits(pc, v, a, 1.0, err); break;
    case ZB_OPT_PIPE_MEM_LIMIT_MB: st = mem_limits(pc, v, a, 1024.0 * 1024.0, err); break;
    case ZB_OPT_PIPE_TRACE: o->trace_path = v; break;
    case ZB_OPT_PIPE_TRACE_SVG: o->trace_svg_path = v; break;
    case ZB_OPT_PIPE_PARTITION:
        if ((st = zb_cli_flag_choice(v, partitions, a, &k, err)) == ZB_OK)
            o->profile = k == 1;
        break;
    case ZB_OPT_PIPE_TRANSPORT:
        if ((st = zb_cli_flag_choice(v, transports, a, &k, err)) == ZB_OK)
            pc->mpi = k == 1;
        break;
    case ZB_OPT_PIPE_COMM_TIMEOUT:
        st = zb_cli_flag_positive(v, a, &o->timeout, err);
        if (st == ZB_OK && o->timeout > ZB_TIMEOUT_MAX_S)
            st = zb_err_set(err, ZB_EINVAL, "%s expects a number of seconds up to 2592000 "
                                            "(30 days), got '%s'", a, v);
        pc->timeout_given = 1;
        break;
    case ZB_OPT_PIPE_RECOMPUTE: st = zb_recompute_parse(v, &o->recompute, err); break;
    case ZB_OPT_PIPE_OFFLOAD: st = zb_offload_parse(v, &o->offload, err); break;
    case ZB_OPT_PIPE_KEEP_ACTIVATIONS:
        if ((st = zb_cli_flag_choice(v, keeps, a, &k, err)) == ZB_OK)
            o->keep = k == 1 ? ZB_GPT2_KEEP_SELECTIVE : ZB_GPT2_KEEP_ALL;
        break;
    case ZB_OPT_PIPE_CHECKPOINT_FORMAT:
        if ((st = zb_cli_flag_choice(v, formats, a, &k, err)) == ZB_OK)
            o->sharded_checkpoint = k == 1;
        break;
    default: return zb_err_set(err, ZB_EINVAL, "internal: option %d is not a pipeline flag", id);
    }
    pc->given = 1;
    if (st != ZB_OK)
        return st;
    if (id == ZB_OPT_PIPE_SCHEDULE || id == ZB_OPT_PIPE_CHUNKS || id == ZB_OPT_PIPE_TRACE ||
        id == ZB_OPT_PIPE_MEM_LIMIT || id == ZB_OPT_PIPE_MEM_LIMIT_MB)
        pc->routes = a;
    if (id == ZB_OPT_PIPE_OPTIMIZER_SYNC || id == ZB_OPT_PIPE_PARTITION ||
        id == ZB_OPT_PIPE_COMM_TIMEOUT)
        pc->inert = a;
    return ZB_OK;
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
            "                       activation peak): schedules that would exceed it are refused;\n"
            "                       or one value per rank, comma-separated (rank 0 first)\n"
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
            "  --offload none|all|auto   GPU ranks: each stash to pinned host memory after its F\n"
            "                       and back before its B (all), or keep, offload or recompute\n"
            "                       each as --mem-limit needs (auto); same bits (default none)\n"
            "  --keep-activations all|selective   what a forward keeps: everything (default),\n"
            "                       or not the LayerNorm and GELU outputs, which the weight\n"
            "                       gradient (W) recomputes (selective recompute; same bits)\n"
            "  --checkpoint-format file|sharded   --save as one file (default) or one shard per\n"
            "                       rank + a manifest at the --save path (--resume reads both)\n");
}

int zb_cli_pipeline_offload(const zb_cli_pipeline_t *pc, bool cuda)
{
    if (cuda)
        return 0;
    if (pc->opts.offload != ZB_OFFLOAD_NONE)
        fprintf(stderr, "zbpp train: --offload %s: %s\n", zb_offload_name(pc->opts.offload),
                offload_refusal);
    else if (pc->file_offloads)
        fprintf(stderr, "zbpp train: schedule file %s has offload (O/L) actions: %s\n",
                pc->opts.schedule_file, offload_refusal);
    else
        return 0;
    return 2;
}

int zb_cli_pipeline_wanted(const zb_cli_pipeline_t *pc, const zb_train_config_t *c)
{
    return pc->opts.ranks > 1 || pc->opts.dp > 1 || pc->mpi || pc->opts.sharded_checkpoint ||
           pc->opts.schedule_file || pc->opts.trace_svg_path || pc->routes ||
           pc->opts.recompute != ZB_RECOMPUTE_NONE || pc->opts.keep != ZB_GPT2_KEEP_ALL ||
           pc->opts.offload != ZB_OFFLOAD_NONE ||
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
    pc->file_offloads = zb_schedule_has_offload(s);
    if (pc->ranks_given && pc->opts.ranks != s->ranks) {
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
