/* zbpp profile — measure F, B, W of every part of a GPT-2 model for one microbatch on this
 * machine (one core, single-threaded BLAS), then show what those costs mean for a pipeline:
 * per-stage times and memory for a --ranks/--chunks partition and the schedule comparison
 * (zb_plan_compare) under those costs. Library side: zbpp/profile.h. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/device_flags.h"
#include "cli/pipeline_print.h"
#include "zbpp/pipeline.h"
#include "zbpp/nn.h"
#include "zbpp/plan.h"
#include "zbpp/profile.h"
#include "zbpp/train.h"
#include "zbpp/workers.h"

#define CMD "profile"
#define MIB (1024.0 * 1024.0)

enum {
    OPT_INIT_FROM = 3000,
    OPT_LAYERS,
    OPT_HEADS,
    OPT_CHANNELS,
    OPT_VOCAB,
    OPT_MAX_SEQ,
    OPT_BATCH,
    OPT_SEQ,
    OPT_MICROBATCHES,
    OPT_CHUNKS,
    OPT_PLACEMENT,
    OPT_REPS,
    OPT_MEM_LIMIT_MB,
    OPT_TIME_LIMIT,
    OPT_WRITE_COSTS,
    OPT_NO_PIN,
    OPT_THREADS,
};

static void help(FILE *out)
{
    fputs("usage: zbpp profile [model and batch flags as zbpp train] [--ranks P] [--chunks V]\n"
          "                    [--reps N] [--mem-limit-mb X] [--format table|json]\n\n"
          "Time forward (F), input-gradient backward (B) and weight-gradient backward (W) of the\n"
          "embedding, every transformer block and the head (final LayerNorm + LM head + loss)\n"
          "for one microbatch of B/M sequences with single-threaded BLAS, one thread per core on\n"
          "min(P, cores) cores at once as the ranks would run (median of --reps after a\n"
          "warm-up), and one activation message between two rank threads. Then\n"
          "partition the blocks into P x V stages balancing the measured F+B+W and show each\n"
          "stage's times and memory deltas and how every schedule family would do with them.\n\n"
          "model: --init-from FILE (llm.c .bin) | --layers L (2) --heads NH (4) --channels C (64)\n"
          "       --vocab V (257) --max-seq N (= --seq)\n"
          "batch: --batch B (4) --seq T (64) --microbatches M (1): a microbatch is B/M sequences\n"
          "  -p, --ranks P          pipeline ranks (default 2)\n"
          "  --chunks V             stages per rank (default 1)\n"
          "  --placement loop|v     where a rank's stages sit when V = 2 (default loop)\n"
          "  --reps N               timed repetitions, median kept (default 5)\n"
          "  --mem-limit-mb X       activation memory limit per rank for the comparison\n"
          "  --time-limit S         seconds for the exact solver (optimal; default 2)\n"
          "  --write-costs FILE     per-stage costs as 'stage,F,B,W,C' (ms) for\n"
          "                         zbpp schedule/plan --cost-file\n"
          "  --no-pin               do not pin the measuring thread to a core\n"
          "  --threads N            threads per rank, as zbpp train --threads (default: the\n"
          "                         cores this process may use divided among the P ranks)\n"
          "  --format table|json    output (default table; json: seconds and bytes)\n",
          out);
    zb_cli_device_usage(out);
    fputs("  (with --device cuda each phase is timed over 4 microbatches back to back between\n"
          "   device synchronisations; the message is device -> host -> device)\n", out);
}

typedef struct {
    zb_train_config_t c;
    const char *init_from, *write_costs;
    int ranks, chunks, reps;
    zb_placement_t placement;
    double mem_limit, time_limit;
    bool json, pin, model_flag;
    zb_cli_device_t dev; /* --device, --precision, --tf32 */
    char device_desc[320]; /* "cuda:0 <name>, <precision>" when on a GPU */
} opts_t;

/* A flag of the model's shape (an integer in [1, hi]); it is noted that one was given. */
static zb_status_t model_int(opts_t *o, const char *arg, int hi, const char *flag, int *out,
                             zb_err_t *err)
{
    o->model_flag = true;
    return zb_cli_parse_int(arg, 1, hi, flag, out, err);
}

