/* zbpp — the transport between pipeline ranks: point-to-point messages, a few fixed-order
 * collectives, and abort.
 *
 * One interface, several implementations: threads in one process (transport_threads.c) and MPI
 * processes (transport_mpi.c). The runtime only ever talks to a zb_transport_t through the
 * functions below, so every rank runs the same code whatever carries its messages.
 *
 * Semantics every implementation must provide:
 *  - send() may buffer: when it returns, `buf` may be reused by the caller. It blocks only while
 *    the transport's own buffering is full (and then honours the timeout and abort). An MPI
 *    implementation copies into a staging buffer and posts MPI_Isend; it completes the requests
 *    later (on later calls, in flush(), or before reusing a staging buffer).
 *  - recv() blocks until a message from `peer` with `tag` arrives, the timeout expires
 *    (ZB_ETIMEOUT), or some rank aborts (ZB_EABORT). Messages are matched by (source, tag); two
 *    messages with the same (source, tag) are received in the order they were sent. The byte count
 *    must match the sender's exactly (else ZB_ECOMM).
 *  - post_recv() (optional, may be NULL) announces that a recv(peer, tag, bytes) will follow, so
 *    an MPI implementation can post an MPI_Irecv into a staging buffer now and overlap the
 *    transfer with compute. It never blocks. Calling recv() without post_recv() is always valid.
 *  - arrived() (optional, may be NULL = "cannot tell") says whether a recv(peer, tag) would
 *    return without waiting: the message is here (or, MPI, its announced receive completed). It
 *    never blocks and takes nothing; a false answer is always allowed.
 *  - Collectives must be called by every rank, in the same order. Their results are identical
 *    on every rank and independent of message arrival order: allgather places rank r's values at
 *    [r*n, r*n+n); allreduce_sum sums in rank order 0..P-1 (never MPI_Allreduce, whose order is
 *    unspecified).
 *  - abort(reason) makes every other rank's pending and future calls fail with ZB_EABORT and a
 *    message "rank R failed: <reason>". It never blocks and may be called from any rank, any
 *    time, more than once (the first reason wins). Calls on the aborting rank itself also fail.
 *
 * A zb_transport_t is used by one thread only (its rank's). */
#ifndef ZBPP_TRANSPORT_H
#define ZBPP_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbpp/error.h"

/* ---- tags: (kind, stage, microbatch) packed into 31 bits, so it fits an MPI tag where the
 * implementation's MPI_TAG_UB allows (Open MPI: 2^31-1). `stage` is the RECEIVING stage. ---- */
typedef enum {
    ZB_TAG_ACT = 0,      /* forward activation, stage s-1 -> s */
    ZB_TAG_GRAD = 1,     /* input gradient, stage s+1 -> s */
    ZB_TAG_COLL = 2,     /* collectives (allgather, allreduce, barrier) */
    ZB_TAG_EXCHANGE = 3, /* pairwise buffer exchange (tied embedding gradients) */
    ZB_TAG_USER = 4,     /* free for callers (tests, control messages) */
    ZB_TAG_DP = 5,       /* data-parallel gradient reduction between replicas (--dp) */
    ZB_TAG_REPORT = 6    /* figures gathered for the run report (timelines, peaks) */
} zb_tag_kind_t;

#define ZB_TAG_MAX_STAGE 1023   /* stage field: 10 bits */
#define ZB_TAG_MAX_MB 131071    /* microbatch field: 17 bits */

/* Pack (kind, stage, mb); stage in [0, ZB_TAG_MAX_STAGE], mb in [0, ZB_TAG_MAX_MB], kind < 16.
 * Out-of-range fields are masked, so callers check sizes up front (zb_transport_check_sizes). */
static inline uint32_t zb_tag(zb_tag_kind_t kind, int stage, int mb)
{
    return ((uint32_t)kind & 0xFu) << 27 | ((uint32_t)stage & 0x3FFu) << 17 |
           ((uint32_t)mb & 0x1FFFFu);
}
static inline int zb_tag_kind(uint32_t tag) { return (int)(tag >> 27 & 0xFu); }
static inline int zb_tag_stage(uint32_t tag) { return (int)(tag >> 17 & 0x3FFu); }
static inline int zb_tag_mb(uint32_t tag) { return (int)(tag & 0x1FFFFu); }

