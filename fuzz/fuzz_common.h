/* Shared by the libFuzzer harnesses: a sink for writers, a message check, and the input written
 * to a private temp file (the readers take paths). Abort = a finding libFuzzer reports. */
#ifndef ZBPP_FUZZ_COMMON_H
#define ZBPP_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zbpp/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline FILE *fz_sink(void)
{
    static FILE *null_out;
    if (!null_out)
        null_out = fopen("/dev/null", "w");
    if (!null_out)
        abort();
    return null_out;
}

/* A failure must come with one line naming the problem. */
static inline void fz_check_message(const zb_err_t *err)
{
    if (!err->msg[0] || strchr(err->msg, '\n')) {
        fprintf(stderr, "bad error message: '%s'\n", err->msg);
        abort();
    }
}

/* A private directory for this process (created once, under $TMPDIR or /tmp). */
static inline const char *fz_dir(void)
{
    static char dir[256];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/zbpp-fuzz-%ld", t && *t ? t : "/tmp", (long)getpid());
        char cmd[300];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        if (system(cmd) != 0)
            abort();
    }
    return dir;
}

/* Write bytes to <fz_dir>/<name>; returns the path (static storage per call site's buffer). */
static inline void fz_write(const char *name, const void *data, size_t size, char *path,
                            size_t cap)
{
    snprintf(path, cap, "%s/%s", fz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
}

#endif