static zb_status_t parse(opts_t *o, int argc, char **argv, int *rc, zb_err_t *err)
{
    static const struct option longopts[] = {
        {"init-from", required_argument, NULL, OPT_INIT_FROM},
        {"layers", required_argument, NULL, OPT_LAYERS},
        {"heads", required_argument, NULL, OPT_HEADS},
        {"channels", required_argument, NULL, OPT_CHANNELS},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"max-seq", required_argument, NULL, OPT_MAX_SEQ},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"seq", required_argument, NULL, OPT_SEQ},
        {"microbatches", required_argument, NULL, OPT_MICROBATCHES},
        {"ranks", required_argument, NULL, 'p'},
        {"chunks", required_argument, NULL, OPT_CHUNKS},
        {"placement", required_argument, NULL, OPT_PLACEMENT},
        {"reps", required_argument, NULL, OPT_REPS},
        {"mem-limit-mb", required_argument, NULL, OPT_MEM_LIMIT_MB},
        {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
        {"write-costs", required_argument, NULL, OPT_WRITE_COSTS},
        {"no-pin", no_argument, NULL, OPT_NO_PIN},
        {"threads", required_argument, NULL, OPT_THREADS},
        ZB_CLI_DEVICE_OPTIONS
        {"format", required_argument, NULL, ZB_OPT_FORMAT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const int big = 1 << 24;
    zb_gpt2_config_t *m = &o->c.model;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":p:h", longopts, NULL)) != -1) {
        zb_status_t st = ZB_OK;
        switch (c) {
        case OPT_INIT_FROM: o->init_from = optarg; break;
        case OPT_LAYERS: st = model_int(o, optarg, 4096, "--layers", &m->layers, err); break;
        case OPT_HEADS: st = model_int(o, optarg, big, "--heads", &m->heads, err); break;
        case OPT_CHANNELS: st = model_int(o, optarg, big, "--channels", &m->channels, err); break;
        case OPT_VOCAB: st = model_int(o, optarg, big, "--vocab", &m->vocab, err); break;
        case OPT_MAX_SEQ: st = model_int(o, optarg, big, "--max-seq", &m->max_seq, err); break;
        case OPT_BATCH: st = zb_cli_parse_int(optarg, 1, big, "--batch", &o->c.batch, err); break;
        case OPT_SEQ: st = zb_cli_parse_int(optarg, 1, big, "--seq", &o->c.seq, err); break;
        case OPT_MICROBATCHES:
            st = zb_cli_parse_int(optarg, 1, 100000, "--microbatches", &o->c.microbatches, err);
            break;
        case 'p': st = zb_cli_parse_int(optarg, 1, 1024, "--ranks", &o->ranks, err); break;
        case OPT_CHUNKS: st = zb_cli_parse_int(optarg, 1, 64, "--chunks", &o->chunks, err); break;
        case OPT_PLACEMENT:
            if (!strcmp(optarg, "loop") || !strcmp(optarg, "v"))
                o->placement = !strcmp(optarg, "v") ? ZB_PLACE_V : ZB_PLACE_LOOP;
            else
                st = zb_err_set(err, ZB_EINVAL, "--placement: '%s' is not loop or v", optarg);
            break;
        case OPT_REPS: st = zb_cli_parse_int(optarg, 1, 1000, "--reps", &o->reps, err); break;
        case OPT_MEM_LIMIT_MB:
            st = zb_cli_parse_number(optarg, true, "--mem-limit-mb", &o->mem_limit, err);
            if (st == ZB_OK && !(o->mem_limit > 0))
                st = zb_err_set(err, ZB_EINVAL, "--mem-limit-mb: must be > 0");
            o->mem_limit *= MIB;
            break;
        case OPT_TIME_LIMIT:
            st = zb_cli_parse_number(optarg, true, "--time-limit", &o->time_limit, err);
            break;
        case OPT_WRITE_COSTS: o->write_costs = optarg; break;
        case OPT_NO_PIN: o->pin = false; break;
        case OPT_THREADS:
            st = zb_cli_parse_int(optarg, 1, ZB_WORKERS_MAX, "--threads", &o->c.threads, err);
            break;
        case ZB_OPT_DEV_DEVICE:
        case ZB_OPT_DEV_PRECISION:
        case ZB_OPT_DEV_TF32:
        case ZB_OPT_DEV_FP32_ATTENTION: zb_cli_device_option(&o->dev, c, optarg); break;
        case ZB_OPT_FORMAT:
            if (!strcmp(optarg, "table") || !strcmp(optarg, "json"))
                o->json = !strcmp(optarg, "json");
            else
                st = zb_err_set(err, ZB_EINVAL, "--format: '%s' is not table or json", optarg);
            break;
        case 'h': help(stdout); *rc = ZB_EXIT_OK; return ZB_EUNSUPPORTED;
        default: *rc = zb_cli_bad_option(CMD, c, argv); return ZB_EUNSUPPORTED;
        }
        if (st != ZB_OK)
            return st;
    }
    if (optind < argc)
        return zb_err_set(err, ZB_EINVAL, "unexpected argument '%s' (see zbpp profile --help)",
                          argv[optind]);
    if (o->model_flag && o->init_from)
        return zb_err_set(err, ZB_EINVAL,
                          "--layers/--heads/--channels/--vocab/--max-seq describe a fresh model; "
                          "the shape comes from --init-from");
    if (o->c.batch % o->c.microbatches)
        return zb_err_set(err, ZB_EINVAL, "--batch %d is not divisible by --microbatches %d",
                          o->c.batch, o->c.microbatches);
    if (o->placement == ZB_PLACE_V && o->chunks != 2)
        return zb_err_set(err, ZB_EINVAL, "--placement v needs --chunks 2");
    return ZB_OK;
}

