/* MPI ranks on the CUDA rank (issue 13, `--transport mpi --device cuda`) on the fake device of
 * cuda_fake_device.inc (device memory in host memory, every op the CPU kernel): one process per
 * pipeline rank, messages staged through pinned host slots (the fake's cudaHostAlloc, counted)
 * on each stage's copy stream and moved by the MPI transport, the tied
 * WTE exchange, the norm reduction, post-validation and the gathered checkpoint through the
 * transport. The losses and the checkpoint written by rank 0 must be the SAME BITS as the
 * single-process trainer's (rank 0 runs it and compares), for 1f1b (barrier), zb-h1
 * (post-validation, validation through the pipeline) and zb-v (two stages per rank); at -np 4
 * also --dp 2 x --ranks 2, against the same run on the CPU's MPI ranks (whose replica
 * reduction order it shares).
 *
 * Also under MPI on the fake GPU: --trace (every action of each process's program timed on its
 * timer, stubbed by cuda_fake_timer.inc; rank 0's gathered trace has every rank's compute; the
 * bits are the untraced run's), --partition profile (rank 0 profiles on the fake GPU; the same
 * bits), sharded checkpoints (save after 2 steps, resume to 4: the straight run's losses and
 * checkpoint bytes; written by fake-GPU ranks and resumed by CPU ranks, and the other way), and a
 * rank that fails: every process returns an error naming it, nothing waits (the timeout is only a
 * backstop).
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
#include "cuda_fake_timer.inc"
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
    int dp;       /* > 1: --dp dp x --ranks P/dp, at -np 4 only, against the CPU's MPI ranks */
    bool trace;   /* --trace; its losses and checkpoint also compared with CASES[twin]'s */
    int twin;     /* with trace: the same run untraced */
    bool profile; /* --partition profile (rank 0 profiles on the fake GPU) */
} mpi_case_t;

static const mpi_case_t CASES[] = {
    {.schedule = "1f1b", .sync = ZB_OPT_SYNC_BARRIER, .dp = 1},
    {.schedule = "zb-h1", .sync = ZB_OPT_SYNC_POST_VALIDATION, .validate = true, .dp = 1},
    {.schedule = "zb-v", .sync = ZB_OPT_SYNC_POST_VALIDATION, .dp = 1},
    {.schedule = "zb-h1", .sync = ZB_OPT_SYNC_POST_VALIDATION, .dp = 2},
    {.schedule = "zb-v", .sync = ZB_OPT_SYNC_POST_VALIDATION, .dp = 1, .trace = true, .twin = 2},
    {.schedule = "zb-h1", .sync = ZB_OPT_SYNC_BARRIER, .dp = 1, .profile = true},
};

/* The pipeline options of a run of `schedule` over the MPI transport (every process). */
static void base_opts(zb_pipeline_opts_t *o, zb_transport_t *net, const char *schedule, int dp,
                      const zb_cuda_train_opts_t *cuda)
{
    zb_pipeline_opts_defaults(o);
    o->dp = dp;
    o->ranks = net->size / dp;
    o->schedule = schedule;
    o->pin = false;
    o->timeout = 60;
    o->transport = net;
    o->cuda = cuda;
}

/* One pipeline run of c with options o, metrics (written by rank 0, as the CLI) and checkpoint
 * to the given paths (NULL: none). */
static zb_status_t run_opts(zb_train_config_t c, const zb_pipeline_opts_t *o, const char *metrics,
                            const char *ckpt, zb_pipeline_report_t *rep, zb_err_t *err)
{
    c.metrics_path = o->transport->rank == 0 ? metrics : NULL;
    c.save_path = ckpt;
    zb_train_summary_t sum;
    return zb_pipeline_train(&c, o, NULL, &sum, rep, NULL, err);
}

