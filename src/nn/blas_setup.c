#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
/* One-time BLAS setup: every pipeline rank is a thread pinned to its own core, so the BLAS must
 * not start threads of its own. See docs/blas.md for the library choice. */
#include "zbpp/nn.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(ZB_BLAS_OPENBLAS)
#include <cblas.h> /* declares openblas_set_num_threads, openblas_get_corename */
#elif defined(ZB_BLAS_BLIS)
#include <blis.h>
#endif

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static char blas_name[96] = "unknown BLAS";

/* Address space in use now (bytes), from /proc/self/statm; 0 if unknown. */
static size_t vm_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t blas_buffer_bytes; /* what the first sgemm mapped (OpenBLAS's work buffer) */

/* OpenBLAS maps its GEMM work buffer on the first call, and when that mmap fails (e.g. under
 * `ulimit -v`, the model having taken the address space) it retries forever at 100% CPU. One
 * small sgemm here, before the model is allocated, makes it map the buffer while there is room;
 * later calls reuse it. The growth is remembered for zb_blas_check_headroom. */
static bool blas_no_room; /* the warm-up could not run: the buffer would not fit */

#if defined(ZB_BLAS_OPENBLAS)
static void blas_warm_up(void)
{
    enum { N = 256 }; /* above OpenBLAS's small-matrix path, which needs no buffer */
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        /* under a limit, first prove the buffer (128 MiB on x86-64) fits: if it does not,
         * calling the BLAS would spin forever */
        size_t probe = (size_t)192 << 20;
        void *p = mmap(NULL, probe, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            blas_no_room = true;
            return;
        }
        munmap(p, probe);
    }
    float *a = calloc(3 * (size_t)N * N, sizeof *a);
    if (!a)
        return;
    size_t before = vm_bytes();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, a + N * N, N,
                0.0f, a + 2 * N * N, N);
    size_t after = vm_bytes();
    blas_buffer_bytes = after > before ? after - before : 0;
    free(a);
}
#endif

static void blas_setup_once(void)
{
#if defined(ZB_BLAS_OPENBLAS)
    openblas_set_num_threads(1);
    snprintf(blas_name, sizeof blas_name, "OpenBLAS %s", openblas_get_corename());
    blas_warm_up();
#elif defined(ZB_BLAS_BLIS)
    bli_thread_set_num_threads(1);
    snprintf(blas_name, sizeof blas_name, "BLIS %s", bli_arch_string(bli_arch_query_id()));
#endif
}

const char *zb_blas_init(void)
{
    pthread_once(&blas_once, blas_setup_once);
    return blas_name;
}

zb_status_t zb_blas_check_headroom(int threads, zb_err_t *err)
{
    zb_blas_init();
    struct rlimit rl;
    if (blas_no_room && getrlimit(RLIMIT_AS, &rl) == 0)
        return zb_err_set(err, ZB_ENOMEM,
                          "not enough address space under the limit (ulimit -v %llu KiB) for "
                          "the BLAS work buffer (about 192 MiB)",
                          (unsigned long long)(rl.rlim_cur / 1024));
    if (threads < 1 || getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return ZB_OK;
    if (threads == 1)
        return ZB_OK; /* the calling thread computes: its buffer was mapped by the warm-up */
    /* per compute thread: its own BLAS buffer (OpenBLAS keeps one per thread), its stack and the
     * malloc arena glibc reserves for it */
    size_t per = blas_buffer_bytes + ((size_t)72 << 20);
    size_t need = (size_t)threads * per + ((size_t)32 << 20);
    void *p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p != MAP_FAILED) {
        munmap(p, need);
        return ZB_OK;
    }
    return zb_err_set(err, ZB_ENOMEM,
                      "not enough address space under the limit (ulimit -v %llu KiB): %zu MiB "
                      "in use, about %zu MiB more needed for %d compute thread(s)",
                      (unsigned long long)(rl.rlim_cur / 1024), vm_bytes() >> 20, need >> 20,
                      threads);
}
