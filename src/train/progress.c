/* Progress output for a training run: a redrawn one-line bar on a terminal, plain lines
 * otherwise, and a JSON-lines metrics file (one object per step, flushed as it goes so a crashed
 * run still leaves its history). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zbpp/train.h"
#include "zbpp/util.h"

struct zb_progress {
    FILE *human;
    bool tty;
    FILE *metrics;
    char *metrics_path;
    long total;
    bool bar_drawn;
    double last_draw; /* zb_now() of the last bar redraw */
    double t_open;    /* zb_now() at open: elapsed time counts from here */
    long first_step;  /* the first step recorded (a resumed run starts past 0), -1 = none yet */
    double flops_per_step, peak_flops; /* MFU (zb_progress_set_flops); 0 = unknown */
};

void zb_progress_set_flops(zb_progress_t *p, double flops_per_step, double peak_flops)
{
    if (!p)
        return;
    p->flops_per_step = flops_per_step > 0 ? flops_per_step : 0;
    p->peak_flops = peak_flops > 0 ? peak_flops : 0;
}

double zb_train_flops_per_step(const zb_gpt2_config_t *m, size_t n_params, int B, int T)
{
    double per_token = 6.0 * (double)n_params + 12.0 * m->layers * (double)m->channels * T;
    return per_token * (double)B * (double)T;
}

/* "1h02m03s", "4m05s", "7.2s" */
static void fmt_duration(char *buf, size_t cap, double s)
{
    if (!(s >= 0) || s > 1e9) {
        snprintf(buf, cap, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else if (t >= 60)
        snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, cap, "%.1fs", s);
}

/* Elapsed since open and the ETA of the remaining steps at this run's mean step time. */
static void times(const zb_progress_t *p, const zb_step_stats_t *s, char *el, char *eta,
                  size_t cap, double *elapsed)
{
    *elapsed = zb_now() - p->t_open;
    long done_here = s->step + 1 - p->first_step, left = p->total - (s->step + 1);
    fmt_duration(el, cap, *elapsed);
    if (left <= 0)
        snprintf(eta, cap, "0s");
    else
        fmt_duration(eta, cap, done_here > 0 ? *elapsed / (double)done_here * (double)left : -1);
}

/* The metrics file for appending or from scratch. Never waits in open: a FIFO nobody reads
 * fails at once with ENXIO (fopen would block until a reader comes, forever if none does). */
static FILE *open_metrics(const char *path, bool append)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
                            (append ? O_APPEND : O_TRUNC), 0666);
    if (fd < 0)
        return NULL;
    int flags = fcntl(fd, F_GETFL); /* writes may wait for a slow reader, as with fopen */
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (!f)
        close(fd);
    return f;
}

zb_status_t zb_progress_open(zb_progress_t **out, FILE *human, const char *metrics_path,
                             bool append, long total_steps, zb_err_t *err)
{
    *out = NULL;
    zb_progress_t *p = calloc(1, sizeof *p);
    if (!p)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for progress");
    p->human = human;
    p->tty = human && isatty(fileno(human));
    p->total = total_steps;
    p->t_open = zb_now();
    p->first_step = -1;
    if (metrics_path) {
        p->metrics_path = strdup(metrics_path);
        p->metrics = open_metrics(metrics_path, append);
        if (!p->metrics_path || !p->metrics) {
            int saved = errno;
            if (p->metrics)
                fclose(p->metrics);
            free(p->metrics_path);
            free(p);
            return zb_err_set(err, ZB_EIO, "cannot write metrics file %s: %s", metrics_path,
                              saved == ENXIO ? "it is a FIFO and nothing reads it"
                                             : strerror(saved));
        }
    }
    *out = p;
    return ZB_OK;
}

/* "  mfu 12.3%" of this step against the peak, "" when the peak is unknown. */
static void mfu_text(const zb_progress_t *p, const zb_step_stats_t *s, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (p->peak_flops > 0 && p->flops_per_step > 0 && s->step_ms > 0)
        snprintf(buf, cap, "  mfu %.1f%%",
                 100 * p->flops_per_step / (s->step_ms * 1e-3) / p->peak_flops);
}

static void draw_bar(zb_progress_t *p, const zb_step_stats_t *s, const char *el, const char *eta)
{
    enum { WIDTH = 24 };
    long done = s->step + 1;
    int fill = p->total > 0 ? (int)(WIDTH * done / p->total) : WIDTH;
    if (fill > WIDTH)
        fill = WIDTH;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    /* \r redraws in place; \033[K clears what a longer previous line left behind */
    char mfu[24];
    mfu_text(p, s, mfu, sizeof mfu);
    fprintf(p->human, "\r[%s] step %ld/%ld  loss %.4f  %.0f tok/s%s  %s elapsed, ETA %s%s\033[K",
            bar, done, p->total, s->loss, s->tokens_per_s, mfu, el, eta,
            s->skipped ? "  (skipped)" : "");
    fflush(p->human);
    p->bar_drawn = true;
}

