/* MPI ranks on the CUDA rank (issue 13, `--transport mpi --device cuda`) on the fake device of
 * cuda_fake_device.inc, recovering and failing (test_cuda_fake_mpi.c has the runs themselves):
 * - sharded checkpoints (`--checkpoint-format sharded`): 2 steps saved as shards, resumed to 4;
 *   the losses of both runs and the final (gathered) checkpoint are the straight run's bits, for
 *   shards written by fake-GPU ranks and resumed by fake-GPU ranks, by the CPU's MPI ranks, the
 *   CPU's resumed on the fake GPU, and a re-shard (zb-h1 -> zb-v) on the fake GPU;
 * - a rank that fails (the pipeline's test hook): every process returns an error naming the
 *   failing rank and the fault, within the abort's latency (the transport's 30 s timeout only a
 *   backstop, never reached).
 * Started by ctest, it runs itself under mpirun -np 2 and -np 4 (cuda_fake_mpi_util.h). Skipped
 * (77) without CUDA, without mpirun, or in a build without MPI. No clipping (grad_clip 0): the
 * fake sums the norm in the GPU's block order (test_cuda_fake_pipeline). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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
#include "cuda_fake_timer.inc" /* every GPU training step is timed */
#include "pipeline_testutil.h"
#include "cuda_fake_mpi_util.h"
#include "pipeline/pipeline_hooks.h"
#include "zbpp/util.h"

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
    zb_status_t st = net->rank == 0 ? fm_reference(c, ref_m, ref_c, &err) : ZB_OK;
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
        zb_pipeline_report_t rep = {0};
        zb_train_config_t first = c;
        first.steps = K;
        fm_base_opts(&o, net, "zb-h1", 1, ways[w].first_gpu ? &FM_GPU : NULL);
        o.sharded_checkpoint = true;
        st = fm_run(first, &o, m1, shard, &rep, &err);
        zb_train_config_t second = c;
        second.resume_path = shard;
        fm_base_opts(&o, net, ways[w].second, 1, ways[w].second_gpu ? &FM_GPU : NULL);
        if (st == ZB_OK)
            st = fm_run(second, &o, m2, out, &rep, &err);
        if (st != ZB_OK) {
            printf("FAIL: %s, rank %d: %s\n", what, net->rank, err.msg);
            zb_mpi_abort_job(net, 1);
            return 1;
        }
        if (net->rank == 0) {
            size_t n = 0;
            unsigned char *man = fm_slurp(shard, &n); /* a manifest, not a gathered file */
            int b = !man || n < 23 || memcmp(man, "zbpp-sharded-checkpoint", 23) != 0;
            free(man);
            if (b)
                printf("FAIL: %s: %s is not a sharded checkpoint's manifest\n", what, shard);
            b = b || fm_same_losses(what, ref_m, 0, m1, K) ||
                fm_same_losses(what, ref_m, K, m2, N - K) || fm_same_file(what, ref_c, out);
            if (!b)
                printf("ok: %s: losses and final checkpoint bit-identical to the straight run\n",
                       what);
            bad |= b;
        }
        zb_pipeline_report_free(&rep);
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
    fm_base_opts(&o, net, "zb-h2", 1, &FM_GPU);
    net->timeout = 30; /* the MPI transport's own wait limit (o.timeout is the threads') */
    zb_pipeline_test_hooks_t hooks = ZB_PIPELINE_TEST_HOOKS_OFF;
    hooks.fail_step = 1;
    hooks.fail_rank = failing;
    hooks.fail_action = 3;
    o.test_hooks = &hooks;
    zb_pipeline_report_t rep = {0};
    zb_err_t err;
    zb_err_clear(&err);
    double t0 = zb_now();
    zb_status_t st = fm_run(c, &o, NULL, NULL, &rep, &err);
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
    zb_pipeline_report_free(&rep);
    return 0;
}

/* One process of the MPI job: the sharded resumes, then the failing rank. */
static int worker(zb_transport_t *net, const char *dir)
{
    int bad = sharded_resumes(net, dir);
    return bad | fault_stops_all(net); /* last: it leaves the transport aborted */
}

int main(int argc, char **argv) { return fm_main(argc, argv, "fake_mpi_recovery", worker); }

#endif
