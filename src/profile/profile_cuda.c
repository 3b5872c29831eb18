/* `zbpp profile --device cuda`: F, B and W of every part of the model timed on the GPU, into the
 * zb_profile_t the CPU profiler fills (src/profile/profile.c), so the same tables, partition and
 * schedule comparison follow.
 *
 * Three one-block stages (a model config with one layer: the embedding alone, one block, the
 * head alone) keep the device memory at one block's parameters whatever the depth; block l is
 * timed with block l's parameters uploaded into the block stage. A phase is timed as ROUND
 * microbatches back to back (one stash each), by events on its stream around them: the device
 * time, as a pipeline rank's host queues ahead of its stream (a round the host cannot launch
 * fast enough still shows it). Median of `reps` rounds after one warm-up round. For ranks that
 * share the GPU (profile_ranks > 1), the other ranks' partitions run blocks on copies of the
 * block stage while one part is timed (beside_ref says which phases), for the whole of the
 * timed round (cp_peers_top_up): the ranks of a pipeline share the device's memory bandwidth,
 * and a part timed alone runs faster than it will in the pipeline (the CPU profiler times its
 * ranks' threads at once for the same reason). cp_share then measures how that speed depends
 * on how many others are busy and on what they run (zb_share_t, for the simulator). Uses the
 * public zb_cuda_* API and the CUDA layer's streams and timers (src/cuda/stream.h; compiled in
 * every build; without CUDA the device check fails first). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/stream.h"
#include "profile/profile_params.h"
#include "zbpp/profile.h"
#include "zbpp/util.h"

/* ROUND microbatches per timed phase; a peer keeps up to COVER groups of ROUND block stashes
 * (two at least, the third where the device has room for it), so that its work beside a timed
 * round runs on stashes ready for it (cp_peers_top_up); a cycle of F, B, W uses CYCLES groups. */
enum { ROUND = 4, COVER = 3, CYCLES = 2, PINGPONGS = 15, PART_EMBED = 0, PART_BLOCK = 1,
       PART_HEAD = 2, LOAD_MSGS = 4 };

typedef struct {
    zb_gpt2_config_t one;        /* the model's config with one layer */
    zb_gpt2_params_t host;       /* parameters of `one` (the block being timed) */
    zb_cuda_stage_t *stage[3];   /* embedding, block, head */
    zb_cuda_partitions_t *parts; /* the ranks' partitions, owned by the timed context (NULL:
                                  * the whole GPU, or a peer's) */
    zb_cuda_stash_t *stash[3][ROUND]; /* the timed context's, per part */
    zb_cuda_stash_t *cover[COVER][ROUND]; /* a peer's (block part only), in groups of a round */
    int groups;                    /* a peer's groups of stashes (CYCLES .. COVER) */
    int cover_next[COVER];         /* the phase each group runs next (0 F, 1 B, 2 W) */
    /* a peer's work beside one timed round, in units (a phase on a group, or a cycle): units
     * queued, and events at the end of the last two (unit u records unit_done[u % 2]) */
    int units;
    struct CUevent_st *unit_done[2];
    zb_cuda_timer_t *timer[3];     /* the timed context's, per part: a round's device time */
    struct CUevent_st *round_done; /* the timed context's: the end of its round */
    float *x_in, *x_out, *dx_out, *dx_in; /* device, B·T·C each */
    float *msg;                  /* host, B·T·C, page-locked as the staged messages' slots */
    /* the host link kept busy beside a timed round (cp_share's copies case): LOAD_MSGS
     * messages' worth on the device and in page-locked memory, copied down and up on the
     * stash streams; per direction two copies in flight, load_done[d][i % 2] after copy i */
    float *load_dev, *load_host;
    size_t load_n;
    struct CUevent_st *load_done[2][2];
    int loads[2];
    int *tokens;                 /* host, 2·B·T: tokens then targets */
    size_t ntok;                 /* B·T */
} cprof_t;

/* Seconds for every context (p and its n peers) to copy nc floats over the host link at once,
 * device -> page-locked host (x_out -> msg), back (msg -> x_in), or both (COPY_BOTH: a copy
 * each way at once, the way up from the load buffers), each on its block stage's stash streams.
 * Each context queues COPY_REPS copies (pairs) back to back and the time is per copy: a stash
 * is ~100x a message, so a copy timed alone with the host's issue and wait around it (~10-20
 * us) would understate the bandwidth a stash gets by 10-20 %. */
enum { COPY_REPS = 8, COPY_DOWN = 0, COPY_UP = 1, COPY_BOTH = 2 };

