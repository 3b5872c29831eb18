/* zbpp — the thread transport: every rank a thread of one process.
 *
 * Each rank has a bounded mailbox (a FIFO of copied messages). send() copies the payload outside
 * the lock, then appends it to the receiver's mailbox, waiting while the mailbox is full.
 * recv() takes the oldest message matching (source, tag), waiting on the mailbox's condition
 * variable — no busy-waiting. One world mutex guards all mailboxes: messages are few and large,
 * so contention is negligible and abort needs only one lock to be seen by everyone. */
#define _GNU_SOURCE /* pthread_setaffinity_np, CPU_SET */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zbpp/transport.h"

typedef struct msg {
    struct msg *next;
    int src;
    uint32_t tag;
    size_t bytes;
    unsigned char data[];
} msg_t;

typedef struct {
    msg_t *head, *tail;
    int count;
    pthread_cond_t cond; /* signalled on arrival, removal and abort */
} mailbox_t;

typedef struct {
    zb_transport_t base; /* first member: a zb_transport_t* is a rank_t* */
    zb_thread_world_t *world;
} rank_t;

struct zb_thread_world {
    int ranks, capacity;
    double timeout;
    pthread_mutex_t lock;
    mailbox_t *box;  /* [ranks] */
    rank_t *handles; /* [ranks] */
    bool aborted;
    int abort_rank;
    char abort_reason[400];
};

static const zb_transport_ops_t thread_ops;

static zb_status_t aborted_error(zb_thread_world_t *w, int self, zb_err_t *err)
{
    if (w->abort_rank == self)
        return zb_err_set(err, ZB_EABORT, "rank %d failed: %s", self, w->abort_reason);
    return zb_err_set(err, ZB_EABORT, "rank %d failed: %s", w->abort_rank, w->abort_reason);
}

static const char *tag_kind_name(uint32_t tag)
{
    static const char *names[] = {"activation", "gradient", "collective", "exchange", "user",
                                  "replica gradient", "report"};
    int k = zb_tag_kind(tag);
    return k < 7 ? names[k] : "unknown";
}

/* Deadline for a blocking call, on the monotonic clock (the condvars use it too). */
static struct timespec deadline_after(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    time_t whole = (time_t)seconds;
    long nsec = (long)((seconds - (double)whole) * 1e9);
    ts.tv_sec += whole;
    ts.tv_nsec += nsec;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Wait on `c` with the world lock held: 0 when woken (the caller re-checks its condition),
 * ETIMEDOUT at the deadline, or another error code of pthread_cond_timedwait, which must end the
 * wait too (taking it for a wake-up would spin). */
static int wait_on(zb_thread_world_t *w, pthread_cond_t *c, const struct timespec *deadline)
{
    if (w->timeout <= 0)
        return pthread_cond_wait(c, &w->lock);
    return pthread_cond_timedwait(c, &w->lock, deadline);
}

/* The error of a wait that ended with `rc` (not 0): a timeout, or the wait itself failing. */
static zb_status_t wait_failed(zb_thread_world_t *w, int rc, int self, const char *doing,
                               zb_err_t *err)
{
    if (rc == ETIMEDOUT)
        return zb_err_set(err, ZB_ETIMEOUT, "rank %d: timed out after %.1f s %s", self,
                          w->timeout, doing);
    return zb_err_set(err, ZB_ECOMM, "rank %d: waiting failed (%s) %s", self, strerror(rc),
                      doing);
}

static zb_status_t th_send(zb_transport_t *t, const void *buf, size_t bytes, int peer,
                           uint32_t tag, zb_err_t *err)
{
    zb_thread_world_t *w = ((rank_t *)t)->world;
    msg_t *m = malloc(sizeof *m + bytes);
    if (!m)
        return zb_err_set(err, ZB_ENOMEM, "rank %d: out of memory copying a %zu-byte message",
                          t->rank, bytes);
    m->next = NULL;
    m->src = t->rank;
    m->tag = tag;
    m->bytes = bytes;
    if (bytes)
        memcpy(m->data, buf, bytes);

    struct timespec deadline = deadline_after(w->timeout);
    mailbox_t *box = &w->box[peer];
    zb_status_t st = ZB_OK;
    pthread_mutex_lock(&w->lock);
    while (!w->aborted && box->count >= w->capacity) {
        int rc = wait_on(w, &box->cond, &deadline);
        if (rc != 0) {
            char doing[160];
            snprintf(doing, sizeof doing,
                     "sending to rank %d (its mailbox of %d messages stayed full)", peer,
                     w->capacity);
            st = wait_failed(w, rc, t->rank, doing, err);
            break;
        }
    }
    if (st == ZB_OK && w->aborted)
        st = aborted_error(w, t->rank, err);
    if (st == ZB_OK) {
        if (box->tail)
            box->tail->next = m;
        else
            box->head = m;
        box->tail = m;
        box->count++;
        m = NULL;
        pthread_cond_broadcast(&box->cond);
    }
    pthread_mutex_unlock(&w->lock);
    free(m);
    return st;
}

/* Unlink and return the oldest message from src with tag, or NULL. Lock held. */
static msg_t *take(mailbox_t *box, int src, uint32_t tag)
{
    msg_t *prev = NULL;
    for (msg_t *m = box->head; m; prev = m, m = m->next) {
        if (m->src != src || m->tag != tag)
            continue;
        if (prev)
            prev->next = m->next;
        else
            box->head = m->next;
        if (box->tail == m)
            box->tail = prev;
        box->count--;
        return m;
    }
    return NULL;
}

static zb_status_t th_recv(zb_transport_t *t, void *buf, size_t bytes, int peer, uint32_t tag,
                           zb_err_t *err)
{
    zb_thread_world_t *w = ((rank_t *)t)->world;
    mailbox_t *box = &w->box[t->rank];
    struct timespec deadline = deadline_after(w->timeout);
    msg_t *m = NULL;
    zb_status_t st = ZB_OK;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        /* A message that arrived before the abort is still dropped: after an abort nothing
         * should make progress, so the failure is seen at the same point by everyone. */
        if (w->aborted) {
            st = aborted_error(w, t->rank, err);
            break;
        }
        if ((m = take(box, peer, tag)) != NULL) {
            pthread_cond_broadcast(&box->cond); /* a sender may wait for room */
            break;
        }
        int rc = wait_on(w, &box->cond, &deadline);
        if (rc != 0) {
            char doing[160];
            snprintf(doing, sizeof doing,
                     "waiting for a %s message from rank %d (stage %d, microbatch %d)",
                     tag_kind_name(tag), peer, zb_tag_stage(tag), zb_tag_mb(tag));
            st = wait_failed(w, rc, t->rank, doing, err);
            break;
        }
    }
    pthread_mutex_unlock(&w->lock);
    if (m) {
        if (m->bytes != bytes)
            st = zb_err_set(err, ZB_ECOMM,
                            "rank %d: %s message from rank %d (stage %d, microbatch %d) has %zu "
                            "bytes, expected %zu",
                            t->rank, tag_kind_name(tag), peer, zb_tag_stage(tag), zb_tag_mb(tag),
                            m->bytes, bytes);
        else if (bytes)
            memcpy(buf, m->data, bytes);
        free(m);
    }
    return st;
}

