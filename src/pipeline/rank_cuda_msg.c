/* zbpp — a GPU rank's messages (rank_cuda.c): staged through pinned host slots on each stage's
 * copy streams (a SEND's download queued after its producer, a RECV's slot uploaded at the
 * rank's next device call), or with device messages (thread ranks) a handle and an event the
 * receiver's copy waits for. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/rank_cuda_msg.h"
#include "pipeline/rank_memory_cuda.h"

zb_status_t pl_cu_buf_init(pl_rank_t *R, pl_stage_t *ls, cu_stage_t *cs, cu_buf_t *b,
                           pl_buf_kind_t kind, zb_err_t *err)
{
    const pl_t *pl = R->pl;
    memset(b, 0, sizeof *b);
    if (!(b->slot = malloc((size_t)pl->M * sizeof *b->slot)) ||
        (b->n = pl_cuda_msg_slots(pl, &pl->plan.sched->rank[R->rank], ls->stage, kind,
                                  b->slot)) < 0)
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for message slots", R->rank);
    zb_status_t st = zb_cuda_buffer_alloc(cs->stage, (size_t)(b->n ? b->n : 1) * pl->NC, &b->mem,
                                          err);
    const bool staged = !CU(R)->device_messages;
    const size_t n = (size_t)b->n;
    if (st == ZB_OK && staged && (kind == PL_BUF_X_OUT || kind == PL_BUF_DX_IN) &&
        !(b->reuse = calloc(n ? n : 1, sizeof *b->reuse)))
        st = zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for message slots", R->rank);
    if (st == ZB_OK && staged &&
        ((kind == PL_BUF_DX_OUT && !cs->next_here) || (kind == PL_BUF_X_IN && !cs->prev_here))) {
        if (!(b->read = calloc(n ? n : 1, sizeof *b->read)))
            return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for message slots",
                              R->rank);
        for (int k = 0; k < b->n && st == ZB_OK; k++)
            st = zb_cuda_event_new(cs->stage, &b->read[k], err);
    }
    return st;
}

void pl_cu_buf_free(cu_buf_t *b)
{
    zb_cuda_buffer_free(b->mem);
    for (int k = 0; b->read && k < b->n; k++)
        zb_cuda_event_free(b->read[k]);
    free(b->read), free(b->reuse), free(b->slot);
    memset(b, 0, sizeof *b);
}

zb_status_t pl_cu_before_write(cu_stage_t *cs, cu_buf_t *b, int m, zb_err_t *err)
{
    int k = b && b->reuse && m >= 0 ? b->slot[m] : -1;
    if (k < 0 || !b->reuse[k])
        return ZB_OK;
    struct CUevent_st *ev = b->reuse[k];
    b->reuse[k] = NULL;
    return zb_cuda_stage_wait(cs->stage, ev, err);
}

zb_status_t pl_cu_after_read(cu_stage_t *cs, cu_buf_t *b, int m, zb_err_t *err)
{
    int k = b->read && m >= 0 ? b->slot[m] : -1;
    return k < 0 ? ZB_OK : zb_cuda_event_record(cs->stage, b->read[k], err);
}

zb_status_t pl_cu_device_messages_init(pl_rank_t *R, cu_stage_t *cs, zb_err_t *err)
{
    size_t M = (size_t)R->pl->M;
    if (!(cs->ev_x_out = calloc(M, sizeof *cs->ev_x_out)) ||
        !(cs->ev_dx_in = calloc(M, sizeof *cs->ev_dx_in)) ||
        !(cs->out_x = calloc(M, sizeof *cs->out_x)) || !(cs->out_dx = calloc(M, sizeof *cs->out_dx)) ||
        !(cs->in_x = calloc(M, sizeof *cs->in_x)) || !(cs->in_dx = calloc(M, sizeof *cs->in_dx)))
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for device messages", R->rank);
    zb_status_t st = ZB_OK;
    for (size_t m = 0; m < M && st == ZB_OK; m++) {
        if (cs->own_x_out.slot)
            st = zb_cuda_event_new(cs->stage, &cs->ev_x_out[m], err);
        if (st == ZB_OK && cs->own_dx_in.slot)
            st = zb_cuda_event_new(cs->stage, &cs->ev_dx_in[m], err);
    }
    return st;
}

/* Staging: the pinned slots this stage's messages need, and their events. */
zb_status_t pl_cu_staging_init(pl_rank_t *R, pl_stage_t *ls, cu_stage_t *cs, zb_err_t *err)
{
    const size_t M = (size_t)R->pl->M, MNC = M * R->pl->NC;
    zb_status_t st = ZB_OK;
    if (cs->own_x_out.slot)
        st = zb_cuda_host_alloc(MNC, &cs->pin_x_out, err);
    if (st == ZB_OK && cs->own_dx_in.slot)
        st = zb_cuda_host_alloc(MNC, &cs->pin_dx_in, err);
    if (st == ZB_OK && !ls->span.embed && !cs->prev_here)
        st = zb_cuda_host_alloc(MNC, &cs->pin_x_in, err);
    if (st == ZB_OK && !ls->span.head && !cs->next_here)
        st = zb_cuda_host_alloc(MNC, &cs->pin_dx_out, err);
    if (st != ZB_OK)
        return st;
    if (!(cs->ev_prod = calloc(2 * M, sizeof *cs->ev_prod)) ||
        !(cs->ev_down = calloc(2 * M, sizeof *cs->ev_down)) ||
        !(cs->ev_up = calloc(2 * M, sizeof *cs->ev_up)) || !(cs->arrived = calloc(2 * M, 1)))
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for message staging", R->rank);
    for (size_t k = 0; k < 2 * M && st == ZB_OK; k++) {
        bool fwd = k < M;
        if ((fwd ? cs->pin_x_out : cs->pin_dx_in) &&
            (st = zb_cuda_event_new(cs->stage, &cs->ev_prod[k], err)) == ZB_OK)
            st = zb_cuda_event_new(cs->stage, &cs->ev_down[k], err);
        if (st == ZB_OK && (fwd ? cs->pin_x_in : cs->pin_dx_out))
            st = zb_cuda_event_new(cs->stage, &cs->ev_up[k], err);
    }
    return st;
}

