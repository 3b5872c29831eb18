/* zbpp CLI — run the pipeline trainer with ranks as threads of this process (or hand the run
 * to cli/mpi_run.c for --transport mpi) and print its report. */
#include <stdlib.h>

#include "cli/args.h"
#include "cli/mpi_run.h"
#include "cli/pipeline_print.h"
#include "cli/pipeline_run.h"
#include "cli/train_signals.h"
#include "zbpp/util.h"

int zb_cli_pipeline_run(zb_cli_pipeline_t *pc, const zb_train_config_t *c)
{
    if (pc->mpi)
        return zb_cli_pipeline_run_mpi(pc, c);
    zb_train_summary_t sum;
    zb_pipeline_report_t *rep = calloc(1, sizeof *rep);
    if (!rep) {
        fprintf(stderr, "zbpp train: out of memory\n");
        return 1;
    }
    zb_err_t err;
    zb_err_clear(&err);
    zb_status_t st = zb_pipeline_train(c, &pc->opts, stderr, &sum, rep, NULL, &err);
    if (st != ZB_OK) {
        fprintf(stderr, "zbpp train: %s\n", err.msg[0] ? err.msg : zb_strerror(st));
        zb_pipeline_report_free(rep), free(rep);
        return zb_cli_exit_code(st);
    }
    if (rep->replicas_checked && rep->replicas_differ > 0) { /* never expected: a bug */
        zb_cli_print_replicas_differ(rep);
        zb_pipeline_report_free(rep), free(rep);
        return 1;
    }
    if (!c->quiet)
        zb_cli_print_pipeline_report(pc, c, &sum, rep, NULL, pc->opts.ranks * (pc->opts.dp > 1
                                                                               ? pc->opts.dp
                                                                               : 1));
    zb_pipeline_report_free(rep), free(rep);
    return sum.interrupted ? zb_cli_train_signal_status() : 0;
}
