/* Progress output for a training run: a redrawn one-line bar on a terminal, plain lines
 * otherwise, and a JSON-lines metrics file (one object per step, flushed as it goes so a crashed
 * run still leaves its history). */
#include <errno.h>
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
};

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
    if (metrics_path) {
        p->metrics_path = strdup(metrics_path);
        p->metrics = fopen(metrics_path, append ? "a" : "w");
        if (!p->metrics_path || !p->metrics) {
            int saved = errno;
            if (p->metrics)
                fclose(p->metrics);
            free(p->metrics_path);
            free(p);
            return zb_err_set(err, ZB_EIO, "cannot write metrics file %s: %s", metrics_path,
                              strerror(saved));
        }
    }
    *out = p;
    return ZB_OK;
}

static void draw_bar(zb_progress_t *p, const zb_step_stats_t *s)
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
    fprintf(p->human, "\r[%s] step %ld/%ld  loss %.4f  %.0f tok/s%s\033[K", bar, done, p->total,
            s->loss, s->tokens_per_s, s->skipped ? "  (skipped)" : "");
    fflush(p->human);
    p->bar_drawn = true;
}

zb_status_t zb_progress_step(zb_progress_t *p, const zb_step_stats_t *s, zb_err_t *err)
{
    if (!p)
        return ZB_OK;
    if (p->human) {
        /* redraw at most ~10 times a second (and always for the last step) */
        if (p->tty) {
            if (s->step + 1 >= p->total || zb_now() - p->last_draw >= 0.1) {
                draw_bar(p, s);
                p->last_draw = zb_now();
            }
        } else {
            fprintf(p->human,
                    "step %ld/%ld  loss %.6f  lr %.3e  norm %.4f  %.1f ms  %.0f tok/s%s\n",
                    s->step + 1, p->total, s->loss, s->lr, s->grad_norm, s->step_ms,
                    s->tokens_per_s, s->skipped ? "  skipped: non-finite gradient norm" : "");
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
        fprintf(p->metrics,
                "{\"step\":%ld,\"loss\":%s,\"lr\":%.9g,\"grad_norm\":%s,\"step_ms\":%.3f,"
                "\"tokens_per_s\":%.1f,\"skipped\":%s}\n",
                s->step, loss, (double)s->lr, norm, s->step_ms, s->tokens_per_s,
                s->skipped ? "true" : "false");
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
