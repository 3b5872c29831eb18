/* zbpp — data-parallel replicas of the pipeline (--dp N): the fixed-order gradient sum across
 * the replicas of one pipeline rank, and the replicas' mean loss.
 *
 * The update ranges of a rank (its norm units, plus the tied WTE copy on a head rank without the
 * embedding) are packed into one flat vector and split into N chunks. Reduce-scatter: replica k
 * receives chunk k from every replica and adds them in replica order, g_0 + g_1 + ... + g_{N-1};
 * all-gather: it sends the sum back to everyone. Each element is added in the same order on
 * whichever replica sums it, so every replica ends with the same bits, and each rank moves
 * 2·(N-1)/N of its gradient instead of N-1 copies. MPI_Allreduce is never used: its order is
 * unspecified. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_dp.h"
#include "zbpp/handshake.h"

/* First element of chunk k of n elements split N ways. */
static size_t chunk_lo(size_t n, int N, int k)
{
    return n / (size_t)N * (size_t)k + (n % (size_t)N) * (size_t)k / (size_t)N;
}

static size_t max_chunk(size_t n, int N)
{
    size_t most = 0;
    for (int k = 0; k < N; k++) {
        size_t c = chunk_lo(n, N, k + 1) - chunk_lo(n, N, k);
        if (c > most)
            most = c;
    }
    return most;
}

/* A rank's part in the replica reduction. */
struct pl_replicas {
    /* views of the world for this step: the replica's pipeline and the replicas of rank p */
    zb_transport_group_t pipe_view, dp_view;
    float *flat;     /* [upd_elems] gradients of the update ranges, packed */
    float *in, *acc; /* [one chunk] a replica's chunk, the running sum */
};

zb_status_t pl_dp_views(zb_transport_t *t, pl_rank_t *R, zb_transport_t **pipe,
                        zb_transport_t **dp, zb_err_t *err)
{
    const pl_t *pl = R->pl;
    zb_status_t st = ZB_OK;
    *pipe = t;
    *dp = NULL;
    if (R->dp) {
        if ((st = zb_transport_group_init(&R->dp->pipe_view, t, R->replica * pl->P, 1, pl->P,
                                          err)) == ZB_OK)
            st = zb_transport_group_init(&R->dp->dp_view, t, R->rank, pl->P, pl->N, err);
        *pipe = &R->dp->pipe_view.base;
        *dp = &R->dp->dp_view.base;
    }
    return st;
}

zb_status_t pl_dp_alloc(pl_rank_t *R, zb_err_t *err)
{
    int N = R->pl->N;
    if (N <= 1)
        return ZB_OK;
    size_t n = R->upd_elems, c = max_chunk(n, N);
    struct pl_replicas *d = R->dp = calloc(1, sizeof *R->dp);
    if (d) {
        d->flat = malloc((n ? n : 1) * sizeof(float));
        d->in = malloc((c ? c : 1) * sizeof(float));
        d->acc = malloc((c ? c : 1) * sizeof(float));
    }
    if (!d || !d->flat || !d->in || !d->acc)
        return zb_err_set(err, ZB_ENOMEM, "rank %d of replica %d: out of memory for the replica "
                          "reduction", R->rank, R->replica);
    return ZB_OK;
}

void pl_dp_free(pl_rank_t *R)
{
    if (R->dp)
        free(R->dp->flat), free(R->dp->in), free(R->dp->acc);
    free(R->dp);
    R->dp = NULL;
}

/* flat <-> the gradient buffer's update ranges, in range order */
static void pack(pl_rank_t *R, bool to_flat)
{
    float *f = R->dp->flat;
    for (int i = 0; i < R->n_upd; i++) {
        float *g = R->grads.g.data + R->upd[i].off;
        size_t bytes = R->upd[i].count * sizeof(float);
        if (to_flat)
            memcpy(f, g, bytes);
        else
            memcpy(g, f, bytes);
        f += R->upd[i].count;
    }
}

