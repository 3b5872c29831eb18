/* zbpp CLI — Ctrl-C (SIGINT) and SIGTERM during `zbpp train`: during the start-up a signal ends
 * the process at once; after it the first signal asks the run to stop at the next step boundary (the library reads the flag, saves --save as at the end); a
 * second one exits at once, removing the temp files of a save in progress, so no partial file
 * is left (the atomic writer's temp is PATH.tmp.<pid>; the old PATH stays intact). */
#ifndef ZBPP_CLI_TRAIN_SIGNALS_H
#define ZBPP_CLI_TRAIN_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

/* Install the handlers; `save_path` / `save_model_path` (may be NULL) name the files whose temp
 * files a second signal removes (and, when both are NULL, the first signal says that nothing
 * will be saved). With `mpi`, a signal from the parent process (the MPI launcher ending the job
 * after a rank ended, or mpirun interrupted) is told apart: rank 0 says so, the others say
 * nothing. Returns the flag for zb_train_config_t.stop: 0, or the number of the signal. */
volatile sig_atomic_t *zb_cli_train_signals(const char *save_path, const char *save_model_path,
                                            bool mpi);
/* The flag for zb_train_config_t.started: before the first step a signal ends the process at
 * once (exit 128 + signal, one line saying nothing was trained or saved) instead of waiting for
 * the start-up to finish. */
volatile sig_atomic_t *zb_cli_train_started(void);
/* Exit status after a run the flag stopped: 128 + signal (130 for SIGINT, 143 for SIGTERM). */
int zb_cli_train_signal_status(void);

#endif
