/* zbpp — sampling through pipeline ranks (`zbpp generate --ranks P`): the model's blocks split
 * into P contiguous stages, one per rank (a thread of this process, talking through the thread
 * transport), each rank holding only its stage's parameters and its own KV cache. Rank 0 embeds
 * a token and sends the activation row onward; the last rank computes the logits, picks the next
 * token and sends it back to rank 0. One sequence has no microbatches to overlap, so the ranks
 * take turns: this shows the per-rank state and the message path, not a speed-up. The tokens are
 * the same as zb_gpt2_generate's for the same sampler seed (same kernels, same order). */
#ifndef ZBPP_PIPELINE_GENERATE_H
#define ZBPP_PIPELINE_GENERATE_H

#include "zbpp/error.h"
#include "zbpp/gpt2.h"
#include "zbpp/gpt2_infer.h"

/* As zb_gpt2_generate (gpt2_infer.h) over `ranks` ranks, 1 <= ranks <= layers (ranks == 1 runs
 * zb_gpt2_generate). `whole` is copied into the ranks' stage-local buffers. fn is called on the
 * last rank's thread. ZB_EINVAL for a bad rank count; a rank's failure aborts the others and its
 * message is returned. */
zb_status_t zb_pipeline_generate(const zb_gpt2_params_t *whole, int ranks, const int *prompt,
                                 int n_prompt, int n_new, zb_sampler_t *s, int *out, int *n_out,
                                 zb_token_fn fn, void *ctx, zb_err_t *err);

#endif
