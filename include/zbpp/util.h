/* zbpp — small utilities: monotonic time, atomic file writes, whole-file reads. */
#ifndef ZBPP_UTIL_H
#define ZBPP_UTIL_H

#include <stdio.h>
#include <stddef.h>

#include "zbpp/error.h"

/* Seconds on the monotonic clock (arbitrary origin). */
double zb_now(void);
/* This process's peak and current resident set in bytes (Linux /proc/self/status; 0 if
 * unknown). */
double zb_rss_peak_bytes(void);
double zb_rss_bytes(void);
/* Measured fp32 FLOP/s of one core of this CPU at its FMA ceiling (a few ms the first time, then
 * cached): the peak MFU is taken against when no peak is given. */
double zb_cpu_peak_flops_per_core(void);

/* Sort v[0..n-1] ascending, in place. */
void zb_sort_doubles(double *v, size_t n);
/* Median of v[0..n-1] (n >= 1): the middle value, the mean of the two middle ones when n is
 * even. Sorts v in place. */
double zb_median(double *v, size_t n);

/* Atomic file write (SQLite-style): write to "<path>.tmp.<pid>", fsync, rename over path, fsync
 * the directory. Until zb_atomic_commit succeeds the old file at `path` is untouched; on any
 * failure (or zb_atomic_abort) the temp file is removed.
 * What exists at `path` decides (docs/reliability.md):
 *   regular file or nothing  -> replaced atomically as above;
 *   symlink                  -> the file it points to is replaced atomically, the link stays
 *                               (a dangling link is refused, ZB_EIO);
 *   character device, FIFO   -> written in place, nothing renamed (`-o /dev/null` discards);
 *                               a FIFO nobody reads is refused (ZB_EIO) instead of blocking;
 *   directory, block device, socket -> refused (ZB_EIO), nothing written.
 * The temp file is locked (flock) while written; zb_atomic_open removes unlocked
 * "<path>.tmp.<digits>" files left by killed writers. tmp_path is "" when writing in place.
 * A replaced regular file keeps its permission bits (a 0600 file stays 0600). */
typedef struct {
    FILE *f;             /* write here */
    char path[4096];
    char tmp_path[4200];
} zb_atomic_file_t;

zb_status_t zb_atomic_open(zb_atomic_file_t *af, const char *path, zb_err_t *err);
zb_status_t zb_atomic_commit(zb_atomic_file_t *af, zb_err_t *err);
void zb_atomic_abort(zb_atomic_file_t *af);

/* Would zb_atomic_open(path) succeed now? The same rules, checked without writing anything, so a
 * long job can refuse a bad output before it starts rather than lose its work at the end:
 * ZB_EIO naming the problem (a dangling symlink, a directory, a FIFO nobody reads, a missing or
 * unwritable directory). For a FIFO that has a reader, *held_fd (when not NULL) receives a
 * write descriptor the caller keeps open until its real write, so the reader does not see
 * end-of-file in between; otherwise *held_fd is -1. */
zb_status_t zb_atomic_check(const char *path, int *held_fd, zb_err_t *err);

/* Open `path` for reading, refusing anything but a regular file without blocking (a FIFO or a
 * device is rejected before any read, so a reader never hangs on one). `what` names the file in
 * messages ("checkpoint", "shard", NULL for none). ZB_EIO when missing, unreadable or not
 * regular. On success *fd is an open descriptor (blocking mode) the caller closes. */
zb_status_t zb_open_regular(const char *path, const char *what, int *fd, zb_err_t *err);
/* The same as a stdio stream ("rb"). */
zb_status_t zb_fopen_regular(const char *path, const char *what, FILE **f, zb_err_t *err);

/* Remove files in `dir` (a directory path ending in '/', or "" for the current one) named
 * "<prefix><anything>.tmp.<digits>" that no process holds locked (temp files of writers that
 * were killed). `keep`, when not NULL, is asked first for each candidate name and may veto its
 * removal. Returns the number removed. */
int zb_remove_stale_temps(const char *dir, const char *prefix,
                          int (*keep)(const char *name, void *ctx), void *ctx);

/* Read a whole file into a NUL-terminated malloc'd buffer (*len excludes the NUL). Rejects files
 * larger than max_bytes. Caller frees *data. */
zb_status_t zb_read_file(const char *path, size_t max_bytes, char **data, size_t *len,
                         zb_err_t *err);

#endif
