/* zbpp CLI — the printed report of a pipeline run (threads and MPI) and its memory table,
 * shared with zbpp profile. The only place a pipeline report is printed. */
#include <stdio.h>

#include "cli/pipeline_print.h"
#include "cli/train_report.h"
#include "zbpp/cuda.h"
#include "zbpp/pipeline_trace.h"

/* The last step's phases after the actions, one row per rank (replica 0's): on a GPU the
 * device's time between the events around each phase next to the host's wall time (their
 * difference is the host's launches, round trips and waits); on the CPU the wall time. Phases
 * no rank ran are left out. */
static void print_phases(const zb_pipeline_report_t *rep)
{
    bool ran[ZB_PHASES] = {false}, any = false;
    for (int r = 0; r < rep->ranks && r < 1024; r++)
        for (int p = 0; p < ZB_PHASES; p++)
            any |= ran[p] |= rep->phases[r].host_ms[p] > 0;
    if (!any)
        return;
    const bool dev = rep->mem_on_device;
    printf("step phases after the actions (last step, ms%s):\n",
           dev ? "; device events / host wall time" : "");
    printf("  %-7s", "");
    for (int p = 0; p < ZB_PHASES; p++)
        if (ran[p])
            printf(" %*s", dev ? 15 : 9, zb_step_phase_name((zb_step_phase_t)p));
    printf(" %*s\n", dev ? 15 : 9, "sum");
    for (int r = 0; r < rep->ranks && r < 1024; r++) {
        const zb_step_phases_t *ph = &rep->phases[r];
        double sum_dev = 0, sum_host = 0;
        printf("  rank %-2d", r);
        for (int p = 0; p < ZB_PHASES; p++) {
            sum_dev += ph->device_ms[p], sum_host += ph->host_ms[p];
            if (ran[p] && dev)
                printf(" %7.2f/%7.2f", ph->device_ms[p], ph->host_ms[p]);
            else if (ran[p])
                printf(" %9.2f", ph->host_ms[p]);
        }
        if (dev)
            printf(" %7.2f/%7.2f\n", sum_dev, sum_host);
        else
            printf(" %9.2f\n", sum_host);
    }
}

/* The cost model against the run: each rank's mean action time per kind, measured / predicted
 * (profiled costs are seconds, so they compare directly), the kinds some rank ran. */
static void print_action_times(const zb_pipeline_report_t *rep)
{
    bool any[ZB_REPORT_KINDS] = {false};
    int shown = 0;
    for (int r = 0; r < rep->ranks; r++)
        for (int k = 0; k < ZB_REPORT_KINDS; k++)
            if (rep->action_measured[(size_t)r * ZB_REPORT_KINDS + (size_t)k] > 0 && !any[k])
                any[k] = true, shown++;
    if (!shown)
        return;
    printf("action times (last step, mean ms per action): measured / predicted (ratio)\n%-8s", "");
    for (int k = 0; k < ZB_REPORT_KINDS; k++)
        if (any[k])
            printf(" %24s", zb_action_type_name(zb_report_kinds[k]));
    printf("\n");
    for (int r = 0; r < rep->ranks; r++) {
        printf("  rank %-2d", r);
        for (int k = 0; k < ZB_REPORT_KINDS; k++) {
            if (!any[k])
                continue;
            double m = rep->action_measured[(size_t)r * ZB_REPORT_KINDS + (size_t)k] * 1e3;
            double p = rep->action_predicted[(size_t)r * ZB_REPORT_KINDS + (size_t)k] * 1e3;
            if (m > 0 && p > 0)
                printf("  %7.3f/%7.3f (%5.3f)", m, p, m / p);
            else
                printf(" %24s", "-");
        }
        printf("\n");
    }
}

