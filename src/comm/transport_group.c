/* zbpp — group views of a transport (see zbpp/transport.h): a strided subset of the parent's
 * ranks, renumbered from 0, forwarding every message to the parent with the peer mapped. */
#include "zbpp/transport.h"

static zb_transport_group_t *as_group(zb_transport_t *t) { return (zb_transport_group_t *)t; }

static int parent_rank(const zb_transport_group_t *g, int peer)
{
    return g->first + peer * g->stride;
}

static zb_status_t gr_send(zb_transport_t *t, const void *buf, size_t bytes, int peer,
                           uint32_t tag, zb_err_t *err)
{
    zb_transport_group_t *g = as_group(t);
    return zb_send(g->parent, buf, bytes, parent_rank(g, peer), tag, err);
}

static zb_status_t gr_recv(zb_transport_t *t, void *buf, size_t bytes, int peer, uint32_t tag,
                           zb_err_t *err)
{
    zb_transport_group_t *g = as_group(t);
    return zb_recv(g->parent, buf, bytes, parent_rank(g, peer), tag, err);
}

static zb_status_t gr_post_recv(zb_transport_t *t, size_t bytes, int peer, uint32_t tag,
                                zb_err_t *err)
{
    zb_transport_group_t *g = as_group(t);
    return zb_post_recv(g->parent, bytes, parent_rank(g, peer), tag, err);
}

static zb_status_t gr_arrived(zb_transport_t *t, int peer, uint32_t tag, bool *yes,
                              zb_err_t *err)
{
    zb_transport_group_t *g = as_group(t);
    return zb_recv_arrived(g->parent, parent_rank(g, peer), tag, yes, err);
}

static zb_status_t gr_flush(zb_transport_t *t, zb_err_t *err)
{
    return zb_flush(as_group(t)->parent, err);
}

static void gr_abort(zb_transport_t *t, const char *reason)
{
    zb_transport_abort(as_group(t)->parent, reason);
}

static void gr_destroy(zb_transport_t *t)
{
    (void)t; /* a view owns nothing */
}

static const zb_transport_ops_t group_ops = {
    .send = gr_send,
    .recv = gr_recv,
    .post_recv = gr_post_recv,
    .arrived = gr_arrived,
    .allgather = zb_allgather_p2p,
    .exchange = zb_exchange_p2p,
    .flush = gr_flush,
    .abort = gr_abort,
    .destroy = gr_destroy,
};

zb_status_t zb_transport_group_init(zb_transport_group_t *g, zb_transport_t *parent, int first,
                                    int stride, int size, zb_err_t *err)
{
    if (!parent || size < 1 || stride < 1 || first < 0 ||
        (long)first + (long)(size - 1) * stride >= parent->size)
        return zb_err_set(err, ZB_EINVAL,
                          "group of %d ranks from %d by %d does not fit a world of %d", size,
                          first, stride, parent ? parent->size : 0);
    int off = parent->rank - first;
    if (off < 0 || off % stride != 0 || off / stride >= size)
        return zb_err_set(err, ZB_EINVAL, "rank %d is not in the group of %d ranks from %d by %d",
                          parent->rank, size, first, stride);
    g->base = (zb_transport_t){.ops = &group_ops,
                               .name = parent->name,
                               .rank = off / stride,
                               .size = size,
                               .timeout = parent->timeout};
    g->parent = parent;
    g->first = first;
    g->stride = stride;
    return ZB_OK;
}