/* ZB_EINVAL if `stages` or `microbatches` do not fit the tag fields. */
zb_status_t zb_transport_check_sizes(int stages, int microbatches, zb_err_t *err);

typedef struct zb_transport zb_transport_t;

/* The vtable an implementation fills. Every function returns ZB_OK or fills err. */
typedef struct {
    zb_status_t (*send)(zb_transport_t *t, const void *buf, size_t bytes, int peer, uint32_t tag,
                        zb_err_t *err);
    zb_status_t (*recv)(zb_transport_t *t, void *buf, size_t bytes, int peer, uint32_t tag,
                        zb_err_t *err);
    /* optional (NULL = no-op) */
    zb_status_t (*post_recv)(zb_transport_t *t, size_t bytes, int peer, uint32_t tag,
                             zb_err_t *err);
    zb_status_t (*arrived)(zb_transport_t *t, int peer, uint32_t tag, bool *yes, zb_err_t *err);
    /* Every rank's `bytes` bytes, laid out by rank: all + r·bytes holds rank r's. bytes may be 0
     * (then it is a barrier). The typed collectives below (doubles, 64-bit integers) are views
     * of this one: values travel as their bytes, exactly. */
    zb_status_t (*allgather)(zb_transport_t *t, const void *mine, size_t bytes, void *all,
                             zb_err_t *err);
    /* Send `count` floats to `peer` and receive `count` floats from it (peer != own rank).
     * send_buf and recv_buf may not overlap. */
    zb_status_t (*exchange)(zb_transport_t *t, const float *send_buf, float *recv_buf,
                            size_t count, int peer, uint32_t tag, zb_err_t *err);
    /* Wait until every send issued so far has left this rank's buffers (MPI: all Isends
     * complete). */
    zb_status_t (*flush)(zb_transport_t *t, zb_err_t *err);
    void (*abort)(zb_transport_t *t, const char *reason);
    /* Release this rank's handle (not the other ranks'). */
    void (*destroy)(zb_transport_t *t);
} zb_transport_ops_t;

/* The longest wait a timeout may ask for (30 days): beyond it a deadline stops being a time the
 * clock can reach (time_t overflows), so transports refuse larger values with ZB_EINVAL. */
#define ZB_TIMEOUT_MAX_S (30.0 * 86400.0)

struct zb_transport {
    const zb_transport_ops_t *ops;
    const char *name; /* "threads", "mpi" */
    int rank;         /* this rank, 0 <= rank < size */
    int size;         /* number of ranks P */
    double timeout;   /* seconds a blocking call may wait before ZB_ETIMEOUT; <= 0 = forever */
};

/* ---- convenience wrappers (check arguments, then dispatch) ---- */

/* ZB_EINVAL for peer out of range or == own rank, or buf NULL with bytes > 0. */
zb_status_t zb_send(zb_transport_t *t, const void *buf, size_t bytes, int peer, uint32_t tag,
                    zb_err_t *err);
zb_status_t zb_recv(zb_transport_t *t, void *buf, size_t bytes, int peer, uint32_t tag,
                    zb_err_t *err);
zb_status_t zb_post_recv(zb_transport_t *t, size_t bytes, int peer, uint32_t tag, zb_err_t *err);
/* *yes = a zb_recv(t, ..., peer, tag) now would not wait (false where the transport cannot
 * tell). Never blocks; reports an abort like the other calls. */
zb_status_t zb_recv_arrived(zb_transport_t *t, int peer, uint32_t tag, bool *yes, zb_err_t *err);
/* all[r*n + i] = value i of rank r: doubles, 64-bit integers (hashes, sizes, checksums,
 * statuses) or raw bytes, each exact on every transport. n <= 4096 values (bytes: any). */
zb_status_t zb_allgather(zb_transport_t *t, const double *mine, int n, double *all,
                         zb_err_t *err);
zb_status_t zb_allgather_u64(zb_transport_t *t, const uint64_t *mine, int n, uint64_t *all,
                             zb_err_t *err);
zb_status_t zb_allgather_bytes(zb_transport_t *t, const void *mine, size_t bytes, void *all,
                               zb_err_t *err);
