/* zbpp — executor: one rank's lowered program, action by action, through an ops vtable and a
 * transport. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/executor.h"
#include "zbpp/util.h"

zb_status_t zb_exec_timeline_alloc(zb_exec_timeline_t *tl, int len, zb_err_t *err)
{
    tl->len = 0;
    tl->start = calloc(len > 0 ? (size_t)len : 1, sizeof(double));
    tl->end = calloc(len > 0 ? (size_t)len : 1, sizeof(double));
    if (len < 0 || !tl->start || !tl->end) {
        zb_exec_timeline_free(tl);
        return zb_err_set(err, len < 0 ? ZB_EINVAL : ZB_ENOMEM,
                          "timeline of %d actions: cannot allocate", len);
    }
    tl->len = len;
    return ZB_OK;
}

void zb_exec_timeline_free(zb_exec_timeline_t *tl)
{
    free(tl->start);
    free(tl->end);
    tl->start = tl->end = NULL;
    tl->len = 0;
}

zb_status_t zb_exec_route(const zb_schedule_t *s, const zb_action_t *a, int *peer,
                          uint32_t *tag, zb_err_t *err)
{
    int other, kind, recv_stage;
    switch ((zb_action_type_t)a->type) {
    case ZB_ACT_SEND_F: other = a->stage + 1; recv_stage = other; kind = ZB_TAG_ACT; break;
    case ZB_ACT_RECV_F: other = a->stage - 1; recv_stage = a->stage; kind = ZB_TAG_ACT; break;
    case ZB_ACT_SEND_B: other = a->stage - 1; recv_stage = other; kind = ZB_TAG_GRAD; break;
    case ZB_ACT_RECV_B: other = a->stage + 1; recv_stage = a->stage; kind = ZB_TAG_GRAD; break;
    default:
        return zb_err_set(err, ZB_EINVAL, "%s is not a communication action",
                          zb_action_type_name((zb_action_type_t)a->type));
    }
    if (other < 0 || other >= s->stages)
        return zb_err_set(err, ZB_ESCHEDULE, "%s(stage %d, mb %d) talks to stage %d, outside 0..%d",
                          zb_action_type_name((zb_action_type_t)a->type), a->stage, a->mb, other,
                          s->stages - 1);
    *peer = zb_stage_rank(s, other);
    *tag = zb_tag((zb_tag_kind_t)kind, recv_stage, a->mb);
    return ZB_OK;
}

/* Prefix err->msg with where it happened: "rank 1, B(stage 3, mb 2): ...". */
static void locate(zb_err_t *err, int rank, const zb_action_t *a)
{
    if (!err)
        return;
    char inner[sizeof err->msg];
    snprintf(inner, sizeof inner, "%s", err->msg);
    snprintf(err->msg, sizeof err->msg, "rank %d, %s(stage %d, mb %d): %.440s", rank,
             zb_action_type_name((zb_action_type_t)a->type), a->stage, a->mb, inner);
}

/* Sends whose buffers a device is still filling (ops->send_ready): program indices, oldest
 * first, with what the transport needs. */
typedef struct {
    int n;
    int *at;
    const void **buf;
    size_t *bytes;
} deferred_t;

static zb_status_t deferred_alloc(deferred_t *d, int len, zb_err_t *err)
{
    size_t cap = len > 0 ? (size_t)len : 1;
    d->n = 0;
    d->at = malloc(cap * sizeof *d->at);
    d->buf = malloc(cap * sizeof *d->buf);
    d->bytes = malloc(cap * sizeof *d->bytes);
    if (!d->at || !d->buf || !d->bytes)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the deferred sends");
    return ZB_OK;
}

static void deferred_free(deferred_t *d)
{
    free(d->at), free(d->buf), free(d->bytes);
}

static zb_status_t transmit(const zb_schedule_t *s, zb_transport_t *t, const zb_action_t *a,
                            const void *buf, size_t bytes, zb_err_t *err)
{
    int peer;
    uint32_t tag;
    zb_status_t st = zb_exec_route(s, a, &peer, &tag, err);
    return st != ZB_OK ? st : zb_send(t, buf, bytes, peer, tag, err);
}

/* Hand every deferred send whose buffer is filled to the transport (wait: all of them, waiting
 * for their buffers), keeping the others in order. On failure *failed = its program index. */
static zb_status_t pump(const zb_schedule_t *s, zb_transport_t *t, const zb_exec_ops_t *ops,
                        deferred_t *d, bool wait, int *failed, zb_err_t *err)
{
    const zb_action_t *acts = s->rank[t->rank].actions;
    int kept = 0;
    zb_status_t st = ZB_OK;
    for (int k = 0; k < d->n; k++) {
        bool ready = false;
        if (st == ZB_OK && (st = ops->send_ready(ops->ctx, &acts[d->at[k]], wait, &ready, err)) ==
                               ZB_OK && ready)
            st = transmit(s, t, &acts[d->at[k]], d->buf[k], d->bytes[k], err);
        if (st != ZB_OK) {
            *failed = d->at[k];
            return st;
        }
        if (!ready) {
            d->at[kept] = d->at[k], d->buf[kept] = d->buf[k], d->bytes[kept] = d->bytes[k];
            kept++;
        }
    }
    d->n = kept;
    return ZB_OK;
}