zb_status_t zb_progress_step(zb_progress_t *p, const zb_step_stats_t *s, zb_err_t *err)
{
    if (!p)
        return ZB_OK;
    if (p->first_step < 0)
        p->first_step = s->step;
    char el[32], eta[32];
    double elapsed;
    times(p, s, el, eta, sizeof el, &elapsed);
    if (p->human) {
        /* redraw at most ~10 times a second (and always for the last step) */
        if (p->tty) {
            if (s->has_val) { /* a line of its own above the bar */
                fprintf(p->human, "\r\033[Kstep %ld/%ld  val loss %.4f\n", s->step + 1, p->total,
                        s->val_loss);
                p->last_draw = 0;
            }
            if (s->step + 1 >= p->total || zb_now() - p->last_draw >= 0.1) {
                draw_bar(p, s, el, eta);
                p->last_draw = zb_now();
            }
        } else {
            char mfu[24];
            mfu_text(p, s, mfu, sizeof mfu);
            fprintf(p->human,
                    "step %ld/%ld  loss %.6f  lr %.3e  norm %.4f  %.1f ms  %.0f tok/s%s  "
                    "%s elapsed, ETA %s%s\n",
                    s->step + 1, p->total, s->loss, s->lr, s->grad_norm, s->step_ms,
                    s->tokens_per_s, mfu, el, eta,
                    s->skipped ? "  skipped: non-finite gradient norm" : "");
            if (s->has_val)
                fprintf(p->human, "step %ld/%ld  val loss %.4f\n", s->step + 1, p->total,
                        s->val_loss);
        }
    }
    if (p->metrics) {
        /* JSON has no NaN/Inf: a non-finite value is written as null */
        char norm[32];
        if (isfinite(s->grad_norm))
            snprintf(norm, sizeof norm, "%.9g", s->grad_norm);
        else
            snprintf(norm, sizeof norm, "null");
        char loss[32];
        if (isfinite(s->loss))
            snprintf(loss, sizeof loss, "%.9g", (double)s->loss);
        else
            snprintf(loss, sizeof loss, "null");
        char val[48] = "";
        if (s->has_val && isfinite(s->val_loss))
            snprintf(val, sizeof val, "\"val_loss\":%.9g,", (double)s->val_loss);
        else if (s->has_val)
            snprintf(val, sizeof val, "\"val_loss\":null,");
        /* model FLOP/s of this step and its share of the peak (MFU) */
        double fps = s->step_ms > 0 ? p->flops_per_step / (s->step_ms * 1e-3) : 0;
        char mfu[32];
        if (p->peak_flops > 0 && p->flops_per_step > 0)
            snprintf(mfu, sizeof mfu, "%.6f", fps / p->peak_flops);
        else
            snprintf(mfu, sizeof mfu, "null");
        /* the step numbered as on the console (1-based); timing fields together after
         * step_ms, so a tool comparing two runs can cut them off in one piece */
        fprintf(p->metrics,
                "{\"step\":%ld,\"loss\":%s,%s\"lr\":%.9g,\"grad_norm\":%s,\"step_ms\":%.3f,"
                "\"tokens_per_s\":%.1f,\"elapsed_s\":%.3f,\"tflops\":%.6f,\"mfu\":%s,"
                "\"skipped\":%s}\n",
                s->step + 1, loss, val, (double)s->lr, norm, s->step_ms, s->tokens_per_s,
                elapsed, fps * 1e-12, mfu, s->skipped ? "true" : "false");
        if (fflush(p->metrics) != 0 || ferror(p->metrics))
            return zb_err_set(err, ZB_EIO, "cannot write metrics file %s: %s", p->metrics_path,
                              strerror(errno));
    }
    return ZB_OK;
}

zb_status_t zb_progress_close(zb_progress_t *p, zb_err_t *err)
{
    if (!p)
        return ZB_OK;
    zb_status_t st = ZB_OK;
    if (p->human && p->tty && p->bar_drawn)
        fputc('\n', p->human);
    if (p->metrics) {
        int bad = ferror(p->metrics) != 0;
        bad |= fclose(p->metrics) != 0;
        if (bad)
            st = zb_err_set(err, ZB_EIO, "cannot write metrics file %s", p->metrics_path);
    }
    free(p->metrics_path);
    free(p);
    return st;
}