static zb_status_t copies_at_once(cprof_t *p, cprof_t *peers, int n, int dir, size_t nc,
                                  double *secs, zb_err_t *err)
{
    struct CUevent_st *done[2][64] = {{NULL}};
    n = n < 63 ? n : 63;
    zb_status_t st = ZB_OK;
    for (int q = 0; q <= n && st == ZB_OK; q++)
        for (int d = 0; d < 2 && st == ZB_OK; d++)
            st = zb_cuda_event_new((q ? &peers[q - 1] : p)->stage[PART_BLOCK], &done[d][q], err);
    double t0 = zb_now();
    for (int r = 0; r < COPY_REPS; r++) /* every context's first copy first: all in flight */
        for (int q = 0; q <= n && st == ZB_OK; q++) {
            cprof_t *c = q ? &peers[q - 1] : p;
            zb_cuda_stage_t *s = c->stage[PART_BLOCK];
            if (dir != COPY_UP)
                st = zb_cuda_stash_copy(s, false, c->msg, c->x_out, nc, done[0][q], err);
            if (st == ZB_OK && dir != COPY_DOWN)
                st = dir == COPY_UP
                         ? zb_cuda_stash_copy(s, true, c->x_in, c->msg, nc, done[1][q], err)
                         : zb_cuda_stash_copy(s, true, c->load_dev, c->load_host, nc,
                                              done[1][q], err);
        }
    for (int q = 0; q <= n && st == ZB_OK; q++)
        for (int d = 0; d < 2 && st == ZB_OK; d++)
            if ((d == 0 && dir != COPY_UP) || (d == 1 && dir != COPY_DOWN))
                st = zb_cuda_event_sync(done[d][q], err);
    *secs = (zb_now() - t0) / COPY_REPS;
    for (int q = 0; q <= n; q++)
        for (int d = 0; d < 2; d++)
            zb_cuda_event_free(done[d][q]);
    return st;
}

static uint32_t cp_rand(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (uint32_t)(*s >> 32);
}

/* Parameters of the one-layer config: the shared tensors of `full`, and block l's slice of every
 * per-layer tensor (a tensor whose size differs between the two configs). */
static void cp_take_block(zb_gpt2_params_t *one, const zb_gpt2_params_t *full, int l)
{
    for (int k = 0; k < ZB_GPT2_NUM_TENSORS; k++) {
        size_t n = one->sizes[k];
        size_t off = full->sizes[k] == n ? 0 : (size_t)l * n;
        memcpy(one->t[k], full->t[k] + off, n * sizeof(float));
    }
}

static void cp_free(cprof_t *p)
{
    for (int k = 0; k < 3; k++) {
        for (int r = 0; r < ROUND; r++)
            zb_cuda_stash_free(p->stash[k][r]);
        zb_cuda_stage_free(p->stage[k]);
    }
    for (int g = 0; g < COVER; g++)
        for (int r = 0; r < ROUND; r++)
            zb_cuda_stash_free(p->cover[g][r]);
    for (int k = 0; k < 3; k++)
        zb_cuda_timer_free(p->timer[k]);
    zb_cuda_event_free(p->unit_done[0]);
    zb_cuda_event_free(p->unit_done[1]);
    zb_cuda_event_free(p->round_done);
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 2; i++)
            zb_cuda_event_free(p->load_done[d][i]);
    zb_cuda_buffer_free(p->load_dev);
    zb_cuda_host_free(p->load_host);
    zb_cuda_partitions_free(p->parts); /* after the stages that queued on its stream */
    zb_cuda_buffer_free(p->x_in);
    zb_cuda_buffer_free(p->x_out);
    zb_cuda_buffer_free(p->dx_out);
    zb_cuda_buffer_free(p->dx_in);
    zb_gpt2_params_free(&p->host);
    zb_cuda_host_free(p->msg);
    free(p->tokens);
    memset(p, 0, sizeof *p);
}

/* The context timed in partition `slot` of `shared` (NULL: the first context makes the ranks'
 * partitions itself and owns them); slot > 0: a peer, which runs the block part only (on its
 * groups of stashes) and holds no embedding or head. */
