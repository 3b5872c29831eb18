/* Helpers of the MPI-on-the-fake-GPU tests (test_cuda_fake_mpi.c, test_cuda_fake_mpi_recovery.c;
 * include after cuda_fake_device.inc and pipeline_testutil.h): pipeline options and one run over
 * the MPI transport, the single-process reference, bit-exact comparisons of losses and
 * checkpoint files (printed by rank 0, 0 = same), and fm_main, which under ctest relaunches the
 * test under `mpirun --allow-run-as-root --oversubscribe -np 2` and `-np 4` with a scratch
 * folder, and under mpirun runs the worker with the transport. Header-only: each test is its own
 * executable. */
#ifndef ZBPP_TESTS_CUDA_FAKE_MPI_UTIL_H
#define ZBPP_TESTS_CUDA_FAKE_MPI_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zbpp/cuda.h"
#include "zbpp/pipeline.h"
#include "zbpp/transport_mpi.h"

static const zb_cuda_train_opts_t FM_GPU = {.device = 0, .precision = ZB_CUDA_FP32};

/* The pipeline options of a run of `schedule` over the MPI transport (every process); cuda NULL:
 * the CPU's ranks. */
static inline void fm_base_opts(zb_pipeline_opts_t *o, zb_transport_t *net, const char *schedule,
                                int dp, const zb_cuda_train_opts_t *cuda)
{
    zb_pipeline_opts_defaults(o);
    o->dp = dp;
    o->ranks = net->size / dp;
    o->schedule = schedule;
    o->pin = false;
    o->transport = net;
    o->cuda = cuda;
}

/* One pipeline run of c with options o, metrics (written by rank 0, as the CLI) and checkpoint
 * to the given paths (NULL: none). */
static inline zb_status_t fm_run(zb_train_config_t c, const zb_pipeline_opts_t *o,
                                 const char *metrics, const char *ckpt, zb_pipeline_report_t *rep,
                                 zb_err_t *err)
{
    c.metrics_path = o->transport->rank == 0 ? metrics : NULL;
    c.save_path = ckpt;
    zb_train_summary_t sum;
    return zb_pipeline_train(&c, o, NULL, &sum, rep, NULL, err);
}

/* Rank 0: the single-process trainer on c, metrics and checkpoint to the given paths. */
static inline zb_status_t fm_reference(zb_train_config_t c, const char *metrics, const char *ckpt,
                                       zb_err_t *err)
{
    zb_train_summary_t sum;
    c.metrics_path = metrics;
    c.save_path = ckpt;
    return zb_train_run(&c, NULL, &sum, err);
}

/* The whole file (caller frees), or NULL (*n = its size). */
static inline unsigned char *fm_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *b = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)len + 1)) &&
            fread(b, 1, (size_t)len, f) != (size_t)len) {
            free(b);
            b = NULL;
        }
        *n = (size_t)(len > 0 ? len : 0);
    }
    fclose(f);
    return b;
}

enum { FM_MAX_STEPS = 8 };

/* Rank 0: losses [0, n) of got_m are losses [off, off + n) of ref_m, bit for bit. */
static inline int fm_same_losses(const char *what, const char *ref_m, int off, const char *got_m,
                                 int n)
{
    float a[FM_MAX_STEPS], b[FM_MAX_STEPS];
    pt_read_losses(ref_m, a, off + n);
    pt_read_losses(got_m, b, n);
    for (int s = 0; s < n; s++)
        if (memcmp(&a[off + s], &b[s], sizeof b[s]) != 0) {
            printf("FAIL: %s: step %d loss %.9g, reference %.9g\n", what, off + s, (double)b[s],
                   (double)a[off + s]);
            return 1;
        }
    return 0;
}

/* Rank 0: the two checkpoint files are the same bytes. */
static inline int fm_same_file(const char *what, const char *ref_c, const char *got_c)
{
    size_t na = 0, nb = 0;
    unsigned char *ca = fm_slurp(ref_c, &na), *cb = fm_slurp(got_c, &nb);
    int bad = !ca || !cb || na != nb || memcmp(ca, cb, na) != 0;
    for (size_t i = 0; bad && ca && cb && i < na && i < nb; i++)
        if (ca[i] != cb[i]) {
            printf("first differing byte at %zu\n", i);
            break;
        }
    if (bad)
        printf("FAIL: %s: checkpoint (%zu bytes) differs from the reference's (%zu bytes)\n",
               what, nb, na);
    free(ca), free(cb);
    return bad;
}

/* One process of the MPI job: 0 = passed (it prints its FAIL lines). */
typedef int (*fm_worker_fn)(zb_transport_t *net, const char *dir);

/* ctest's process: the job under mpirun at -np 2 and 4, with the scratch folder
 * /tmp/zbpp_test_<pid>_<what> (removed after). */
static inline int fm_launch(const char *self, const char *what)
{
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("skipped: mpirun not found (install openmpi-bin)\n");
        return 77;
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    char dir[256];
    pt_tmp_path(dir, sizeof dir, what);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        printf("FAIL: cannot make %s\n", dir);
        return 1;
    }
    /* Open MPI's session directory in the scratch folder: two mpiruns starting at once (ctest
     * -j) can race creating the shared one in /tmp ("orte_session_dir failed") */
    setenv("OMPI_MCA_orte_tmpdir_base", dir, 1);
    int rc = 0;
    static const int nps[] = {2, 4};
    for (int i = 0; i < 2 && rc == 0; i++) {
        char cmd[4096 + 512];
        /* Open MPI's own allocations trip LeakSanitizer in a sanitizer build (mpi_common.inc) */
        snprintf(cmd, sizeof cmd,
                 "mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS=detect_leaks=0 "
                 "-np %d '%s' '%s'",
                 nps[i], self, dir);
        int w = system(cmd);
        rc = w == -1 ? 1 : WIFEXITED(w) ? WEXITSTATUS(w) : 1;
        if (rc != 0 && rc != 77)
            printf("FAIL: %s exited %d\n", cmd, rc);
    }
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        printf("note: could not remove %s\n", dir);
    return rc;
}

/* main: under mpirun (one argument, the scratch folder) the worker with an MPI transport
 * (skipped, 77, in a build without MPI); else the launcher. */
static inline int fm_main(int argc, char **argv, const char *what, fm_worker_fn worker)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* a failing assert exits: its lines go out first */
    if (getenv("OMPI_COMM_WORLD_SIZE") && argc == 2) {
        zb_err_t err;
        zb_err_clear(&err);
        zb_transport_t *net = NULL;
        zb_status_t st = zb_mpi_transport_new(NULL, NULL, 60.0, &net, &err);
        if (st == ZB_EUNSUPPORTED) {
            printf("skipped: %s\n", err.msg);
            return 77;
        }
        if (st != ZB_OK) {
            printf("FAIL: MPI transport: %s\n", err.msg);
            return 1;
        }
        int bad = worker(net, argv[1]);
        zb_transport_destroy(net);
        zb_mpi_finalize();
        return bad;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    return fm_launch(self, what);
}

#endif
