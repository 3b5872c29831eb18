/* A rank's worker group (include/zbpp/workers.h): helpers wait for a job on a futex word
 * (generation counter), claim chunks from an atomic counter, and the last one to finish wakes the
 * caller. Waits spin briefly first (kernel calls follow each other within microseconds) and then
 * sleep, so an idle group costs nothing and an oversubscribed one (more threads than cores) still
 * makes progress. */
#define _GNU_SOURCE /* pthread_attr_setaffinity_np, sched_getaffinity, syscall */
#include "zbpp/workers.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { SPIN_ITERS = 4000 }; /* a few tens of microseconds before sleeping */

typedef struct {
    zb_workers_t *w;
    int id;
    void *scratch;
    size_t scratch_bytes;
} helper_t;

struct zb_workers {
    int n;
    bool pinned;
    int cores[ZB_WORKERS_MAX];
    pthread_t tid[ZB_WORKERS_MAX];
    helper_t helper[ZB_WORKERS_MAX];
    int started; /* helpers running */
    /* the job */
    zb_chunk_fn fn;
    void *ctx;
    size_t n_chunks;
    atomic_size_t next;
    atomic_int pending; /* helpers that have not finished the job */
    bool busy;          /* the caller is inside zb_parallel_for (nested calls run inline) */
    bool stop;
    /* futex words */
    atomic_uint gen;      /* bumped once per job */
    atomic_int sleepers;  /* helpers asleep (or about to be) on gen */
    atomic_uint done;     /* 1 when every helper finished the job */
    atomic_int caller_sleeping;
};

static _Thread_local zb_workers_t *current;
/* the thread's affinity before a group pinned it, restored when it leaves the pinned group */
static _Thread_local cpu_set_t saved_affinity;
static _Thread_local bool saved_valid;

static void futex_wait(atomic_uint *word, unsigned expect)
{
    syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *word)
{
    syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void run_chunks(zb_workers_t *w, int id)
{
    for (;;) {
        size_t c = atomic_fetch_add_explicit(&w->next, 1, memory_order_relaxed);
        if (c >= w->n_chunks)
            return;
        w->fn(w->ctx, c, id);
    }
}

static void *helper_main(void *p)
{
    helper_t *h = p;
    zb_workers_t *w = h->w;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load(&w->gen)) == seen) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add(&w->sleepers, 1);
            futex_wait(&w->gen, seen); /* returns at once if gen moved meanwhile */
            atomic_fetch_sub(&w->sleepers, 1);
        }
        seen = g;
        if (w->stop)
            return NULL;
        run_chunks(w, h->id);
        if (atomic_fetch_sub(&w->pending, 1) == 1) {
            atomic_store(&w->done, 1);
            if (atomic_load(&w->caller_sleeping))
                futex_wake(&w->done);
        }
    }
}

/* Hand a job (or the stop order) to the helpers. */
static void publish(zb_workers_t *w)
{
    atomic_store(&w->done, 0);
    atomic_store(&w->pending, w->started);
    atomic_fetch_add(&w->gen, 1);
    if (atomic_load(&w->sleepers) > 0)
        futex_wake(&w->gen);
}

static void wait_done(zb_workers_t *w)
{
    int spins = 0;
    while (atomic_load(&w->done) == 0) {
        if (++spins < SPIN_ITERS) {
            cpu_relax();
            continue;
        }
        atomic_store(&w->caller_sleeping, 1);
        futex_wait(&w->done, 0);
        atomic_store(&w->caller_sleeping, 0);
    }
}

zb_status_t zb_workers_new(int n, const int *cores, zb_workers_t **out, zb_err_t *err)
{
    *out = NULL;
    if (n < 1 || n > ZB_WORKERS_MAX)
        return zb_err_set(err, ZB_EINVAL, "threads per rank must be in 1..%d (got %d)",
                          ZB_WORKERS_MAX, n);
    for (int i = 0; cores && i < n; i++)
        if (cores[i] < 0 || cores[i] >= CPU_SETSIZE)
            return zb_err_set(err, ZB_EINVAL, "worker thread %d: no CPU %d", i, cores[i]);
    zb_workers_t *w = calloc(1, sizeof *w);
    if (!w)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a worker group");
    w->n = n;
    w->pinned = cores != NULL;
    for (int i = 0; i < n; i++)
        w->cores[i] = cores ? cores[i] : -1;
    for (int i = 1; i < n; i++) {
        w->helper[i] = (helper_t){.w = w, .id = i};
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (cores) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cores[i], &set);
            pthread_attr_setaffinity_np(&attr, sizeof set, &set);
        }
        int rc = pthread_create(&w->tid[i], &attr, helper_main, &w->helper[i]);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            zb_workers_free(w);
            return zb_err_set(err, ZB_ENOMEM, "cannot start worker thread %d of %d", i, n);
        }
        w->started = i;
    }
    *out = w;
    return ZB_OK;
}

