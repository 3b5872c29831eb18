/* zbpp — faults a test injects into the pipeline trainer (zb_pipeline_opts_t.test_hooks, which
 * is NULL outside tests). Not part of the public API: tests include this header. */
#ifndef ZBPP_PL_HOOKS_H
#define ZBPP_PL_HOOKS_H

/* -1 = off. At step inject_inf_step, after the tied fold, the first gradient element of norm
 * unit inject_inf_unit becomes +Inf on the rank that owns the unit; a failing compute on
 * `fail_rank` at step fail_step (its `fail_action`-th compute). always_guess (0 = off): every
 * rank whose own norm allows it updates optimistically, whatever the last steps said (the
 * rollback path on demand). sent_slots (0 = the rank's own rule): the fewest slots a GPU rank's
 * staged sent buffers (x_out, dx_in) get; 1 makes every next microbatch reuse the slot whose
 * download may still be queued, so a missing wait for it shows (pl_cuda_msg_slots). */
typedef struct zb_pipeline_test_hooks {
    long inject_inf_step;
    int inject_inf_unit;
    long fail_step;
    int fail_rank, fail_action;
    int always_guess;
    int sent_slots;
} zb_pipeline_test_hooks_t;

/* Every hook off. */
#define ZB_PIPELINE_TEST_HOOKS_OFF ((zb_pipeline_test_hooks_t){-1, -1, -1, -1, -1, 0, 0})

#endif
