/* zbpp train — train a GPT-2 model in this process (flags documented in usage() and
 * docs/training.md). Parsing only: the loop lives in the library (zb_train_run). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/device_flags.h"
#include "cli/pipeline_flags.h"
#include "cli/pipeline_run.h"
#include "cli/train_outputs.h"
#include "cli/train_report.h"
#include "cli/train_signals.h"
#include "zbpp/checkpoint_sharded.h"
#include "zbpp/nn.h"
#include "zbpp/train.h"
#include "zbpp/util.h"
#include "zbpp/workers.h"

#define GPT2_VOCAB 50257
#define DEMO_CORPUS "data/demo_corpus.txt"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zbpp train [options]\n\n"
            "Train a GPT-2 model (single process). Without --data or --text it trains on the demo\n"
            "corpus (" DEMO_CORPUS ") with the byte-level tokenizer.\n\n"
            "model (fresh, random init from --seed; or --init-from):\n"
            "  --init-from FILE     llm.c model checkpoint (.bin) to start from\n"
            "  --layers L           transformer blocks (default 2)\n"
            "  --heads NH           attention heads (default 4)\n"
            "  --channels C         embedding width (default 64)\n"
            "  --vocab V            vocabulary size (default 257 for text, 50257 with --data)\n"
            "  --max-seq N          model's maximum sequence length (default --seq)\n"
            "data:\n"
            "  --data GLOB          llm.c token shards (sorted glob)\n"
            "  --text FILE          plain text, byte-level tokenized\n"
            "  --batch B            sequences per step (default 4)\n"
            "  --seq T              tokens per sequence (default 64)\n"
            "  --microbatches M     gradient accumulation: B/M sequences per microbatch (default 1)\n"
            "  --steps N            total optimizer steps (default 20)\n"
            "  --seed S             model init and data order (default 1337)\n"
            "  --no-shuffle         read the data in order\n"
            "validation (forward only, same bits for any --ranks and transport):\n"
            "  --val-data GLOB      llm.c token shards to validate on\n"
            "  --val-text FILE      or plain text, byte-level tokenized\n"
            "  --val-every N        validate every N steps (default 0: only after the last step)\n"
            "  --val-steps K        batches per validation, always the first K (default 4)\n"
            "optimizer:\n"
            "  --lr X (3e-4)  --beta1 X (0.9)  --beta2 X (0.95)  --eps X (1e-8)\n"
            "  --weight-decay X (0.1)  --grad-clip X (1.0, 0 = off)\n"
            "  --lr-schedule constant|cosine (cosine)  --warmup N (0)  --lr-min X (0)\n"
            "checkpoints and output:\n"
            "  --save FILE          training checkpoint at the end (and every --save-every N)\n"
            "  --save-every N       also save after every N steps\n"
            "  --keep-last N        keep each save also as FILE.stepNNNNNN, the N newest of them\n"
            "  --save-model FILE    llm.c model checkpoint (.bin, for --init-from or llm.c)\n"
            "  --resume FILE        continue a training checkpoint (its settings are the defaults)\n"
            "  --metrics FILE       JSON lines, one per step (loss, val_loss, tokens/s, mfu, ...)\n"
            "  --peak-tflops X      the hardware's peak TFLOP/s, for MFU (default: mfu n/a)\n"
            "  --sample-every N     print a short sample from the model every N steps (also\n"
            "                       with --quiet); --sample-tokens K tokens (default 32)\n"
            "  --quiet              no progress output\n"
            "  --verbose            also print the BLAS kernel and the threads per rank\n"
            "compute:\n"
            "  --threads N          threads per rank (default: the cores this process may use,\n"
            "                       divided evenly among its ranks); same bits for any N\n");
    zb_cli_pipeline_usage(out);
    zb_cli_device_usage(out);
}

/* The demo corpus: ./data/, else the source tree the binary was built from, else next to the
 * executable's build tree (build/zbpp -> ../data). */
static const char *find_demo_corpus(char *buf, size_t cap)
{
    if (access(DEMO_CORPUS, R_OK) == 0)
        return DEMO_CORPUS;
#ifdef ZB_DATA_DIR
    snprintf(buf, cap, "%s/demo_corpus.txt", ZB_DATA_DIR);
    if (access(buf, R_OK) == 0)
        return buf;
#endif
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    static const char *const ups[] = {"/../", "/../../"};
    for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++) {
        snprintf(buf, cap, "%s%s%s", exe, ups[i], DEMO_CORPUS);
        if (access(buf, R_OK) == 0)
            return buf;
    }
    return NULL;
}

