/* A pipeline's start-up builds each rank's own units and nothing else: with the library's count
 * of parameter-shaped buffers (zb_gpt2_buffer_peak_bytes), the most a run of thread ranks ever
 * holds is what its ranks hold (the whole-rank memory table's params + grads + optimizer), for
 * a fresh model, --init-from, --resume of a single-file checkpoint and of another layout's
 * sharded checkpoint, with the profiler on or off. A whole-model copy at start-up (a trainer's
 * params, grads and moments, or the profiler timing a whole model) breaks the bound. The
 * resumed runs end with the bits of an uninterrupted one. */
#include "pipeline_testutil.h"

#include "zbpp/gpt2.h"

enum { LAYERS = 8, RANKS = 4, BATCH = 8, MICRO = 8 };

/* Bytes the ranks of the run hold in parameter-shaped buffers, as their memory table says. */
static double ranks_state(const zb_pipeline_report_t *rep, int ranks)
{
    double sum = 0;
    assert_true(rep->mem_measured_ok);
    for (int r = 0; r < ranks; r++)
        sum += rep->mem_measured[r].params + rep->mem_measured[r].grads +
               rep->mem_measured[r].optimizer;
    return sum;
}

/* The count may exceed the table by the tied WTE that thread ranks share (the head rank's copies
 * of params, m and v and its own accumulator, counted before they were folded into the
 * embedding rank's): at most 4 WTE-sized buffers. */
static double shared_wte_slack(const zb_train_config_t *c)
{
    int vp = (c->model.vocab + 127) / 128 * 128;
    return 4.0 * vp * c->model.channels * sizeof(float);
}

/* One run of `c` with `o` on RANKS thread ranks (no outputs: gathering a checkpoint or the
 * final parameters builds the whole model, after training), start-up to end measured. */
static void run_bounded(const zb_train_config_t *c, zb_pipeline_opts_t *o, const char *what)
{
    static zb_pipeline_report_t rep;
    zb_err_t err;
    o->ranks = RANKS;
    zb_gpt2_buffer_reset_peak();
    size_t before = zb_gpt2_buffer_bytes();
    zb_status_t st = pt_run(c, o, NULL, NULL, &rep, &err);
    if (st != ZB_OK)
        fail_msg("%s: %s", what, err.msg);
    double peak = (double)(zb_gpt2_buffer_peak_bytes() - before);
    double own = ranks_state(&rep, RANKS), bound = own + shared_wte_slack(c);
    zb_gpt2_span_t whole = {0, LAYERS, true, true};
    zb_gpt2_config_t m = c->model;
    m.max_seq = c->seq;
    m.padded_vocab = (m.vocab + 127) / 128 * 128;
    double model = (double)zb_gpt2_params_part_count(&m, &whole, 1) * sizeof(float);
    print_message("%s: peak %.0f KiB of parameter buffers, ranks hold %.0f KiB, model %.0f KiB\n",
                  what, peak / 1024, own / 1024, model / 1024);
    if (peak > bound)
        fail_msg("%s: %.0f bytes of parameter buffers at the peak, more than the ranks' own "
                 "%.0f (+ %.0f shared WTE): a whole model (%.0f bytes) was built",
                 what, peak, own, bound - own, model);
    assert_int_equal(zb_gpt2_buffer_bytes(), before); /* and all released */
}

static void config(zb_train_config_t *c, long steps)
{
    pt_tiny_config(c, LAYERS, BATCH, MICRO, steps);
    c->model.vocab = 512; /* the tied WTE a little larger than a block, like a real GPT-2 */
    c->lr_schedule = ZB_LR_CONSTANT; /* a run cut in two then steps like an uninterrupted one */
}

static void test_fresh(void **state)
{
    (void)state;
    zb_train_config_t c;
    config(&c, 2);
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    run_bounded(&c, &o, "fresh, FLOP partition");
    o.profile = true; /* the profiler times one block, not the whole model */
    run_bounded(&c, &o, "fresh, profiled partition");
    o.profile = false;
    o.schedule = "zb-v"; /* two stages a rank: the embedding and the head on rank 0 */
    o.chunks = 2;
    run_bounded(&c, &o, "fresh, zb-v");
}

static void test_init_from(void **state)
{
    (void)state;
    zb_train_config_t c;
    config(&c, 1);
    char model[256];
    pt_tmp_path(model, sizeof model, "startup_model.bin");
    zb_err_t err;
    zb_gpt2_params_t p;
    zb_gpt2_config_t m = {.max_seq = c.seq, .vocab = c.model.vocab, .padded_vocab = 512,
                          .layers = LAYERS, .heads = c.model.heads, .channels = c.model.channels};
    assert_int_equal(zb_gpt2_params_alloc(&p, &m, &err), ZB_OK);
    zb_gpt2_params_init_random(&p, 7);
    assert_int_equal(zb_gpt2_save_llmc(model, &p, &err), ZB_OK);
    zb_gpt2_params_free(&p);
    c.init_from = model;
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    run_bounded(&c, &o, "--init-from");
    unlink(model);
}

/* Save after 2 of 4 steps (the saving run is not measured), resume with RANKS ranks: bounded,
 * and the final parameters are those of 4 uninterrupted steps. */
static void resume_case(bool sharded, int save_ranks, const char *what)
{
    zb_train_config_t c;
    config(&c, 4);
    zb_gpt2_params_t ref, got;
    float losses[4];
    pt_reference(&c, NULL, NULL, losses, &ref, NULL);
    char ckpt[256];
    pt_tmp_path(ckpt, sizeof ckpt, sharded ? "startup_sharded" : "startup_ckpt.bin");
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.ranks = save_ranks;
    o.sharded_checkpoint = sharded;
    zb_train_config_t first = c;
    first.steps = 2;
    first.save_path = ckpt;
    zb_err_t err;
    zb_pipeline_report_t rep;
    if (pt_run(&first, &o, NULL, NULL, &rep, &err) != ZB_OK)
        fail_msg("%s: saving run: %s", what, err.msg);
    zb_train_config_t second = c;
    second.resume_path = ckpt;
    o.ranks = RANKS;
    run_bounded(&second, &o, what);
    if (pt_run(&second, &o, NULL, &got, &rep, &err) != ZB_OK) /* the bits, unmeasured */
        fail_msg("%s: %s", what, err.msg);
    pt_assert_same_params(&ref, &got, what);
    zb_gpt2_params_free(&ref);
    zb_gpt2_params_free(&got);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f %s %s.*", ckpt, ckpt);
    assert_int_equal(system(cmd), 0);
}

static void test_resume(void **state)
{
    (void)state;
    resume_case(false, 2, "--resume single file");
    resume_case(true, 2, "--resume sharded, 2 ranks to 4");
    resume_case(true, RANKS, "--resume sharded, same layout");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh),
        cmocka_unit_test(test_init_from),
        cmocka_unit_test(test_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
