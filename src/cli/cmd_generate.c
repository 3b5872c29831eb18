/* zbpp generate — sample text from an llm.c GPT-2 checkpoint with a KV cache (gpt2_infer.h),
 * in this process or through pipeline ranks (--ranks P, pipeline_generate.h). The prompt is
 * byte-level tokens unless --tokenizer gives llm.c's GPT-2 tokenizer file (docs/training.md,
 * "Sampling"). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "zbpp/checkpoint_sharded.h"
#include "zbpp/data.h"
#include "zbpp/gpt2.h"
#include "zbpp/gpt2_infer.h"
#include "zbpp/nn.h"
#include "zbpp/pipeline_generate.h"
#include "zbpp/tokenizer.h"
#include "zbpp/train.h"

#define CMD "generate"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zbpp generate --init-from MODEL.bin [options]\n\n"
            "Sample text from an llm.c GPT-2 model checkpoint (as `zbpp train --save-model`\n"
            "writes it), one token at a time with a KV cache. Prints the prompt, then each new\n"
            "token as it is picked.\n\n"
            "  --init-from FILE     llm.c model checkpoint (.bin), required\n"
            "  --tokenizer FILE     llm.c GPT-2 tokenizer (.bin, magic 20240328) to encode the\n"
            "                       prompt (greedy longest match) and decode; without it tokens\n"
            "                       are bytes (the demo corpus's byte-level tokenizer)\n"
            "  --prompt TEXT        text to continue (default: the end-of-text token)\n"
            "  --tokens N           new tokens to generate (default 64); past the model's max\n"
            "                       sequence T the context slides: the last T/2 tokens are\n"
            "                       fed again and generation goes on (same text as one pass\n"
            "                       while it fits)\n"
            "  --temperature X      softmax temperature, >= 0 (default 1; 0 = greedy)\n"
            "  --top-k K            sample among the K most likely tokens (default 0 = all)\n"
            "  --seed S             sampling seed (default 1337): same seed, same text\n"
            "  --ranks P            run the model split into P pipeline ranks (threads), each\n"
            "                       with its own blocks and KV cache (default 1)\n");
}

typedef struct {
    const zb_gpt2_tok_t *tok; /* NULL: byte-level */
    FILE *out;
} printer_t;

static void print_token(const printer_t *pr, int id)
{
    if (pr->tok) {
        size_t n;
        const char *s = zb_gpt2_tok_piece(pr->tok, id, &n);
        if (s)
            fwrite(s, 1, n, pr->out);
        else
            fputc('?', pr->out);
    } else {
        char buf[32];
        uint16_t t = (uint16_t)(id < 0 || id > 65535 ? '?' : id);
        size_t n = zb_tok_decode(&t, 1, buf, sizeof buf);
        fwrite(buf, 1, n < sizeof buf ? n : sizeof buf - 1, pr->out);
    }
}

static int on_token(void *ctx, int token)
{
    const printer_t *pr = ctx;
    print_token(pr, token);
    fflush(pr->out);
    return 0;
}

