/* zbpp — transport wrappers (argument checks + dispatch) and the collectives written with
 * point-to-point messages, shared by every transport implementation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/transport.h"

zb_status_t zb_transport_check_sizes(int stages, int microbatches, zb_err_t *err)
{
    if (stages < 1 || stages - 1 > ZB_TAG_MAX_STAGE)
        return zb_err_set(err, ZB_EINVAL, "%d stages do not fit the message tag (at most %d)",
                          stages, ZB_TAG_MAX_STAGE + 1);
    if (microbatches < 1 || microbatches - 1 > ZB_TAG_MAX_MB)
        return zb_err_set(err, ZB_EINVAL, "%d microbatches do not fit the message tag (at most %d)",
                          microbatches, ZB_TAG_MAX_MB + 1);
    return ZB_OK;
}

static zb_status_t check_peer(const zb_transport_t *t, int peer, const char *what, zb_err_t *err)
{
    if (peer < 0 || peer >= t->size || peer == t->rank)
        return zb_err_set(err, ZB_EINVAL, "rank %d: %s with invalid peer %d (world of %d ranks)",
                          t->rank, what, peer, t->size);
    return ZB_OK;
}

zb_status_t zb_send(zb_transport_t *t, const void *buf, size_t bytes, int peer, uint32_t tag,
                    zb_err_t *err)
{
    zb_status_t st = check_peer(t, peer, "send", err);
    if (st != ZB_OK)
        return st;
    if (!buf && bytes > 0)
        return zb_err_set(err, ZB_EINVAL, "rank %d: send of %zu bytes from a NULL buffer", t->rank,
                          bytes);
    return t->ops->send(t, buf, bytes, peer, tag, err);
}

zb_status_t zb_recv(zb_transport_t *t, void *buf, size_t bytes, int peer, uint32_t tag,
                    zb_err_t *err)
{
    zb_status_t st = check_peer(t, peer, "recv", err);
    if (st != ZB_OK)
        return st;
    if (!buf && bytes > 0)
        return zb_err_set(err, ZB_EINVAL, "rank %d: recv of %zu bytes into a NULL buffer", t->rank,
                          bytes);
    return t->ops->recv(t, buf, bytes, peer, tag, err);
}

zb_status_t zb_post_recv(zb_transport_t *t, size_t bytes, int peer, uint32_t tag, zb_err_t *err)
{
    zb_status_t st = check_peer(t, peer, "post_recv", err);
    if (st != ZB_OK || !t->ops->post_recv)
        return st;
    return t->ops->post_recv(t, bytes, peer, tag, err);
}

zb_status_t zb_recv_arrived(zb_transport_t *t, int peer, uint32_t tag, bool *yes, zb_err_t *err)
{
    *yes = false;
    zb_status_t st = check_peer(t, peer, "arrived", err);
    if (st != ZB_OK || !t->ops->arrived)
        return st;
    return t->ops->arrived(t, peer, tag, yes, err);
}

enum { ALLREDUCE_MAX = 4096 };

zb_status_t zb_allgather_bytes(zb_transport_t *t, const void *mine, size_t bytes, void *all,
                               zb_err_t *err)
{
    if (bytes > 0 && (!mine || !all))
        return zb_err_set(err, ZB_EINVAL, "rank %d: allgather of %zu bytes with NULL buffers",
                          t->rank, bytes);
    return t->ops->allgather(t, mine, bytes, all, err);
}

zb_status_t zb_allgather(zb_transport_t *t, const double *mine, int n, double *all, zb_err_t *err)
{
    if (n < 0 || n > ALLREDUCE_MAX)
        return zb_err_set(err, ZB_EINVAL, "rank %d: allgather of %d values (at most %d)",
                          t->rank, n, ALLREDUCE_MAX);
    return zb_allgather_bytes(t, mine, (size_t)n * sizeof *mine, all, err);
}

zb_status_t zb_allgather_u64(zb_transport_t *t, const uint64_t *mine, int n, uint64_t *all,
                             zb_err_t *err)
{
    if (n < 0 || n > ALLREDUCE_MAX)
        return zb_err_set(err, ZB_EINVAL, "rank %d: allgather of %d integers (at most %d)",
                          t->rank, n, ALLREDUCE_MAX);
    return zb_allgather_bytes(t, mine, (size_t)n * sizeof *mine, all, err);
}

zb_status_t zb_allreduce_sum(zb_transport_t *t, double *vals, int n, zb_err_t *err)
{
    if (n < 0 || n > ALLREDUCE_MAX || (n > 0 && !vals))
        return zb_err_set(err, ZB_EINVAL, "rank %d: allreduce of %d values (at most %d)", t->rank,
                          n, ALLREDUCE_MAX);
    if (n == 0)
        return zb_barrier(t, err);
    double *all = malloc(sizeof(double) * (size_t)n * (size_t)t->size);
    if (!all)
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory in allreduce", t->rank);
    zb_status_t st = t->ops->allgather(t, vals, (size_t)n * sizeof *vals, all, err);
    if (st == ZB_OK) {
        /* Rank order, from 0.0: the same additions on every rank, whatever arrived first. */
        for (int i = 0; i < n; i++) {
            double s = 0.0;
            for (int r = 0; r < t->size; r++)
                s += all[(size_t)r * (size_t)n + (size_t)i];
            vals[i] = s;
        }
    }
    free(all);
    return st;
}