void zb_workers_free(zb_workers_t *w)
{
    if (!w)
        return;
    if (current == w)
        zb_workers_enter(NULL);
    w->stop = true;
    publish(w);
    for (int i = 1; i <= w->started; i++)
        pthread_join(w->tid[i], NULL);
    for (int i = 1; i < w->n; i++)
        free(w->helper[i].scratch);
    free(w);
}

int zb_workers_count(const zb_workers_t *w) { return w ? w->n : 1; }

/* The CPUs of this process's affinity mask, in order; returns how many (0 if unknown). */
static int allowed_cpus(int *cpus, int max)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    int k = 0;
    for (int c = 0; c < CPU_SETSIZE && k < max; c++)
        if (CPU_ISSET(c, &set))
            cpus[k++] = c;
    return k;
}

int zb_workers_default_threads(int ranks)
{
    int cpus[CPU_SETSIZE];
    int n = allowed_cpus(cpus, CPU_SETSIZE);
    if (n <= 0) {
        long on = sysconf(_SC_NPROCESSORS_ONLN);
        n = on > 0 ? (int)on : 1;
    }
    int per = ranks > 0 ? n / ranks : n;
    if (per > ZB_WORKERS_MAX)
        per = ZB_WORKERS_MAX;
    return per < 1 ? 1 : per;
}

int zb_workers_resolve(int requested, int ranks)
{
    return requested > 0 ? requested : zb_workers_default_threads(ranks);
}

zb_status_t zb_workers_new_for_rank(int rank_index, int n, bool pin, zb_workers_t **out,
                                    zb_err_t *err)
{
    int cpus[CPU_SETSIZE];
    int have = pin ? allowed_cpus(cpus, CPU_SETSIZE) : 0;
    bool fits = pin && rank_index >= 0 && n >= 1 && n <= ZB_WORKERS_MAX &&
                (long)(rank_index + 1) * n <= have;
    return zb_workers_new(n, fits ? cpus + (size_t)rank_index * (size_t)n : NULL, out, err);
}

zb_workers_t *zb_workers_enter(zb_workers_t *w)
{
    zb_workers_t *prev = current;
    current = w;
    if (w && w->pinned) {
        if (!saved_valid)
            saved_valid = pthread_getaffinity_np(pthread_self(), sizeof saved_affinity,
                                                 &saved_affinity) == 0;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cores[0], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    } else if (saved_valid) {
        pthread_setaffinity_np(pthread_self(), sizeof saved_affinity, &saved_affinity);
        saved_valid = false;
    }
    return prev;
}

zb_workers_t *zb_workers_current(void) { return current; }

int zb_workers_current_count(void) { return current ? current->n : 1; }

void zb_parallel_for(size_t n_chunks, zb_chunk_fn fn, void *ctx)
{
    zb_workers_t *w = current;
    if (!w || w->n == 1 || n_chunks <= 1 || w->busy) {
        for (size_t c = 0; c < n_chunks; c++)
            fn(ctx, c, 0);
        return;
    }
    w->busy = true;
    w->fn = fn;
    w->ctx = ctx;
    w->n_chunks = n_chunks;
    atomic_store(&w->next, 0);
    publish(w);
    run_chunks(w, 0);
    wait_done(w);
    w->busy = false;
}

bool zb_workers_reserve(size_t bytes)
{
    zb_workers_t *w = current;
    if (!w || w->busy)
        return false;
    bytes = (bytes + 63) & ~(size_t)63;
    for (int i = 1; i < w->n; i++) {
        helper_t *h = &w->helper[i];
        if (h->scratch_bytes >= bytes)
            continue;
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes) != 0)
            return false;
        free(h->scratch);
        h->scratch = p;
        h->scratch_bytes = bytes;
    }
    return true;
}

void *zb_workers_scratch(const zb_workers_t *w, int worker)
{
    if (!w || worker < 1 || worker >= w->n)
        return NULL;
    return w->helper[worker].scratch;
}
