/* zbpp — the MPI transport (see zbpp/transport_mpi.h for the contract, docs/mpi.md for why).
 *
 * Never block inside MPI: every wait is a loop of MPI_Test on the request we need plus an
 * MPI_Iprobe of the abort tag, spinning for a few microseconds and then sleeping with a growing
 * (capped) pause. That is what makes --comm-timeout and "another rank failed" possible at all:
 * a blocking MPI_Recv on a peer that was SIGSTOPped would wait forever. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zbpp/transport_mpi.h"
#include "zbpp/util.h"

/* Tag kinds 0..6 belong to zb_tag; 15 carries abort notices, 14 and 13 the liveness check's
 * question and answer (outside any zb_tag_kind_t). */
#define ABORT_TAG ((int)zb_tag((zb_tag_kind_t)15, 0, 0))
#define PING_TAG ((int)zb_tag((zb_tag_kind_t)14, 0, 0))
#define PONG_TAG ((int)zb_tag((zb_tag_kind_t)13, 0, 0))
#define LIVENESS_MAX_S 10.0 /* the liveness check waits min(timeout, this) for answers */
#define MAX_SENDS 4096   /* staging buffers in flight before send() waits for one */
#define MAX_POSTED 1024  /* early receives outstanding */
#define SPIN_S 50e-6     /* poll without sleeping this long, for latency */
#define MAX_SLEEP_NS 200000L

typedef struct {
    void *buf;
    size_t cap;
    MPI_Request req; /* MPI_REQUEST_NULL = free */
    int peer;
} send_slot_t;

typedef struct {
    void *buf;
    size_t cap, bytes;
    int peer;
    uint32_t tag;
    long seq;        /* posting order: recv takes the oldest match (MPI matches in this order) */
    bool active;
    bool done;         /* arrived() saw it complete: req is spent, status holds its count */
    MPI_Status status;
    MPI_Request req;
} post_slot_t;

typedef struct {
    zb_transport_t base; /* first: a zb_transport_t* is an mpi_t* */
    MPI_Comm comm;
    send_slot_t *sends;
    int n_sends;
    post_slot_t *posts;
    int n_posts;
    long next_seq;
    bool aborted;
    char abort_msg[480];
    char abort_out[480];     /* our own reason, kept alive for the Isends */
    MPI_Request *abort_reqs; /* [size] */
    zb_mpi_stats_t stats;
    int local_rank, local_size; /* among the processes of this machine */
} mpi_t;

static const zb_transport_ops_t mpi_ops;

static zb_status_t mpi_error(zb_err_t *err, int rc, const char *what, int rank)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    return zb_err_set(err, ZB_ECOMM, "rank %d: %s failed: %s", rank, what, text);
}

static zb_status_t aborted_error(mpi_t *m, zb_err_t *err)
{
    return zb_err_set(err, ZB_EABORT, "%s", m->abort_msg);
}

static void pause_a_little(double waited, long *sleep_ns)
{
    if (waited < SPIN_S)
        return;
    *sleep_ns = *sleep_ns ? *sleep_ns * 2 : 2000;
    if (*sleep_ns > MAX_SLEEP_NS)
        *sleep_ns = MAX_SLEEP_NS;
    struct timespec ts = {0, *sleep_ns};
    nanosleep(&ts, NULL);
}

/* Has another rank sent an abort notice? Takes it (first reason wins). */
static bool poll_abort(mpi_t *m)
{
    if (m->aborted)
        return true;
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, ABORT_TAG, m->comm, &flag, &st) != MPI_SUCCESS || !flag)
        return false;
    char reason[sizeof m->abort_out];
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    if (n < 0 || n > (int)sizeof reason)
        n = (int)sizeof reason;
    MPI_Recv(reason, n, MPI_CHAR, st.MPI_SOURCE, ABORT_TAG, m->comm, MPI_STATUS_IGNORE);
    reason[n > 0 ? n - 1 : 0] = '\0';
    m->aborted = true;
    /* a reason that names its rank (a timeout's "rank 2 failed or stopped responding") stays
     * as it is: prefixing the reporter would blame it instead */
    if (!strncmp(reason, "rank ", 5))
        snprintf(m->abort_msg, sizeof m->abort_msg, "%.400s (reported by rank %d)", reason,
                 st.MPI_SOURCE);
    else
        snprintf(m->abort_msg, sizeof m->abort_msg, "rank %d failed: %.400s", st.MPI_SOURCE,
                 reason);
    return true;
}