/* ---- output ---- */

static const char *part_name(int k, int L, char *buf, size_t n)
{
    if (k == 0)
        return "embedding";
    if (k == L + 1)
        return "head";
    snprintf(buf, n, "block %d", k - 1);
    return buf;
}

static zb_op_time_t part_time(const zb_profile_t *p, int k)
{
    return k == 0 ? p->embed : k == p->layers + 1 ? p->head : p->block[k - 1];
}

/* Whole-rank memory of every rank under the fastest fitting family with this profile's chunking
 * and placement (the stage costs sc are for those), as zbpp train would predict it. rep->note
 * names the family; *found = false when no family qualifies. */
static zb_status_t best_rank_memory(const opts_t *o, const zb_profile_t *p, const int *first,
                                    const zb_costs_t *sc, const zb_plan_t *plan,
                                    zb_pipeline_report_t *rep, bool *found, zb_err_t *err)
{
    *found = false;
    for (int i = 0; i < plan->count; i++) {
        const zb_plan_row_t *r = &plan->rows[i];
        if (!r->fits || r->chunks != o->chunks ||
            (o->chunks == 2 && r->placement != o->placement))
            continue;
        zb_gen_params_t gp = {.ranks = o->ranks, .microbatches = o->c.microbatches,
                              .chunks = o->chunks, .costs = sc};
        zb_schedule_t *s = NULL;
        if (zb_generate(r->family, &gp, &s, NULL) != ZB_OK || s->placement != o->placement) {
            zb_schedule_free(s);
            continue;
        }
        zb_status_t st = zb_pipeline_predict_memory(&p->cfg, first, s, sc, p->batch, p->seq,
                                                    ZB_OPT_SYNC_POST_VALIDATION,
                                                    ZB_GPT2_KEEP_ALL, rep->mem_predicted, err);
        snprintf(rep->note, sizeof rep->note, "%s", r->family);
        zb_schedule_free(s);
        *found = st == ZB_OK;
        return st;
    }
    return ZB_OK;
}

