/* MPI ranks on the CUDA rank (issue 13, `--transport mpi --device cuda`) on the fake device of
 * cuda_fake_device.inc (device memory in host memory, every op the CPU kernel): one process per
 * pipeline rank, messages staged through pinned host slots (the fake's cudaHostAlloc, counted)
 * on each stage's copy stream and moved by the MPI transport, the tied
 * WTE exchange, the norm reduction, post-validation and the gathered checkpoint through the
 * transport. The fake's copy stream finishes a download only when it is waited for or asked
 * about twice, so a send handed to MPI before its download is done carries NaN: the deferred
 * sends (executor send_ready) are checked for real. The losses and the checkpoint written by rank 0 must be the SAME BITS as the
 * single-process trainer's (rank 0 runs it and compares), for 1f1b (barrier), zb-h1
 * (post-validation, validation through the pipeline) and zb-v (two stages per rank); at -np 4
 * also --dp 2 x --ranks 2, against the same run on the CPU's MPI ranks (whose replica
 * reduction order it shares).
 *
 * Run by ctest without arguments: it starts itself under
 * `mpirun --allow-run-as-root --oversubscribe -np 2` (and -np 4) with a scratch folder as its
 * argument. Skipped (77) without CUDA, without mpirun, or in a build without MPI. No clipping
 * (grad_clip 0): the fake sums the norm in the GPU's block order (test_cuda_fake_pipeline). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef ZB_HAVE_CUDA
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#else

#include "cuda_fake_device.inc"
#include "pipeline_testutil.h"
#include "zbpp/pipeline.h"
#include "zbpp/transport_mpi.h"
#include "zbpp/util.h"

enum { STEPS = 3 };
static const zb_cuda_train_opts_t GPU = {.device = 0, .precision = ZB_CUDA_FP32};

typedef struct {
    const char *schedule;
    zb_opt_sync_t sync;
    bool validate;
    int dp; /* > 1: --dp dp x --ranks P/dp, at -np 4 only, against the CPU's MPI ranks */
} mpi_case_t;

static const mpi_case_t CASES[] = {
    {"1f1b", ZB_OPT_SYNC_BARRIER, false, 1},
    {"zb-h1", ZB_OPT_SYNC_POST_VALIDATION, true, 1},
    {"zb-v", ZB_OPT_SYNC_POST_VALIDATION, false, 1},
    {"zb-h1", ZB_OPT_SYNC_POST_VALIDATION, false, 2},
};

/* One pipeline run of c over the MPI transport (every process), metrics and gathered checkpoint
 * to the given paths. */
static zb_status_t pipe_run(zb_transport_t *net, zb_train_config_t c, const mpi_case_t *cs,
                            const zb_cuda_train_opts_t *cuda, const char *metrics,
                            const char *ckpt, zb_pipeline_report_t *rep, zb_err_t *err)
{
    zb_pipeline_opts_t o;
    zb_pipeline_opts_defaults(&o);
    o.dp = cs->dp;
    o.ranks = net->size / cs->dp;
    o.schedule = cs->schedule;
    o.opt_sync = cs->sync;
    o.pin = false;
    o.timeout = 60;
    o.transport = net;
    o.cuda = cuda;
    c.metrics_path = net->rank == 0 ? metrics : NULL; /* as the CLI: rank 0 writes them */
    c.save_path = ckpt;
    zb_train_summary_t sum;
    return zb_pipeline_train(&c, &o, NULL, &sum, rep, NULL, err);
}

/* The whole file, or NULL (*n = its size). */
static unsigned char *slurp(const char *path, size_t *n)
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

/* Rank 0: the losses and the checkpoint of the MPI run equal the reference's bit for bit. */
static int compare(const char *what, const char *ref_m, const char *ref_c, const char *got_m,
                   const char *got_c)
{
    float a[STEPS], b[STEPS];
    pt_read_losses(ref_m, a, STEPS);
    pt_read_losses(got_m, b, STEPS);
    for (int s = 0; s < STEPS; s++)
        if (memcmp(&a[s], &b[s], sizeof a[s]) != 0) {
            printf("FAIL: %s: step %d loss %.9g, reference %.9g\n", what, s, (double)b[s],
                   (double)a[s]);
            return 1;
        }
    size_t na = 0, nb = 0;
    unsigned char *ca = slurp(ref_c, &na), *cb = slurp(got_c, &nb);
    int bad = !ca || !cb || na != nb || memcmp(ca, cb, na) != 0;
    for (size_t i = 0; bad && ca && cb && i < na && i < nb; i++)
        if (ca[i] != cb[i]) {
            printf("first differing byte at %zu\n", i);
            break;
        }
    if (bad)
        printf("FAIL: %s: checkpoint (%zu bytes) differs from the reference's (%zu bytes)\n", what, nb,
               na);
    else
        printf("ok: %s: losses and checkpoint (params + moments) bit-identical to the reference\n",
               what);
    free(ca), free(cb);
    return bad;
}

