/* zbpp — the tied WTE's gradient on GPU ranks without a host round trip (docs/cuda.md, "The
 * step on a GPU"). The embedding stage's WTE gradient and the head stage's accumulator are
 * folded as the CPU folds them (embedding's + head's, pl_tied_embedding), on the device: in
 * place when one stage holds both; when two stages of one rank do, the head stage reads the
 * embedding stage's WTE and the embedding stage adds the head's accumulator into its gradient;
 * across ranks the embedding stage also copies the sum into the head's own copy's gradient, so
 * both steps read the same bits.
 *
 * Across two thread ranks on one GPU, two small host messages order the streams, and no host
 * waits for the device: the head records an event after its last W and sends {its gradient,
 * its accumulator, the event}; the embedding's stream waits for that event, adds, copies into
 * the head's gradient and records its own event, which it sends back; the head's stream waits
 * for it before anything it queues later (its optimizer reads that gradient, its next step
 * zeroes the accumulator the embedding read). A head that reads the embedding rank's WTE
 * (pl_cuda_wte_shared) has no WTE gradient of its own to copy into. Ranks in processes (MPI) or
 * on two GPUs keep the host path. */
#include "pipeline/rank_cuda_msg.h"
#include "pipeline/rank_cuda_update.h"
#include "pipeline/rank_device.h"
#include "cuda/stream.h"

/* what the head rank sends the embedding rank, and (ev only) back */
typedef struct {
    float *grad;
    const float *acc;
    struct CUevent_st *ev;
} tied_msg_t;

/* the local stage holding the embedding (embed) or the head, -1 none */
static int local_stage(const pl_rank_t *R, bool embed)
{
    for (int i = 0; i < R->n_local; i++)
        if (embed ? R->st[i].span.embed : R->st[i].span.head)
            return i;
    return -1;
}

/* both ends on this rank: on its one stream, no event needed; the head stage reads the
 * embedding stage's WTE (zb_cuda_stage_new_tied), so the fold is all there is */
static zb_status_t fold_here(cu_rank_t *C, int e, int h, zb_err_t *err)
{
    zb_cuda_stage_t *se = C->st[e].stage, *sh = C->st[h].stage;
    if (e == h)
        return zb_cuda_fold_tied(se, err);
    float *grad_e, *grad_h;
    const float *acc_e, *acc_h;
    size_t n, nh;
    zb_cuda_stage_wte_grads(se, &grad_e, &acc_e, &n);
    zb_cuda_stage_wte_grads(sh, &grad_h, &acc_h, &nh);
    if (!grad_e || grad_h || !acc_h || n != nh)
        return zb_err_set(err, ZB_EINVAL, "tied WTE: the stages' WTE buffers do not match");
    return zb_cuda_grad_wte_add(se, acc_h, NULL, err);
}

static zb_status_t tied_event(cu_rank_t *C, zb_cuda_stage_t *s, zb_err_t *err)
{
    return C->ev_tied ? ZB_OK : zb_cuda_event_new(s, &C->ev_tied, err);
}

/* e, h: the local stages holding the embedding and the head (-1: none here) */
static zb_status_t fold(zb_transport_t *t, pl_rank_t *R, int e, int h, bool *done, zb_err_t *err)
{
    pl_t *pl = R->pl;
    cu_rank_t *C = CU(R);
    if (e >= 0 && h >= 0) {
        *done = true;
        return fold_here(C, e, h, err);
    }
    int peer = e >= 0 ? pl->plan.head_rank : pl->plan.embed_rank;
    const pl_rank_t *Q = &pl->ranks[R->replica * pl->P + peer];
    if (pl->opts->transport || !Q->devst || CU(Q)->device != C->device)
        return ZB_OK; /* the host path; both ends decide alike */
    zb_cuda_stage_t *s = C->st[e >= 0 ? e : h].stage;
    float *grad;
    const float *acc;
    size_t n;
    zb_cuda_stage_wte_grads(s, &grad, &acc, &n);
    const uint32_t tag = zb_tag(ZB_TAG_EXCHANGE, 0, 0);
    tied_msg_t mine = {grad, acc, NULL}, theirs;
    zb_status_t st = tied_event(C, s, err);
    *done = true;
    if (h >= 0) { /* the head: offer, then order its stream after the embedding's fold */
        mine.ev = C->ev_tied;
        if (st == ZB_OK && (!acc || (!grad && !C->wte_owner)))
            st = zb_err_set(err, ZB_EINVAL, "tied WTE: head stage without its WTE buffers");
        if (st == ZB_OK)
            st = zb_cuda_event_record(s, C->ev_tied, err);
        if (st == ZB_OK)
            st = zb_send(t, &mine, sizeof mine, peer, tag, err);
        if (st == ZB_OK)
            st = zb_flush(t, err);
        if (st == ZB_OK)
            st = zb_recv(t, &theirs, sizeof theirs, peer, tag, err);
        return st == ZB_OK ? zb_cuda_stage_wait(s, theirs.ev, err) : st;
    }
    /* the embedding: after the head's last W, fold, hand the sum over, say when it is done
     * (the message is received even when this end cannot fold: the head waits for the reply) */
    zb_status_t got = zb_recv(t, &theirs, sizeof theirs, peer, tag, err);
    if (st == ZB_OK && !grad)
        st = zb_err_set(err, ZB_EINVAL, "tied WTE: embedding stage without its WTE gradient");
    if (st == ZB_OK)
        st = got;
    if (st == ZB_OK)
        st = zb_cuda_grad_wte_add(s, theirs.acc, theirs.ev, err);
    if (st == ZB_OK && theirs.grad) /* a head with a WTE of its own steps it with the sum */
        st = zb_cuda_copy_after(s, theirs.grad, grad, C->device, n, NULL, err);
    if (st == ZB_OK)
        st = zb_cuda_event_record(s, C->ev_tied, err);
    mine.ev = C->ev_tied;
    if (st == ZB_OK)
        st = zb_send(t, &mine, sizeof mine, peer, tag, err);
    return st == ZB_OK ? zb_flush(t, err) : st;
}

zb_status_t pl_cu_tied_wte(zb_transport_t *t, pl_rank_t *R, bool *done, zb_err_t *err)
{
    cu_rank_t *C = CU(R);
    int e = local_stage(R, true), h = local_stage(R, false);
    *done = false;
    if (e < 0 && h < 0)
        return ZB_OK;
    /* the rank that ends last folds on the whole GPU (elementwise: the same bits) */
    const bool wide = e >= 0 && pl_cu_on_tail(R);
    zb_status_t st = wide ? zb_cuda_stage_widen(C->st[e].stage, true, err) : ZB_OK;
    if (st == ZB_OK)
        st = fold(t, R, e, h, done, err);
    return wide ? pl_cu_narrow_back(C->st[e].stage, st, err) : st;
}