void pl_cu_staging_free(const pl_rank_t *R, cu_stage_t *cs)
{
    zb_cuda_host_free(cs->pin_x_out), zb_cuda_host_free(cs->pin_dx_in);
    zb_cuda_host_free(cs->pin_x_in), zb_cuda_host_free(cs->pin_dx_out);
    for (int k = 0; k < 2 * R->pl->M; k++) {
        zb_cuda_event_free(cs->ev_prod ? cs->ev_prod[k] : NULL);
        zb_cuda_event_free(cs->ev_down ? cs->ev_down[k] : NULL);
        zb_cuda_event_free(cs->ev_up ? cs->ev_up[k] : NULL);
    }
    free(cs->ev_prod), free(cs->ev_down), free(cs->ev_up), free(cs->arrived);
}

/* Staging: every message the transport has put in a pinned slot since the last call is
 * queued for upload on its stage's copy stream (it overlaps the compute queued meanwhile; the
 * consumer waits for its event, pl_cu_bring_in). */
zb_status_t pl_cu_upload_arrived(pl_rank_t *R, zb_err_t *err)
{
    const int M = R->pl->M;
    const size_t NC = R->pl->NC;
    zb_status_t st = ZB_OK;
    for (int i = 0; i < R->n_local && st == ZB_OK; i++) {
        cu_stage_t *cs = &CU(R)->st[i];
        for (int k = 0; cs->arrived && k < 2 * M && st == ZB_OK; k++) {
            if (cs->arrived[k] != 1)
                continue;
            const int m = k % M;
            const size_t at = (size_t)m * NC;
            cu_buf_t *b = k < M ? &cs->x_in : &cs->dx_out;
            float *dst = cu_slot(b, m, NC);
            /* a pooled slot: after the B that read it last (cu_buf_t.read) */
            struct CUevent_st *after = b->read && dst ? b->read[b->slot[m]] : NULL;
            st = dst ? zb_cuda_stage_upload(cs->stage, dst, (k < M ? cs->pin_x_in : cs->pin_dx_out) + at,
                                            NC, after, cs->ev_up[k], err)
                     : zb_err_set(err, ZB_ESCHEDULE, "stage %d: no slot for the %s of microbatch %d",
                                  R->st[i].stage, k < M ? "input" : "gradient", m);
            cs->arrived[k] = 2;
        }
    }
    return st;
}

