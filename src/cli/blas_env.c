/* Two settings OpenBLAS reads only when it loads, which the CLI fixes by re-executing itself once
 * with the variable set (docs/blas.md, docs/reliability.md):
 * - OPENBLAS_CORETYPE, when OpenBLAS chose kernels below what the CPU can run (an unknown or
 *   hidden CPU model) and the user set none: the best kernel the library has for the CPU's
 *   features (nn/blas_core.c decides; its report says what happened).
 * - OPENBLAS_NUM_THREADS=1 under an address-space limit (`ulimit -v`): OpenBLAS's own pool,
 *   started at load time, maps a work buffer per thread and retries forever when that fails, and
 *   exit() then waits forever to join it. zbpp never uses those threads (every rank calls a
 *   single-threaded BLAS). */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "zbpp/nn.h"

/* Under a limit, and neither the user nor an earlier pass set the thread count. */
static bool wants_one_thread(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return false;
    return !getenv("OPENBLAS_NUM_THREADS") && !getenv("ZB_BLAS_ENV_SET");
}

void zb_cli_blas_env(char **argv)
{
    const zb_blas_kernel_t *k = zb_blas_kernel();
    bool core = k->state == ZB_BLAS_CORE_LOW && !getenv(ZB_BLAS_CORE_ENV);
    bool threads = wants_one_thread();
    if (!core && !threads)
        return;
    char note[80];
    snprintf(note, sizeof note, "%s>%s", k->in_use, k->best);
    /* ZB_BLAS_ENV_SET and ZB_BLAS_CORE_ENV guard against a loop should a variable be dropped */
    if (core && (setenv("OPENBLAS_CORETYPE", k->best, 1) || setenv(ZB_BLAS_CORE_ENV, note, 1)))
        return;
    if (threads &&
        (setenv("OPENBLAS_NUM_THREADS", "1", 1) || setenv("ZB_BLAS_ENV_SET", "1", 1)))
        return;
    execv("/proc/self/exe", argv);
    /* exec failed: go on as before (the report keeps saying the kernel is below the CPU's best,
     * and the BLAS pool may still spin under a tight limit) */
    if (core) {
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv(ZB_BLAS_CORE_ENV);
    }
}