static zb_status_t cp_init(cprof_t *p, const zb_gpt2_params_t *full, int B, int T,
                           const zb_cuda_train_opts_t *o, zb_cuda_partitions_t *shared, int slot,
                           zb_err_t *err)
{
    memset(p, 0, sizeof *p);
    p->one = full->cfg;
    p->one.layers = 1;
    const zb_gpt2_span_t spans[3] = {
        {0, 0, true, false}, {0, 1, false, false}, {1, 1, false, true}};
    size_t n = (size_t)B * (size_t)T, nc = n * (size_t)full->cfg.channels;
    p->ntok = n;
    zb_status_t st = zb_gpt2_params_alloc(&p->host, &p->one, err);
    if (st == ZB_OK) {
        p->tokens = malloc(2 * n * sizeof *p->tokens);
        if (!p->tokens)
            st = zb_err_set(err, ZB_ENOMEM, "profile: out of memory for the inputs");
    }
    if (st == ZB_OK)
        st = zb_cuda_host_alloc(nc, &p->msg, err);
    /* the partition a pipeline rank will get: the same split of the same device */
    int sharing = o->profile_ranks > 1 ? o->profile_ranks : 1;
    if (st == ZB_OK && !shared && slot == 0 && (sharing > 1 || o->sm_per_rank > 0)) {
        st = zb_cuda_partitions_new(o->device, sharing, o->sm_per_rank, &p->parts, err);
        if (st == ZB_EUNSUPPORTED && o->sm_per_rank == 0)
            st = ZB_OK, p->parts = NULL; /* no green contexts: the ranks share the whole GPU */
        shared = p->parts;
    }
    const bool peer = slot > 0;
    for (int k = peer ? PART_BLOCK : 0; k < (peer ? PART_BLOCK + 1 : 3) && st == ZB_OK; k++) {
        st = zb_cuda_stage_new(&p->one, &spans[k], B, T, o->precision, o->device, &p->stage[k],
                               err);
        if (st == ZB_OK)
            st = zb_cuda_stage_set_fp32_attention(p->stage[k], o->fp32_attention, err);
        if (st == ZB_OK) /* as the pipeline's heads: the F leaves the gradient (cp_run's scale) */
            st = zb_cuda_stage_fold_loss_grad(p->stage[k], 1.0f / ((float)B * (float)T), err);
        if (st == ZB_OK && shared)
            st = zb_cuda_stage_use_stream(p->stage[k], zb_cuda_partition_stream(shared, slot),
                                          zb_cuda_partition_sms(shared, slot), err);
        for (int r = 0; r < ROUND && st == ZB_OK && !peer; r++)
            st = zb_cuda_stash_new(p->stage[k], &p->stash[k][r], err);
        for (int g = 0; g < COVER && peer && st == ZB_OK; g++) {
            for (int r = 0; r < ROUND && st == ZB_OK; r++)
                st = zb_cuda_stash_new(p->stage[k], &p->cover[g][r], err);
            if (st == ZB_ENOMEM && g >= CYCLES) { /* enough without this group: give it back */
                for (int r = 0; r < ROUND; r++)
                    zb_cuda_stash_free(p->cover[g][r]), p->cover[g][r] = NULL;
                st = ZB_OK;
                break;
            }
            if (st == ZB_OK)
                p->groups = g + 1;
        }
        if (st == ZB_OK && !peer && k == PART_HEAD)
            st = zb_cuda_stage_loss_slots(p->stage[k], ROUND, err);
        if (st == ZB_OK && !peer) /* its events on the stage's device */
            st = zb_cuda_stage_bind(p->stage[k], err);
        if (st == ZB_OK && !peer)
            st = zb_cuda_timer_new(zb_cuda_stage_stream(p->stage[k]), 1, &p->timer[k], err);
    }
    for (int e = 0; e < 2 && st == ZB_OK && peer; e++)
        st = zb_cuda_event_new(p->stage[PART_BLOCK], &p->unit_done[e], err);
    if (st == ZB_OK && !peer)
        st = zb_cuda_event_new(p->stage[PART_BLOCK], &p->round_done, err);
    float **bufs[4] = {&p->x_in, &p->x_out, &p->dx_out, &p->dx_in};
    for (int b = 0; b < 4 && st == ZB_OK; b++)
        st = zb_cuda_buffer_alloc(p->stage[PART_BLOCK], nc, bufs[b], err);
    p->load_n = LOAD_MSGS * nc;
    if (st == ZB_OK)
        st = zb_cuda_buffer_alloc(p->stage[PART_BLOCK], p->load_n, &p->load_dev, err);
    if (st == ZB_OK)
        st = zb_cuda_host_alloc(p->load_n, &p->load_host, err);
    for (int e = 0; e < 4 && st == ZB_OK; e++)
        st = zb_cuda_event_new(p->stage[PART_BLOCK], &p->load_done[e / 2][e % 2], err);
    if (st == ZB_OK) {
        uint64_t seed = 0x9E3779B97F4A7C15u;
        for (size_t i = 0; i < 2 * n; i++)
            p->tokens[i] = (int)(cp_rand(&seed) % (uint32_t)full->cfg.vocab);
        for (size_t i = 0; i < nc; i++)
            p->msg[i] = (float)cp_rand(&seed) / 4294967296.0f - 0.5f;
        st = zb_cuda_copy_to_device(p->stage[PART_BLOCK], p->x_in, p->msg, nc, err);
        if (st == ZB_OK)
            st = zb_cuda_copy_to_device(p->stage[PART_BLOCK], p->dx_out, p->msg, nc, err);
    }
    cp_take_block(&p->host, full, 0);
    for (int k = 0; k < 3 && st == ZB_OK; k++)
        if (p->stage[k])
            st = zb_cuda_params_upload(p->stage[k], &p->host, err);
    if (st != ZB_OK)
        cp_free(p);
    return st;
}