/* vals[i] = sum over ranks r = 0..P-1 (in that order, starting from 0.0) of rank r's vals[i].
 * n <= 4096. Bit-identical on every rank. */
zb_status_t zb_allreduce_sum(zb_transport_t *t, double *vals, int n, zb_err_t *err);
zb_status_t zb_barrier(zb_transport_t *t, zb_err_t *err);
zb_status_t zb_exchange(zb_transport_t *t, const float *send_buf, float *recv_buf, size_t count,
                        int peer, uint32_t tag, zb_err_t *err);
zb_status_t zb_flush(zb_transport_t *t, zb_err_t *err);
/* Abort every rank; reason is one line (e.g. the failing call's err->msg). */
void zb_transport_abort(zb_transport_t *t, const char *reason);
void zb_transport_destroy(zb_transport_t *t);

/* Building blocks an implementation may reuse: allgather (gather to rank 0 then broadcast, in
 * rank order) and exchange (send then recv) written with send/recv only. */
zb_status_t zb_allgather_p2p(zb_transport_t *t, const void *mine, size_t bytes, void *all,
                             zb_err_t *err);
zb_status_t zb_exchange_p2p(zb_transport_t *t, const float *send_buf, float *recv_buf,
                            size_t count, int peer, uint32_t tag, zb_err_t *err);

/* ---- group views: a subset of a transport's ranks as a transport of its own ---- */

/* Ranks first, first + stride, ..., first + (size-1)·stride of `parent`, renumbered 0..size-1
 * (like MPI_Comm_split, without communication). The data-parallel trainer uses two per rank:
 * its replica's pipeline (first = d·P, stride 1, size P) and the replicas of its pipeline rank
 * (first = p, stride P, size N). Messages go through the parent with peers mapped; collectives
 * are the rank-ordered p2p ones of this file, so sums stay in group order; abort aborts the whole
 * parent; flush flushes the parent. Tags are not changed: two groups that share a pair of parent
 * ranks must not use the same tags at the same time (the trainer's two groups share no pair).
 * The view holds no resources; it is valid while `parent` is. */
typedef struct {
    zb_transport_t base; /* first member: pass &view.base wherever a zb_transport_t* goes */
    zb_transport_t *parent;
    int first, stride;
} zb_transport_group_t;

/* ZB_EINVAL if the group does not fit the parent, or does not contain the parent's own rank. */
zb_status_t zb_transport_group_init(zb_transport_group_t *g, zb_transport_t *parent, int first,
                                    int stride, int size, zb_err_t *err);

/* ---- the thread transport: P ranks as threads of one process ---- */

/* A world of P ranks sharing mailboxes. Each rank's mailbox holds at most `capacity` messages
 * (>= 1); a send to a full mailbox waits. The runtime sizes it from the schedule so that a valid
 * schedule never waits on capacity. `timeout` seconds (<= 0 = forever, at most
 * ZB_TIMEOUT_MAX_S) applies to every blocking call of every rank. */
typedef struct zb_thread_world zb_thread_world_t;

zb_status_t zb_thread_world_new(int ranks, int capacity, double timeout, zb_thread_world_t **out,
                                zb_err_t *err);
/* Rank r's transport (owned by the world; do not destroy it separately). */
zb_transport_t *zb_thread_world_rank(zb_thread_world_t *w, int rank);
/* Frees the world and any undelivered messages. No rank thread may still be using it. */
void zb_thread_world_free(zb_thread_world_t *w);

/* Run fn(rank's transport, args[rank]) on P new threads (the caller waits for them;
 * all are joined before returning). With `pin` and at least P online cores, thread r is pinned to
 * core r. status[r] receives each rank's return value (may be NULL). Returns ZB_OK if every rank
 * returned ZB_OK, else the first failing rank's status with its message in err: a rank that
 * failed by itself is preferred over one that only saw the abort. */
typedef zb_status_t (*zb_rank_fn)(zb_transport_t *t, void *arg, zb_err_t *err);
zb_status_t zb_thread_world_run(zb_thread_world_t *w, zb_rank_fn fn, void **args, int pin,
                                zb_status_t *status, zb_err_t *err);

#endif