static int parse_u64(const char *flag, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0' || s[0] == '-') {
        zb_cli_error(CMD, "%s expects a non-negative integer, got '%s'", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* The prompt as token ids into *ids (malloc'd), *n of them. */
static zb_status_t encode_prompt(const char *prompt, const zb_gpt2_tok_t *tok, int vocab,
                                 int **ids, int *n, zb_err_t *err)
{
    size_t len = prompt ? strlen(prompt) : 0;
    *ids = malloc((len + 1) * sizeof **ids);
    if (!*ids)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the prompt");
    if (len == 0) { /* start from end-of-text, as GPT-2 does unconditioned */
        int eot = tok ? zb_gpt2_tok_eot(tok) : ZB_TOK_EOT;
        if (eot < 0 || eot >= vocab)
            return zb_err_set(err, ZB_EINVAL,
                              "no --prompt and no end-of-text token to start from: give a prompt");
        (*ids)[0] = eot;
        *n = 1;
        return ZB_OK;
    }
    if (tok) {
        size_t got;
        zb_status_t st = zb_gpt2_tok_encode(tok, prompt, len, *ids, len, &got, err);
        *n = (int)got;
        return st;
    }
    uint16_t *t = malloc(len * sizeof *t);
    if (!t)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the prompt");
    size_t got = zb_tok_encode(prompt, len, t);
    for (size_t i = 0; i < got; i++)
        (*ids)[i] = t[i];
    free(t);
    *n = (int)got;
    return ZB_OK;
}

/* One pass with a KV cache: n_new tokens after prompt[0..n), n + n_new - 1 <= max_seq. */
static zb_status_t generate_pass(const zb_gpt2_params_t *p, int ranks, const int *prompt, int n,
                                 int n_new, zb_sampler_t *s, int *out, printer_t *pr,
                                 zb_err_t *err)
{
    if (ranks > 1)
        return zb_pipeline_generate(p, ranks, prompt, n, n_new, s, out, NULL, on_token, pr, err);
    return zb_gpt2_generate(p, prompt, n, n_new, s, out, NULL, on_token, pr, err);
}

/* n_new tokens after prompt[0..n_prompt), as many as asked whatever the model's max sequence T:
 * while the context fits, one pass (the text of a plain KV-cache run); when the window is full,
 * its last T/2 tokens become the prompt of a fresh pass. The positions are learned and absolute,
 * so a cache cannot shift: the kept half is fed again (one prefill per T/2 new tokens, rather
 * than one per token as a window sliding by one would cost). A prompt longer than T keeps its
 * last T tokens. */
static zb_status_t generate_sliding(const zb_gpt2_params_t *p, int ranks, const int *prompt,
                                    int n_prompt, int n_new, zb_sampler_t *s, printer_t *pr,
                                    zb_err_t *err)
{
    const int T = p->cfg.max_seq, keep = T / 2 > 0 ? T / 2 : 1;
    int *ctx = malloc(((size_t)T + 1) * sizeof *ctx); /* the window, then a pass's tokens */
    if (!ctx)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a %d-token window", T);
    int n = n_prompt < T ? n_prompt : T;
    memcpy(ctx, prompt + (n_prompt - n), (size_t)n * sizeof *ctx);
    if (n_prompt + (long)n_new - 1 > T)
        fprintf(stderr, "zbpp generate: note: %ld tokens do not fit the model's %d positions: the "
                        "context slides (the last %d tokens are kept each time it is full)\n",
                (long)n_prompt + n_new - 1, T, keep);
    zb_status_t st = ZB_OK;
    for (int left = n_new; left > 0 && st == ZB_OK;) {
        int room = T - n + 1, k = left < room ? left : room;
        st = generate_pass(p, ranks, ctx, n, k, s, ctx + n, pr, err);
        left -= k;
        if (left > 0) { /* n + k <= T + 1 tokens: keep the newest `keep` */
            memmove(ctx, ctx + n + k - keep, (size_t)keep * sizeof *ctx);
            n = keep;
        }
    }
    free(ctx);
    return st;
}

/* A training checkpoint (--save) given where a model is wanted: say what it is and how to get
 * a model from it, rather than what its header lacks. */
static bool is_training_checkpoint(const char *path)
{
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    zb_err_t err;
    const char *kind = NULL;
    if (zb_ckpt_is_sharded(path))
        kind = "a sharded training checkpoint (the manifest of --checkpoint-format sharded)";
    else if (zb_train_peek(path, &c, &err) == ZB_OK)
        kind = "a training checkpoint (zbpp train --save)";
    if (kind)
        zb_cli_error(CMD, "%s is %s, not a model: write the model with `zbpp train --resume %s "
                          "--save-model MODEL.bin`, then `zbpp generate --init-from MODEL.bin`",
                     path, kind, path);
    return kind != NULL;
}

/* NaN or infinite weights (a diverged run's): the model would print garbage, refuse it. */
static bool weights_finite(const zb_gpt2_params_t *p, const char *path)
{
    size_t bad = 0;
    for (size_t i = 0; i < p->count; i++)
        bad += !isfinite(p->data[i]);
    if (bad)
        zb_cli_error(CMD, "%s: %zu of %zu weights are NaN or infinite (a diverged run?): not a "
                          "usable model",
                     path, bad, p->count);
    return bad == 0;
}

int zb_cmd_generate(int argc, char **argv)
{
    const char *model_path = NULL, *tok_path = NULL, *prompt = NULL;
    int n_new = 64, top_k = 0, ranks = 1;
    double temperature = 1.0;
    uint64_t seed = 1337;
    zb_err_t err;
    zb_err_clear(&err);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return ZB_EXIT_OK;
        }
        if (strncmp(a, "--", 2) != 0) {
            zb_cli_error(CMD, "unexpected argument '%s' (see zbpp generate --help)", a);
            return ZB_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            zb_cli_error(CMD, "%s needs a value", a);
            return ZB_EXIT_USAGE;
        }
        const char *v = argv[++i];
        zb_status_t st = ZB_OK;
        if (!strcmp(a, "--init-from"))
            model_path = v;
        else if (!strcmp(a, "--tokenizer"))
            tok_path = v;
        else if (!strcmp(a, "--prompt"))
            prompt = v;
        else if (!strcmp(a, "--tokens"))
            st = zb_cli_parse_int(v, 1, INT_MAX, a, &n_new, &err);
        else if (!strcmp(a, "--temperature"))
            st = zb_cli_parse_number(v, true, a, &temperature, &err);
        else if (!strcmp(a, "--top-k"))
            st = zb_cli_parse_int(v, 0, INT_MAX, a, &top_k, &err);
        else if (!strcmp(a, "--ranks"))
            st = zb_cli_parse_int(v, 1, 1024, a, &ranks, &err);
        else if (!strcmp(a, "--seed")) {
            if (parse_u64(a, v, &seed))
                return ZB_EXIT_USAGE;
        } else {
            zb_cli_error(CMD, "unknown option '%s' (see zbpp generate --help)", a);
            return ZB_EXIT_USAGE;
        }
        if (st != ZB_OK)
            return zb_cli_bad_value(CMD, st, &err);
    }
    if (!model_path) {
        zb_cli_error(CMD, "--init-from MODEL.bin is required (an llm.c checkpoint, e.g. from "
                          "zbpp train --save-model)");
        return ZB_EXIT_USAGE;
    }
    if (temperature > 1e6) {
        zb_cli_error(CMD, "--temperature %g is too large (at most 1e6)", temperature);
        return ZB_EXIT_USAGE;
    }

    zb_gpt2_params_t params;
    zb_gpt2_tok_t *tok = NULL;
    zb_sampler_t sampler = {0};
    int *ids = NULL, n_prompt = 0, rc = ZB_EXIT_FAIL;
    if (is_training_checkpoint(model_path))
        return ZB_EXIT_USAGE;
    zb_status_t st = zb_gpt2_load_llmc(model_path, &params, &err);
    if (st != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        return ZB_EXIT_FAIL;
    }
    const zb_gpt2_config_t *cfg = &params.cfg;
    if (!weights_finite(&params, model_path))
        goto out;
    if (tok_path && (st = zb_gpt2_tok_load(tok_path, &tok, &err)) != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    if (tok && zb_gpt2_tok_vocab(tok) != cfg->vocab) {
        zb_cli_error(CMD, "tokenizer %s has %d tokens but the model's vocabulary is %d", tok_path,
                     zb_gpt2_tok_vocab(tok), cfg->vocab);
        goto out;
    }
    if (!tok && cfg->vocab < ZB_TOK_VOCAB) {
        zb_cli_error(CMD, "the model's vocabulary (%d) is smaller than the byte-level "
                          "tokenizer's %d: give its --tokenizer", cfg->vocab, ZB_TOK_VOCAB);
        goto out;
    }
    if (!tok && cfg->vocab != ZB_TOK_VOCAB)
        fprintf(stderr, "zbpp generate: warning: the model's vocabulary is %d, not the byte-level "
                        "%d: tokens above 256 print as '?' (give --tokenizer)\n",
                cfg->vocab, ZB_TOK_VOCAB);
    if (top_k > cfg->vocab) {
        zb_cli_error(CMD, "--top-k %d is larger than the vocabulary (%d)", top_k, cfg->vocab);
        rc = ZB_EXIT_USAGE;
        goto out;
    }
    if (ranks > cfg->layers) {
        zb_cli_error(CMD, "--ranks %d but the model has %d blocks (at most one rank per block)",
                     ranks, cfg->layers);
        rc = ZB_EXIT_USAGE;
        goto out;
    }
    if ((st = encode_prompt(prompt, tok, cfg->vocab, &ids, &n_prompt, &err)) != ZB_OK) {
        zb_cli_error(CMD, "--prompt: %s", err.msg);
        rc = ZB_EXIT_USAGE;
        goto out;
    }
    for (int i = 0; i < n_prompt; i++)
        if (ids[i] >= cfg->vocab) {
            zb_cli_error(CMD, "--prompt: token %d is outside the model's vocabulary (%d)", ids[i],
                         cfg->vocab);
            rc = ZB_EXIT_USAGE;
            goto out;
        }
    if ((st = zb_sampler_init(&sampler, (float)temperature, top_k, cfg->vocab, seed, &err)) !=
        ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        rc = ZB_EXIT_USAGE;
        goto out;
    }
    zb_blas_init();
    printer_t pr = {.tok = tok, .out = stdout};
    if (prompt && *prompt) /* the prompt as given (the tokens' text is the same bytes) */
        fputs(prompt, stdout);
    st = generate_sliding(&params, ranks, ids, n_prompt, n_new, &sampler, &pr, &err);
    fputc('\n', stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        zb_cli_error(CMD, "cannot write the output");
        goto out;
    }
    if (st != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    rc = ZB_EXIT_OK;
out:
    zb_sampler_free(&sampler);
    free(ids);
    zb_gpt2_tok_free(tok);
    zb_gpt2_params_free(&params);
    return rc;
}