static bool is_recv(const zb_action_t *a)
{
    return a->type == ZB_ACT_RECV_F || a->type == ZB_ACT_RECV_B;
}

/* Action a; a send is deferred (queued in d) when d is given. Before a receive that would wait,
 * every deferred send goes out first. */
static zb_status_t run_action(const zb_schedule_t *s, zb_transport_t *t, const zb_exec_ops_t *ops,
                              const zb_action_t *a, int i, deferred_t *d, int *failed,
                              zb_err_t *err)
{
    zb_action_type_t type = (zb_action_type_t)a->type;
    if (zb_action_is_compute(type))
        return ops->compute(ops->ctx, a, err);
    if (zb_action_is_copy(type))
        return ops->copy ? ops->copy(ops->ctx, a, err)
                         : zb_err_set(err, ZB_EUNSUPPORTED, "no copy op for offload (O/L) actions");

    int peer;
    uint32_t tag;
    zb_status_t st = zb_exec_route(s, a, &peer, &tag, err);
    if (st != ZB_OK)
        return st;
    if (type == ZB_ACT_SEND_F || type == ZB_ACT_SEND_B) {
        if (!ops->send_payload)
            return zb_err_set(err, ZB_EINVAL, "no send_payload op");
        const void *buf = NULL;
        size_t bytes = 0;
        st = ops->send_payload(ops->ctx, a, &buf, &bytes, err);
        if (st != ZB_OK || !d)
            return st != ZB_OK ? st : zb_send(t, buf, bytes, peer, tag, err);
        d->at[d->n] = i, d->buf[d->n] = buf, d->bytes[d->n] = bytes;
        d->n++;
        return ZB_OK;
    }
    if (!ops->recv_payload)
        return zb_err_set(err, ZB_EINVAL, "no recv_payload op");
    bool here = false;
    if (d && d->n > 0 && (st = zb_recv_arrived(t, peer, tag, &here, err)) == ZB_OK)
        st = pump(s, t, ops, d, !here, failed, err);
    if (st != ZB_OK)
        return st;
    void *buf = NULL;
    size_t bytes = 0;
    st = ops->recv_payload(ops->ctx, a, &buf, &bytes, err);
    return st != ZB_OK ? st : zb_recv(t, buf, bytes, peer, tag, err);
}

static zb_status_t check_run(const zb_schedule_t *s, zb_transport_t *t, const zb_exec_ops_t *ops,
                             const zb_exec_timeline_t *tl, zb_err_t *err)
{
    if (!s || !t || !ops || !ops->compute)
        return zb_err_set(err, ZB_EINVAL,
                          "execute: schedule, transport and compute op are required");
    if (s->ranks != t->size)
        return zb_err_set(err, ZB_EMISMATCH, "rank %d: schedule has %d ranks, transport %d",
                          t->rank, s->ranks, t->size);
    if (s->ranks > 1 && !zb_schedule_has_comms(s))
        return zb_err_set(err, ZB_EINVAL,
                          "rank %d: schedule '%s' is not lowered (run zb_insert_comms first)",
                          t->rank, s->name);
    zb_status_t st = zb_transport_check_sizes(s->stages, s->microbatches, err);
    if (st == ZB_OK && tl && tl->len != s->rank[t->rank].len)
        st = zb_err_set(err, ZB_EINVAL, "rank %d: timeline holds %d actions, program has %d",
                        t->rank, tl->len, s->rank[t->rank].len);
    return st;
}

