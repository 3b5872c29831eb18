/* Under an address-space limit (`ulimit -v`), OpenBLAS must not start its own thread pool: the
 * pool is created when the library loads (one thread per core) and each of its threads maps a
 * work buffer at start; when that mapping fails it retries forever, and exit() then waits forever
 * to join it. zbpp never uses those threads (every pipeline rank calls a single-threaded BLAS),
 * and OpenBLAS reads OPENBLAS_NUM_THREADS only at load time, so with a limit and no setting of
 * its own the process re-executes itself once with OPENBLAS_NUM_THREADS=1. docs/reliability.md */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"

void zb_cli_blas_env(char **argv)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("ZB_BLAS_ENV_SET"))
        return;
    /* ZB_BLAS_ENV_SET guards against a loop should the variable be dropped */
    if (setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0 || setenv("ZB_BLAS_ENV_SET", "1", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    /* exec failed: go on as before (the BLAS pool may still spin under a tight limit) */
}
