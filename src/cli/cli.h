/* zbpp CLI — one file per subcommand (cmd_<name>.c), each exporting zb_cmd_<name>.
 * A command returns the process exit status: 0 on success, 1 on a runtime failure, 2 on bad
 * usage. Errors are printed as one line "zbpp <cmd>: <message>" on stderr. */
#ifndef ZBPP_CLI_H
#define ZBPP_CLI_H

int zb_cmd_schedule(int argc, char **argv);
int zb_cmd_simulate(int argc, char **argv);
int zb_cmd_validate(int argc, char **argv);
int zb_cmd_train(int argc, char **argv);

int zb_cmd_plan(int argc, char **argv); /* cmd_plan.c */
int zb_cmd_profile(int argc, char **argv); /* cmd_profile.c */
int zb_cmd_plot(int argc, char **argv);    /* cmd_plot.c */
int zb_cmd_generate(int argc, char **argv); /* cmd_generate.c */
/* Re-execute once with OPENBLAS_CORETYPE set when OpenBLAS chose kernels below the CPU's, and
 * with OPENBLAS_NUM_THREADS=1 under `ulimit -v` (blas_env.c). */
void zb_cli_blas_env(char **argv);
/* End the process (exit 1, one line naming `what`) unless zb_cli_watchdog_stop is called within
 * `seconds` (<= 0: no watchdog). For MPI start-up, which has no timeout (startup_watchdog.c). */
void zb_cli_watchdog_start(double seconds, const char *what);
void zb_cli_watchdog_stop(void);

#endif