/* Queue ROUND microbatches of phase `ph` (0 F, 1 B, 2 W, FUSED_BW: each microbatch's B then
 * its W, as a pipeline's BW runs them) of part k on its stream, one on each of the ROUND
 * stashes. */
enum { FUSED_BW = 3 };
static zb_status_t cp_queue(cprof_t *p, int k, zb_cuda_stash_t *const *stash, int ph, float scale,
                            zb_err_t *err)
{
    zb_cuda_stage_t *s = p->stage[k];
    const int *targets = p->tokens + p->ntok;
    bool embed = k == PART_EMBED, head = k == PART_HEAD;
    zb_status_t st = ZB_OK;
    for (int r = 0; r < ROUND && st == ZB_OK; r++) {
        if (ph == 0) /* the head's losses into slots, as the pipeline's ranks take them: no
                      * host wait inside the round */
            st = zb_cuda_forward_deferred(s, stash[r], embed ? p->tokens : NULL,
                                          embed ? NULL : p->x_in, head ? targets : NULL,
                                          head ? NULL : p->x_out, r, err);
        if (st == ZB_OK && (ph == 1 || ph == FUSED_BW))
            st = zb_cuda_backward_input(s, stash[r], head ? NULL : p->dx_out, scale,
                                        embed ? NULL : p->dx_in, err);
        if (st == ZB_OK && (ph == 2 || ph == FUSED_BW))
            st = zb_cuda_backward_weight(s, stash[r], err);
    }
    return st;
}

static zb_status_t cp_phase(cprof_t *p, int k, int ph, float scale, zb_err_t *err)
{
    return cp_queue(p, k, p->stash[k], ph, scale, err);
}

/* ---- the other ranks' work while one part is timed ---- */

/* Phase ph on peer q's stash group g; each stash then takes the next phase (F may also repeat). */
static zb_status_t peer_phase(cprof_t *q, int g, int ph, float scale, zb_err_t *err)
{
    q->cover_next[g] = (ph + 1) % 3;
    return cp_queue(q, PART_BLOCK, q->cover[g], ph, scale, err);
}

/* Queue, untimed, what group g needs before it can run phase ph (a B needs an F, a W a B, an F
 * anything but a pending B); *queued is set when anything was. */
static zb_status_t peer_ready(cprof_t *q, int g, int ph, float scale, bool *queued, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    while (st == ZB_OK && q->cover_next[g] != ph && !(ph == 0 && q->cover_next[g] == 1)) {
        st = peer_phase(q, g, q->cover_next[g], scale, err);
        *queued = true;
    }
    return st;
}

/* What the peers run beside a timed phase: one phase throughout (0 F, 1 B, 2 W: every group of
 * stashes in turn), or BESIDE_CYCLE, F, B, W in turn on CYCLES groups. */
enum { BESIDE_CYCLE = 3 };

/* The profile's own neighbours, beside a timed F, B, W (and fused BW): a pipeline rank's
 * neighbours mostly run blocks, whatever part it runs itself (the head and the embedding timed
 * beside copies of themselves ran ~5 % slower than in the pipeline, 2026-11-27b). An F is
 * timed beside forwards, a B beside input backwards, as a pipeline's steady state runs them
 * side by side. A W (and a BW) fills the holes between F's and B's, so it is timed beside
 * cycles of F, B, W (beside W's alone it was timed 1.15-1.2x faster than it ran in zb-h2 and
 * zb-v, 2026-11-27). */
static const int beside_ref[4] = {0, 1, BESIDE_CYCLE, BESIDE_CYCLE};

/* The phase a peer's unit of `beside` work starts with, and the groups of stashes its units
 * take in turn. */
static int beside_first(int beside) { return beside == BESIDE_CYCLE ? 0 : beside; }
static int beside_groups(const cprof_t *q, int beside)
{
    return beside == BESIDE_CYCLE ? CYCLES : q->groups;
}

/* Peer q's next unit of work beside a timed phase: the phase on its next group of stashes
 * (after what that group needs first: only a round longer than as many of the peer's units as
 * it has groups needs that), or F, B, W on it. Records unit_done after it. */