static int fail(zb_status_t st, const zb_err_t *err)
{
    fprintf(stderr, "zbpp train: %s\n", err->msg[0] ? err->msg : zb_strerror(st));
    return zb_cli_exit_code(st);
}

/* The flags of zbpp train itself: X(ID, "name", has_arg). A flag is added here and in
 * train_flag (and the usage); the pipeline's and the device's have their own lists
 * (pipeline_flags.h, device_flags.h). Every value flag takes its value as the next word or after
 * '=' (`--steps=5`), and unique prefixes work, as in the other commands. */
#define TRAIN_FLAGS(X)                                                                          \
    X(INIT_FROM, "init-from", 1) X(LAYERS, "layers", 1) X(HEADS, "heads", 1)                     \
    X(CHANNELS, "channels", 1) X(VOCAB, "vocab", 1) X(MAX_SEQ, "max-seq", 1) X(DATA, "data", 1)   \
    X(TEXT, "text", 1) X(BATCH, "batch", 1) X(SEQ, "seq", 1) X(MICROBATCHES, "microbatches", 1)  \
    X(STEPS, "steps", 1) X(SEED, "seed", 1) X(LR, "lr", 1) X(BETA1, "beta1", 1)                   \
    X(BETA2, "beta2", 1) X(EPS, "eps", 1) X(WEIGHT_DECAY, "weight-decay", 1)                      \
    X(GRAD_CLIP, "grad-clip", 1) X(LR_SCHEDULE, "lr-schedule", 1) X(WARMUP, "warmup", 1)          \
    X(LR_MIN, "lr-min", 1) X(SAVE, "save", 1) X(SAVE_MODEL, "save-model", 1)                      \
    X(SAVE_EVERY, "save-every", 1) X(RESUME, "resume", 1) X(METRICS, "metrics", 1)                \
    X(SAMPLE_EVERY, "sample-every", 1) X(SAMPLE_TOKENS, "sample-tokens", 1)                       \
    X(THREADS, "threads", 1) X(VAL_DATA, "val-data", 1) X(VAL_TEXT, "val-text", 1)                \
    X(VAL_EVERY, "val-every", 1) X(VAL_STEPS, "val-steps", 1) X(KEEP_LAST, "keep-last", 1)        \
    X(PEAK_TFLOPS, "peak-tflops", 1) X(NO_SHUFFLE, "no-shuffle", 0) X(QUIET, "quiet", 0)          \
    X(VERBOSE, "verbose", 0)

#define TRAIN_ID(id, name, arg) OPT_##id,
enum { OPT_TRAIN_FIRST = 1400, TRAIN_FLAGS(TRAIN_ID) OPT_TRAIN_END };
#define TRAIN_OPTION(id, name, arg) {name, arg, NULL, OPT_##id},

static const struct option train_options[] = {
    TRAIN_FLAGS(TRAIN_OPTION)
    ZB_CLI_PIPELINE_FLAGS(ZB_CLI_PIPELINE_OPTION)
    ZB_CLI_DEVICE_OPTIONS
    ZB_CLI_DEVICE_TRAIN_OPTIONS
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct {
    zb_train_config_t *c;
    zb_cli_pipeline_t *pipe;
    zb_cli_device_t *dev;
    zb_gpt2_config_t shape; /* the shape flags given (0 = not given), to compare with --resume */
    bool model_flag, vocab_given, verbose, microbatches_given;
    const char *lr_sched, *val_flag;
} train_flags_t;

/* A shape flag given with --resume must agree with the checkpoint's model (in c->model after
 * the peek): 0, or 2 after naming the first flag that differs and both values. */
static int shape_agrees(const zb_gpt2_config_t *ckpt, const zb_gpt2_config_t *flags,
                        const char *path)
{
    const struct {
        const char *flag;
        int given, stored;
    } f[] = {{"--layers", flags->layers, ckpt->layers},
             {"--heads", flags->heads, ckpt->heads},
             {"--channels", flags->channels, ckpt->channels},
             {"--vocab", flags->vocab, ckpt->vocab},
             {"--max-seq", flags->max_seq, ckpt->max_seq}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].given && f[i].given != f[i].stored) {
            fprintf(stderr, "zbpp train: %s %d differs from the model of --resume %s (%s %d): "
                            "leave it out, or give %d\n",
                    f[i].flag, f[i].given, path, f[i].flag + 2, f[i].stored, f[i].stored);
            return 2;
        }
    return 0;
}