/* One run of case cs over the MPI transport (every process). */
static zb_status_t pipe_run(zb_transport_t *net, zb_train_config_t c, const mpi_case_t *cs,
                            const zb_cuda_train_opts_t *cuda, const char *metrics,
                            const char *ckpt, const char *trace, zb_pipeline_report_t *rep,
                            zb_err_t *err)
{
    zb_pipeline_opts_t o;
    base_opts(&o, net, cs->schedule, cs->dp, cuda);
    o.opt_sync = cs->sync;
    o.trace_path = cs->trace ? trace : NULL;
    o.profile = cs->profile;
    return run_opts(c, &o, metrics, ckpt, rep, err);
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

/* Rank 0: the single-process trainer on c, metrics and checkpoint to the given paths. */
static zb_status_t reference(zb_train_config_t c, const char *metrics, const char *ckpt,
                             zb_err_t *err)
{
    zb_train_summary_t sum;
    c.metrics_path = metrics;
    c.save_path = ckpt;
    return zb_train_run(&c, NULL, &sum, err);
}

enum { MAX_STEPS = 8 };

/* Rank 0: losses [0, n) of got_m are losses [off, off + n) of ref_m, bit for bit. */
static int same_losses(const char *what, const char *ref_m, int off, const char *got_m, int n)
{
    float a[MAX_STEPS], b[MAX_STEPS];
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
static int same_file(const char *what, const char *ref_c, const char *got_c)
{
    size_t na = 0, nb = 0;
    unsigned char *ca = slurp(ref_c, &na), *cb = slurp(got_c, &nb);
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

/* Rank 0: the losses and the checkpoint of the MPI run equal the reference's bit for bit. */
static int compare(const char *what, const char *ref_m, const char *ref_c, const char *got_m,
                   const char *got_c)
{
    int bad = same_losses(what, ref_m, 0, got_m, STEPS) || same_file(what, ref_c, got_c);
    if (!bad)
        printf("ok: %s: losses and checkpoint (params + moments) bit-identical to the reference\n",
               what);
    return bad;
}

/* Rank 0: the measured Chrome trace has compute events of each of the P ranks (at least
 * min_each), each with a duration >= 0 (start <= end), and each rank's actions (compute and
 * communication, written in program order) start in program order. */
static int check_trace(const char *what, const char *path, int P, int min_each)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("FAIL: %s: rank 0 wrote no trace at %s\n", what, path);
        return 1;
    }
    int count[16] = {0}, bad = P > 16;
    double last[16];
    for (int r = 0; r < 16; r++)
        last[r] = -1e300;
    char line[1024];
    while (!bad && fgets(line, sizeof line, f)) {
        bool compute = strstr(line, "\"cat\": \"compute\"");
        if (!compute && !strstr(line, "\"cat\": \"comm\""))
            continue;
        const char *t = strstr(line, "\"tid\": "), *ts = strstr(line, "\"ts\": "),
                   *d = strstr(line, "\"dur\": ");
        int tid = t ? atoi(t + 7) : -1;
        double start = ts ? strtod(ts + 6, NULL) : -1.0;
        double dur = !compute ? 0.0 : d ? strtod(d + 7, NULL) : -1.0;
        if (tid < 0 || tid >= P || !(dur >= 0.0) || !(start >= last[tid])) {
            printf("FAIL: %s: trace event of rank %d at %g (its previous at %g), duration %g: %s",
                   what, tid, start, tid >= 0 && tid < P ? last[tid] : 0.0, dur, line);
            bad = 1;
        } else {
            last[tid] = start;
            count[tid] += compute;
        }
    }
    fclose(f);
    for (int r = 0; r < P && !bad; r++)
        if (count[r] < min_each) {
            printf("FAIL: %s: the trace has %d compute actions of rank %d (expected >= %d)\n", what,
                   count[r], r, min_each);
            bad = 1;
        }
    if (!bad)
        printf("ok: %s: the gathered trace times every rank's compute (start <= end)\n", what);
    return bad;
}

/* Sharded checkpoints on MPI ranks: 2 steps of zb-h1 saved as shards, resumed to 4 (gathered
 * file), fake GPU -> fake GPU, fake GPU -> CPU, CPU -> fake GPU, and fake GPU -> fake GPU zb-v
 * (every rank assembles its stages from all shards); rank 0 compares the first run's
 * losses, the continuation's and its checkpoint with the straight 4-step run of the
 * single-process trainer (constant lr: the same whatever --steps the first run had). */
static int sharded_resumes(zb_transport_t *net, const char *dir)
{
    enum { N = 4, K = 2 };
    const int P = net->size;
    zb_train_config_t c;
    pt_tiny_config(&c, 8, 8, 2 * P, N);
    c.grad_clip = 0.0f;
    c.lr_schedule = ZB_LR_CONSTANT;
    char ref_m[512], ref_c[512];
    snprintf(ref_m, sizeof ref_m, "%s/shref%d.jsonl", dir, P);
    snprintf(ref_c, sizeof ref_c, "%s/shref%d.ckpt", dir, P);
    zb_err_t err;
    zb_err_clear(&err);
    zb_status_t st = net->rank == 0 ? reference(c, ref_m, ref_c, &err) : ZB_OK;
    if (st != ZB_OK) {
        printf("FAIL: sharded: reference: %s\n", err.msg);
        zb_mpi_abort_job(net, 1);
        return 1;
    }
    static const struct {
        bool first_gpu, second_gpu;
        const char *second; /* the resumed run's schedule: zb-v re-shards (other stage map) */
    } ways[] = {{true, true, "zb-h1"}, {true, false, "zb-h1"}, {false, true, "zb-h1"},
                {true, true, "zb-v"}};
    int bad = 0;
    for (int w = 0; w < 4; w++) {
        char what[96], shard[512], m1[512], m2[512], out[512];
        snprintf(what, sizeof what, "-np %d sharded checkpoint, zb-h1 %s ranks -> %s %s ranks", P,
                 ways[w].first_gpu ? "fake-GPU" : "CPU", ways[w].second,
                 ways[w].second_gpu ? "fake-GPU" : "CPU");
        snprintf(shard, sizeof shard, "%s/shard%d_%d", dir, P, w);
        snprintf(m1, sizeof m1, "%s/sh%d_%d_first.jsonl", dir, P, w);
        snprintf(m2, sizeof m2, "%s/sh%d_%d_second.jsonl", dir, P, w);
        snprintf(out, sizeof out, "%s/sh%d_%d_final.ckpt", dir, P, w);
        zb_pipeline_opts_t o;
        zb_pipeline_report_t rep;
        zb_train_config_t first = c;
        first.steps = K;
        base_opts(&o, net, "zb-h1", 1, ways[w].first_gpu ? &GPU : NULL);
        o.sharded_checkpoint = true;
        st = run_opts(first, &o, m1, shard, &rep, &err);
        zb_train_config_t second = c;
        second.resume_path = shard;
        base_opts(&o, net, ways[w].second, 1, ways[w].second_gpu ? &GPU : NULL);
        if (st == ZB_OK)
            st = run_opts(second, &o, m2, out, &rep, &err);
        if (st != ZB_OK) {
            printf("FAIL: %s, rank %d: %s\n", what, net->rank, err.msg);
            zb_mpi_abort_job(net, 1);
            return 1;
        }
        if (net->rank == 0) {
            size_t n = 0;
            unsigned char *man = slurp(shard, &n); /* a manifest, not a gathered file */
            int b = !man || n < 23 || memcmp(man, "zbpp-sharded-checkpoint", 23) != 0;
            free(man);
            if (b)
                printf("FAIL: %s: %s is not a sharded checkpoint's manifest\n", what, shard);
            b = b || same_losses(what, ref_m, 0, m1, K) || same_losses(what, ref_m, K, m2, N - K) ||
                    same_file(what, ref_c, out);
            if (!b)
                printf("ok: %s: losses and final checkpoint bit-identical to the straight run\n",
                       what);
            bad |= b;
        }
    }
    return bad;
}

/* A rank that fails (the test hook: its 4th compute of step 1) on the fake GPU: every process
 * returns an error naming that rank and the fault, without waiting for the timeout (30 s, a
 * backstop). The transport is aborted afterwards: the job's last case. */
static int fault_stops_all(zb_transport_t *net)
{
    const int P = net->size, failing = 1;
    zb_train_config_t c;
    pt_tiny_config(&c, 8, 8, 2 * P, 4);
    c.grad_clip = 0.0f;
    zb_pipeline_opts_t o;
    base_opts(&o, net, "zb-h2", 1, &GPU);
    net->timeout = 30; /* the MPI transport's own wait limit (o.timeout is the threads') */
    o.fail_step = 1;
    o.fail_rank = failing;
    o.fail_action = 3;
    zb_pipeline_report_t rep;
    zb_err_t err;
    zb_err_clear(&err);
    double t0 = zb_now();
    zb_status_t st = run_opts(c, &o, NULL, NULL, &rep, &err);
    char name[32];
    snprintf(name, sizeof name, "rank %d", failing);
    const char *at = strstr(err.msg, name);
    bool named = at && (at[strlen(name)] < '0' || at[strlen(name)] > '9');
    if (st == ZB_OK || !named || !strstr(err.msg, "injected fault")) {
        printf("FAIL: -np %d failing rank %d: rank %d returned %s: '%s'\n", P, failing, net->rank,
               zb_strerror(st), err.msg);
        return 1;
    }
    printf("ok: -np %d failing rank %d: rank %d stopped after %.2f s: %s\n", P, failing, net->rank,
           zb_now() - t0, err.msg);
    return 0;
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
        char ref_m[512], ref_c[512], got_m[512], got_c[512], trace[512], what[96];
        snprintf(ref_m, sizeof ref_m, "%s/ref%d_%zu.jsonl", dir, P, k);
        snprintf(ref_c, sizeof ref_c, "%s/ref%d_%zu.ckpt", dir, P, k);
        snprintf(got_m, sizeof got_m, "%s/mpi%d_%zu.jsonl", dir, P, k);
        snprintf(got_c, sizeof got_c, "%s/mpi%d_%zu.ckpt", dir, P, k);
        snprintf(trace, sizeof trace, "%s/trace%d_%zu.json", dir, P, k);
        snprintf(what, sizeof what, "-np %d %s%s%s%s on the fake GPU", P, cs->schedule,
                 cs->dp > 1 ? " --dp 2" : "", cs->trace ? " --trace" : "",
                 cs->profile ? " --partition profile" : "");
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
            st = pipe_run(net, c, cs, NULL, ref_m, ref_c, NULL, &rep, &err);
        } else if (net->rank == 0) {
            st = reference(c, ref_m, ref_c, &err);
        }
        if (st != ZB_OK) {
            printf("FAIL: %s: reference: %s\n", what, err.msg);
            zb_mpi_abort_job(net, 1);
            return 1;
        }
        const zb_cuda_train_opts_t *cuda = getenv("ZB_FAKE_MPI_CPU") ? NULL : &GPU; /* debugging */
        long resolved = timers_resolved, timed = timed_actions;
        if ((st = pipe_run(net, c, cs, cuda, got_m, got_c, trace, &rep, &err)) != ZB_OK) {
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
        if (cs->profile && !strstr(rep.note, "measured on rank 0")) {
            printf("FAIL: %s, rank %d: not planned from rank 0's profile: '%s'\n", what,
                   net->rank, rep.note);
            bad = 1;
        }
        /* --trace: this process's timer resolved every step, which the fake refuses unless
         * every action of the rank's program was timed (zb-v: F, B, W of 2P mbs x 2 stages);
         * without it nothing is timed */
        resolved = timers_resolved - resolved, timed = timed_actions - timed;
        if (cuda && (cs->trace ? resolved != STEPS || timed < (long)STEPS * 3 * 2 * 2 * P
                               : resolved != 0 || timed != 0)) {
            printf("FAIL: %s, rank %d: %ld timers resolved (expected %d), %ld actions timed\n",
                   what, net->rank, resolved, cs->trace ? STEPS : 0, timed);
            bad = 1;
        }
        if (net->rank != 0)
            continue;
        bad |= compare(what, ref_m, ref_c, got_m, got_c);
        if (cs->trace) {
            char twin_m[512], twin_c[512];
            snprintf(twin_m, sizeof twin_m, "%s/mpi%d_%d.jsonl", dir, P, cs->twin);
            snprintf(twin_c, sizeof twin_c, "%s/mpi%d_%d.ckpt", dir, P, cs->twin);
            int b = same_losses(what, twin_m, 0, got_m, STEPS) || same_file(what, twin_c, got_c);
            if (!b)
                printf("ok: %s: the same bits as the untraced run\n", what);
            bad |= b;
            if (!rep.measured || !(rep.bubble_measured >= 0.0 && rep.bubble_measured < 1.0)) {
                printf("FAIL: %s: no measured bubble (%g)\n", what, rep.bubble_measured);
                bad = 1;
            }
            bad |= check_trace(what, trace, P, 3 * 2 * 2 * P);
        }
    }
    bad |= sharded_resumes(net, dir);
    bad |= fault_stops_all(net); /* last: it leaves the transport aborted */
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