void zb_cli_print_bubble(const zb_pipeline_report_t *rep, bool replicas, bool profiled)
{
    if (!rep->measured) {
        printf("bubble: predicted %.1f%% (simulator)\n", 100 * rep->bubble_predicted);
        return;
    }
    printf("bubble: measured %.1f%% (last step%s), predicted %.1f%% (simulator)\n",
           100 * rep->bubble_measured, replicas ? ", replica 0" : "", 100 * rep->bubble_predicted);
    /* profiled costs are seconds: the predicted span compares with the measured one directly */
    if (profiled && rep->span_predicted > 0) {
        printf("pipeline span (last step): measured %.2f ms, predicted %.2f ms (%+.1f%%)\n",
               rep->span_measured * 1e3, rep->span_predicted * 1e3,
               100 * (rep->span_measured / rep->span_predicted - 1));
        if (rep->makespan_predicted > 0)
            printf("pipeline makespan (last step, first action to last over every rank): "
                   "measured %.2f ms, predicted %.2f ms (%+.1f%%)\n",
                   rep->makespan_measured * 1e3, rep->makespan_predicted * 1e3,
                   100 * (rep->makespan_measured / rep->makespan_predicted - 1));
    }
    /* what a user waits for beyond the schedule's actions: the step's wall time outside them
     * (start-up of the step, optimizer, norms, exchanges, host waits). Against the makespan:
     * the span leaves out the pipeline's fill before the longest rank's first F, which is the
     * schedule's time, not overhead */
    if (rep->step_ms_last > 0) {
        double act_ms = rep->makespan_measured * 1e3, out_ms = rep->step_ms_last - act_ms;
        double before_ms = rep->first_action_at * 1e3;
        printf("outside the actions (last step): step %.2f ms, actions %.2f ms (makespan), "
               "outside %.2f ms (%.1f%% of the step): %.2f ms before the first action, %.2f "
               "after the last\n",
               rep->step_ms_last, act_ms, out_ms, 100 * out_ms / rep->step_ms_last, before_ms,
               out_ms - before_ms);
    }
    if (profiled && rep->action_measured)
        print_action_times(rep);
    if (rep->phases)
        print_phases(rep);
}

static void mem_row(const char *what, const zb_rank_mem_t *m)
{
    const double MiB = 1048576.0;
    printf("  %-9s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %9.2f %9.2f\n", what,
           m->params / MiB, m->grads / MiB, m->optimizer / MiB, m->backup / MiB,
           m->messages / MiB, m->activations / MiB, m->workspace / MiB, m->total / MiB,
           m->stash_alloc / MiB);
}

void zb_cli_print_rank_memory(const zb_pipeline_report_t *rep, int ranks, double limit,
                              const double *limits)
{
    if (rep->mem_on_device)
        printf("GPU memory per rank, MiB (device: params + grads + optimizer + backup + messages "
               "+ activation peak + workspace; the host mirror is not counted; docs/cuda.md)\n");
    else
        printf("memory per rank, MiB (whole rank = params + grads + optimizer + backup + "
               "messages + activation peak + workspace; docs/runtime.md)\n");
    printf("  %-9s %8s %8s %8s %8s %8s %8s %8s %9s %9s\n", "", "params", "grads", "optim",
           "backup", "messages", "act.peak", "work", "total", "act.alloc");
    for (int r = 0; r < ranks && r < 1024; r++) {
        printf(" rank %d\n", r);
        mem_row("predicted", &rep->mem_predicted[r]);
        if (rep->mem_measured_ok)
            mem_row("measured", &rep->mem_measured[r]);
    }
    if (limits) {
        printf("  memory limits (--mem-limit), MiB on the whole-rank total:");
        for (int r = 0; r < ranks && r < 1024; r++)
            printf(" rank %d %.2f%s", r, limits[r] / 1048576.0, r + 1 < ranks ? "," : "\n");
    } else if (limit > 0) {
        printf("  memory limit (--mem-limit): %.2f MiB per rank, on the whole-rank total\n",
               limit / 1048576.0);
    }
    if (rep->mem_on_device && rep->mem_measured_ok && rep->device_bytes_in_use >= 0) {
        double held = 0;
        for (int r = 0; r < ranks && r < 1024; r++)
            held += zb_rank_mem_allocated(&rep->mem_measured[r]);
        printf("  GPU memory in use at the end (the driver's count: CUDA contexts, libraries and "
               "other processes included): %.1f MiB, of which the ranks above allocated %.1f\n",
               rep->device_bytes_in_use / 1048576.0, held / 1048576.0);
    }
    double rss = rep->rss_peak_bytes;
    if (rep->mem_measured_ok && rep->mem_measured[0].rss_peak > 0 && ranks > 0)
        rss = rep->mem_measured[0].rss_peak;
    if (rep->mem_measured_ok) {
        bool per_process = false;
        for (int r = 1; r < ranks && r < 1024; r++)
            per_process |= rep->mem_measured[r].rss_peak != rep->mem_measured[0].rss_peak;
        if (per_process) {
            printf("  peak RSS per process (MiB):");
            for (int r = 0; r < ranks && r < 1024; r++)
                printf(" rank %d %.1f%s", r, rep->mem_measured[r].rss_peak / 1048576.0,
                       r + 1 < ranks ? "," : "\n");
        } else if (rss > 0) {
            printf("  peak RSS of this process: %.1f MiB\n", rss / 1048576.0);
        }
    }
}

