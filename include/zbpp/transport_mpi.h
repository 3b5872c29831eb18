/* zbpp — the MPI transport: one pipeline rank per MPI process (Open MPI, one or many machines).
 *
 * It implements zb_transport_t (zbpp/transport.h) over a private duplicate of MPI_COMM_WORLD:
 * sends are copied into a pool of staging buffers and posted with MPI_Isend; announced receives
 * (post_recv) are posted early with MPI_Irecv; every wait polls (MPI_Test + MPI_Iprobe of an abort
 * tag, with a short backoff sleep) so a dead or stopped peer turns into ZB_ETIMEOUT after the
 * transport's timeout instead of a hang. Collectives are the rank-ordered p2p ones of
 * transport.c, so sums are bit-identical to the thread transport.
 *
 * When zbpp is built without MPI every function here fails with ZB_EUNSUPPORTED (or does
 * nothing), so callers need no #ifdef. */
#ifndef ZBPP_TRANSPORT_MPI_H
#define ZBPP_TRANSPORT_MPI_H

#include <stdbool.h>

#include "zbpp/transport.h"

/* Initialise MPI if needed (argc/argv may be NULL) and open the transport over all processes:
 * (*out)->rank / ->size are the MPI rank and world size, `timeout` seconds bound every wait
 * (<= 0 = forever). ZB_EUNSUPPORTED without MPI; ZB_ECOMM if MPI cannot start or its tag bound
 * is below what zb_tag needs. Free with zb_transport_destroy, then zb_mpi_finalize. */
zb_status_t zb_mpi_transport_new(int *argc, char ***argv, double timeout, zb_transport_t **out,
                                 zb_err_t *err);

/* Traffic through an MPI transport since it was opened. */
typedef struct {
    double bytes_sent, bytes_received; /* payload bytes of point-to-point messages */
    long msgs_sent, msgs_received;
    double wait_s; /* seconds spent waiting in recv/flush/full send pool (not copying) */
} zb_mpi_stats_t;

/* Fill *s for an MPI transport (all zero for any other transport). */
void zb_mpi_transport_stats(const zb_transport_t *t, zb_mpi_stats_t *s);

/* This process's place among the processes of its machine (MPI_COMM_TYPE_SHARED, in world
 * order) and how many there are; for any other transport, or without MPI, its rank and size. A
 * process on a machine with N GPUs takes GPU local_rank mod N. */
void zb_mpi_local_rank(const zb_transport_t *t, int *local_rank, int *local_size);

/* Clean shutdown (MPI_Finalize) after a run every rank finished normally. No-op if MPI was not
 * initialised or is already finalised. */
void zb_mpi_finalize(void);

/* Stop the whole job after a failure: give this rank's abort notices (zb_transport_abort) up to
 * a second to leave, then MPI_Abort(MPI_COMM_WORLD, code), which terminates every process and
 * does not return. For the CLI, after it printed its message; t may be NULL. Without MPI (or
 * before MPI_Init) it returns and the caller exits normally. */
void zb_mpi_abort_job(zb_transport_t *t, int code);

#endif
