/* A start-up watchdog for MPI launches: MPI_Init has no timeout, and a rank that dies or is
 * stopped just after launch leaves the others blocked in it forever. The watchdog thread waits
 * up to --comm-timeout seconds for zb_cli_watchdog_stop; if start-up has not finished by then it
 * prints one line and ends the process with exit status 1 (the CLI may exit; the library never
 * does). docs/reliability.md */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cond;
static bool wd_done, wd_running;
static pthread_t wd_thread;
static double wd_seconds;
static char wd_what[160];

static void *watch(void *arg)
{
    (void)arg;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)wd_seconds;
    until.tv_nsec += (long)((wd_seconds - (double)(time_t)wd_seconds) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&wd_lock);
    int rc = 0;
    /* any error ends the wait: EINVAL is never a wake-up (looping on it would spin) */
    while (!wd_done && rc == 0)
        rc = pthread_cond_timedwait(&wd_cond, &wd_lock, &until);
    bool fire = !wd_done;
    pthread_mutex_unlock(&wd_lock);
    if (fire) {
        char line[320];
        int n = snprintf(line, sizeof line,
                         "zbpp train: %s did not finish within %g s (--comm-timeout): another "
                         "rank failed or stopped during start-up\n",
                         wd_what, wd_seconds);
        if (n > 0 && write(2, line, (size_t)n) < 0)
            n = 0;
        _exit(1); /* the thread blocked in MPI cannot be interrupted any other way */
    }
    return NULL;
}

void zb_cli_watchdog_start(double seconds, const char *what)
{
    if (!(seconds > 0) || wd_running)
        return;
    if (seconds > 30.0 * 86400.0) /* a deadline the clock can reach (the flag is bounded too) */
        seconds = 30.0 * 86400.0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wd_cond, &ca);
    pthread_condattr_destroy(&ca);
    wd_seconds = seconds;
    wd_done = false;
    snprintf(wd_what, sizeof wd_what, "%s", what);
    wd_running = pthread_create(&wd_thread, NULL, watch, NULL) == 0;
}

void zb_cli_watchdog_stop(void)
{
    if (!wd_running)
        return;
    pthread_mutex_lock(&wd_lock);
    wd_done = true;
    pthread_cond_signal(&wd_cond);
    pthread_mutex_unlock(&wd_lock);
    pthread_join(wd_thread, NULL);
    pthread_cond_destroy(&wd_cond);
    wd_running = false;
}