/* A shape flag: the model's and the one given (to compare with --resume). */
static zb_status_t shape_flag(train_flags_t *t, const char *v, const char *flag, int *model,
                              int *given, zb_err_t *err)
{
    t->model_flag = true;
    zb_status_t st = zb_cli_flag_int(v, 1, INT_MAX, flag, given, err);
    *model = *given;
    return st;
}

/* Option `id` of train_options with its value v (NULL for a switch): ZB_OK, or ZB_EINVAL with
 * one line in err. */
static zb_status_t train_flag(train_flags_t *t, int id, const char *v, zb_err_t *err)
{
    zb_train_config_t *c = t->c;
    zb_gpt2_config_t *m = &c->model;
    const long big = LONG_MAX / 2;
    switch (id) {
    case OPT_NO_SHUFFLE: c->shuffle = false; return ZB_OK;
    case OPT_QUIET: c->quiet = true; return ZB_OK;
    case OPT_VERBOSE: t->verbose = true; return ZB_OK;
    case OPT_INIT_FROM: c->init_from = v; return ZB_OK;
    case OPT_LAYERS: return shape_flag(t, v, "--layers", &m->layers, &t->shape.layers, err);
    case OPT_HEADS: return shape_flag(t, v, "--heads", &m->heads, &t->shape.heads, err);
    case OPT_CHANNELS:
        return shape_flag(t, v, "--channels", &m->channels, &t->shape.channels, err);
    case OPT_VOCAB:
        t->vocab_given = true;
        return shape_flag(t, v, "--vocab", &m->vocab, &t->shape.vocab, err);
    case OPT_MAX_SEQ: return shape_flag(t, v, "--max-seq", &m->max_seq, &t->shape.max_seq, err);
    case OPT_DATA: c->data_glob = v; return ZB_OK;
    case OPT_TEXT: c->text_path = v; return ZB_OK;
    case OPT_BATCH: return zb_cli_flag_int(v, 1, INT_MAX, "--batch", &c->batch, err);
    case OPT_SEQ: return zb_cli_flag_int(v, 1, INT_MAX, "--seq", &c->seq, err);
    case OPT_MICROBATCHES:
        t->microbatches_given = true;
        return zb_cli_flag_int(v, 1, INT_MAX, "--microbatches", &c->microbatches, err);
    case OPT_STEPS: return zb_cli_flag_long(v, 0, big, "--steps", &c->steps, err);
    case OPT_SEED: return zb_cli_flag_u64(v, "--seed", &c->seed, err);
    case OPT_LR: return zb_cli_flag_float(v, 0.0f, "--lr", &c->adamw.lr, err);
    case OPT_BETA1: return zb_cli_flag_float(v, 0.0f, "--beta1", &c->adamw.beta1, err);
    case OPT_BETA2: return zb_cli_flag_float(v, 0.0f, "--beta2", &c->adamw.beta2, err);
    case OPT_EPS: return zb_cli_flag_float(v, 0.0f, "--eps", &c->adamw.eps, err);
    case OPT_WEIGHT_DECAY:
        return zb_cli_flag_float(v, 0.0f, "--weight-decay", &c->adamw.weight_decay, err);
    case OPT_GRAD_CLIP: return zb_cli_flag_float(v, 0.0f, "--grad-clip", &c->grad_clip, err);
    case OPT_LR_SCHEDULE: t->lr_sched = v; return ZB_OK;
    case OPT_WARMUP: return zb_cli_flag_long(v, 0, big, "--warmup", &c->warmup, err);
    case OPT_LR_MIN: return zb_cli_flag_float(v, 0.0f, "--lr-min", &c->lr_min, err);
    case OPT_SAVE: c->save_path = v; return ZB_OK;
    case OPT_SAVE_MODEL: c->save_model_path = v; return ZB_OK;
    case OPT_SAVE_EVERY: return zb_cli_flag_long(v, 0, big, "--save-every", &c->save_every, err);
    case OPT_RESUME: c->resume_path = v; return ZB_OK;
    case OPT_METRICS: c->metrics_path = v; return ZB_OK;
    case OPT_SAMPLE_EVERY:
        return zb_cli_flag_long(v, 0, big, "--sample-every", &c->sample_every, err);
    case OPT_SAMPLE_TOKENS:
        return zb_cli_flag_int(v, 1, INT_MAX, "--sample-tokens", &c->sample_tokens, err);
    case OPT_THREADS: return zb_cli_flag_int(v, 1, INT_MAX, "--threads", &c->threads, err);
    case OPT_VAL_DATA: c->val_data_glob = v; return ZB_OK;
    case OPT_VAL_TEXT: c->val_text_path = v; return ZB_OK;
    case OPT_VAL_EVERY:
        t->val_flag = "--val-every";
        return zb_cli_flag_long(v, 0, big, "--val-every", &c->val_every, err);
    case OPT_VAL_STEPS:
        t->val_flag = "--val-steps";
        return zb_cli_flag_int(v, 1, INT_MAX, "--val-steps", &c->val_steps, err);
    case OPT_KEEP_LAST: return zb_cli_flag_int(v, 1, INT_MAX, "--keep-last", &c->keep_last, err);
    case OPT_PEAK_TFLOPS: {
        float x = 0;
        zb_status_t st = zb_cli_flag_float(v, 0.0f, "--peak-tflops", &x, err);
        if (st == ZB_OK && !(x > 0))
            st = zb_err_set(err, ZB_EINVAL, "--peak-tflops expects a positive number, got '%s'",
                            v);
        c->peak_tflops = x;
        return st;
    }
    default:
        if (id > ZB_OPT_PIPE_FIRST && id < ZB_OPT_PIPE_END)
            return zb_cli_pipeline_option(t->pipe, id, v, err);
        if (zb_cli_device_option(t->dev, id, v))
            return ZB_OK;
        return zb_err_set(err, ZB_EINVAL, "internal: option %d has no parser", id);
    }
}