void zb_cli_print_trace_paths(const char *trace_path)
{
    char path[ZB_TRACE_FILES][4400];
    for (int k = 0; k < ZB_TRACE_FILES; k++)
        if (zb_pipeline_trace_path(trace_path, (zb_trace_file_t)k, path[k], sizeof path[k],
                                   NULL) != ZB_OK)
            path[k][0] = '\0';
    printf("trace: measured %s, predicted %s\n", path[ZB_TRACE_MEASURED_JSON],
           path[ZB_TRACE_PREDICTED_JSON]);
    printf("svg:   measured %s, predicted %s\n", path[ZB_TRACE_MEASURED_SVG],
           path[ZB_TRACE_PREDICTED_SVG]);
}

void zb_cli_print_pipeline_report(const zb_cli_pipeline_t *pc, const zb_train_config_t *c,
                                  const zb_train_summary_t *sum, const zb_pipeline_report_t *rep,
                                  const zb_pipeline_rank_figures_t *figures, int world)
{
    const int P = pc->opts.ranks;
    if (pc->mpi)
        printf("pipeline: %s, transport mpi (%d processes)\n", rep->note, world);
    else
        printf("pipeline: %s\n", rep->note);
    if (rep->offload_note[0])
        printf("offload: %s\n", rep->offload_note);
    if (rep->device[0]) /* --device cuda: the ranks' GPUs and SM partitions */
        printf("device: cuda %s, %s\n", zb_cuda_precision_name(pc->opts.cuda->precision),
               rep->device);
    printf("partition (first block of each stage):");
    for (int s = 0; s <= rep->stages; s++)
        printf(" %d", rep->first[s]);
    printf("\n");
    if (sum->steps_run <= 0) {
        if (!sum->interrupted)
            printf("nothing to do: already at step %ld of %ld\n", sum->first_step, c->steps);
        zb_cli_print_run_extras(c, sum);
        return;
    }
    printf("trained steps %ld..%ld: loss %.4f -> %.4f, median step %.1f ms, %.0f tokens/s\n",
           sum->first_step + 1, sum->first_step + sum->steps_run, sum->first_loss,
           sum->last_loss, rep->step_ms_median, sum->median_tokens_per_s);
    zb_cli_print_bubble(rep, world > P, pc->opts.profile);
    long rollbacks = rep->rollbacks;
    if (figures) { /* processes: each rank's own figures, gathered */
        rollbacks = 0;
        double steps = (double)sum->steps_run;
        for (int g = 0; g < world; g++) {
            const zb_pipeline_rank_figures_t *o = &figures[g];
            char who[64] = "";
            if (world > P) /* global rank = replica·P + pipeline rank */
                snprintf(who, sizeof who, " (replica %d, pipeline rank %d)", g / P, g % P);
            printf("rank %d%s: stash peak %.2f MiB (predicted %.2f), per step: sent %.3f MB in "
                   "%.0f messages, received %.3f MB, waited %.2f ms\n",
                   g, who, o->stash_peak_bytes / 1048576.0,
                   rep->predicted_stash_bytes[g % P] / 1048576.0, o->bytes_sent / steps / 1e6,
                   o->msgs_sent / steps, o->bytes_received / steps / 1e6,
                   o->wait_s / steps * 1e3);
            rollbacks += (long)o->rollbacks;
        }
    }
    zb_cli_print_rank_memory(rep, P, pc->opts.mem_limit, pc->opts.mem_limit_ranks);
    if (rep->replicas_checked)
        printf("replicas: %d, %s after the run (parameter and AdamW state hashes)\n",
               world / P, rep->replicas_differ ? "DIFFERENT" : "identical");
    if (pc->opts.opt_sync == ZB_OPT_SYNC_POST_VALIDATION)
        printf("optimizer post-validation: %ld rank-steps rolled back and redone\n", rollbacks);
    if (pc->opts.trace_path && rep->measured)
        zb_cli_print_trace_paths(pc->opts.trace_path);
    if (pc->opts.trace_svg_path && rep->measured)
        printf("overlay: measured vs predicted %s\n", pc->opts.trace_svg_path);
    zb_cli_print_run_extras(c, sum);
    if (c->save_path)
        printf("saved %s%s\n", c->save_path,
               pc->opts.sharded_checkpoint ? " (manifest; one shard per rank beside it)" : "");
    if (c->save_model_path)
        printf("saved model %s\n", c->save_model_path);
}

void zb_cli_print_replicas_differ(const zb_pipeline_report_t *rep)
{
    fprintf(stderr, "zbpp train: %d ranks ended with a state different from replica 0's\n",
            rep->replicas_differ);
}
