/* The bf16 product backend on oneDNN's matmul (Debian's libdnnl; cmake/onednn.cmake): bf16
 * operands, fp32 accumulation and output, alpha as an output scale and beta as a sum post-op.
 * One primitive per shape, made once and kept (a pipeline stage has a few dozen shapes). Every
 * call runs on the calling thread alone: the tiles of gemm_tiled.c share the work, so the bits
 * depend on the shape only, never on the thread count. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "nn/gemm_bf16.h"

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    int f32; /* the test mode's fp32 operands (zb_bf16_backend_gemm_f32) */
} shape_t;

typedef struct {
    shape_t key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c, scratch;
    size_t scratch_bytes;
} entry_t;

/* Open addressing; full means later shapes are made per call and dropped. */
#define CACHE_SLOTS 512

static struct {
    pthread_once_t once;
    int ok;
    dnnl_engine_t engine;
    pthread_mutex_t lock;
    entry_t *slots[CACHE_SLOTS];
    pthread_key_t thread_key;
} g = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

/* Per thread: an in-order stream and the scratchpad buffer. */
typedef struct {
    dnnl_stream_t stream;
    void *scratch;
    size_t scratch_bytes;
} thread_t;

static void thread_free(void *p)
{
    thread_t *t = p;
    if (t->stream)
        dnnl_stream_destroy(t->stream);
    free(t->scratch);
    free(t);
}

static void init_once(void)
{
    pthread_key_create(&g.thread_key, thread_free);
    g.ok = dnnl_engine_create(&g.engine, dnnl_cpu, 0) == dnnl_success;
}

static thread_t *thread_state(void)
{
    thread_t *t = pthread_getspecific(g.thread_key);
    if (t)
        return t;
    if (!(t = calloc(1, sizeof *t)))
        return NULL;
    if (dnnl_stream_create(&t->stream, g.engine, dnnl_stream_default_flags) != dnnl_success ||
        pthread_setspecific(g.thread_key, t) != 0) {
        thread_free(t);
        return NULL;
    }
    /* Debian's oneDNN runs on OpenMP: one thread per call, from this thread (libgomp keeps the
     * setting per calling thread; libdnnl loaded it, so the symbol is there). Set before this
     * thread makes any primitive: a primitive fixes its thread count when it is made. */
    void (*set_threads)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    if (set_threads)
        set_threads(1);
    return t;
}

/* The memory descriptor of a rows x cols operand whose element (i, j) lies at i·s0 + j·s1. */
static int md_init(dnnl_memory_desc_t *md, int rows, int cols, dnnl_data_type_t type, int s0,
                   int s1)
{
    dnnl_dims_t dims = {rows, cols}, strides = {s0, s1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides) == dnnl_success ? 0 : -1;
}

/* A primitive for one shape, or NULL (with the primitive descriptor's implementation name in
 * impl when asked). */
static entry_t *entry_make(const shape_t *s, char *impl, size_t impl_n)
{
    entry_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = *s;
    /* op(A) is M x K, op(B) is K x N: a transposed operand is the stored one read by columns */
    dnnl_data_type_t type = s->f32 ? dnnl_f32 : dnnl_bf16;
    if (md_init(&e->a, s->M, s->K, type, s->ta ? 1 : s->lda, s->ta ? s->lda : 1) ||
        md_init(&e->b, s->K, s->N, type, s->tb ? 1 : s->ldb, s->tb ? s->ldb : 1) ||
        md_init(&e->c, s->M, s->N, dnnl_f32, s->ldc, 1)) {
        free(e);
        return NULL;
    }
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dnnl_matmul_desc_init(&desc, &e->a, &e->b, NULL, &e->c) == dnnl_success &&
             dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
                 dnnl_success;
    if (ok && s->alpha != 1.0f)
        ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &s->alpha) == dnnl_success;
    if (ok && s->beta != 0.0f)
        ok = dnnl_post_ops_create(&post) == dnnl_success &&
             dnnl_post_ops_append_sum(post, s->beta) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, post) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, g.engine, NULL) == dnnl_success;
    if (ok && impl) {
        const char *name = NULL;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
        snprintf(impl, impl_n, "%s", name ? name : "?");
    }
    if (ok) {
        const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (sp)
            e->scratch = *sp;
        e->scratch_bytes = sp ? dnnl_memory_desc_get_size(sp) : 0;
        ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (post)
        dnnl_post_ops_destroy(post);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        free(e);
        return NULL;
    }
    return e;
}

static void entry_free(entry_t *e)
{
    if (e) {
        dnnl_primitive_destroy(e->prim);
        free(e);
    }
}