/* Messages land in the mailbox whoever posts what, so there is nothing to prepare; only an abort
 * is reported early. */
static zb_status_t th_post_recv(zb_transport_t *t, size_t bytes, int peer, uint32_t tag,
                                zb_err_t *err)
{
    (void)bytes, (void)peer, (void)tag;
    return t->ops->flush(t, err);
}

static zb_status_t th_arrived(zb_transport_t *t, int peer, uint32_t tag, bool *yes,
                              zb_err_t *err)
{
    zb_thread_world_t *w = ((rank_t *)t)->world;
    zb_status_t st = ZB_OK;
    *yes = false;
    pthread_mutex_lock(&w->lock);
    if (w->aborted)
        st = aborted_error(w, t->rank, err);
    for (const msg_t *m = w->box[t->rank].head; st == ZB_OK && m && !*yes; m = m->next)
        *yes = m->src == peer && m->tag == tag;
    pthread_mutex_unlock(&w->lock);
    return st;
}

static zb_status_t th_flush(zb_transport_t *t, zb_err_t *err)
{
    /* Sends are already copied into the receiver's mailbox; only report an abort. */
    zb_thread_world_t *w = ((rank_t *)t)->world;
    zb_status_t st = ZB_OK;
    pthread_mutex_lock(&w->lock);
    if (w->aborted)
        st = aborted_error(w, t->rank, err);
    pthread_mutex_unlock(&w->lock);
    return st;
}

static void th_abort(zb_transport_t *t, const char *reason)
{
    zb_thread_world_t *w = ((rank_t *)t)->world;
    pthread_mutex_lock(&w->lock);
    if (!w->aborted) {
        w->aborted = true;
        w->abort_rank = t->rank;
        snprintf(w->abort_reason, sizeof w->abort_reason, "%.399s", reason);
        for (int r = 0; r < w->ranks; r++)
            pthread_cond_broadcast(&w->box[r].cond);
    }
    pthread_mutex_unlock(&w->lock);
}

static void th_destroy(zb_transport_t *t)
{
    (void)t; /* handles belong to the world */
}

static const zb_transport_ops_t thread_ops = {
    .send = th_send,
    .recv = th_recv,
    .post_recv = th_post_recv,
    .arrived = th_arrived,
    .allgather = zb_allgather_p2p,
    .exchange = zb_exchange_p2p,
    .flush = th_flush,
    .abort = th_abort,
    .destroy = th_destroy,
};

