/* Pipeline memory by lifetime: a split stash (regions bound separately, FB region unbound during
 * W, one scratch) gives the same bits as a one-allocation stash; the stash pool's FW/FB/BW slot
 * counts and the message buffers' slots follow the program; the pool refuses a B or W out of
 * order. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pipeline/msg_buffers.h"
#include "pipeline/stash_pool.h"
#include "zbpp/gpt2.h"

static const zb_gpt2_config_t CFG = {.max_seq = 8, .vocab = 40, .padded_vocab = 64,
                                     .layers = 2, .heads = 2, .channels = 16};
enum { BB = 2, TT = 8, NTOK = BB * TT };

static void must(zb_status_t s, const zb_err_t *e)
{
    if (s != ZB_OK)
        fail_msg("unexpected error: %s", e->msg);
}

/* F, B, W of the whole model with stash st (bound by the caller when split); the gradients and
 * the input gradient land in g and the loss in *loss. */
static void run(const zb_gpt2_params_t *p, zb_gpt2_stash_t *st, void *bases[3][4],
                zb_gpt2_grads_t *g, float *loss, zb_gpt2_keep_t keep)
{
    zb_err_t e;
    int tok[NTOK], tgt[NTOK];
    for (int i = 0; i < NTOK; i++)
        tok[i] = (i * 7) % CFG.vocab, tgt[i] = (i * 5 + 3) % CFG.vocab;
    zb_gpt2_span_t sp = {0, CFG.layers, true, true};
    (void)keep;
    if (bases)
        zb_gpt2_stash_bind(st, bases[0]);
    must(zb_gpt2_forward(p, &sp, st, tok, NULL, tgt, NULL, loss, &e), &e);
    if (bases)
        zb_gpt2_stash_bind(st, bases[1]);
    must(zb_gpt2_backward_input(p, &sp, st, NULL, 1.0f / NTOK, NULL, &e), &e);
    if (bases)
        zb_gpt2_stash_bind(st, bases[2]);
    must(zb_gpt2_backward_weight(p, &sp, st, g, &e), &e);
}

static void split_matches(zb_gpt2_keep_t keep)
{
    zb_err_t e;
    zb_gpt2_params_t p;
    must(zb_gpt2_params_alloc(&p, &CFG, &e), &e);
    zb_gpt2_params_init_random(&p, 7);
    zb_gpt2_span_t sp = {0, CFG.layers, true, true};
    zb_gpt2_grads_t g1, g2;
    must(zb_gpt2_grads_alloc(&g1, &CFG, &e), &e);
    must(zb_gpt2_grads_alloc(&g2, &CFG, &e), &e);
    zb_gpt2_grads_zero(&g1);
    zb_gpt2_grads_zero(&g2);

    zb_gpt2_stash_t *one, *split;
    must(zb_gpt2_stash_new_keep(&CFG, &sp, BB, TT, keep, &one, &e), &e);
    must(zb_gpt2_stash_new_split(&CFG, &sp, BB, TT, keep, &split, &e), &e);
    size_t bytes[ZB_GPT2_NUM_REGIONS], sum = 0;
    zb_gpt2_stash_regions(&CFG, &sp, BB, TT, keep, bytes);
    void *mem[ZB_GPT2_NUM_REGIONS];
    for (int r = 0; r < ZB_GPT2_NUM_REGIONS; r++) {
        sum += bytes[r];
        assert_int_equal(posix_memalign(&mem[r], 64, bytes[r] ? bytes[r] : 64), 0);
        memset(mem[r], 0xff, bytes[r]); /* NaN garbage: a buffer read before written shows */
    }
    /* the split layout holds the same buffers: it is no larger than one allocation */
    assert_true(sum <= zb_gpt2_stash_capacity_keep(&CFG, &sp, BB, TT, keep));
    assert_true(bytes[ZB_GPT2_REGION_BW] > 0 && bytes[ZB_GPT2_REGION_FW] > 0);
    /* F: no BW region; B: all; W: no FB region (what the pipeline's pool binds) */
    void *bases[3][4] = {{mem[0], mem[1], NULL, mem[3]},
                         {mem[0], mem[1], mem[2], mem[3]},
                         {mem[0], NULL, mem[2], mem[3]}};
    float l1, l2;
    run(&p, one, NULL, &g1, &l1, keep);
    run(&p, split, bases, &g2, &l2, keep);
    assert_memory_equal(&l1, &l2, sizeof l1);
    assert_memory_equal(g1.g.data, g2.g.data, g1.g.count * sizeof(float));
    assert_memory_equal(g1.wte_head, g2.wte_head, g1.g.sizes[ZB_WTE] * sizeof(float));
    for (int r = 0; r < ZB_GPT2_NUM_REGIONS; r++)
        free(mem[r]);
    zb_gpt2_stash_free(one);
    zb_gpt2_stash_free(split);
    zb_gpt2_grads_free(&g1);
    zb_gpt2_grads_free(&g2);
    zb_gpt2_params_free(&p);
}

