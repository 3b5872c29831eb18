/* CUDA GPT-2 stage (label gpu) against the CPU stage and against itself:
 *  - one microbatch F/B/W: loss and gradients within 1e-5 (relative to scale) of the CPU stage;
 *    at a 2-stage split the boundary activation and its gradient too;
 *  - W deferred after other microbatches gives the same bits as W right after B;
 *  - 1, 2 and 3 GPU stages give the same loss and gradient bits (any partition, same bits);
 *  - 10 AdamW steps (2 microbatches, clipping): every loss within 1e-5 of the CPU trainer's, a
 *    second run gives identical bits (losses and parameters), and so does a run saved to the
 *    host after 4 steps and resumed on a new stage (resume is bit-exact);
 *  - bf16 and tf32: losses within 0.05 of fp32 over 10 steps, and the loss falls;
 *  - fp32 with the 3xTF32 attention: the fp32 bounds above (one step, 10 steps, repeat, resume),
 *    and other bits than the FMA attention's;
 *  - stash accounting (zb_gpt2_stage_mem) and call-order / input errors.
 * Skipped (exit 77) where there is no CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_testutil.h"
#include "zbpp/gpt2.h"
#include "zbpp/optim.h"

#include "cuda_stage_tests.inc"

int main(void)
{
    cuda_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_cpu),
        cmocka_unit_test(test_deferred_w_same_bits),
        cmocka_unit_test(test_fold_loss_grad_same_bits),
        cmocka_unit_test(test_partitions_same_bits),
        cmocka_unit_test(test_training_matches_cpu_and_repeats),
        cmocka_unit_test(test_reduced_precision_close),
        cmocka_unit_test(test_3xtf32_attention_is_fp32),
        cmocka_unit_test(test_stage_holds_only_its_span),
        cmocka_unit_test(test_stash_and_errors),
        cmocka_unit_test(test_split_stash_same_bits),
        cmocka_unit_test(test_deferred_losses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
