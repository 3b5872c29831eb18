/* zbpp — the MPI transport's entry points when zbpp is built without MPI (cmake/mpi.cmake did
 * not find it): each says so clearly instead of leaving the symbols undefined. */
#ifndef ZB_HAVE_MPI
#include <string.h>

#include "zbpp/transport_mpi.h"

zb_status_t zb_mpi_transport_new(int *argc, char ***argv, double timeout, zb_transport_t **out,
                                 zb_err_t *err)
{
    (void)argc, (void)argv, (void)timeout;
    *out = NULL;
    return zb_err_set(err, ZB_EUNSUPPORTED,
                      "--transport mpi: this zbpp was built without MPI (install libopenmpi-dev "
                      "and rebuild)");
}

void zb_mpi_transport_stats(const zb_transport_t *t, zb_mpi_stats_t *s)
{
    (void)t;
    memset(s, 0, sizeof *s);
}

void zb_mpi_local_rank(const zb_transport_t *t, int *local_rank, int *local_size)
{
    *local_rank = t ? t->rank : 0;
    *local_size = t ? t->size : 1;
}

void zb_mpi_finalize(void) {}

void zb_mpi_abort_job(zb_transport_t *t, int code) { (void)t, (void)code; }
#else
typedef int zb_transport_nompi_unused; /* ISO C: a translation unit is never empty */
#endif