zb_status_t zb_execute(const zb_schedule_t *s, zb_transport_t *t, const zb_exec_ops_t *ops,
                       const zb_exec_opts_t *opts, zb_exec_timeline_t *tl, zb_err_t *err)
{
    static const zb_exec_opts_t defaults = {0};
    if (!opts)
        opts = &defaults;
    zb_status_t st = check_run(s, t, ops, tl, err);
    deferred_t defer = {0}, *d = NULL;
    if (st == ZB_OK && ops->send_ready && (st = deferred_alloc(&defer, s->rank[t->rank].len,
                                                               err)) == ZB_OK)
        d = &defer;
    if (st != ZB_OK) {
        deferred_free(&defer);
        if (t && st != ZB_EABORT)
            zb_transport_abort(t, err ? err->msg : zb_strerror(st));
        return st;
    }

    const zb_rank_program_t *prog = &s->rank[t->rank];
    int next_post = 0, posted_ahead = 0, failed = -1;
    bool lookahead = opts->recv_lookahead > 0 && ops->recv_bytes && t->ops->post_recv;
    for (int i = 0; i < prog->len && st == ZB_OK; i++) {
        const zb_action_t *a = &prog->actions[i];
        if (lookahead) {
            if (next_post <= i) /* an action we already passed cannot be announced */
                next_post = i;
            while (st == ZB_OK && next_post < prog->len && posted_ahead < opts->recv_lookahead) {
                const zb_action_t *b = &prog->actions[next_post++];
                if (!is_recv(b))
                    continue;
                int peer;
                uint32_t tag;
                st = zb_exec_route(s, b, &peer, &tag, err);
                if (st == ZB_OK)
                    st = zb_post_recv(t, ops->recv_bytes(ops->ctx, b), peer, tag, err);
                posted_ahead++;
            }
            if (is_recv(a) && next_post > i) /* `a` was announced: it leaves the window */
                posted_ahead--;
        }
        double t_start = zb_now() - opts->t0;
        if (st == ZB_OK)
            st = run_action(s, t, ops, a, i, d, &failed, err);
        if (tl) {
            tl->start[i] = t_start;
            tl->end[i] = zb_now() - opts->t0;
        }
        if (st == ZB_OK && d && d->n > 0) /* what is ready goes out as early as it can */
            st = pump(s, t, ops, d, false, &failed, err);
        if (st != ZB_OK && failed < 0)
            failed = i;
    }
    if (st == ZB_OK && d)
        st = pump(s, t, ops, d, true, &failed, err);
    deferred_free(&defer);
    if (st != ZB_OK && st != ZB_EABORT) {
        if (failed >= 0)
            locate(err, t->rank, &prog->actions[failed]);
        zb_transport_abort(t, err ? err->msg : zb_strerror(st));
    }
    return st;
}

/* The arrays are laid out exactly as the simulator's, so its free serves. */
void zb_exec_sim_free(zb_sim_t *sim) { zb_sim_free(sim); }

zb_status_t zb_exec_fill_sim(const zb_schedule_t *s, const zb_exec_timeline_t *tls,
                             const double *peak_bytes, zb_sim_t *out, zb_err_t *err)
{
    int P = s->ranks;
    memset(out, 0, sizeof *out);
    out->ranks = P;
    out->schedule = s;
    out->len = calloc((size_t)P, sizeof(int));
    out->start = calloc((size_t)P, sizeof(double *));
    out->end = calloc((size_t)P, sizeof(double *));
    out->span = calloc((size_t)P, sizeof(double));
    out->busy = calloc((size_t)P, sizeof(double));
    out->peak_mem = calloc((size_t)P, sizeof(double));
    out->peak_time = calloc((size_t)P, sizeof(double));
    if (!out->len || !out->start || !out->end || !out->span || !out->busy || !out->peak_mem ||
        !out->peak_time)
        goto oom;

    double t_first = INFINITY, t_last = -INFINITY;
    for (int r = 0; r < P; r++) {
        if (tls[r].len != s->rank[r].len) {
            zb_exec_sim_free(out);
            return zb_err_set(err, ZB_EINVAL, "timeline of rank %d has %d actions, program %d", r,
                              tls[r].len, s->rank[r].len);
        }
        for (int i = 0; i < tls[r].len; i++) {
            t_first = fmin(t_first, tls[r].start[i]);
            t_last = fmax(t_last, tls[r].end[i]);
        }
    }
    if (!isfinite(t_first))
        t_first = t_last = 0;
    out->makespan = t_last - t_first;

    for (int r = 0; r < P; r++) {
        int n = tls[r].len;
        out->len[r] = n;
        out->start[r] = calloc(n > 0 ? (size_t)n : 1, sizeof(double));
        out->end[r] = calloc(n > 0 ? (size_t)n : 1, sizeof(double));
        if (!out->start[r] || !out->end[r])
            goto oom;
        double first_f = INFINITY, last_end = 0, busy = 0;
        for (int i = 0; i < n; i++) {
            double a = tls[r].start[i] - t_first, b = tls[r].end[i] - t_first;
            out->start[r][i] = a;
            out->end[r][i] = b;
            zb_action_type_t type = (zb_action_type_t)s->rank[r].actions[i].type;
            if (zb_action_is_compute(type))
                busy += b - a;
            if (type == ZB_ACT_F && a < first_f)
                first_f = a;
            last_end = fmax(last_end, b);
        }
        out->busy[r] = busy;
        out->span[r] = isfinite(first_f) ? last_end - first_f : 0;
        out->span_max = fmax(out->span_max, out->span[r]);
        out->busy_max = fmax(out->busy_max, busy);
        out->peak_mem[r] = peak_bytes ? peak_bytes[r] : 0;
    }
    out->bubble_rate = out->span_max > 0 ? (out->span_max - out->busy_max) / out->span_max : 0;
    return ZB_OK;
oom:
    zb_exec_sim_free(out);
    return zb_err_set(err, ZB_ENOMEM, "out of memory filling the measured timeline");
}