static zb_status_t peer_unit(cprof_t *q, int beside, float scale, zb_err_t *err)
{
    const int g = q->units % beside_groups(q, beside), first = beside_first(beside);
    bool queued = false;
    zb_status_t st = peer_ready(q, g, first, scale, &queued, err);
    for (int c = first; c <= (beside == BESIDE_CYCLE ? 2 : first) && st == ZB_OK; c++)
        st = peer_phase(q, g, c, scale, err);
    if (st == ZB_OK)
        st = zb_cuda_event_record(q->stage[PART_BLOCK], q->unit_done[q->units % 2], err);
    q->units++;
    return st;
}

/* Start the peers' work beside a timed phase: first, untimed and waited for, what their stashes
 * need before it; then two units each, queued before the timed round so that they run from its
 * start. cp_peers_top_up keeps them busy until it ends. */
static zb_status_t cp_peers_start(cprof_t *peers, int n_peers, int beside, float scale,
                                  zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    for (int q = 0; q < n_peers && st == ZB_OK; q++) {
        bool queued = false;
        for (int g = 0; g < beside_groups(&peers[q], beside) && st == ZB_OK; g++)
            st = peer_ready(&peers[q], g, beside_first(beside), scale, &queued, err);
        if (st == ZB_OK && queued)
            st = zb_cuda_sync(peers[q].stage[PART_BLOCK], err);
        peers[q].units = 0;
    }
    for (int u = 0; u < 2; u++)
        for (int q = 0; q < n_peers && st == ZB_OK; q++)
            st = peer_unit(&peers[q], beside, scale, err);
    return st;
}

/* ---- the host link kept busy beside a timed round (share.copy_slow) ---- */

/* Context c's next copy in direction d (0 down, 1 up) of its load buffers. */
static zb_status_t load_copy(cprof_t *c, int d, zb_err_t *err)
{
    zb_status_t st = zb_cuda_stash_copy(c->stage[PART_BLOCK], d == 1,
                                        d ? c->load_dev : c->load_host,
                                        d ? c->load_host : c->load_dev, c->load_n,
                                        c->load_done[d][c->loads[d] % 2], err);
    c->loads[d]++;
    return st;
}

/* Two copies each way in flight on c's stash streams, queued before the timed round. */
static zb_status_t load_start(cprof_t *c, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    c->loads[0] = c->loads[1] = 0;
    for (int i = 0; i < 4 && st == ZB_OK; i++)
        st = load_copy(c, i % 2, err);
    return st;
}

/* A direction whose older copy has ended gets another: one in flight at least, always. */
static zb_status_t load_top_up(cprof_t *c, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    for (int d = 0; d < 2 && st == ZB_OK; d++) {
        bool older_done = false;
        st = zb_cuda_event_query(c->load_done[d][c->loads[d] % 2], &older_done, err);
        if (st == ZB_OK && older_done)
            st = load_copy(c, d, err);
    }
    return st;
}

/* Wait for c's copies still in flight (the next round is timed without them). */
static zb_status_t load_drain(cprof_t *c, zb_err_t *err)
{
    zb_status_t st = ZB_OK;
    for (int e = 0; e < 4 && st == ZB_OK; e++)
        if (c->loads[e / 2] > e % 2)
            st = zb_cuda_event_sync(c->load_done[e / 2][e % 2], err);
    c->loads[0] = c->loads[1] = 0;
    return st;
}

/* Until `done` (the timed round's end) has happened: a peer whose second-last unit has ended
 * (one left) gets another, so every peer computes for the whole round, however long the
 * timed part is; with `copies`, the timed context p and every peer keep copying both ways. */
static zb_status_t cp_peers_top_up(cprof_t *p, cprof_t *peers, int n_peers, int beside,
                                   bool copies, float scale, struct CUevent_st *done,
                                   zb_err_t *err)
{
    for (;;) {
        bool finished = false;
        zb_status_t st = zb_cuda_event_query(done, &finished, err);
        if (st != ZB_OK || finished)
            return st;
        for (int q = 0; q < n_peers && st == ZB_OK; q++) {
            bool older_done = false;
            st = zb_cuda_event_query(peers[q].unit_done[peers[q].units % 2], &older_done, err);
            if (st == ZB_OK && older_done)
                st = peer_unit(&peers[q], beside, scale, err);
            if (st == ZB_OK && copies)
                st = load_top_up(&peers[q], err);
        }
        if (st == ZB_OK && copies)
            st = load_top_up(p, err);
        if (st != ZB_OK)
            return st;
    }
}

