/* zbpp — GPT-2 inference with a KV cache, and token sampling (`zbpp generate`, `train
 * --sample-every`).
 *
 * A KV cache belongs to one stage (a span of blocks, as in gpt2.h; the whole model is one stage
 * with embed and head) and one sequence. zb_gpt2_infer_step runs ONE new position through the
 * stage: each block computes q, k, v of that position only, appends k and v to its cache and
 * attends over every cached position, so n tokens cost n single-row passes instead of n growing
 * full-sequence forwards. The result equals the full-sequence forward (zb_gpt2_forward) to float
 * rounding; tests/test_generate.c checks it for every position.
 *
 * Sampling: temperature 0 is greedy (argmax, the lowest id on ties); otherwise the softmax of
 * logits/temperature restricted to the top_k largest logits (0 = all), one draw from a seeded
 * splitmix64 stream: the same seed, model and prompt give the same tokens. */
#ifndef ZBPP_GPT2_INFER_H
#define ZBPP_GPT2_INFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbpp/error.h"
#include "zbpp/gpt2.h"

/* ---- KV cache and one-position forward ---- */

typedef struct zb_gpt2_kv zb_gpt2_kv_t;

/* A cache for the stage `span` of cfg holding up to `cap` positions (1 <= cap <= max_seq), plus
 * the per-position scratch. ZB_EINVAL for a bad config, span or cap; ZB_ENOMEM. */
zb_status_t zb_gpt2_kv_new(const zb_gpt2_config_t *cfg, const zb_gpt2_span_t *span, int cap,
                           zb_gpt2_kv_t **out, zb_err_t *err);
void zb_gpt2_kv_free(zb_gpt2_kv_t *kv);
/* Forget every cached position (start a new sequence). */
void zb_gpt2_kv_reset(zb_gpt2_kv_t *kv);
/* Positions cached so far (= the position the next step runs at). */
int zb_gpt2_kv_len(const zb_gpt2_kv_t *kv);
/* Bytes the cache allocated (K, V and scratch). */
size_t zb_gpt2_kv_bytes(const zb_gpt2_kv_t *kv);

/* Run position zb_gpt2_kv_len(kv) through the stage and cache its keys and values.
 * embed stage: `token` in [0, V) (x_in unused); else x_in[C], the previous stage's output.
 * head stage: writes logits[Vp] (columns V..Vp-1 are the padded rows' products, never sampled);
 * else writes x_out[C]. p may be a whole or a stage-local buffer holding the span.
 * ZB_EINVAL when the cache is full, the token is out of range, a buffer is missing, or p does
 * not hold the span or has another config. */
zb_status_t zb_gpt2_infer_step(const zb_gpt2_params_t *p, const zb_gpt2_span_t *span,
                               zb_gpt2_kv_t *kv, int token, const float *x_in, float *x_out,
                               float *logits, zb_err_t *err);

/* ---- sampling ---- */

typedef struct {
    float temperature; /* 0 = greedy */
    int top_k;         /* 0 = whole vocabulary */
    int vocab;         /* V: tokens [0, V) are candidates */
    uint64_t state;    /* splitmix64 */
    int *idx;          /* [V] scratch: candidate order */
    double *w;         /* [V] scratch: weights */
} zb_sampler_t;

/* ZB_EINVAL for a negative or non-finite temperature, top_k outside [0, V], V < 1. */
zb_status_t zb_sampler_init(zb_sampler_t *s, float temperature, int top_k, int vocab,
                            uint64_t seed, zb_err_t *err);
void zb_sampler_free(zb_sampler_t *s);
/* The next token for logits[0..V). Deterministic in (seed, the sequence of calls). Non-finite
 * logits are never picked unless every logit is (then token 0). */
int zb_sampler_pick(zb_sampler_t *s, const float *logits);

/* ---- whole-model generation ---- */

/* Called with each generated token as soon as it is picked (may be NULL). A non-zero return
 * stops the generation early (ZB_OK, *n_out tells how many were made). */
typedef int (*zb_token_fn)(void *ctx, int token);

/* Feed prompt[0..n_prompt) (n_prompt >= 1) through a whole-model buffer p with a KV cache, then
 * pick n_new tokens with s, each fed back; out[0..n_new) receives them (may be NULL), *n_out
 * (may be NULL) how many. ZB_EINVAL when n_prompt + n_new - 1 > max_seq (the last token picked
 * is never fed, so a full window is n_prompt + n_new - 1 positions) or a prompt token is out of
 * range. */
zb_status_t zb_gpt2_generate(const zb_gpt2_params_t *p, const int *prompt, int n_prompt,
                             int n_new, zb_sampler_t *s, int *out, int *n_out, zb_token_fn fn,
                             void *ctx, zb_err_t *err);

#endif