/* Bring microbatch m's message into the device slot `dst` of stage ls: from the host buffer
 * (staging), or from the sender's device slot after its event (device messages). */
zb_status_t pl_cu_bring_in(pl_rank_t *R, pl_stage_t *ls, cu_stage_t *cs, bool forward, int m,
                            float *dst, zb_err_t *err)
{
    const size_t NC = R->pl->NC;
    if (cs->in_x) {
        const cu_msg_t *h = forward ? &cs->in_x[m] : &cs->in_dx[m];
        if (!h->src)
            return zb_err_set(err, ZB_ESCHEDULE, "stage %d: no %s message for microbatch %d",
                              ls->stage, forward ? "forward" : "backward", m);
        return CU(R)->skip_copies ? zb_cuda_stage_wait(cs->stage, h->ev, err)
                                  : zb_cuda_copy_after(cs->stage, dst, h->src, h->device, NC,
                                                       h->ev, err);
    }
    /* staged: uploaded on the copy stream (pl_cu_upload_arrived), the stream waits for it */
    int k = forward ? m : R->pl->M + m;
    zb_status_t st = cs->arrived[k] == 1 ? pl_cu_upload_arrived(R, err) : ZB_OK;
    if (st != ZB_OK)
        return st;
    if (cs->arrived[k] != 2)
        return zb_err_set(err, ZB_ESCHEDULE, "stage %d: no %s for microbatch %d", ls->stage,
                          forward ? "input" : "gradient", m);
    return zb_cuda_stage_wait(cs->stage, cs->ev_up[k], err);
}

/* Device messages. SEND: record the slot's event on the stage's stream (after the F or B that
 * wrote it) and send {slot, event, device}; RECV: the handle lands in in_*[m], and the compute
 * that reads the message queues the wait and the copy (pl_cu_bring_in). The slot is written once
 * per step; the sender's next step waits for the receiver's ev_done (recorded after its
 * program, cuda_program_done), so the receiver has copied it before it is written again. */
static zb_status_t device_message(pl_rank_t *R, pl_stage_t *ls, cu_stage_t *cs,
                                  const zb_action_t *a, void **host, zb_err_t *err)
{
    const size_t NC = R->pl->NC;
    int m = a->mb;
    cu_msg_t *h = NULL;
    zb_status_t st = ZB_OK;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_SEND_F:
    case ZB_ACT_SEND_B: {
        bool fwd = a->type == ZB_ACT_SEND_F;
        const cu_buf_t *own = fwd ? &cs->own_x_out : &cs->own_dx_in;
        if (!own->slot)
            break;
        const float *slot = cu_slot(own, m, NC);
        if (!slot)
            return zb_err_set(err, ZB_ESCHEDULE, "stage %d: nothing to send for microbatch %d",
                              ls->stage, m);
        struct CUevent_st *ev = fwd ? cs->ev_x_out[m] : cs->ev_dx_in[m];
        h = fwd ? &cs->out_x[m] : &cs->out_dx[m];
        *h = (cu_msg_t){.src = slot, .ev = ev,
                        .device = zb_cuda_stage_device(cs->stage)};
        st = zb_cuda_event_record(cs->stage, ev, err);
        break;
    }
    case ZB_ACT_RECV_F: h = ls->span.embed ? NULL : &cs->in_x[m]; break;
    case ZB_ACT_RECV_B: h = ls->span.head ? NULL : &cs->in_dx[m]; break;
    default: break;
    }
    *host = h;
    return st;
}

