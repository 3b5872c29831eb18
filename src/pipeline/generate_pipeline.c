/* Sampling through pipeline ranks (pipeline_generate.h): stage-local parameters and a KV cache
 * per rank, activation rows forward over the thread transport, the sampled token back to rank 0.
 *
 * Messages: an activation is C+1 floats, [0] = 1 (go on) or 0 (stop), then the row; its tag is
 * (ACT, receiving stage, 0) — one message per (source, tag) at a time, received in order. The
 * token is one int32 (tag (USER, 0, 0)), -1 = stop (the caller's callback asked to end). */
#include "zbpp/pipeline_generate.h"

#include <stdlib.h>
#include <string.h>

#include "zbpp/transport.h"

typedef struct {
    int rank, P;
    zb_gpt2_span_t span;
    zb_gpt2_params_t params; /* stage-local */
    zb_gpt2_kv_t *kv;
    float *msg;    /* [C + 1] */
    float *logits; /* [Vp], last rank */
    /* shared, read-only except on the last rank */
    const int *prompt;
    int n_prompt, n_pos, n_new;
    zb_sampler_t *s;
    int *out, *n_out;
    zb_token_fn fn;
    void *ctx;
} gen_rank_t;

static zb_status_t fail(zb_transport_t *t, zb_status_t st, zb_err_t *err)
{
    zb_transport_abort(t, err && err->msg[0] ? err->msg : zb_strerror(st));
    return st;
}

static zb_status_t rank_run(zb_transport_t *t, void *arg, zb_err_t *err)
{
    gen_rank_t *R = arg;
    int C = R->params.cfg.channels, P = R->P, r = R->rank;
    size_t row = ((size_t)C + 1) * sizeof(float);
    uint32_t tag_in = zb_tag(ZB_TAG_ACT, r, 0), tag_out = zb_tag(ZB_TAG_ACT, r + 1, 0);
    uint32_t tag_tok = zb_tag(ZB_TAG_USER, 0, 0);
    zb_status_t st = ZB_OK;
    for (int i = 0; i < R->n_pos; i++) {
        int32_t tok = 0;
        if (r == 0) {
            if (i < R->n_prompt)
                tok = R->prompt[i];
            else if ((st = zb_recv(t, &tok, sizeof tok, P - 1, tag_tok, err)) != ZB_OK)
                return fail(t, st, err);
            if (tok < 0) { /* stop: tell the next rank, which tells its next */
                R->msg[0] = 0.0f;
                if ((st = zb_send(t, R->msg, row, 1, tag_out, err)) != ZB_OK)
                    return fail(t, st, err);
                break;
            }
        } else {
            if ((st = zb_recv(t, R->msg, row, r - 1, tag_in, err)) != ZB_OK)
                return fail(t, st, err);
            if (R->msg[0] == 0.0f) {
                if (r + 1 < P && (st = zb_send(t, R->msg, row, r + 1, tag_out, err)) != ZB_OK)
                    return fail(t, st, err);
                break;
            }
        }
        st = zb_gpt2_infer_step(&R->params, &R->span, R->kv, tok, R->msg + 1, R->msg + 1,
                                R->logits, err);
        if (st != ZB_OK)
            return fail(t, st, err);
        if (r + 1 < P) {
            R->msg[0] = 1.0f;
            if ((st = zb_send(t, R->msg, row, r + 1, tag_out, err)) != ZB_OK)
                return fail(t, st, err);
            continue;
        }
        /* the last rank: pick once the prompt is in */
        if (i < R->n_prompt - 1)
            continue;
        int k = i - (R->n_prompt - 1);
        int32_t next = zb_sampler_pick(R->s, R->logits);
        if (R->out)
            R->out[k] = next;
        if (R->n_out)
            *R->n_out = k + 1;
        int stop = R->fn ? R->fn(R->ctx, next) : 0;
        if (i + 1 < R->n_pos) {
            int32_t send = stop ? -1 : next;
            if ((st = zb_send(t, &send, sizeof send, 0, tag_tok, err)) != ZB_OK)
                return fail(t, st, err);
        }
        if (stop)
            break;
    }
    return zb_flush(t, err);
}