zb_status_t zb_thread_world_new(int ranks, int capacity, double timeout, zb_thread_world_t **out,
                                zb_err_t *err)
{
    *out = NULL;
    if (ranks < 1 || ranks > 4096)
        return zb_err_set(err, ZB_EINVAL, "thread world: %d ranks (need 1..4096)", ranks);
    if (capacity < 1)
        return zb_err_set(err, ZB_EINVAL, "thread world: mailbox capacity %d (need >= 1)",
                          capacity);
    if (!(timeout <= ZB_TIMEOUT_MAX_S))
        return zb_err_set(err, ZB_EINVAL, "thread world: timeout %g s (at most %g s, <= 0 = "
                                          "none)", timeout, ZB_TIMEOUT_MAX_S);
    zb_thread_world_t *w = calloc(1, sizeof *w);
    if (!w)
        return zb_err_set(err, ZB_ENOMEM, "thread world: out of memory");
    w->box = calloc((size_t)ranks, sizeof *w->box);
    w->handles = calloc((size_t)ranks, sizeof *w->handles);
    if (!w->box || !w->handles) {
        free(w->box);
        free(w->handles);
        free(w);
        return zb_err_set(err, ZB_ENOMEM, "thread world: out of memory");
    }
    w->ranks = ranks;
    w->capacity = capacity;
    w->timeout = timeout;
    w->abort_rank = -1;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    for (int r = 0; r < ranks; r++) {
        pthread_cond_init(&w->box[r].cond, &attr);
        rank_t *h = &w->handles[r];
        h->base.ops = &thread_ops;
        h->base.name = "threads";
        h->base.rank = r;
        h->base.size = ranks;
        h->base.timeout = timeout;
        h->world = w;
    }
    pthread_condattr_destroy(&attr);
    *out = w;
    return ZB_OK;
}

zb_transport_t *zb_thread_world_rank(zb_thread_world_t *w, int rank)
{
    if (!w || rank < 0 || rank >= w->ranks)
        return NULL;
    return &w->handles[rank].base;
}

void zb_thread_world_free(zb_thread_world_t *w)
{
    if (!w)
        return;
    for (int r = 0; r < w->ranks; r++) {
        msg_t *m = w->box[r].head;
        while (m) {
            msg_t *next = m->next;
            free(m);
            m = next;
        }
        pthread_cond_destroy(&w->box[r].cond);
    }
    pthread_mutex_destroy(&w->lock);
    free(w->box);
    free(w->handles);
    free(w);
}

/* ---- running ranks on threads ---- */

typedef struct {
    zb_thread_world_t *w;
    int rank;
    zb_rank_fn fn;
    void *arg;
    zb_status_t status;
    zb_err_t err;
} job_t;

static void *rank_main(void *p)
{
    job_t *j = p;
    zb_transport_t *t = &j->w->handles[j->rank].base;
    zb_err_clear(&j->err);
    j->status = j->fn(t, j->arg, &j->err);
    /* Whatever went wrong, nobody may wait for this rank any longer. */
    if (j->status != ZB_OK)
        th_abort(t, j->err.msg[0] ? j->err.msg : zb_strerror(j->status));
    return NULL;
}

/* The r-th CPU this process may run on, or -1. */
static int allowed_cpu(int r)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) <= r)
        return -1;
    for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && seen++ == r)
            return c;
    return -1;
}

zb_status_t zb_thread_world_run(zb_thread_world_t *w, zb_rank_fn fn, void **args, int pin,
                                zb_status_t *status, zb_err_t *err)
{
    int P = w->ranks;
    job_t *jobs = calloc((size_t)P, sizeof *jobs);
    pthread_t *tid = calloc((size_t)P, sizeof *tid);
    bool *started = calloc((size_t)P, sizeof *started);
    if (!jobs || !tid || !started) {
        free(jobs);
        free(tid);
        free(started);
        return zb_err_set(err, ZB_ENOMEM, "thread world: out of memory starting %d ranks", P);
    }
    bool can_pin = pin && allowed_cpu(P - 1) >= 0;
    zb_status_t result = ZB_OK;
    for (int r = 0; r < P; r++) {
        jobs[r] = (job_t){.w = w, .rank = r, .fn = fn, .arg = args ? args[r] : NULL};
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (can_pin) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(allowed_cpu(r), &set);
            pthread_attr_setaffinity_np(&attr, sizeof set, &set);
        }
        int rc = pthread_create(&tid[r], &attr, rank_main, &jobs[r]);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            zb_err_t local;
            result = zb_err_set(&local, ZB_ENOMEM,
                                "thread world: cannot start the thread of rank %d", r);
            th_abort(&w->handles[r].base, local.msg);
            if (err)
                *err = local;
            break;
        }
        started[r] = true;
    }
    for (int r = 0; r < P; r++)
        if (started[r])
            pthread_join(tid[r], NULL);

    if (result == ZB_OK) {
        /* Report the rank that failed by itself (the abort's origin) before the others. */
        int pick = -1;
        if (w->abort_rank >= 0 && jobs[w->abort_rank].status != ZB_OK)
            pick = w->abort_rank;
        for (int r = 0; r < P && pick < 0; r++)
            if (jobs[r].status != ZB_OK)
                pick = r;
        if (pick >= 0) {
            result = jobs[pick].status;
            if (err)
                *err = jobs[pick].err;
        }
    }
    if (status)
        for (int r = 0; r < P; r++)
            status[r] = started[r] ? jobs[r].status : ZB_EABORT;
    free(jobs);
    free(tid);
    free(started);
    return result;
}