/* One process of the MPI job: every case through the pipeline on the fake GPU. */
static int worker(const char *dir)
{
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
    int P = net->size, bad = 0;
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const mpi_case_t *cs = &CASES[k];
        if (cs->dp > 1 && P != 4)
            continue;
        char ref_m[512], ref_c[512], got_m[512], got_c[512], what[96];
        snprintf(ref_m, sizeof ref_m, "%s/ref%d_%zu.jsonl", dir, P, k);
        snprintf(ref_c, sizeof ref_c, "%s/ref%d_%zu.ckpt", dir, P, k);
        snprintf(got_m, sizeof got_m, "%s/mpi%d_%zu.jsonl", dir, P, k);
        snprintf(got_c, sizeof got_c, "%s/mpi%d_%zu.ckpt", dir, P, k);
        snprintf(what, sizeof what, "-np %d %s%s on the fake GPU", P, cs->schedule,
                 cs->dp > 1 ? " --dp 2" : "");
        zb_train_config_t c;
        pt_tiny_config(&c, 8, 8, cs->dp > 1 ? 4 : 2 * P, STEPS);
        c.grad_clip = 0.0f;
        if (cs->validate) {
            c.val_text_path = c.text_path;
            c.val_every = 2;
            c.val_steps = 1;
        }
        zb_pipeline_report_t rep;
        if (cs->dp > 1) { /* the replicas' reduction order is the pipeline's: its CPU ranks */
            st = pipe_run(net, c, cs, NULL, ref_m, ref_c, &rep, &err);
        } else if (net->rank == 0) { /* the single-process trainer */
            zb_train_config_t r = c;
            zb_train_summary_t sum;
            r.metrics_path = ref_m;
            r.save_path = ref_c;
            st = zb_train_run(&r, NULL, &sum, &err);
        }
        if (st != ZB_OK) {
            printf("FAIL: %s: reference: %s\n", what, err.msg);
            zb_mpi_abort_job(net, 1);
            return 1;
        }
        const zb_cuda_train_opts_t *cuda = getenv("ZB_FAKE_MPI_CPU") ? NULL : &GPU; /* debugging */
        if ((st = pipe_run(net, c, cs, cuda, got_m, got_c, &rep, &err)) != ZB_OK) {
            printf("FAIL: %s, rank %d: %s\n", what, net->rank, err.msg);
            zb_mpi_abort_job(net, 1);
            return 1;
        }
        if (cuda && !strstr(rep.device, "MPI rank ")) {
            printf("FAIL: %s: the report's device line is '%s'\n", what, rep.device);
            bad = 1;
        }
        if (cuda && fake_host_allocs == 0) { /* the messages went through pinned slots */
            printf("FAIL: %s, rank %d: no pinned staging buffer was allocated\n", what, net->rank);
            bad = 1;
        }
        if (cuda && fake_event_not_ready == 0) { /* the fake's downloads finish late: deferred */
            printf("FAIL: %s, rank %d: no send waited for its download\n", what, net->rank);
            bad = 1;
        }
        if (net->rank == 0)
            bad |= compare(what, ref_m, ref_c, got_m, got_c);
    }
    zb_transport_destroy(net);
    zb_mpi_finalize();
    return bad;
}

/* ctest's process: the job under mpirun at -np 2 and 4. */
static int launch(const char *self)
{
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("skipped: mpirun not found (install openmpi-bin)\n");
        return 77;
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    char dir[256];
    pt_tmp_path(dir, sizeof dir, "fake_mpi");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        printf("FAIL: cannot make %s\n", dir);
        return 1;
    }
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

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* a failing assert exits: its lines go out first */
    if (getenv("OMPI_COMM_WORLD_SIZE") && argc == 2)
        return worker(argv[1]);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    return launch(self);
}
#endif