/* One round of part k: ROUND forwards, then ROUND input backwards, then ROUND weight
 * backwards (fused: ROUND forwards, then ROUND fused BW's, into t.f and t.b), each phase
 * between synchronisations, its device time from events around it (launch and
 * synchronisation latency left out, as a pipeline's ranks queue ahead of their streams), the
 * n_peers other ranks' contexts busy throughout with beside[phase]. Seconds per microbatch
 * into t. */
static zb_status_t cp_round(cprof_t *p, cprof_t *peers, int n_peers, int k, const int beside[4],
                            bool fused, bool copies, float scale, zb_op_time_t *t, zb_err_t *err)
{
    zb_cuda_stage_t *s = p->stage[k];
    zb_cuda_timer_t *tm = p->timer[k];
    zb_status_t st = zb_cuda_sync(s, err);
    double secs[3] = {0, 0, 0};
    for (int i = 0; i < (fused ? 2 : 3) && st == ZB_OK; i++) {
        const int ph = fused && i == 1 ? FUSED_BW : i;
        st = cp_peers_start(peers, n_peers, beside[ph], scale, err);
        for (int q = 0; q <= n_peers && copies && st == ZB_OK; q++)
            st = load_start(q ? &peers[q - 1] : p, err);
        if (st == ZB_OK)
            st = zb_cuda_timer_step_begin(tm, err);
        if (st == ZB_OK)
            st = zb_cuda_timer_begin(tm, 0, err);
        if (st == ZB_OK)
            st = cp_phase(p, k, ph, scale, err);
        if (st == ZB_OK)
            st = zb_cuda_timer_end(tm, 0, err);
        if (st == ZB_OK)
            st = zb_cuda_event_record(s, p->round_done, err);
        if (st == ZB_OK)
            st = cp_peers_top_up(p, peers, n_peers, beside[ph], copies, scale, p->round_done,
                                 err);
        double t0 = 0, t1 = 0;
        if (st == ZB_OK)
            st = zb_cuda_timer_resolve(tm, tm, 0, &t0, &t1, 1, err);
        secs[i] = t1 - t0;
        if (st == ZB_OK)
            st = zb_cuda_sync(s, err);
        for (int q = 0; q < n_peers && st == ZB_OK; q++)
            st = zb_cuda_sync(peers[q].stage[PART_BLOCK], err);
        for (int q = 0; q <= n_peers && copies && st == ZB_OK; q++)
            st = load_drain(q ? &peers[q - 1] : p, err);
    }
    if (st == ZB_OK)
        *t = (zb_op_time_t){secs[0] / ROUND, secs[1] / ROUND, secs[2] / ROUND};
    return st;
}

static double cp_median(double *v, int n) { return zb_median(v, (size_t)n); }

/* The ranks' slowdown of each other (zb_profile_t.share): the block part timed with k = 0 ..
 * n_peers of the other ranks busy as the profile's parts are (beside_ref), with all of them
 * running one phase throughout (F, B or W: the mix), as a fused BW beside all of them as
 * profiled, and beside all of them as profiled with every rank also copying both ways over
 * the host link (copy_slow), reps rounds each, interleaved so that drift hits every case
 * alike. Each factor is a median time over the one with all n_peers busy as the parts were
 * timed; the fused BW's is over that B's and W's sum. */