static void print_rank_memory(const opts_t *o, const zb_profile_t *p, const int *first,
                              const zb_costs_t *sc, const zb_plan_t *plan, bool json)
{
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    zb_err_t err;
    bool found = false;
    zb_status_t st = rep ? zb_pipeline_report_init(rep, o->ranks, &err) : ZB_ENOMEM;
    if (st == ZB_OK)
        st = best_rank_memory(o, p, first, sc, plan, rep, &found, &err);
    if (json) {
        printf("  \"rank_memory\": ");
        if (!found) {
            printf("null,\n");
        } else {
            printf("{\"family\": \"%s\", \"ranks\": [", rep->note);
            for (int r = 0; r < o->ranks && r < 1024; r++) {
                const zb_rank_mem_t *m = &rep->mem_predicted[r];
                printf("%s\n    {\"params\": %.17g, \"grads\": %.17g, \"optimizer\": %.17g, "
                       "\"backup\": %.17g, \"messages\": %.17g, \"activations\": %.17g, "
                       "\"workspace\": %.17g, \"total\": %.17g, \"stash_alloc\": %.17g}",
                       r ? "," : "", m->params, m->grads, m->optimizer, m->backup, m->messages,
                       m->activations, m->workspace, m->total, m->stash_alloc);
            }
            printf("\n  ]},\n");
        }
    } else if (found) {
        printf("\nwhole-rank memory if trained with %s (predicted; zbpp train also measures it):\n",
               rep->note);
        zb_cli_print_rank_memory(rep, o->ranks, 0, NULL);
    } else if (st != ZB_OK) {
        printf("\nwhole-rank memory: not predicted (%s)\n", rep ? err.msg : "out of memory");
    }
    zb_pipeline_report_free(rep), free(rep);
}