/* The peak MFU is taken against when --peak-tflops is not given, named for the report: this
 * CPU's measured FMA ceiling times the cores in use, or a known GPU's published figure for the
 * precision; 0 (mfu n/a) for an unknown GPU. */
static double default_peak(const zb_train_config_t *c, const zb_cli_pipeline_t *pipe,
                           const zb_cli_device_t *dev, bool piped)
{
    char src[200];
    if (dev->cuda) {
        char desc[256];
        zb_err_t err;
        const char *prec = zb_cuda_precision_name(dev->opts.precision);
        if (zb_cuda_device_describe(dev->opts.device, desc, sizeof desc, &err) != ZB_OK)
            return 0;
        /* pipeline ranks spread over the visible GPUs, several to a GPU when they are fewer */
        int ranks = piped ? (pipe->opts.ranks > 0 ? pipe->opts.ranks : 1) : 1, gpus = 1;
        if (ranks > 1 && zb_cuda_device_count(&gpus, &err) == ZB_OK)
            gpus = gpus < 1 ? 1 : gpus < ranks ? gpus : ranks;
        double one = zb_gpu_spec_peak_tflops(desc, prec);
        if (!(one > 0))
            return 0; /* a GPU without a known figure: mfu n/a */
        desc[strcspn(desc, ",")] = '\0'; /* the name, without "sm_90, 132 SMs, ..." */
        snprintf(src, sizeof src, "%.96s dense %s peak from the data sheet, x %d GPU%s; "
                 "--peak-tflops sets it", desc, prec, gpus, gpus == 1 ? "" : "s");
        zb_cli_set_peak_source(src);
        return one * gpus;
    }
    int replicas = pipe->opts.dp > 1 ? pipe->opts.dp : 1;
    int ranks = piped ? (pipe->opts.ranks > 0 ? pipe->opts.ranks : 1) * replicas : 1;
    int cores = ranks * zb_workers_resolve(c->threads, ranks);
    snprintf(src, sizeof src, "measured fp32 FMA peak of %d core%s; --peak-tflops sets it", cores,
             cores == 1 ? "" : "s");
    zb_cli_set_peak_source(src);
    return zb_cpu_peak_flops_per_core() * cores * 1e-12;
}

