/* `zbpp train --sample-every N`: a short sample from the current parameters, one line on the
 * progress stream (train.h, zb_train_sample). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "zbpp/data.h"
#include "zbpp/gpt2_infer.h"
#include "zbpp/train.h"

#define SAMPLE_DEFAULT_TOKENS 32

typedef struct {
    FILE *out;
} sample_out_t;

/* One token as text on one line: byte-level bytes, printable ASCII as is, the rest escaped. */
static int put_token(void *ctx, int token)
{
    FILE *out = ((sample_out_t *)ctx)->out;
    if (token == ZB_TOK_EOT) {
        fputs("<|endoftext|>", out);
    } else if (token > 255) {
        fprintf(out, "<%d>", token);
    } else if (token == '\n') {
        fputs("\\n", out);
    } else if (token == '\\') {
        fputs("\\\\", out);
    } else if (token < 32 || token > 126) {
        fprintf(out, "\\x%02x", token);
    } else {
        fputc(token, out);
    }
    return 0;
}

zb_status_t zb_train_sample(const zb_train_config_t *cfg, const zb_gpt2_params_t *params,
                            int first_token, long step, FILE *out, zb_err_t *err)
{
    if (!out)
        return ZB_OK;
    int n = cfg->sample_tokens > 0 ? cfg->sample_tokens : SAMPLE_DEFAULT_TOKENS;
    if (n > params->cfg.max_seq)
        n = params->cfg.max_seq;
    zb_sampler_t s;
    zb_status_t st = zb_sampler_init(&s, 1.0f, 0, params->cfg.vocab, cfg->seed, err);
    if (st != ZB_OK)
        return st;
    /* a terminal's progress bar is redrawn in place: clear it, the next step draws it again */
    fprintf(out, "%ssample after step %ld: ", isatty(fileno(out)) ? "\r\033[K" : "", step);
    put_token(&(sample_out_t){out}, first_token);
    st = zb_gpt2_generate(params, &first_token, 1, n, &s, NULL, NULL, put_token,
                          &(sample_out_t){out}, err);
    fputc('\n', out);
    fflush(out);
    zb_sampler_free(&s);
    return st;
}