/* Answer every liveness question waiting for us (a rank that timed out asks who is alive). */
static void answer_pings(mpi_t *m)
{
    static char none; /* zero-byte messages still need a buffer */
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, PING_TAG, m->comm, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        MPI_Recv(&none, 0, MPI_BYTE, st.MPI_SOURCE, PING_TAG, m->comm, MPI_STATUS_IGNORE);
        MPI_Request req;
        if (MPI_Isend(&none, 0, MPI_BYTE, st.MPI_SOURCE, PONG_TAG, m->comm, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
}

/* After a timeout waiting on one rank: which ranks are stopped? The one we waited on may itself
 * be waiting on another, so ask everyone. A rank that waits in this transport answers at once
 * (every wait loop answers); a stopped process (SIGSTOP, a frozen node) cannot. Writes the ranks
 * that gave no answer within the window into `silent` ("2", "2, 3"), "" when all answered.
 * Returns false if an abort notice arrived meanwhile. */
static bool find_silent_ranks(mpi_t *m, double window, char *silent, size_t cap)
{
    static char none;
    int P = m->base.size, me = m->base.rank, left = P - 1;
    bool *answered = calloc((size_t)P, sizeof *answered);
    silent[0] = '\0';
    if (!answered)
        return true;
    for (int r = 0; r < P; r++) {
        MPI_Request req;
        if (r != me && MPI_Isend(&none, 0, MPI_BYTE, r, PING_TAG, m->comm, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
    double t0 = zb_now();
    long sleep_ns = 0;
    bool aborted = false;
    while (left > 0 && zb_now() - t0 < window && !(aborted = poll_abort(m))) {
        answer_pings(m);
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, PONG_TAG, m->comm, &flag, &st) == MPI_SUCCESS && flag) {
            MPI_Recv(&none, 0, MPI_BYTE, st.MPI_SOURCE, PONG_TAG, m->comm, MPI_STATUS_IGNORE);
            if (!answered[st.MPI_SOURCE])
                answered[st.MPI_SOURCE] = true, left--;
            continue;
        }
        pause_a_little(zb_now() - t0, &sleep_ns);
    }
    size_t used = 0;
    for (int r = 0; r < P && !aborted; r++)
        if (r != me && !answered[r] && used < cap)
            used += (size_t)snprintf(silent + used, cap - used, "%s%d", used ? ", " : "", r);
    free(answered);
    return !aborted;
}

/* The error of a wait that timed out (`what` says on whom): names the ranks really stopped. */
static zb_status_t timed_out(mpi_t *m, const char *what, zb_err_t *err)
{
    double window = m->base.timeout < LIVENESS_MAX_S ? m->base.timeout : LIVENESS_MAX_S;
    char silent[256];
    if (!find_silent_ranks(m, window, silent, sizeof silent))
        return aborted_error(m, err);
    if (silent[0])
        return zb_err_set(err, ZB_ETIMEOUT,
                          "rank%s %s failed or stopped responding (no answer to a liveness check "
                          "within %g s; rank %d timed out after %g s %s)",
                          strchr(silent, ',') ? "s" : "", silent, window, m->base.rank,
                          m->base.timeout, what);
    return zb_err_set(err, ZB_ETIMEOUT,
                      "rank %d timed out after %g s %s, yet every rank answers: none is stopped, "
                      "they wait on each other or one is slower than --comm-timeout allows",
                      m->base.rank, m->base.timeout, what);
}

/* Wait for `req` while watching for aborts and the timeout, answering liveness questions.
 * `what` says for what and on whom (`peer`, who may itself be waiting: on a timeout the
 * liveness check names the ranks really stopped). On failure the request is left to the
 * caller. */
static zb_status_t wait_req(mpi_t *m, MPI_Request *req, MPI_Status *status, int peer,
                            const char *what, zb_err_t *err)
{
    double t0 = zb_now();
    long sleep_ns = 0;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, status);
        if (rc != MPI_SUCCESS) {
            m->stats.wait_s += zb_now() - t0;
            return mpi_error(err, rc, what, m->base.rank);
        }
        double waited = zb_now() - t0;
        if (done) {
            m->stats.wait_s += waited;
            return ZB_OK;
        }
        if (poll_abort(m)) {
            m->stats.wait_s += waited;
            return aborted_error(m, err);
        }
        answer_pings(m);
        if (m->base.timeout > 0 && waited > m->base.timeout) {
            m->stats.wait_s += waited;
            (void)peer;
            return timed_out(m, what, err);
        }
        pause_a_little(waited, &sleep_ns);
    }
}

/* Give up on a receive whose wait failed: its buffer must not be written later. */
static void cancel_req(MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL)
        return;
    MPI_Cancel(req);
    MPI_Request_free(req);
    *req = MPI_REQUEST_NULL;
}

