/* One-time BLAS setup: every pipeline rank is a thread pinned to its own core, so the BLAS must
 * not start threads of its own. See docs/blas.md for the library choice. */
#include "zbpp/nn.h"

#include <pthread.h>
#include <stdio.h>

#if defined(ZB_BLAS_OPENBLAS)
#include <cblas.h> /* declares openblas_set_num_threads, openblas_get_corename */
#elif defined(ZB_BLAS_BLIS)
#include <blis.h>
#endif

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static char blas_name[96] = "unknown BLAS";

static void blas_setup_once(void)
{
#if defined(ZB_BLAS_OPENBLAS)
    openblas_set_num_threads(1);
    snprintf(blas_name, sizeof blas_name, "OpenBLAS %s", openblas_get_corename());
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