static zb_status_t cp_share(cprof_t *p, cprof_t *peers, int n_peers, int reps, float scale,
                            zb_share_t *out, zb_err_t *err)
{
    memset(out, 0, sizeof *out);
    if (n_peers < 1 || n_peers + 1 > ZB_SHARE_MAX)
        return ZB_OK; /* no sharing, or more ranks than the model takes: fixed costs */
    /* cases: k = 0 .. n_peers, then all beside F, B, W, then the fused BW, then the copies */
    const int K = n_peers + 1, C = K + 5, FUSED = K + 3, COPIES = K + 4;
    double *t = malloc(3 * (size_t)C * (size_t)reps * sizeof *t); /* [phase][case][rep] */
    if (!t)
        return zb_err_set(err, ZB_ENOMEM, "profile: out of memory");
#define T_AT(ph, c, r) t[((size_t)(ph) * (size_t)C + (size_t)(c)) * (size_t)reps + (size_t)(r)]
    zb_status_t st = ZB_OK;
    for (int r = 0; r < reps && st == ZB_OK; r++)
        for (int c = 0; c < C && st == ZB_OK; c++) {
            zb_op_time_t m = {0, 0, 0};
            const int all[4] = {c - K, c - K, c - K, c - K};
            const bool mix = c >= K && c < FUSED;
            st = cp_round(p, peers, c < K ? c : n_peers, PART_BLOCK, mix ? all : beside_ref,
                          c == FUSED, c == COPIES, scale, &m, err);
            T_AT(0, c, r) = m.f, T_AT(1, c, r) = m.b, T_AT(2, c, r) = m.w;
        }
    for (int ph = 0; ph < 3 && st == ZB_OK; ph++) {
        double ref = cp_median(&T_AT(ph, n_peers, 0), reps);
        for (int c = 0; c < FUSED; c++) {
            double f = ref > 0 ? cp_median(&T_AT(ph, c, 0), reps) / ref : 1.0;
            f = f > 0 && f <= 1e3 ? f : 1.0; /* a timer's zero: no information */
            if (c < K)
                out->f[ph][c] = f;
            else
                out->mix[ph][c - K] = f;
        }
        double beside = ref > 0 ? cp_median(&T_AT(ph, COPIES, 0), reps) / ref : 1.0;
        out->copy_slow[ph] = beside > 0 && beside <= 1e3 ? beside : 1.0;
    }
    if (st == ZB_OK) {
        double split = cp_median(&T_AT(1, n_peers, 0), reps) + cp_median(&T_AT(2, n_peers, 0), reps);
        double f = split > 0 ? cp_median(&T_AT(1, FUSED, 0), reps) / split : 1.0;
        out->bw = f > 0 && f <= 1e3 ? f : 1.0;
    }
#undef T_AT
    free(t);
    if (st == ZB_OK)
        out->n = K;
    return st;
}