static zb_status_t check_count(mpi_t *m, const MPI_Status *st, size_t bytes, int peer,
                               uint32_t tag, zb_err_t *err)
{
    int n = 0;
    MPI_Get_count(st, MPI_BYTE, &n);
    if ((size_t)n != bytes)
        return zb_err_set(err, ZB_ECOMM,
                          "rank %d: message from rank %d (tag kind %d, stage %d, mb %d) has %d "
                          "bytes, expected %zu",
                          m->base.rank, peer, zb_tag_kind(tag), zb_tag_stage(tag), zb_tag_mb(tag),
                          n, bytes);
    m->stats.bytes_received += (double)bytes;
    m->stats.msgs_received++;
    return ZB_OK;
}

static zb_status_t check_size(mpi_t *m, size_t bytes, zb_err_t *err)
{
    if (bytes > INT_MAX)
        return zb_err_set(err, ZB_EUNSUPPORTED,
                          "rank %d: a message of %zu bytes exceeds MPI's int count", m->base.rank,
                          bytes);
    return ZB_OK;
}

static const char *describe(uint32_t tag, int peer, bool sending, char *buf, size_t cap)
{
    static const char *const kinds[] = {"activation", "gradient", "collective", "exchange",
                                        "user message", "replica gradient", "report"};
    int k = zb_tag_kind(tag);
    snprintf(buf, cap, "%s %s %s rank %d (stage %d, mb %d)", sending ? "sending" : "receiving",
             k < 7 ? kinds[k] : "message", sending ? "to" : "from", peer, zb_tag_stage(tag),
             zb_tag_mb(tag));
    return buf;
}

/* ---- sends: staging pool ---- */

/* Complete what has finished; returns a free slot able to hold `bytes`, or -1. */
static int free_send_slot(mpi_t *m, size_t bytes)
{
    int best = -1;
    for (int i = 0; i < m->n_sends; i++) {
        send_slot_t *s = &m->sends[i];
        if (s->req != MPI_REQUEST_NULL) {
            int done = 0;
            if (MPI_Test(&s->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)
                continue;
        }
        if (s->cap >= bytes)
            return i;
        if (best < 0)
            best = i;
    }
    return best;
}

/* Make a staging buffer hold at least `bytes` (kept for reuse; never shrinks). */
static zb_status_t grow_buffer(void **buf, size_t *cap, size_t bytes, int rank, const char *what,
                               zb_err_t *err)
{
    if (*cap >= bytes)
        return ZB_OK;
    void *nb = realloc(*buf, bytes ? bytes : 1);
    if (!nb)
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for a %zu-byte %s buffer", rank,
                          bytes, what);
    *buf = nb;
    *cap = bytes;
    return ZB_OK;
}