int zb_cmd_train(int argc, char **argv)
{
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    zb_cli_pipeline_t pipe; /* --ranks, --schedule, ... (cli/pipeline_flags.c) */
    zb_cli_pipeline_init(&pipe);
    zb_cli_device_t dev = {.device = NULL}; /* --device, --precision, --tf32 (device_flags.c) */
    zb_err_t err;
    zb_err_clear(&err);

    /* --resume first: the checkpoint's settings replace the defaults, explicit flags then apply
     * (and must agree with it, which zb_train_load checks) */
    int ch, rc = 0;
    opterr = 0;
    optind = 0; /* GNU getopt: 0 starts a fresh scan (this command parses twice) */
    while ((ch = getopt_long(argc, argv, ":h", train_options, NULL)) != -1)
        if (ch == OPT_RESUME) {
            zb_status_t st = zb_ckpt_is_sharded(optarg) ? zb_ckpt_sharded_peek(optarg, &c, &err)
                                                         : zb_train_peek(optarg, &c, &err);
            if (st != ZB_OK)
                return fail(st, &err);
        }

    const zb_gpt2_config_t stored_shape = c.model; /* the checkpoint's, with --resume */
    train_flags_t t = {.c = &c, .pipe = &pipe, .dev = &dev};
    optind = 0;
    while ((ch = getopt_long(argc, argv, ":h", train_options, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            return 0;
        }
        if (ch == '?' || ch == ':')
            return zb_cli_bad_option("train", ch, argv);
        zb_status_t st = train_flag(&t, ch, optarg, &err);
        if (st != ZB_OK)
            return zb_cli_bad_value("train", st, &err);
    }
    if (!zb_cli_no_operands("train", argc, argv, optind))
        return 2;
    bool model_flag = t.model_flag, vocab_given = t.vocab_given, verbose = t.verbose;
    bool microbatches_given = t.microbatches_given;
    const char *lr_sched = t.lr_sched, *val_flag = t.val_flag;
    if (lr_sched) {
        zb_status_t st = zb_lr_kind_parse(lr_sched, &c.lr_schedule, &err);
        if (st != ZB_OK)
            return fail(st, &err);
    }
    if (model_flag && c.init_from) {
        fprintf(stderr, "zbpp train: --layers/--heads/--channels/--vocab/--max-seq describe a fresh "
                        "model; the shape comes from --init-from\n");
        return 2;
    }
    /* the original command plus --resume: shape flags that agree with the checkpoint are fine */
    if (model_flag && c.resume_path && (rc = shape_agrees(&stored_shape, &t.shape, c.resume_path)))
        return rc;
    if (c.data_glob && c.text_path) {
        fprintf(stderr, "zbpp train: use either --data or --text, not both\n");
        return 2;
    }
    if (val_flag && !c.val_data_glob && !c.val_text_path) {
        fprintf(stderr, "zbpp train: %s needs --val-data GLOB or --val-text FILE\n", val_flag);
        return 2;
    }
    if (c.val_data_glob && c.val_text_path) {
        fprintf(stderr, "zbpp train: use either --val-data or --val-text, not both\n");
        return 2;
    }
    if (c.keep_last > 0 && c.save_every == 0 && c.save_path)
        fprintf(stderr, "zbpp train: warning: --keep-last without --save-every keeps only the "
                        "checkpoint of the end of the run\n");
    if (c.data_glob && !vocab_given && !c.resume_path)
        c.model.vocab = GPT2_VOCAB;
    char demo[4300];
    if (!c.data_glob && !c.text_path) {
        c.text_path = find_demo_corpus(demo, sizeof demo);
        if (!c.text_path) {
            fprintf(stderr, "zbpp train: no --data or --text given and the demo corpus "
                            "(" DEMO_CORPUS ") was not found\n");
            return 1;
        }
    }

    rc = zb_cli_pipeline_schedule_file(&pipe, &c, microbatches_given);
    if (rc)
        return rc;
    if ((rc = zb_cli_device_resolve(&dev, "train")) != 0 ||
        (rc = zb_cli_device_check_ranks(&dev, "train", pipe.opts.ranks)) != 0 ||
        (rc = zb_cli_pipeline_offload(&pipe, dev.cuda)) != 0)
        return rc;
    zb_status_t st = zb_train_config_check(&c, &err);
    if (st != ZB_OK)
        return fail(st, &err);
    /* Outputs are checked before training starts. Under MPI rank 0 checks them once the
     * transport is up (mpi_run.c): other hosts may not have the directories rank 0 writes to. */
    if (!pipe.mpi && (st = zb_cli_check_train_outputs(&c, &pipe.opts, &err)) != ZB_OK)
        return fail(st, &err);
    /* --sm-per-rank with one rank runs it as a one-rank pipeline in a partition of K SMs */
    bool piped = zb_cli_pipeline_wanted(&pipe, &c) || (dev.cuda && dev.opts.sm_per_rank > 0);
    if (!piped && pipe.inert) /* a pipeline flag that a single process has no use for */
        fprintf(stderr, "zbpp train: warning: %s has no effect with one rank in one process "
                        "(give --ranks P > 1)\n", pipe.inert);
    if (!(c.peak_tflops > 0) && !pipe.mpi) /* MFU against the device's peak */
        c.peak_tflops = default_peak(&c, &pipe, &dev, piped);
    c.stop = zb_cli_train_signals(c.save_path, c.save_model_path, piped && pipe.mpi);
    c.started = zb_cli_train_started();
    /* tests/cli_signal.sh: a start-up as slow as a large model's, on demand, to signal into */
    const char *delay = getenv("ZBPP_TEST_STARTUP_DELAY_MS");
    if (delay && atoi(delay) > 0) {
        struct timespec ts = {atoi(delay) / 1000, (long)(atoi(delay) % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    if (!dev.cuda)
        zb_cli_print_kernel_header(verbose);
    if (verbose) {
        /* ranks sharing this process: the pipeline's threads, or one (single process, MPI) */
        int local = piped && !pipe.mpi ? pipe.opts.ranks * (pipe.opts.dp > 1 ? pipe.opts.dp : 1) : 1;
        fprintf(stderr, "zbpp train: BLAS %s; %d thread%s per rank\n", zb_blas_init(),
                zb_workers_resolve(c.threads, local),
                zb_workers_resolve(c.threads, local) == 1 ? "" : "s");
    }
    if (dev.cuda && piped && pipe.mpi && dev.opts.device_messages) {
        fprintf(stderr, "zbpp train: --gpu-messages %s needs thread ranks (device pointers "
                        "and events do not cross processes): use --gpu-messages host with "
                        "--transport mpi\n",
                dev.gpu_messages);
        return 2;
    }
    if (dev.cuda && piped) { /* pipeline ranks on GPUs (rank_cuda.c): the device first */
        if ((st = zb_cuda_require_device(dev.opts.device, &err)) != ZB_OK)
            return fail(st, &err);
        pipe.opts.cuda = &dev.opts;
    }
    if (piped)
        return zb_cli_pipeline_run(&pipe, &c);
    zb_train_summary_t sum;
    if (dev.cuda && verbose) {
        char desc[256];
        if (zb_cuda_device_describe(dev.opts.device, desc, sizeof desc, &err) == ZB_OK)
            fprintf(stderr, "zbpp train: device cuda:%d: %s, precision %s%s\n", dev.opts.device,
                    desc, zb_cuda_precision_name(dev.opts.precision),
                    dev.opts.precision != ZB_CUDA_FP32 ? ""
                    : dev.opts.fp32_attention == ZB_CUDA_ATTN_AUTO
                        ? " (attention: 3xtf32 where the head size has it, else fma)"
                        : dev.opts.fp32_attention == ZB_CUDA_ATTN_3XTF32 ? " (3xtf32 attention)"
                                                                          : " (fma attention)");
    }
    st = dev.cuda ? zb_cuda_train_run(&c, &dev.opts, stderr, &sum, &err)
                  : zb_train_run(&c, stderr, &sum, &err);
    if (st != ZB_OK)
        return fail(st, &err);
    if (!c.quiet) {
        if (sum.steps_run > 0)
            printf("trained steps %ld..%ld: loss %.4f -> %.4f, median %.0f tokens/s%s\n",
                   sum.first_step + 1, sum.first_step + sum.steps_run, sum.first_loss,
                   sum.last_loss, sum.median_tokens_per_s,
                   sum.skipped ? " (some steps skipped: non-finite gradient norm)" : "");
        else if (!sum.interrupted)
            printf("nothing to do: already at step %ld of %ld\n", sum.first_step, c.steps);
        zb_cli_print_run_extras(&c, &sum);
        if (!dev.cuda)
            printf("CPU kernels: %s\n", zb_blas_kernel()->line);
        if (!dev.cuda && zb_cpu_gemm_precision() == ZB_CPU_GEMM_BF16)
            printf("CPU bf16 products: %s; %.2fx fp32's rate here (measured)\n",
                   zb_cpu_bf16_backend(), zb_cpu_bf16_speed());
        if (c.save_path)
            printf("saved %s\n", c.save_path);
        if (c.save_model_path)
            printf("saved model %s\n", c.save_model_path);
    }
    return sum.interrupted ? zb_cli_train_signal_status() : 0;
}
