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
 * Also --trace (every action of each process's program timed on its timer, stubbed by
 * cuda_fake_timer.inc; rank 0's gathered trace has every rank's compute, start <= end, in
 * program order; the bits are the untraced run's) and --partition profile (rank 0 profiles on
 * the fake GPU; the reference's bits). Sharded checkpoints and a failing rank under MPI on the
 * fake GPU: test_cuda_fake_mpi_recovery.c.
 *
 * Run by ctest without arguments: it starts itself under
 * `mpirun --allow-run-as-root --oversubscribe -np 2` (and -np 4) with a scratch folder as its
 * argument (cuda_fake_mpi_util.h). Skipped (77) without CUDA, without mpirun, or in a build
 * without MPI. No clipping (grad_clip 0): the fake sums the norm in the GPU's block order
 * (test_cuda_fake_pipeline). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#include "cuda_fake_mpi_util.h"
#include "zbpp/util.h"

enum { STEPS = 3 };

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

/* One run of case cs over the MPI transport (every process). */
static zb_status_t pipe_run(zb_transport_t *net, zb_train_config_t c, const mpi_case_t *cs,
                            const zb_cuda_train_opts_t *cuda, const char *metrics,
                            const char *ckpt, const char *trace, zb_pipeline_report_t *rep,
                            zb_err_t *err)
{
    zb_pipeline_opts_t o;
    fm_base_opts(&o, net, cs->schedule, cs->dp, cuda);
    o.opt_sync = cs->sync;
    o.trace_path = cs->trace ? trace : NULL;
    o.profile = cs->profile;
    return fm_run(c, &o, metrics, ckpt, rep, err);
}

/* Rank 0: the losses and the checkpoint of the MPI run equal the reference's bit for bit. */
static int compare(const char *what, const char *ref_m, const char *ref_c, const char *got_m,
                   const char *got_c)
{
    int bad = fm_same_losses(what, ref_m, 0, got_m, STEPS) || fm_same_file(what, ref_c, got_c);
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

/* One process of the MPI job: every case through the pipeline on the fake GPU. */
static int worker(zb_transport_t *net, const char *dir)
{
    zb_err_t err;
    zb_err_clear(&err);
    zb_status_t st = ZB_OK;
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
        zb_pipeline_report_t rep = {0};
        if (cs->dp > 1) { /* the replicas' reduction order is the pipeline's: its CPU ranks */
            st = pipe_run(net, c, cs, NULL, ref_m, ref_c, NULL, &rep, &err);
        } else if (net->rank == 0) {
            st = fm_reference(c, ref_m, ref_c, &err);
        }
        if (st != ZB_OK) {
            printf("FAIL: %s: reference: %s\n", what, err.msg);
            zb_mpi_abort_job(net, 1);
            return 1;
        }
        /* ZB_FAKE_MPI_CPU set: the same cases on the CPU's ranks (debugging) */
        const zb_cuda_train_opts_t *cuda = getenv("ZB_FAKE_MPI_CPU") ? NULL : &FM_GPU;
        long resolved = timers_resolved, timed = timed_actions;
        if ((st = pipe_run(net, c, cs, cuda, got_m, got_c, trace, &rep, &err)) != ZB_OK) {
            printf("FAIL: %s, rank %d: %s\n", what, net->rank, err.msg);
            zb_mpi_abort_job(net, 1);
            return 1;
        }
        int local = -1, local_size = -1; /* one machine: its place is its rank */
        zb_mpi_local_rank(net, &local, &local_size);
        if (local != net->rank || local_size != net->size) {
            printf("FAIL: rank %d of %d: local rank %d of %d on one machine\n", net->rank,
                   net->size, local, local_size);
            bad = 1;
        }
        char where[96];
        snprintf(where, sizeof where, "(process %d of %d on its machine) on GPU 0 of 1", local,
                 local_size);
        if (cuda && !strstr(rep.device, where)) {
            printf("FAIL: %s: the report's device line is '%s', not '... %s'\n", what, rep.device,
                   where);
            bad = 1;
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
        if (cs->profile && !strstr(rep.note, "measured on rank 0")) {
            printf("FAIL: %s, rank %d: not planned from rank 0's profile: '%s'\n", what,
                   net->rank, rep.note);
            bad = 1;
        }
        /* with or without --trace, this process's timer resolved every step (the measured
         * bubble is the device's), which the fake refuses unless every action of the rank's
         * program was timed (the --trace case, zb-v: F, B, W of 2P mbs x 2 stages) */
        resolved = timers_resolved - resolved, timed = timed_actions - timed;
        /* rank 0's profile (--partition profile) times its rounds with timers of its own */
        const bool profiled = cs->profile && net->rank == 0;
        if (cuda && ((profiled ? resolved < 2 * STEPS : resolved != 2 * STEPS) || /* the
                                                            * actions' and the phases' timers */
                     timed < (long)STEPS * (cs->trace ? 3 * 2 * 2 * P : 1))) {
            printf("FAIL: %s, rank %d: %ld timers resolved (expected %d), %ld actions timed\n",
                   what, net->rank, resolved, 2 * STEPS, timed);
            bad = 1;
        }
        if (net->rank != 0) {
            zb_pipeline_report_free(&rep);
            continue;
        }
        bad |= compare(what, ref_m, ref_c, got_m, got_c);
        if (cs->trace) {
            char twin_m[512], twin_c[512];
            snprintf(twin_m, sizeof twin_m, "%s/mpi%d_%d.jsonl", dir, P, cs->twin);
            snprintf(twin_c, sizeof twin_c, "%s/mpi%d_%d.ckpt", dir, P, cs->twin);
            int b = fm_same_losses(what, twin_m, 0, got_m, STEPS) ||
                    fm_same_file(what, twin_c, got_c);
            if (!b)
                printf("ok: %s: the same bits as the untraced run\n", what);
            bad |= b;
            if (!rep.measured || !(rep.bubble_measured >= 0.0 && rep.bubble_measured < 1.0)) {
                printf("FAIL: %s: no measured bubble (%g)\n", what, rep.bubble_measured);
                bad = 1;
            }
            bad |= check_trace(what, trace, P, 3 * 2 * 2 * P);
        }
        zb_pipeline_report_free(&rep);
    }
    return bad;
}

int main(int argc, char **argv) { return fm_main(argc, argv, "fake_mpi", worker); }

#endif