zb_status_t pl_dp_reduce(zb_transport_t *dp, pl_rank_t *R, zb_err_t *err)
{
    const int N = dp->size, d = dp->rank;
    if (N <= 1 || R->upd_elems == 0)
        return ZB_OK;
    const size_t n = R->upd_elems;
    const uint32_t scatter = zb_tag(ZB_TAG_DP, 0, 0), gather = zb_tag(ZB_TAG_DP, 1, 0);
    float *flat = R->dp->flat;
    pack(R, true);
    zb_status_t st = ZB_OK;
    /* sends are buffered by the transport contract: all of them first, then the receives */
    for (int k = 0; k < N && st == ZB_OK; k++) {
        size_t lo = chunk_lo(n, N, k), hi = chunk_lo(n, N, k + 1);
        if (k != d && hi > lo)
            st = zb_send(dp, flat + lo, (hi - lo) * sizeof(float), k, scatter, err);
    }
    const size_t lo = chunk_lo(n, N, d), c = chunk_lo(n, N, d + 1) - lo;
    float *acc = R->dp->acc;
    for (int k = 0; k < N && st == ZB_OK && c > 0; k++) {
        const float *x = flat + lo;
        if (k != d) {
            if ((st = zb_recv(dp, R->dp->in, c * sizeof(float), k, scatter, err)) != ZB_OK)
                break;
            x = R->dp->in;
        }
        if (k == 0)
            memcpy(acc, x, c * sizeof(float));
        else
            for (size_t i = 0; i < c; i++)
                acc[i] += x[i]; /* (...(g_0 + g_1) + ...) + g_k: the documented order */
    }
    if (st == ZB_OK && c > 0)
        memcpy(flat + lo, acc, c * sizeof(float));
    for (int k = 0; k < N && st == ZB_OK && c > 0; k++)
        if (k != d)
            st = zb_send(dp, flat + lo, c * sizeof(float), k, gather, err);
    for (int k = 0; k < N && st == ZB_OK; k++) {
        size_t klo = chunk_lo(n, N, k), khi = chunk_lo(n, N, k + 1);
        if (k != d && khi > klo)
            st = zb_recv(dp, flat + klo, (khi - klo) * sizeof(float), k, gather, err);
    }
    if (st == ZB_OK)
        pack(R, false);
    return st;
}

zb_status_t pl_dp_mean_loss(zb_transport_t *dp, double *loss, zb_err_t *err)
{
    if (dp->size <= 1)
        return ZB_OK;
    zb_status_t st = zb_allreduce_sum(dp, loss, 1, err); /* 0.0 + l_0 + l_1 + ...: in order */
    if (st == ZB_OK)
        *loss /= (double)dp->size;
    return st;
}

static uint64_t state_hash(const pl_rank_t *R)
{
    size_t bytes = R->params.count * sizeof(float);
    uint64_t h = zb_hash_bytes(ZB_HASH_SEED, R->params.data, bytes);
    h = zb_hash_bytes(h, R->opt.m.data, bytes);
    return zb_hash_bytes(h, R->opt.v.data, bytes);
}

zb_status_t pl_dp_check(pl_t *pl, zb_pipeline_report_t *rep, zb_err_t *err)
{
    const int P = pl->P, world = P * pl->N;
    zb_transport_t *net = pl->opts->transport;
    if (pl->N <= 1)
        return ZB_OK;
    uint64_t *all = calloc((size_t)world, sizeof *all);
    if (!all)
        return zb_err_set(err, ZB_ENOMEM, "out of memory checking the replicas");
    zb_status_t st = ZB_OK;
    for (int g = 0; g < world; g++)
        if (!net || g == net->rank)
            all[g] = state_hash(&pl->ranks[g]);
    if (net) {
        uint64_t mine = all[net->rank];
        st = zb_allgather_u64(net, &mine, 1, all, err);
    }
    if (st == ZB_OK) {
        rep->replicas_checked = true;
        rep->replicas_differ = 0;
        for (int g = P; g < world; g++)
            rep->replicas_differ += all[g] != all[g % P];
    }
    free(all);
    return st;
}