static void rank_free(gen_rank_t *R)
{
    zb_gpt2_kv_free(R->kv);
    zb_gpt2_params_free(&R->params);
    free(R->msg);
    free(R->logits);
}

zb_status_t zb_pipeline_generate(const zb_gpt2_params_t *whole, int ranks, const int *prompt,
                                 int n_prompt, int n_new, zb_sampler_t *s, int *out, int *n_out,
                                 zb_token_fn fn, void *ctx, zb_err_t *err)
{
    if (n_out)
        *n_out = 0;
    if (!whole || !s || !prompt || n_prompt < 1 || n_new < 0)
        return zb_err_set(err, ZB_EINVAL, "generate: a prompt of at least one token is required");
    const zb_gpt2_config_t *cfg = &whole->cfg;
    int L = cfg->layers;
    if (ranks < 1 || ranks > L || ranks > ZB_TAG_MAX_STAGE)
        return zb_err_set(err, ZB_EINVAL,
                          "--ranks %d: must be in [1, %d] (at most one rank per block)", ranks,
                          L < ZB_TAG_MAX_STAGE ? L : ZB_TAG_MAX_STAGE);
    if (ranks == 1)
        return zb_gpt2_generate(whole, prompt, n_prompt, n_new, s, out, n_out, fn, ctx, err);
    if (n_prompt > cfg->max_seq || (long)n_prompt + n_new - 1 > cfg->max_seq)
        return zb_err_set(err, ZB_EINVAL,
                          "generate: %d prompt + %d new tokens need more than the model's max "
                          "sequence %d",
                          n_prompt, n_new, cfg->max_seq);
    if (s->vocab != cfg->vocab)
        return zb_err_set(err, ZB_EINVAL, "generate: sampler vocab %d != model vocab %d",
                          s->vocab, cfg->vocab);
    if (n_new == 0)
        return ZB_OK;
    int n_pos = n_prompt + n_new - 1;
    gen_rank_t *R = calloc((size_t)ranks, sizeof *R);
    void **args = calloc((size_t)ranks, sizeof *args);
    zb_thread_world_t *world = NULL;
    zb_status_t st = R && args ? ZB_OK : zb_err_set(err, ZB_ENOMEM, "generate: out of memory");
    for (int r = 0; st == ZB_OK && r < ranks; r++) {
        gen_rank_t *g = &R[r];
        args[r] = g;
        g->rank = r;
        g->P = ranks;
        g->span = (zb_gpt2_span_t){.layer_begin = (int)((long)r * L / ranks),
                                   .layer_end = (int)((long)(r + 1) * L / ranks),
                                   .embed = r == 0,
                                   .head = r == ranks - 1};
        g->prompt = prompt;
        g->n_prompt = n_prompt;
        g->n_pos = n_pos;
        g->n_new = n_new;
        g->s = s;
        g->out = out;
        g->n_out = n_out;
        g->fn = fn;
        g->ctx = ctx;
        if ((st = zb_gpt2_params_alloc_part(&g->params, cfg, &g->span, 1, err)) != ZB_OK)
            break;
        for (int u = 0; u < zb_gpt2_num_units(cfg); u++)
            zb_gpt2_copy_unit(&g->params, whole, u);
        if ((st = zb_gpt2_kv_new(cfg, &g->span, n_pos, &g->kv, err)) != ZB_OK)
            break;
        g->msg = calloc((size_t)cfg->channels + 1, sizeof(float));
        if (g->span.head)
            g->logits = malloc((size_t)cfg->padded_vocab * sizeof(float));
        if (!g->msg || (g->span.head && !g->logits))
            st = zb_err_set(err, ZB_ENOMEM, "generate: out of memory for rank %d", r);
    }
    if (st == ZB_OK)
        st = zb_thread_world_new(ranks, 4, 600.0, &world, err);
    if (st == ZB_OK)
        st = zb_thread_world_run(world, rank_run, args, 0, NULL, err);
    zb_thread_world_free(world);
    for (int r = 0; R && r < ranks; r++)
        rank_free(&R[r]);
    free(R);
    free(args);
    return st;
}