static unsigned shape_hash(const shape_t *s)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned h = 2166136261u;
    for (size_t i = 0; i < sizeof *s; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* The cached primitive for s, made on first use; *owned says the caller must free it (cache
 * full). */
static entry_t *entry_get(const shape_t *s, int *owned)
{
    unsigned h = shape_hash(s) % CACHE_SLOTS;
    *owned = 0;
    pthread_mutex_lock(&g.lock);
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        entry_t **slot = &g.slots[(h + i) % CACHE_SLOTS];
        if (*slot && !memcmp(&(*slot)->key, s, sizeof *s)) {
            entry_t *e = *slot;
            pthread_mutex_unlock(&g.lock);
            return e;
        }
        if (!*slot) { /* made under the lock: two threads never make the same shape twice */
            *slot = entry_make(s, NULL, 0);
            entry_t *e = *slot;
            pthread_mutex_unlock(&g.lock);
            return e;
        }
    }
    pthread_mutex_unlock(&g.lock);
    *owned = 1;
    return entry_make(s, NULL, 0);
}

static int execute(entry_t *e, thread_t *t, const void *A, const void *B, float *C)
{
    if (t->scratch_bytes < e->scratch_bytes) {
        free(t->scratch);
        t->scratch_bytes = 0;
        if (!(t->scratch = malloc(e->scratch_bytes)))
            return -1;
        t->scratch_bytes = e->scratch_bytes;
    }
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
    int ok = dnnl_memory_create(&ma, &e->a, g.engine, (void *)A) == dnnl_success &&
             dnnl_memory_create(&mb, &e->b, g.engine, (void *)B) == dnnl_success &&
             dnnl_memory_create(&mc, &e->c, g.engine, C) == dnnl_success &&
             (!e->scratch_bytes ||
              dnnl_memory_create(&ms, &e->scratch, g.engine, t->scratch) == dnnl_success);
    if (ok) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb},
                                   {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, ms}};
        ok = dnnl_primitive_execute(e->prim, t->stream, ms ? 4 : 3, args) == dnnl_success &&
             dnnl_stream_wait(t->stream) == dnnl_success;
    }
    dnnl_memory_t all[4] = {ma, mb, mc, ms};
    for (int i = 0; i < 4; i++)
        if (all[i])
            dnnl_memory_destroy(all[i]);
    return ok ? 0 : -1;
}

static int gemm(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda,
                const void *B, int ldb, float beta, float *C, int ldc, int f32)
{
    pthread_once(&g.once, init_once);
    /* the thread's OpenMP setting first: a primitive plans its threads when it is made */
    thread_t *t = g.ok ? thread_state() : NULL;
    if (!t)
        return -1;
    shape_t s;
    memset(&s, 0, sizeof s); /* the key is compared and hashed bytewise */
    s.ta = ta, s.tb = tb, s.M = M, s.N = N, s.K = K, s.lda = lda, s.ldb = ldb, s.ldc = ldc;
    s.alpha = alpha, s.beta = beta, s.f32 = f32;
    int owned;
    entry_t *e = entry_get(&s, &owned);
    if (!e)
        return -1;
    int rc = execute(e, t, A, B, C);
    if (owned)
        entry_free(e);
    return rc;
}

int zb_bf16_backend_gemm(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A,
                         int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    return gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 0);
}

int zb_bf16_backend_gemm_f32(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                             int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    return gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 1);
}

int zb_bf16_backend_probe(char *desc, size_t desc_n, char *why, size_t why_n)
{
    pthread_once(&g.once, init_once);
    const dnnl_version_t *v = dnnl_version();
    if (!g.ok) {
        snprintf(why, why_n, "oneDNN %d.%d.%d could not open the CPU engine", v->major, v->minor,
                 v->patch);
        return -1;
    }
    if (!thread_state()) {
        snprintf(why, why_n, "oneDNN %d.%d.%d: out of memory", v->major, v->minor, v->patch);
        return -1;
    }
    /* a product of the shapes a transformer asks for: transposed B, beta 1 */
    shape_t s;
    memset(&s, 0, sizeof s);
    s.tb = 1, s.M = s.N = s.K = s.lda = s.ldb = s.ldc = 64, s.alpha = s.beta = 1.0f;
    char impl[128] = "";
    entry_t *e = entry_make(&s, impl, sizeof impl);
    if (!e) {
        snprintf(why, why_n, "oneDNN %d.%d.%d has no bf16 matrix product for this CPU", v->major,
                 v->minor, v->patch);
        return -1;
    }
    entry_free(e);
    snprintf(desc, desc_n, "oneDNN %d.%d.%d %s", v->major, v->minor, v->patch, impl);
    return 0;
}
