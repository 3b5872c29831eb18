/* zbpp CLI — SIGINT / SIGTERM during `zbpp train` (see train_signals.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/train_signals.h"

static volatile sig_atomic_t g_signal;
static char g_tmp[2][4400]; /* temp files a second signal removes; written before the handlers */

static void on_signal(int sig)
{
    if (g_signal) { /* the second one: now, without a partial file */
        for (int i = 0; i < 2; i++)
            if (g_tmp[i][0])
                unlink(g_tmp[i]);
        _exit(128 + sig);
    }
    g_signal = sig;
    static const char msg[] = "\nzbpp train: interrupted: stopping after this step and saving "
                              "(signal again to quit at once, without saving)\n";
    ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)n;
}

volatile sig_atomic_t *zb_cli_train_signals(const char *save_path, const char *save_model_path)
{
    const char *paths[2] = {save_path, save_model_path};
    for (int i = 0; i < 2; i++)
        if (paths[i])
            snprintf(g_tmp[i], sizeof g_tmp[i], "%s.tmp.%ld", paths[i], (long)getpid());
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return &g_signal;
}

int zb_cli_train_signal_status(void)
{
    return g_signal ? 128 + g_signal : 0;
}