static void test_split_stash_same_bits(void **state)
{
    (void)state;
    split_matches(ZB_GPT2_KEEP_ALL);
    split_matches(ZB_GPT2_KEEP_SELECTIVE);
}

static zb_rank_program_t program(const zb_action_t *a, int n)
{
    zb_rank_program_t p = {.actions = (zb_action_t *)a, .len = n, .cap = n};
    return p;
}

#define ACT(t, s, m) {.type = ZB_ACT_##t, .stage = (s), .mb = (m), .flags = 0}

static void test_stash_slots_follow_the_program(void **state)
{
    (void)state;
    int n[3];
    /* split backward: F0 F1 B0 F2 B1 W0 W1 B2 W2 -> 3 between F and W, 2 between F and B (F2
     * runs while B0's FB is back), 2 between B and W */
    const zb_action_t split[] = {ACT(F, 0, 0), ACT(F, 0, 1), ACT(B, 0, 0), ACT(F, 0, 2),
                                 ACT(B, 0, 1), ACT(W, 0, 0), ACT(W, 0, 1), ACT(B, 0, 2),
                                 ACT(W, 0, 2)};
    zb_rank_program_t p = program(split, 9);
    pl_stash_plan(&p, 0, 4, NULL, n);
    assert_int_equal(n[0], 3);
    assert_int_equal(n[1], 2);
    assert_int_equal(n[2], 2);
    /* fused backward: the BW part lives only during the BW */
    const zb_action_t fused[] = {ACT(F, 1, 0), ACT(F, 1, 1), ACT(BW, 1, 0), ACT(BW, 1, 1)};
    p = program(fused, 4);
    pl_stash_plan(&p, 1, 4, NULL, n);
    assert_int_equal(n[0], 2);
    assert_int_equal(n[1], 2);
    assert_int_equal(n[2], 1);
    /* non-saving F's give their slots back at once; each R holds one until its W */
    zb_action_t rc[] = {ACT(F, 0, 0), ACT(F, 0, 1), ACT(R, 0, 0), ACT(B, 0, 0),
                        ACT(W, 0, 0), ACT(R, 0, 1), ACT(B, 0, 1), ACT(W, 0, 1)};
    rc[0].flags = rc[1].flags = ZB_ACT_NOSAVE;
    p = program(rc, 8);
    pl_stash_plan(&p, 0, 4, NULL, n);
    assert_int_equal(n[0], 1);
    assert_int_equal(n[1], 1);
    assert_int_equal(n[2], 1);
}

/* An O's slots given back later than the O (pl_stash_plan's release): F0 O0 F1 O1 F2 L0 B0 W0
 * L1 B1 W1 B2 W2 with O0's slots back before F2 and O1's before B0. At the O, F1 takes O0's
 * slots (2 FW slots in all); later, F1 takes a third pair while O0's download may still run,
 * F2 takes O0's again, and L0 a new one (3 FW and FB slots). O1's at the step's end instead:
 * its own L gives them back (L1 then takes them: the first free ones). Sizing and the slots'
 * bookkeeping agree: the walk never runs out of slots. */
