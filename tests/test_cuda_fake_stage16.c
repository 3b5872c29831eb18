/* The CUDA stage's bf16 storage path on the fake device (tests/cuda_fake_device.inc: the bf16
 * kernels, the typed GEMM and flash attention as host loops rounding to bf16 like the GPU):
 * the shared stage tests of cuda_stage_tests.inc in bf16 (bounds against the CPU fp32 stage,
 * B-then-W deferred == fused bit for bit, any partition the same bits, training within 0.05 of
 * the CPU and bit-identical run to run and across a resume, stash lifetimes) and the bf16 ones
 * of cuda_stage16_tests.inc (really bf16, memory predicted == allocated, the weight copy
 * follows the updates). Skipped (exit 77) in a build without CUDA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#ifndef ZB_HAVE_CUDA
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#else

#include "cuda_fake_device.inc"

#define CUDA_STAGE_FAKE 1
#define STAGE_BF16 1
#include "cuda_stage_tests.inc"
#include "cuda_stage16_tests.inc"

int main(void)
{
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
#endif
