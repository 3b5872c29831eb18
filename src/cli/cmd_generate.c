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
#include "zbpp/data.h"
#include "zbpp/gpt2.h"
#include "zbpp/gpt2_infer.h"
#include "zbpp/nn.h"
#include "zbpp/pipeline_generate.h"
#include "zbpp/tokenizer.h"

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
            "  --tokens N           new tokens to generate (default 64); the prompt plus N-1\n"
            "                       must fit the model's max sequence (no sliding window)\n"
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
    zb_status_t st = zb_gpt2_load_llmc(model_path, &params, &err);
    if (st != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        return ZB_EXIT_FAIL;
    }
    const zb_gpt2_config_t *cfg = &params.cfg;
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
    if ((long)n_prompt + n_new - 1 > cfg->max_seq) {
        long room = (long)cfg->max_seq - n_prompt + 1;
        if (room >= 1)
            zb_cli_error(CMD, "--tokens %d with a %d-token prompt needs %ld positions, but the "
                              "model's max sequence is %d: at most --tokens %ld",
                         n_new, n_prompt, (long)n_prompt + n_new - 1, cfg->max_seq, room);
        else
            zb_cli_error(CMD, "the prompt has %d tokens, more than the model's max sequence %d",
                         n_prompt, cfg->max_seq);
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
    if (ranks > 1)
        st = zb_pipeline_generate(&params, ranks, ids, n_prompt, n_new, &sampler, NULL, NULL,
                                  on_token, &pr, &err);
    else
        st = zb_gpt2_generate(&params, ids, n_prompt, n_new, &sampler, NULL, NULL, on_token, &pr,
                              &err);
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