static zb_status_t mpi_send(zb_transport_t *t, const void *buf, size_t bytes, int peer,
                            uint32_t tag, zb_err_t *err)
{
    mpi_t *m = (mpi_t *)t;
    if (poll_abort(m))
        return aborted_error(m, err);
    zb_status_t st = check_size(m, bytes, err);
    if (st != ZB_OK)
        return st;
    int i = free_send_slot(m, bytes);
    if (i < 0 && m->n_sends < MAX_SENDS) {
        send_slot_t *grown = realloc(m->sends, (size_t)(m->n_sends + 1) * sizeof *grown);
        if (!grown)
            return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for a send buffer", t->rank);
        m->sends = grown;
        i = m->n_sends++;
        m->sends[i] = (send_slot_t){.req = MPI_REQUEST_NULL};
    }
    if (i < 0) { /* pool full: wait for the oldest-posted slot (slot 0 is as good as any) */
        char what[128];
        i = 0;
        st = wait_req(m, &m->sends[0].req, MPI_STATUS_IGNORE, m->sends[0].peer,
                      describe(tag, m->sends[0].peer, true, what, sizeof what), err);
        if (st != ZB_OK)
            return st;
    }
    send_slot_t *s = &m->sends[i];
    st = grow_buffer(&s->buf, &s->cap, bytes, t->rank, "send", err);
    if (st != ZB_OK)
        return st;
    if (bytes)
        memcpy(s->buf, buf, bytes);
    s->peer = peer;
    int rc = MPI_Isend(s->buf, (int)bytes, MPI_BYTE, peer, (int)tag, m->comm, &s->req);
    if (rc != MPI_SUCCESS)
        return mpi_error(err, rc, "MPI_Isend", t->rank);
    m->stats.bytes_sent += (double)bytes;
    m->stats.msgs_sent++;
    return ZB_OK;
}

static zb_status_t mpi_flush(zb_transport_t *t, zb_err_t *err)
{
    mpi_t *m = (mpi_t *)t;
    for (int i = 0; i < m->n_sends; i++) {
        send_slot_t *s = &m->sends[i];
        if (s->req == MPI_REQUEST_NULL)
            continue;
        char what[128];
        snprintf(what, sizeof what, "flushing a message to rank %d", s->peer);
        zb_status_t st = wait_req(m, &s->req, MPI_STATUS_IGNORE, s->peer, what, err);
        if (st != ZB_OK)
            return st;
    }
    return poll_abort(m) ? aborted_error(m, err) : ZB_OK;
}

/* ---- receives ---- */

static zb_status_t mpi_post_recv(zb_transport_t *t, size_t bytes, int peer, uint32_t tag,
                                 zb_err_t *err)
{
    mpi_t *m = (mpi_t *)t;
    if (poll_abort(m))
        return aborted_error(m, err);
    zb_status_t st = check_size(m, bytes, err);
    if (st != ZB_OK)
        return st;
    int i = -1;
    for (int k = 0; k < m->n_posts && i < 0; k++)
        if (!m->posts[k].active && m->posts[k].cap >= bytes)
            i = k;
    for (int k = 0; k < m->n_posts && i < 0; k++)
        if (!m->posts[k].active)
            i = k;
    if (i < 0) {
        if (m->n_posts >= MAX_POSTED)
            return ZB_OK; /* announcing is optional: recv() will post it itself */
        post_slot_t *grown = realloc(m->posts, (size_t)(m->n_posts + 1) * sizeof *grown);
        if (!grown)
            return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory for a receive buffer",
                              t->rank);
        m->posts = grown;
        i = m->n_posts++;
        m->posts[i] = (post_slot_t){.req = MPI_REQUEST_NULL};
    }
    post_slot_t *p = &m->posts[i];
    st = grow_buffer(&p->buf, &p->cap, bytes, t->rank, "receive", err);
    if (st != ZB_OK)
        return st;
    int rc = MPI_Irecv(p->buf, (int)bytes, MPI_BYTE, peer, (int)tag, m->comm, &p->req);
    if (rc != MPI_SUCCESS)
        return mpi_error(err, rc, "MPI_Irecv", t->rank);
    p->bytes = bytes;
    p->peer = peer;
    p->tag = tag;
    p->seq = m->next_seq++;
    p->active = true;
    p->done = false;
    return ZB_OK;
}

/* The announced receive recv(peer, tag) will take: the oldest active match, or NULL. */
static post_slot_t *announced(mpi_t *m, int peer, uint32_t tag)
{
    post_slot_t *p = NULL;
    for (int k = 0; k < m->n_posts; k++) {
        post_slot_t *q = &m->posts[k];
        if (q->active && q->peer == peer && q->tag == tag && (!p || q->seq < p->seq))
            p = q;
    }
    return p;
}