zb_status_t zb_cuda_profile_measure(const zb_gpt2_params_t *params, const zb_gpt2_config_t *cfg,
                                    int B, int T, int reps, const zb_cuda_train_opts_t *opts,
                                    zb_profile_t *out, zb_err_t *err)
{
    memset(out, 0, sizeof *out);
    if (!cfg || !opts)
        return zb_err_set(err, ZB_EINVAL, "profile: config and options are required");
    zb_status_t st = zb_gpt2_config_check(cfg, err);
    if (st != ZB_OK)
        return st;
    if (B < 1 || T < 1 || T > cfg->max_seq || reps < 1 || reps > 1000)
        return zb_err_set(err, ZB_EINVAL,
                          "profile: need B >= 1, 1 <= T <= max_seq (%d), 1..1000 repetitions "
                          "(got B %d, T %d, %d)", cfg->max_seq, B, T, reps);
    if ((st = zb_cuda_require_device(opts->device, err)) != ZB_OK)
        return st;
    double start = zb_now();
    zb_gpt2_params_t own;
    if ((st = zb_profile_params(cfg, params, &own, &params, err)) != ZB_OK)
        return st;
    int L = cfg->layers, parts = L + 2;
    double *times = calloc((size_t)reps * (size_t)parts * 3, sizeof *times);
    double col[3][1000];
    out->block = calloc((size_t)L, sizeof *out->block);
    cprof_t p;
    memset(&p, 0, sizeof p);
    /* the other ranks sharing the GPU, each in its own partition, busy while one is timed */
    int n_peers = opts->profile_ranks > 1 ? opts->profile_ranks - 1 : 0;
    cprof_t *peers = calloc((size_t)n_peers + 1, sizeof *peers);
    if (!times || !out->block || !peers)
        st = zb_err_set(err, ZB_ENOMEM, "profile: out of memory");
    if (st == ZB_OK)
        st = cp_init(&p, params, B, T, opts, NULL, 0, err);
    int made = 0;
    for (; made < n_peers && st == ZB_OK; made++)
        st = cp_init(&peers[made], params, B, T, opts, p.parts, made + 1, err);
    if (st != ZB_OK && made > 0)
        made--; /* the failed one freed itself */
    float scale = 1.0f / ((float)B * (float)T);
    /* round -1 warms the device, cuBLASLt's plan cache and the allocator up: not recorded */
    for (int r = -1; r < reps && st == ZB_OK; r++)
        for (int part = 0; part < parts && st == ZB_OK; part++) {
            int k = part == 0 ? PART_EMBED : part == L + 1 ? PART_HEAD : PART_BLOCK;
            if (k == PART_BLOCK) { /* block part-1's own parameters (outside the timing) */
                cp_take_block(&p.host, params, part - 1);
                st = zb_cuda_params_upload(p.stage[k], &p.host, err);
            }
            zb_op_time_t t;
            if (st == ZB_OK)
                st = cp_round(&p, peers, n_peers, k, beside_ref, false, false, scale, &t, err);
            if (st == ZB_OK && r >= 0) {
                double *d = times + ((size_t)r * (size_t)parts + (size_t)part) * 3;
                d[0] = t.f, d[1] = t.b, d[2] = t.w;
            }
        }
    for (int part = 0; part < parts && st == ZB_OK; part++) {
        for (int r = 0; r < reps; r++)
            for (int c = 0; c < 3; c++)
                col[c][r] = times[((size_t)r * (size_t)parts + (size_t)part) * 3 + (size_t)c];
        zb_op_time_t m = {cp_median(col[0], reps), cp_median(col[1], reps),
                          cp_median(col[2], reps)};
        if (part == 0)
            out->embed = m;
        else if (part == L + 1)
            out->head = m;
        else
            out->block[part - 1] = m;
    }
    if (st == ZB_OK) /* the block of the last part is still uploaded */
        st = cp_share(&p, peers, made, reps, scale, &out->share, err);
    /* one activation message as the run will move it: with device messages one device-to-device
     * copy, else device -> page-locked host slot -> device (the staged path's two copies) */
    size_t nc = (size_t)B * (size_t)T * (size_t)cfg->channels;
    zb_cuda_stage_t *bs = p.stage[PART_BLOCK];
    double rtt[PINGPONGS];
    for (int i = -1; i < PINGPONGS && st == ZB_OK; i++) {
        double t0 = zb_now();
        if (opts->device_messages) {
            st = zb_cuda_copy_after(bs, p.x_in, p.x_out, zb_cuda_stage_device(bs), nc, NULL, err);
            if (st == ZB_OK)
                st = zb_cuda_sync(bs, err);
        } else {
            st = zb_cuda_copy_to_host(bs, p.msg, p.x_out, nc, err);
            if (st == ZB_OK)
                st = zb_cuda_copy_to_device(bs, p.x_in, p.msg, nc, err);
        }
        if (i >= 0)
            rtt[i] = zb_now() - t0;
    }
    /* offload's copies: the same block to page-locked host memory and back on the stash
     * streams, every rank of the GPU copying at once (they share its host link), each
     * direction timed apart (the planner times an O and an L with these bandwidths) */
    /* ... and one rank copying alone (what a copy gets while the others' channels are idle:
     * the planner's link model, docs/offload.md) */
    /* ... and every rank copying both ways at once (the link's total both ways) */
    double d2h[PINGPONGS], h2d[PINGPONGS], d2h1[PINGPONGS], h2d1[PINGPONGS], both[PINGPONGS];
    for (int i = -1; i < PINGPONGS && st == ZB_OK; i++) {
        double down = 0, up = 0, down1 = 0, up1 = 0, two = 0;
        st = copies_at_once(&p, peers, made, COPY_DOWN, nc, &down, err);
        if (st == ZB_OK)
            st = copies_at_once(&p, peers, made, COPY_UP, nc, &up, err);
        if (st == ZB_OK)
            st = copies_at_once(&p, peers, 0, COPY_DOWN, nc, &down1, err);
        if (st == ZB_OK)
            st = copies_at_once(&p, peers, 0, COPY_UP, nc, &up1, err);
        if (st == ZB_OK)
            st = copies_at_once(&p, peers, made, COPY_BOTH, nc, &two, err);
        if (i >= 0)
            d2h[i] = down, h2d[i] = up, d2h1[i] = down1, h2d1[i] = up1, both[i] = two;
    }
    if (st == ZB_OK) {
        double bytes = (double)nc * sizeof(float), down = cp_median(d2h, PINGPONGS),
               up = cp_median(h2d, PINGPONGS), down1 = cp_median(d2h1, PINGPONGS),
               up1 = cp_median(h2d1, PINGPONGS), two = cp_median(both, PINGPONGS);
        out->copy_d2h = down > 0 ? bytes / down : 0;
        out->copy_h2d = up > 0 ? bytes / up : 0;
        out->copy_d2h_alone = down1 > 0 ? bytes / down1 : 0;
        out->copy_h2d_alone = up1 > 0 ? bytes / up1 : 0;
        out->copy_both = two > 0 ? 2.0 * (made + 1) * bytes / two : 0;
        out->comm = cp_median(rtt, PINGPONGS);
        out->msg_bytes = nc * sizeof(float);
        out->cfg = *cfg;
        out->batch = B, out->seq = T, out->reps = reps, out->layers = L;
        out->threads = 1 + n_peers, out->rank_threads = 1; /* ranks busy at once */
        out->wall = zb_now() - start;
    }
    for (int q = 0; q < made; q++) /* before the partitions p owns */
        cp_free(&peers[q]);
    free(peers);
    cp_free(&p);
    free(times);
    zb_gpt2_params_free(&own);
    if (st != ZB_OK)
        zb_profile_free(out);
    return st;
}
