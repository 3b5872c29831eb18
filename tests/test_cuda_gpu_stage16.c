/* The CUDA stage in bf16 storage on a GPU (label gpu), the tests of test_cuda_fake_stage16.c on
 * the real kernels: one microbatch within the bf16 bounds of the CPU fp32 stage (stated in
 * cuda_stage_tests.inc) and provably not fp32; B-then-W deferred == fused bitwise; 1, 2 and 3
 * stages the same bits; 10 AdamW steps within 0.05 of the CPU fp32 losses, two runs and a
 * resumed run bit-identical; stash lifetimes; memory predicted == allocated; the bf16 weight
 * copy follows AdamW. Skipped (exit 77) where there is no CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_testutil.h"
#include "zbpp/gpt2.h"
#include "zbpp/optim.h"

#define STAGE_BF16 1
#include "cuda_stage_tests.inc"
#include "cuda_stage16_tests.inc"

int main(void)
{
    cuda_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_cpu),
        cmocka_unit_test(test_bf16_is_not_fp32),
        cmocka_unit_test(test_deferred_w_same_bits),
        cmocka_unit_test(test_fold_loss_grad_same_bits),
        cmocka_unit_test(test_partitions_same_bits),
        cmocka_unit_test(test_training_matches_cpu_and_repeats),
        cmocka_unit_test(test_stage_holds_only_its_span),
        cmocka_unit_test(test_stash_and_errors),
        cmocka_unit_test(test_split_stash_same_bits),
        cmocka_unit_test(test_deferred_losses),
        cmocka_unit_test(test_memory_predicted_is_allocated),
        cmocka_unit_test(test_weight_copy_follows_updates),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