static zb_status_t mpi_arrived(zb_transport_t *t, int peer, uint32_t tag, bool *yes,
                               zb_err_t *err)
{
    mpi_t *m = (mpi_t *)t;
    *yes = false;
    if (poll_abort(m))
        return aborted_error(m, err);
    post_slot_t *p = announced(m, peer, tag);
    int flag = 0, rc;
    if (p && !p->done) {
        rc = MPI_Test(&p->req, &flag, &p->status);
        p->done = rc == MPI_SUCCESS && flag;
    } else if (!p) {
        rc = MPI_Iprobe(peer, (int)tag, m->comm, &flag, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_SUCCESS;
    }
    if (rc != MPI_SUCCESS)
        return mpi_error(err, rc, p ? "MPI_Test" : "MPI_Iprobe", t->rank);
    *yes = p ? p->done : flag != 0;
    return ZB_OK;
}

static zb_status_t mpi_recv(zb_transport_t *t, void *buf, size_t bytes, int peer, uint32_t tag,
                            zb_err_t *err)
{
    mpi_t *m = (mpi_t *)t;
    if (poll_abort(m))
        return aborted_error(m, err);
    zb_status_t st = check_size(m, bytes, err);
    if (st != ZB_OK)
        return st;
    char what[128];
    describe(tag, peer, false, what, sizeof what);
    post_slot_t *p = announced(m, peer, tag);
    MPI_Status status;
    if (p) { /* announced: it was posted with the announced size, may already be here */
        st = p->done ? ZB_OK : wait_req(m, &p->req, &status, peer, what, err);
        if (st != ZB_OK) {
            cancel_req(&p->req);
            p->active = false;
            return st;
        }
        if (p->done)
            status = p->status;
        p->active = p->done = false;
        if ((st = check_count(m, &status, bytes, peer, tag, err)) != ZB_OK)
            return st;
        if (bytes)
            memcpy(buf, p->buf, bytes);
        return ZB_OK;
    }
    MPI_Request req;
    int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, (int)tag, m->comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_error(err, rc, "MPI_Irecv", t->rank);
    st = wait_req(m, &req, &status, peer, what, err);
    if (st != ZB_OK) {
        cancel_req(&req);
        return st;
    }
    return check_count(m, &status, bytes, peer, tag, err);
}

/* ---- collectives, exchange: the rank-ordered p2p versions (bit-identical to threads) ---- */

static zb_status_t mpi_allgather(zb_transport_t *t, const void *mine, size_t bytes, void *all,
                                 zb_err_t *err)
{
    mpi_t *m = (mpi_t *)t;
    if (poll_abort(m))
        return aborted_error(m, err);
    return zb_allgather_p2p(t, mine, bytes, all, err);
}

static zb_status_t mpi_exchange(zb_transport_t *t, const float *send_buf, float *recv_buf,
                                size_t count, int peer, uint32_t tag, zb_err_t *err)
{
    return zb_exchange_p2p(t, send_buf, recv_buf, count, peer, tag, err);
}

/* ---- abort ---- */

static void mpi_abort(zb_transport_t *t, const char *reason)
{
    mpi_t *m = (mpi_t *)t;
    if (m->aborted)
        return;
    m->aborted = true;
    snprintf(m->abort_out, sizeof m->abort_out, "%s", reason);
    snprintf(m->abort_msg, sizeof m->abort_msg, "rank %d failed: %.400s", t->rank, reason);
    int len = (int)strlen(m->abort_out) + 1;
    for (int r = 0; r < t->size; r++)
        if (r != t->rank && m->abort_reqs[r] == MPI_REQUEST_NULL)
            MPI_Isend(m->abort_out, len, MPI_CHAR, r, ABORT_TAG, m->comm, &m->abort_reqs[r]);
}

static void mpi_destroy(zb_transport_t *t)
{
    mpi_t *m = (mpi_t *)t;
    if (!m)
        return;
    for (int i = 0; i < m->n_posts; i++) {
        if (m->posts[i].active)
            cancel_req(&m->posts[i].req);
        free(m->posts[i].buf);
    }
    /* a send still in flight keeps its buffer: only after a failure, when the job is aborted */
    for (int i = 0; i < m->n_sends; i++) {
        int done = 1;
        if (m->sends[i].req != MPI_REQUEST_NULL)
            MPI_Test(&m->sends[i].req, &done, MPI_STATUS_IGNORE);
        if (done)
            free(m->sends[i].buf);
        else
            MPI_Request_free(&m->sends[i].req);
    }
    for (int r = 0; r < t->size; r++)
        if (m->abort_reqs[r] != MPI_REQUEST_NULL)
            MPI_Request_free(&m->abort_reqs[r]);
    free(m->posts);
    free(m->sends);
    free(m->abort_reqs);
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    free(m);
}

static const zb_transport_ops_t mpi_ops = {
    .send = mpi_send,
    .recv = mpi_recv,
    .post_recv = mpi_post_recv,
    .arrived = mpi_arrived,
    .allgather = mpi_allgather,
    .exchange = mpi_exchange,
    .flush = mpi_flush,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
};

/* ---- life cycle ---- */

zb_status_t zb_mpi_transport_new(int *argc, char ***argv, double timeout, zb_transport_t **out,
                                 zb_err_t *err)
{
    *out = NULL;
    if (!(timeout <= ZB_TIMEOUT_MAX_S))
        return zb_err_set(err, ZB_EINVAL, "MPI transport: timeout %g s (at most %g s, <= 0 = "
                                          "none)", timeout, ZB_TIMEOUT_MAX_S);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return zb_err_set(err, ZB_ECOMM, "MPI was already finalised in this process");
    if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS)
        return zb_err_set(err, ZB_ECOMM, "MPI_Init failed (is this an MPI launch?)");
    mpi_t *m = calloc(1, sizeof *m);
    if (!m)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the MPI transport");
    m->comm = MPI_COMM_NULL;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &m->comm) != MPI_SUCCESS) {
        free(m);
        return zb_err_set(err, ZB_ECOMM, "MPI_Comm_dup failed");
    }
    /* errors come back as codes (a truncated message must be a message, not a crash) */
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &m->base.rank);
    MPI_Comm_size(m->comm, &m->base.size);
    m->base.ops = &mpi_ops;
    m->base.name = "mpi";
    m->base.timeout = timeout;
    m->abort_reqs = malloc((size_t)m->base.size * sizeof *m->abort_reqs);
    if (!m->abort_reqs) {
        mpi_destroy(&m->base);
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the MPI transport");
    }
    for (int r = 0; r < m->base.size; r++)
        m->abort_reqs[r] = MPI_REQUEST_NULL;
    /* this machine's processes (shared memory), numbered in world order: a process picks its
     * GPU by its place here, so ranks need not be laid out machine by machine */
    MPI_Comm node = MPI_COMM_NULL;
    m->local_rank = m->base.rank, m->local_size = m->base.size;
    if (MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, m->base.rank, MPI_INFO_NULL, &node) ==
            MPI_SUCCESS &&
        node != MPI_COMM_NULL) {
        MPI_Comm_rank(node, &m->local_rank);
        MPI_Comm_size(node, &m->local_size);
        MPI_Comm_free(&node);
    }
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    if (!flag || !ub || (unsigned)*ub < (unsigned)ABORT_TAG) {
        int have = flag && ub ? *ub : -1;
        mpi_destroy(&m->base);
        return zb_err_set(err, ZB_ECOMM,
                          "this MPI allows tags up to %d; zbpp needs %d (kind/stage/microbatch "
                          "packing)",
                          have, ABORT_TAG);
    }
    *out = &m->base;
    return ZB_OK;
}

