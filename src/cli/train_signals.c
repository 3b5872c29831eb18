/* zbpp CLI — SIGINT / SIGTERM during `zbpp train` (see train_signals.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/train_signals.h"

static volatile sig_atomic_t g_signal;
static volatile sig_atomic_t g_started; /* zb_train_config_t.started: the first step began */
static char g_tmp[2][4400]; /* temp files a second signal removes; written before the handlers */
/* The lines the first signal prints, made before the handlers exist (a handler may only
 * write()): from a user, and from the MPI launcher (empty: say nothing on this rank). */
static char g_msg_user[256], g_msg_launcher[320];
static char g_msg_startup[160], g_msg_launcher_startup[160]; /* before the first step */
static pid_t g_launcher; /* the parent process under MPI (mpirun or its daemon), else 0 */

static void say(const char *msg)
{
    ssize_t n = write(STDERR_FILENO, msg, strlen(msg));
    (void)n;
}

static void on_signal(int sig, siginfo_t *si, void *context)
{
    (void)context;
    if (g_signal) { /* the second one: now, without a partial file */
        for (int i = 0; i < 2; i++)
            if (g_tmp[i][0])
                unlink(g_tmp[i]);
        _exit(128 + sig);
    }
    g_signal = sig;
    /* mpirun signals every rank when one of them ends (or when it is interrupted itself):
     * that is no user asking this rank to save */
    bool launcher = g_launcher && si && si->si_code == SI_USER && si->si_pid == g_launcher;
    if (!g_started) { /* still starting: nothing to finish or save, so no reason to wait */
        say(launcher ? g_msg_launcher_startup : g_msg_startup);
        _exit(128 + sig);
    }
    say(launcher ? g_msg_launcher : g_msg_user);
}

/* This process's MPI rank from the launcher's environment, -1 when not known. */
static int launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

volatile sig_atomic_t *zb_cli_train_signals(const char *save_path, const char *save_model_path,
                                            bool mpi)
{
    const char *paths[2] = {save_path, save_model_path};
    for (int i = 0; i < 2; i++)
        if (paths[i])
            snprintf(g_tmp[i], sizeof g_tmp[i], "%s.tmp.%ld", paths[i], (long)getpid());
    bool saves = save_path || save_model_path;
    snprintf(g_msg_user, sizeof g_msg_user,
             "\nzbpp train: interrupted: stopping after this step%s (signal again to quit at "
             "once%s)\n",
             saves ? " and saving" : "; nothing will be saved (no --save)",
             saves ? ", without saving" : "");
    snprintf(g_msg_startup, sizeof g_msg_startup,
             "\nzbpp train: interrupted during start-up: nothing trained, nothing saved\n");
    int rank = mpi ? launcher_rank() : -1;
    g_launcher = mpi ? getppid() : 0;
    if (rank == 0) /* one line for the job, not one per rank */
        snprintf(g_msg_launcher_startup, sizeof g_msg_launcher_startup,
                 "\nzbpp train: the MPI launcher is ending the job during start-up: nothing "
                 "trained, nothing saved\n");
    if (rank == 0)
        snprintf(g_msg_launcher, sizeof g_msg_launcher,
                 "\nzbpp train: the MPI launcher is ending the job (a rank ended, or mpirun was "
                 "interrupted): stopping after this step%s\n",
                 saves ? "; --save is written only if the launcher lets that step finish"
                       : "; nothing will be saved (no --save)");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return &g_signal;
}

volatile sig_atomic_t *zb_cli_train_started(void)
{
    return &g_started;
}

int zb_cli_train_signal_status(void)
{
    return g_signal ? 128 + g_signal : 0;
}