static void print_table(const opts_t *o, const zb_profile_t *p, const int *first,
                        const zb_costs_t *sc, const zb_plan_t *plan)
{
    const zb_gpt2_config_t *m = &p->cfg;
    int L = p->layers, S = sc->stages;
    printf("profile: GPT-2 L=%d C=%d NH=%d V=%d, microbatch %d x %d tokens, %s, median of %d x %d "
           "ranks measuring at once, %d thread%s each (took %.0f ms)\n",
           L, m->channels, m->heads, m->vocab, p->batch, p->seq,
           o->dev.cuda ? o->device_desc : zb_blas_init(), p->reps,
           p->threads, p->rank_threads, p->rank_threads == 1 ? "" : "s", p->wall * 1e3);
    printf("%-10s %9s %9s %9s %9s\n", "part", "F ms", "B ms", "W ms", "F+B+W ms");
    char buf[32];
    for (int k = 0; k < L + 2; k++) {
        zb_op_time_t t = part_time(p, k);
        printf("%-10s %9.3f %9.3f %9.3f %9.3f\n", part_name(k, L, buf, sizeof buf), t.f * 1e3,
               t.b * 1e3, t.w * 1e3, (t.f + t.b + t.w) * 1e3);
    }
    printf("message of %.1f KiB %s: %.3f ms\n", p->msg_bytes / 1024.0,
           o->dev.cuda ? "device -> host -> device" : "between rank threads", p->comm * 1e3);
    if (p->copy_d2h > 0) /* what --offload's copies are planned with */
        printf("to page-locked host memory %.1f GB/s, back %.1f GB/s per rank with %d ranks "
               "copying; %.1f and %.1f GB/s alone; %.1f GB/s in all with every rank copying "
               "both ways\n", p->copy_d2h / 1e9, p->copy_h2d / 1e9, p->threads,
               p->copy_d2h_alone / 1e9, p->copy_h2d_alone / 1e9, p->copy_both / 1e9);
    if (p->share.n > 1 && p->share.copy_slow[0] > 0)
        printf("a block beside the ranks' copies: F %.3f, B %.3f, W %.3f of its time without\n",
               p->share.copy_slow[0], p->share.copy_slow[1], p->share.copy_slow[2]);
    printf("\n");
    printf("stages for P=%d ranks x V=%d chunks (%s placement), partition balancing F+B+W:\n",
           o->ranks, o->chunks, zb_placement_name(o->placement));
    printf("%-5s %-4s %-7s %8s %8s %8s %9s %9s %9s %9s\n", "stage", "rank", "blocks", "T_F ms",
           "T_B ms", "T_W ms", "M_F MiB", "M_B MiB", "M_W MiB", "keep MiB");
    for (int s = 0; s < S; s++) {
        char blocks[24];
        snprintf(blocks, sizeof blocks, "%d-%d", first[s], first[s + 1] - 1);
        printf("%-5d %-4d %-7s %8.3f %8.3f %8.3f %9.3f %9.3f %9.3f %9.4f\n", s,
               zb_stage_rank_of(o->ranks, o->chunks, o->placement, s), blocks, sc->t_f[s] * 1e3,
               sc->t_b[s] * 1e3, sc->t_w[s] * 1e3, sc->m_f[s] / MIB, sc->m_b[s] / MIB,
               sc->m_w[s] / MIB, zb_costs_m_keep(sc, s) / MIB);
    }
    printf("recompute: a non-saving F keeps only its input (keep), and its R takes T_F: plan with\n"
           "  zbpp schedule|plan --recompute auto --mem-recompute <keep> --recompute-time <T_F>\n");
    printf("\nschedules with these costs (each rank's stages summed; M=%d, memory limit %s):\n",
           o->c.microbatches, isfinite(plan->mem_limit) ? "" : "none");
    if (isfinite(plan->mem_limit))
        printf("  (limit %.2f MiB per rank)\n", plan->mem_limit / MIB);
    printf("%-17s %-9s %12s %8s %14s\n", "family", "chunking", "step ms", "bubble", "peak MiB");
    for (int i = 0; i < plan->count; i++) {
        const zb_plan_row_t *r = &plan->rows[i];
        if (!r->fits)
            continue;
        char chunking[24];
        snprintf(chunking, sizeof chunking, "v=%d %s", r->chunks, zb_placement_name(r->placement));
        printf("%-17s %-9s %12.3f %7.1f%% %14.3f\n", r->family, chunking, r->makespan * 1e3,
               100 * r->bubble_rate, r->peak_max / MIB);
    }
    for (int i = 0; i < plan->count; i++)
        if (!plan->rows[i].fits)
            printf("%-17s -- %s\n", plan->rows[i].family, plan->rows[i].reason);
    print_rank_memory(o, p, first, sc, plan, false);
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void print_json(const opts_t *o, const zb_profile_t *p, const int *first,
                       const zb_costs_t *sc, const zb_plan_t *plan)
{
    const zb_gpt2_config_t *m = &p->cfg;
    int L = p->layers;
    printf("{\n  \"model\": {\"layers\": %d, \"channels\": %d, \"heads\": %d, \"vocab\": %d, "
           "\"padded_vocab\": %d, \"max_seq\": %d},\n",
           L, m->channels, m->heads, m->vocab, m->padded_vocab, m->max_seq);
    printf("  \"microbatch\": {\"batch\": %d, \"seq\": %d}, \"reps\": %d, \"threads\": %d, "
           "\"rank_threads\": %d, \"blas\": ",
           p->batch, p->seq, p->reps, p->threads, p->rank_threads);
    json_str(zb_blas_init());
    printf(", \"device\": ");
    json_str(o->dev.cuda ? o->device_desc : "cpu");
    printf(", \"wall_seconds\": %.6g,\n  \"parts\": [", p->wall);
    char buf[32];
    for (int k = 0; k < L + 2; k++) {
        zb_op_time_t t = part_time(p, k);
        printf("%s\n    {\"part\": \"%s\", \"f\": %.6g, \"b\": %.6g, \"w\": %.6g}", k ? "," : "",
               part_name(k, L, buf, sizeof buf), t.f, t.b, t.w);
    }
    printf("\n  ],\n  \"message_bytes\": %zu, \"comm\": %.6g, \"copy_d2h\": %.6g, "
           "\"copy_h2d\": %.6g, \"copy_d2h_alone\": %.6g, \"copy_h2d_alone\": %.6g, "
           "\"copy_both\": %.6g, \"copy_slow\": [%.6g, %.6g, %.6g],\n",
           p->msg_bytes, p->comm, p->copy_d2h, p->copy_h2d, p->copy_d2h_alone,
           p->copy_h2d_alone, p->copy_both, p->share.copy_slow[0], p->share.copy_slow[1],
           p->share.copy_slow[2]);
    printf("  \"ranks\": %d, \"chunks\": %d, \"placement\": \"%s\", \"microbatches\": %d,\n",
           o->ranks, o->chunks, zb_placement_name(o->placement), o->c.microbatches);
    printf("  \"stages\": [");
    for (int s = 0; s < sc->stages; s++)
        printf("%s\n    {\"stage\": %d, \"rank\": %d, \"first_block\": %d, \"end_block\": %d, "
               "\"t_f\": %.6g, \"t_b\": %.6g, \"t_w\": %.6g, \"comm\": %.6g, \"m_f\": %.17g, "
               "\"m_b\": %.17g, \"m_w\": %.17g, \"t_r\": %.6g, \"m_keep\": %.17g}",
               s ? "," : "", s, zb_stage_rank_of(o->ranks, o->chunks, o->placement, s), first[s],
               first[s + 1], sc->t_f[s], sc->t_b[s], sc->t_w[s], sc->comm[s], sc->m_f[s],
               sc->m_b[s], sc->m_w[s], zb_costs_t_r(sc, s), zb_costs_m_keep(sc, s));
    printf("\n  ],\n  \"mem_limit\": ");
    if (isfinite(plan->mem_limit))
        printf("%.17g", plan->mem_limit);
    else
        printf("null");
    printf(",\n");
    print_rank_memory(o, p, first, sc, plan, true);
    printf("  \"schedules\": [");
    for (int i = 0; i < plan->count; i++) {
        const zb_plan_row_t *r = &plan->rows[i];
        printf("%s\n    {\"family\": ", i ? "," : "");
        json_str(r->family);
        printf(", \"fits\": %s", r->fits ? "true" : "false");
        if (r->fits)
            printf(", \"chunks\": %d, \"placement\": \"%s\", \"makespan\": %.6g, "
                   "\"bubble_rate\": %.6g, \"peak_memory_max\": %.17g",
                   r->chunks, zb_placement_name(r->placement), r->makespan, r->bubble_rate,
                   r->peak_max);
        else {
            printf(", \"reason\": ");
            json_str(r->reason);
        }
        printf("}");
    }
    printf("\n  ]\n}\n");
}

static zb_status_t write_costs(const char *path, const zb_costs_t *sc, zb_err_t *err)
{
    zb_cli_out_t out;
    zb_status_t st = zb_cli_out_open(&out, path, err);
    if (st != ZB_OK)
        return st;
    fprintf(out.f, "# measured by zbpp profile, milliseconds per microbatch\nstage,F,B,W,C\n");
    for (int s = 0; s < sc->stages; s++)
        fprintf(out.f, "%d,%.6g,%.6g,%.6g,%.6g\n", s, sc->t_f[s] * 1e3, sc->t_b[s] * 1e3,
                sc->t_w[s] * 1e3, sc->comm[s] * 1e3);
    return zb_cli_out_commit(&out, err);
}

/* ---- the command ---- */

static int run(opts_t *o, zb_err_t *err)
{
    zb_gpt2_params_t params;
    memset(&params, 0, sizeof params);
    zb_gpt2_config_t cfg = o->c.model;
    zb_status_t st;
    if (o->init_from) {
        if ((st = zb_gpt2_load_llmc(o->init_from, &params, err)) != ZB_OK)
            goto fail_io;
        cfg = params.cfg;
    } else {
        if (cfg.max_seq == 0)
            cfg.max_seq = o->c.seq;
        if (cfg.padded_vocab == 0)
            cfg.padded_vocab = (cfg.vocab + 127) / 128 * 128;
    }
    if ((st = zb_gpt2_config_check(&cfg, err)) != ZB_OK)
        goto fail_usage;
    if (o->c.seq > cfg.max_seq) {
        st = zb_err_set(err, ZB_EINVAL, "--seq %d exceeds the model's maximum sequence %d",
                        o->c.seq, cfg.max_seq);
        goto fail_usage;
    }
    int S = o->ranks * o->chunks;
    if (S > 1024) {
        st = zb_err_set(err, ZB_EINVAL, "%d ranks x %d chunks: at most 1024 stages", o->ranks,
                        o->chunks);
        goto fail_usage;
    }
    if (o->dev.cuda) { /* the device's name for the table; its absence is one line, exit 1 */
        char desc[256] = "";
        if ((st = zb_cuda_require_device(o->dev.opts.device, err)) != ZB_OK ||
            (st = zb_cuda_device_describe(o->dev.opts.device, desc, sizeof desc, err)) != ZB_OK) {
            zb_gpt2_params_free(&params);
            zb_cli_error(CMD, "%s", err->msg);
            return ZB_EXIT_FAIL;
        }
        snprintf(o->device_desc, sizeof o->device_desc, "cuda:%d %s, %s", o->dev.opts.device,
                 desc, zb_cuda_precision_name(o->dev.opts.precision));
    }
    if (S > cfg.layers) {
        st = zb_err_set(err, ZB_EINVAL,
                        "more stages (%d ranks x %d chunks) than transformer blocks (%d)", o->ranks,
                        o->chunks, cfg.layers);
        goto fail_usage;
    }
    zb_profile_t prof;
    /* one measuring thread per rank that would run at once, each with the worker group of a
     * rank (--threads), on the cores zbpp train would give them */
    int rank_threads = zb_workers_resolve(o->c.threads, o->ranks);
    int cores = zb_workers_default_threads(1) / rank_threads;
    cores = cores < 1 ? 1 : cores;
    int threads = o->ranks < cores ? o->ranks : cores;
    if (threads > ZB_PROFILE_MAX_THREADS)
        threads = ZB_PROFILE_MAX_THREADS;
    if (o->dev.cuda)
        st = zb_cuda_profile_measure(o->init_from ? &params : NULL, &cfg,
                                     o->c.batch / o->c.microbatches, o->c.seq, o->reps,
                                     &o->dev.opts, &prof, err);
    else
        st = zb_profile_measure_ranks(o->init_from ? &params : NULL, &cfg,
                                      o->c.batch / o->c.microbatches, o->c.seq, o->reps, threads,
                                      rank_threads, o->pin, &prof, err);
    zb_gpt2_params_free(&params);
    if (st != ZB_OK)
        return zb_cli_error(CMD, "%s", err->msg), ZB_EXIT_FAIL;

    int first[1025];
    zb_costs_t sc, rc;
    zb_plan_t plan;
    memset(&plan, 0, sizeof plan);
    int exit_rc = ZB_EXIT_FAIL;
    if ((st = zb_profile_partition(&prof, S, first, &sc, err)) != ZB_OK)
        goto done_prof;
    sc.mem_limit = o->mem_limit > 0 ? o->mem_limit : INFINITY;
    if ((st = zb_profile_rank_costs(&sc, o->ranks, o->chunks, o->placement, &rc, err)) == ZB_OK) {
        st = zb_plan_compare(o->ranks, o->c.microbatches, &rc, o->time_limit, &plan, err);
        zb_costs_free(&rc);
    }
    if (st == ZB_OK && o->write_costs)
        st = write_costs(o->write_costs, &sc, err);
    if (st == ZB_OK) {
        if (o->json)
            print_json(o, &prof, first, &sc, &plan);
        else
            print_table(o, &prof, first, &sc, &plan);
        exit_rc = ZB_EXIT_OK;
    }
    zb_plan_free(&plan);
    zb_costs_free(&sc);
done_prof:
    zb_profile_free(&prof);
    if (st != ZB_OK)
        zb_cli_error(CMD, "%s", err->msg);
    return exit_rc;
fail_io:
    zb_cli_error(CMD, "%s", err->msg);
    return ZB_EXIT_FAIL;
fail_usage:
    zb_gpt2_params_free(&params);
    zb_cli_error(CMD, "%s", err->msg);
    return ZB_EXIT_USAGE;
}

int zb_cmd_profile(int argc, char **argv)
{
    opts_t o = {.ranks = 2, .chunks = 1, .reps = 5, .time_limit = 2, .pin = true,
                .placement = ZB_PLACE_LOOP};
    zb_train_config_defaults(&o.c);
    zb_err_t err;
    zb_err_clear(&err);
    int rc = ZB_EXIT_USAGE;
    zb_status_t st = parse(&o, argc, argv, &rc, &err);
    if (st == ZB_EUNSUPPORTED) /* --help or a bad option, already handled */
        return rc;
    if (st != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        return ZB_EXIT_USAGE;
    }
    if ((rc = zb_cli_device_resolve(&o.dev, CMD)) != 0)
        return rc;
    return run(&o, &err);
}