zb_status_t zb_barrier(zb_transport_t *t, zb_err_t *err)
{
    return t->ops->allgather(t, NULL, 0, NULL, err);
}

zb_status_t zb_exchange(zb_transport_t *t, const float *send_buf, float *recv_buf, size_t count,
                        int peer, uint32_t tag, zb_err_t *err)
{
    zb_status_t st = check_peer(t, peer, "exchange", err);
    if (st != ZB_OK)
        return st;
    if (count > 0 && (!send_buf || !recv_buf))
        return zb_err_set(err, ZB_EINVAL, "rank %d: exchange with NULL buffers", t->rank);
    return t->ops->exchange(t, send_buf, recv_buf, count, peer, tag, err);
}

zb_status_t zb_flush(zb_transport_t *t, zb_err_t *err)
{
    return t->ops->flush ? t->ops->flush(t, err) : ZB_OK;
}

void zb_transport_abort(zb_transport_t *t, const char *reason)
{
    t->ops->abort(t, reason ? reason : "(no reason given)");
}

void zb_transport_destroy(zb_transport_t *t)
{
    if (t && t->ops->destroy)
        t->ops->destroy(t);
}

/* Gather to rank 0 in rank order, then rank 0 sends the whole table to every rank. Rank 0
 * receives explicitly from 1, 2, ... so the table is laid out by rank, never by arrival. */
zb_status_t zb_allgather_p2p(zb_transport_t *t, const void *mine, size_t bytes, void *all,
                             zb_err_t *err)
{
    const uint32_t up = zb_tag(ZB_TAG_COLL, 0, 0), down = zb_tag(ZB_TAG_COLL, 1, 0);
    const size_t table = bytes * (size_t)t->size;
    unsigned char *rows = all;
    zb_status_t st = ZB_OK;
    if (t->size == 1) {
        if (bytes > 0)
            memcpy(all, mine, bytes);
        return ZB_OK;
    }
    if (t->rank == 0) {
        if (bytes > 0)
            memcpy(all, mine, bytes);
        for (int r = 1; r < t->size && st == ZB_OK; r++)
            st = t->ops->recv(t, bytes > 0 ? rows + (size_t)r * bytes : NULL, bytes, r, up, err);
        for (int r = 1; r < t->size && st == ZB_OK; r++)
            st = t->ops->send(t, all, table, r, down, err);
        return st;
    }
    st = t->ops->send(t, mine, bytes, 0, up, err);
    if (st == ZB_OK)
        st = t->ops->recv(t, all, table, 0, down, err);
    return st;
}

/* Sends are buffered by contract, so send-then-recv on both sides cannot deadlock. */
zb_status_t zb_exchange_p2p(zb_transport_t *t, const float *send_buf, float *recv_buf,
                            size_t count, int peer, uint32_t tag, zb_err_t *err)
{
    zb_status_t st = t->ops->send(t, send_buf, count * sizeof(float), peer, tag, err);
    if (st == ZB_OK)
        st = t->ops->recv(t, recv_buf, count * sizeof(float), peer, tag, err);
    return st;
}
