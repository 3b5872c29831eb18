/* zbpp CLI — `zbpp train --transport mpi`: one pipeline rank per MPI process. Rank 0 prints the
 * progress, metrics and report; a failure is printed once (by the rank that caused it, and by
 * rank 0) and ends the whole job, cleanly when every rank knows of it (start-up checks), else
 * with MPI_Abort so nobody is left waiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/mpi_run.h"
#include "cli/pipeline_print.h"
#include "cli/train_outputs.h"
#include "cli/train_report.h"
#include "cli/train_signals.h"
#include "zbpp/transport_mpi.h"
#include "zbpp/util.h"
#include "zbpp/workers.h"

static void print_error(const zb_transport_t *net, zb_status_t st, const zb_err_t *err)
{
    const char *msg = err->msg[0] ? err->msg : zb_strerror(st);
    if (net && net->rank != 0 && strncmp(msg, "rank ", 5) != 0)
        fprintf(stderr, "zbpp train: rank %d: %s\n", net->rank, msg);
    else
        fprintf(stderr, "zbpp train: %s\n", msg);
}

int zb_cli_pipeline_run_mpi(zb_cli_pipeline_t *pc, const zb_train_config_t *c)
{
    zb_err_t err;
    zb_err_clear(&err);
    if (!pc->timeout_given)
        pc->opts.timeout = 60;
    zb_transport_t *net = NULL;
    zb_cli_watchdog_start(pc->opts.timeout, "MPI start-up (MPI_Init)"); /* it has no timeout */
    zb_status_t st = zb_mpi_transport_new(NULL, NULL, pc->opts.timeout, &net, &err);
    zb_cli_watchdog_stop();
    if (st != ZB_OK) {
        print_error(NULL, st, &err);
        return zb_cli_exit_code(st);
    }
    int replicas = pc->opts.dp > 1 ? pc->opts.dp : 1;
    if (!pc->ranks_given && net->size % replicas != 0) { /* every rank sees the same figures */
        if (net->rank == 0)
            fprintf(stderr, "zbpp train: %d processes cannot be split into --dp %d equal "
                            "pipelines: start a multiple of %d (mpirun -np N)\n",
                    net->size, replicas, replicas);
        zb_transport_destroy(net);
        zb_mpi_finalize();
        return 2;
    }
    if (!pc->ranks_given) /* one pipeline rank per process of each --dp replica */
        pc->opts.ranks = net->size / replicas;
    pc->opts.transport = net;
    pc->opts.pin = false; /* one process per rank: the launcher binds processes to cores */
    /* rank 0 writes the checkpoint, model, metrics and trace: its outputs are checked before
     * any work; a bad one ends the job at once (the others are waiting in start-up) */
    if (net->rank == 0 && (st = zb_cli_check_train_outputs(c, &pc->opts, &err)) != ZB_OK) {
        print_error(net, st, &err);
        fflush(stderr);
        zb_mpi_abort_job(net, zb_cli_exit_code(st)); /* does not return */
    }
    zb_train_config_t mine = *c;
    if (net->rank == 0 && !(mine.peak_tflops > 0) && !pc->opts.cuda) {
        /* MFU against the CPUs' peak: rank 0's core measured, times every process's cores */
        int cores = zb_workers_resolve(c->threads, 1) * net->size;
        mine.peak_tflops = zb_cpu_peak_flops_per_core() * cores * 1e-12;
        char src[160];
        snprintf(src, sizeof src, "measured fp32 FMA peak of %d cores (rank 0's core x %d "
                 "processes); --peak-tflops sets it", cores, net->size);
        zb_cli_set_peak_source(src);
    }
    if (net->rank != 0) { /* one voice: rank 0 prints progress and writes the metrics */
        mine.quiet = true;
        mine.metrics_path = NULL;
    }
    zb_train_summary_t sum;
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    zb_pipeline_rank_figures_t *all = calloc((size_t)net->size, sizeof *all);
    if (!rep || !all)
        st = zb_err_set(&err, ZB_ENOMEM, "out of memory");
    else
        st = zb_pipeline_train(&mine, &pc->opts, stderr, &sum, rep, NULL, &err);
    int code = zb_cli_exit_code(st);
    if (st == ZB_OK) {
        st = zb_pipeline_gather_rank_figures(net, pc->opts.ranks, rep, all, &err);
        code = 1;
    }
    if (st != ZB_OK) {
        if (net->rank == 0 || st != ZB_EABORT)
            print_error(net, st, &err);
        if (!rep || !rep->failed_together) {
            fflush(stderr);
            zb_mpi_abort_job(net, code); /* does not return */
        }
        zb_pipeline_report_free(rep), free(rep), free(all);
        zb_transport_destroy(net);
        zb_mpi_finalize();
        return code;
    }
    if (net->rank == 0 && !c->quiet)
        zb_cli_print_pipeline_report(pc, &mine, &sum, rep, all, net->size);
    /* every rank agreed on the stop; the status is the signal's where this process got one */
    int status = sum.interrupted ? (zb_cli_train_signal_status() ? zb_cli_train_signal_status()
                                                                 : 130)
                                 : 0;
    if (rep->replicas_checked && rep->replicas_differ > 0) { /* every rank knows: never expected */
        if (net->rank == 0)
            zb_cli_print_replicas_differ(rep);
        status = 1;
    }
    fflush(stdout);
    zb_pipeline_report_free(rep), free(rep), free(all);
    zb_transport_destroy(net);
    zb_mpi_finalize();
    return status;
}