static void test_offload_slots_go_back_later(void **state)
{
    (void)state;
    const zb_action_t prog[] = {ACT(F, 0, 0), ACT(O, 0, 0), ACT(F, 0, 1), ACT(O, 0, 1),
                                ACT(F, 0, 2), ACT(L, 0, 0), ACT(B, 0, 0), ACT(W, 0, 0),
                                ACT(L, 0, 1), ACT(B, 0, 1), ACT(W, 0, 1), ACT(B, 0, 2),
                                ACT(W, 0, 2)};
    const int len = (int)(sizeof prog / sizeof *prog);
    zb_rank_program_t p = program(prog, len);
    int n[3];
    pl_stash_plan(&p, 0, 4, NULL, n);
    assert_int_equal(n[PL_FW], 2);
    assert_int_equal(n[PL_FB], 2);
    int release[4] = {pl_release_key(ZB_ACT_F, 2), pl_release_key(ZB_ACT_B, 0), PL_RELEASE_AT_O,
                      PL_RELEASE_AT_O};
    pl_stash_plan(&p, 0, 4, release, n);
    assert_int_equal(n[PL_FW], 3);
    assert_int_equal(n[PL_FB], 3);
    for (int variant = 0; variant < 2; variant++) {
        if (variant == 1)
            release[1] = PL_RELEASE_AT_END;
        pl_stash_slots_t sl;
        zb_err_t e;
        must(pl_stash_slots_init(&sl, &p, 0, 4, release, &e), &e);
        int o0_slot = -1, o1_slot = -1;
        for (int i = 0; i < len; i++) {
            const zb_action_t *a = &prog[i];
            if (!pl_stash_slots_begin(&sl, a, &e))
                fail_msg("variant %d, action %d: %s", variant, i, e.msg);
            const int fw = pl_stash_slots_at(&sl, PL_FW, a->mb);
            if (a->type == ZB_ACT_O)
                *(a->mb ? &o1_slot : &o0_slot) = fw;
            if (i == 2) /* F1: not O0's slot, which its download may still read */
                assert_int_not_equal(fw, o0_slot);
            if (i == 4) /* F2: O0's, given back before it */
                assert_int_equal(fw, o0_slot);
            if (i == 8 && variant == 1) /* L1: its own O's, given back before it */
                assert_int_equal(fw, o1_slot);
            pl_stash_slots_end(&sl, a);
        }
        pl_stash_slots_free(&sl);
    }
}

static void test_message_slots_follow_the_program(void **state)
{
    (void)state;
    int slot[4];
    /* RECV_B just before its B (the comm pass): one slot serves every microbatch */
    const zb_action_t near[] = {ACT(RECV_B, 0, 0), ACT(BW, 0, 0), ACT(RECV_B, 0, 1),
                                ACT(BW, 0, 1)};
    zb_rank_program_t p = program(near, 4);
    assert_int_equal(pl_msgbuf_plan(&p, 0, PL_BUF_DX_OUT, false, 4, slot), 1);
    assert_int_equal(slot[0], 0);
    assert_int_equal(slot[1], 0);
    assert_int_equal(slot[2], -1); /* never received */
    /* two receives ahead of their B's: two slots, the third reuses the first freed */
    const zb_action_t ahead[] = {ACT(RECV_B, 0, 0), ACT(RECV_B, 0, 1), ACT(B, 0, 0),
                                 ACT(RECV_B, 0, 2), ACT(B, 0, 1),       ACT(B, 0, 2)};
    p = program(ahead, 6);
    assert_int_equal(pl_msgbuf_plan(&p, 0, PL_BUF_DX_OUT, false, 4, slot), 2);
    assert_int_not_equal(slot[0], slot[1]);
    assert_int_equal(slot[2], slot[0]);
    /* the stage's own output: from its F to its SEND_F */
    const zb_action_t out[] = {ACT(F, 2, 0), ACT(F, 2, 1), ACT(SEND_F, 2, 0), ACT(SEND_F, 2, 1)};
    p = program(out, 4);
    assert_int_equal(pl_msgbuf_plan(&p, 2, PL_BUF_X_OUT, false, 4, slot), 2);
    /* x_in keeps a slot per microbatch (a non-saving F's input waits there for its R) */
    assert_int_equal(pl_msgbuf_plan(&p, 2, PL_BUF_X_IN, false, 4, NULL), 4);
}

/* A GPU rank's plan (pl_msgbuf_plan_spread): every kind by its intervals, x_in too, and at least
 * `least` slots taken in turn, so that a sent slot's next writer is as far from its SEND as the
 * slots allow. */