void zb_mpi_transport_stats(const zb_transport_t *t, zb_mpi_stats_t *s)
{
    memset(s, 0, sizeof *s);
    if (t && t->ops == &mpi_ops)
        *s = ((const mpi_t *)t)->stats;
}

void zb_mpi_local_rank(const zb_transport_t *t, int *local_rank, int *local_size)
{
    *local_rank = t ? t->rank : 0;
    *local_size = t ? t->size : 1;
    if (t && t->ops == &mpi_ops) {
        *local_rank = ((const mpi_t *)t)->local_rank;
        *local_size = ((const mpi_t *)t)->local_size;
    }
}

void zb_mpi_finalize(void)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized)
        MPI_Finalize();
}

void zb_mpi_abort_job(zb_transport_t *t, int code)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized)
        return;
    if (t && t->ops == &mpi_ops) {
        mpi_t *m = (mpi_t *)t;
        double t0 = zb_now();
        for (int r = 0; r < t->size; r++) {
            while (m->abort_reqs[r] != MPI_REQUEST_NULL && zb_now() - t0 < 1.0) {
                int done = 0;
                if (MPI_Test(&m->abort_reqs[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done)
                    break;
                struct timespec ts = {0, 1000000L};
                nanosleep(&ts, NULL);
            }
        }
    }
    MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
}