/* Staging. SEND: the download of slot m queued on the copy stream after the producing F/B
 * (its event); the host does not wait: the executor defers the send until the download is done
 * (pl_cu_message_ready), so the rank's next actions queue while it runs; RECV: the pinned slot
 * the transport fills, uploaded at the rank's next device call (pl_cu_upload_arrived) on the copy
 * stream. */
static zb_status_t staged_message(pl_rank_t *R, cu_stage_t *cs, const zb_action_t *a,
                                  void **host, zb_err_t *err)
{
    const int M = R->pl->M;
    const size_t at = (size_t)a->mb * R->pl->NC;
    zb_status_t st = pl_cu_upload_arrived(R, err); /* what came in before this action */
    *host = NULL;
    if (st != ZB_OK)
        return st;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_SEND_F:
    case ZB_ACT_SEND_B: {
        bool fwd = a->type == ZB_ACT_SEND_F;
        float *pin = fwd ? cs->pin_x_out : cs->pin_dx_in;
        int k = fwd ? a->mb : M + a->mb;
        if (!pin)
            return ZB_OK;
        cu_buf_t *b = fwd ? cs->x_out : cs->dx_in;
        const float *src = cu_slot(b, a->mb, R->pl->NC);
        if (!src)
            return zb_err_set(err, ZB_ESCHEDULE, "stage %d: nothing to send for microbatch %d",
                              a->stage, a->mb);
        st = zb_cuda_stage_download(cs->stage, pin + at, src, R->pl->NC, cs->ev_prod[k],
                                    cs->ev_down[k], err);
        if (st == ZB_OK && b->reuse) /* the slot's next writer waits for this download */
            b->reuse[b->slot[a->mb]] = cs->ev_down[k];
        if (st == ZB_OK)
            *host = pin + at;
        return st;
    }
    case ZB_ACT_RECV_F:
    case ZB_ACT_RECV_B: {
        bool fwd = a->type == ZB_ACT_RECV_F;
        float *pin = fwd ? cs->pin_x_in : cs->pin_dx_out;
        int k = fwd ? a->mb : M + a->mb;
        /* the transport writes the slot: its last upload (the last step's; no host waits for
         * a step's program) must have read it (done long ago: a wait only in principle) */
        if (pin && (st = zb_cuda_event_sync(cs->ev_up[k], err)) != ZB_OK)
            return st;
        if (pin) {
            *host = pin + at;
            cs->arrived[k] = 1; /* filled when this action returns */
        }
        return ZB_OK;
    }
    default: return ZB_OK;
    }
}

/* A staged SEND's download done (wait: wait for it); every other message is ready when
 * pl_cu_message returns. */
zb_status_t pl_cu_message_ready(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a,
                                      bool wait, bool *ready, zb_err_t *err)
{
    const cu_stage_t *cs = &CU(R)->st[ls - R->st];
    bool fwd = a->type == ZB_ACT_SEND_F;
    *ready = true;
    if (cs->in_x || (!fwd && a->type != ZB_ACT_SEND_B) ||
        !(fwd ? cs->pin_x_out : cs->pin_dx_in))
        return ZB_OK;
    struct CUevent_st *done = cs->ev_down[fwd ? a->mb : R->pl->M + a->mb];
    return wait ? zb_cuda_event_sync(done, err) : zb_cuda_event_query(done, ready, err);
}

/* A message: a handle (device messages) or a pinned host slot (staging). */
zb_status_t pl_cu_message(pl_rank_t *R, pl_stage_t *ls, const zb_action_t *a, void **host,
                                zb_err_t *err)
{
    cu_stage_t *cs = &CU(R)->st[ls - R->st];
    if (cs->in_x) /* device messages: a handle (slot + event) instead of the bytes */
        return device_message(R, ls, cs, a, host, err);
    return staged_message(R, cs, a, host, err);
}