static void test_message_slots_spread(void **state)
{
    (void)state;
    int slot[4];
    /* F, SEND_F in turn: one slot is enough, two alternate (the oldest freed is taken) */
    const zb_action_t turn[] = {ACT(F, 1, 0), ACT(SEND_F, 1, 0), ACT(F, 1, 1), ACT(SEND_F, 1, 1),
                                ACT(F, 1, 2), ACT(SEND_F, 1, 2), ACT(F, 1, 3), ACT(SEND_F, 1, 3)};
    zb_rank_program_t p = program(turn, 8);
    assert_int_equal(pl_msgbuf_plan_spread(&p, 1, PL_BUF_X_OUT, false, 4, 1, slot), 1);
    for (int m = 0; m < 4; m++)
        assert_int_equal(slot[m], 0);
    assert_int_equal(pl_msgbuf_plan_spread(&p, 1, PL_BUF_X_OUT, false, 4, 2, slot), 2);
    for (int m = 0; m < 4; m++)
        assert_int_equal(slot[m], m % 2);
    /* never more than M, never fewer than the program holds at once */
    assert_int_equal(pl_msgbuf_plan_spread(&p, 1, PL_BUF_X_OUT, false, 1, 2, slot), 1);
    const zb_action_t ahead[] = {ACT(F, 1, 0), ACT(F, 1, 1), ACT(F, 1, 2), ACT(SEND_F, 1, 0),
                                 ACT(SEND_F, 1, 1), ACT(SEND_F, 1, 2)};
    p = program(ahead, 6);
    assert_int_equal(pl_msgbuf_plan_spread(&p, 1, PL_BUF_X_OUT, false, 4, 2, slot), 3);
    /* x_in by its intervals: RECV_F to the F (one slot), or to the R of a non-saving F */
    const zb_action_t in[] = {ACT(RECV_F, 1, 0), ACT(F, 1, 0), ACT(RECV_F, 1, 1), ACT(F, 1, 1)};
    p = program(in, 4);
    assert_int_equal(pl_msgbuf_plan_spread(&p, 1, PL_BUF_X_IN, false, 4, 0, slot), 1);
    const zb_action_t rc[] = {ACT(RECV_F, 1, 0), ACT(F, 1, 0), ACT(RECV_F, 1, 1), ACT(F, 1, 1),
                              ACT(R, 1, 0), ACT(B, 1, 0), ACT(R, 1, 1), ACT(B, 1, 1)};
    p = program(rc, 8);
    assert_int_equal(pl_msgbuf_plan_spread(&p, 1, PL_BUF_X_IN, false, 4, 0, slot), 2);
    /* from the previous stage's F on this rank (V placement) */
    const zb_action_t v[] = {ACT(F, 0, 0), ACT(F, 1, 0), ACT(F, 0, 1), ACT(F, 1, 1)};
    p = program(v, 4);
    assert_int_equal(pl_msgbuf_plan_spread(&p, 1, PL_BUF_X_IN, true, 4, 0, slot), 1);
    assert_int_equal(pl_msgbuf_plan(&p, 1, PL_BUF_X_IN, true, 4, NULL), 4);
}

static void test_pool_refuses_out_of_order(void **state)
{
    (void)state;
    const zb_action_t prog[] = {ACT(F, 0, 0), ACT(B, 0, 0), ACT(W, 0, 0)};
    zb_rank_program_t p = program(prog, 3);
    zb_train_config_t cfg = {0};
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    pl_t pl;
    memset(&pl, 0, sizeof pl);
    pl.cfg = &cfg;
    pl.opts = &o;
    pl.mcfg = CFG;
    pl.plan.S = 1, pl.M = 2, pl.mbB = BB, pl.T = TT;
    pl.plan.first[0] = 0, pl.plan.first[1] = CFG.layers;
    zb_gpt2_span_t sp = {0, CFG.layers, true, true};
    pl_stash_pool_t pool;
    zb_err_t e;
    must(pl_stash_pool_init(&pool, &pl, &p, &sp, 0, &e), &e);
    void *scratch = malloc(pool.bytes[ZB_GPT2_REGION_SCRATCH] + 64);
    pool.scratch = scratch;
    zb_action_t b1 = ACT(B, 0, 1), w0 = ACT(W, 0, 0), f0 = ACT(F, 0, 0), f1 = ACT(F, 0, 1);
    assert_null(pl_stash_pool_begin(&pool, &b1, &e));
    assert_non_null(strstr(e.msg, "no forward state"));
    assert_non_null(pl_stash_pool_begin(&pool, &f0, &e));
    assert_null(pl_stash_pool_begin(&pool, &w0, &e)); /* W before its B */
    assert_non_null(strstr(e.msg, "before its B"));
    assert_null(pl_stash_pool_begin(&pool, &f1, &e)); /* one slot: the program has one */
    assert_non_null(strstr(e.msg, "no free activation stash"));
    assert_null(pl_stash_pool_begin(&pool, &f0, &e));
    assert_non_null(strstr(e.msg, "repeated"));
    assert_int_equal(pl_stash_pool_bytes(&pool),
                     pl_stash_stage_bytes(&pl, &p, 0, NULL));
    pl_stash_pool_free(&pool);
    free(scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_stash_same_bits),
        cmocka_unit_test(test_stash_slots_follow_the_program),
        cmocka_unit_test(test_offload_slots_go_back_later),
        cmocka_unit_test(test_message_slots_follow_the_program),
        cmocka_unit_test(test_message_slots_spread),
        cmocka_unit_test(test_pool_refuses_out_of_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
