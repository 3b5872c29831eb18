/* --keep-last: the newest N checkpoints of a run, each a hard link PATH.stepNNNNNN to what --save
 * wrote at that step (a later save renames a new file over PATH, so the link keeps the old one). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zbpp/train.h"

/* Copy src to dst through a temp file and rename (file systems without hard links). */
static zb_status_t copy_file(const char *src, const char *dst, zb_err_t *err)
{
    char tmp[4300];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dst, (long)getpid()) >= (int)sizeof tmp)
        return zb_err_set(err, ZB_EINVAL, "--keep-last: path too long: %.64s...", dst);
    FILE *in = fopen(src, "rb");
    FILE *out = in ? fopen(tmp, "wb") : NULL;
    bool bad = !in || !out;
    char buf[1 << 16];
    size_t n;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0)
        bad = fwrite(buf, 1, n, out) != n;
    bad |= in && ferror(in);
    if (out) {
        bad |= fflush(out) != 0 || fsync(fileno(out)) != 0;
        bad |= fclose(out) != 0;
    }
    if (in)
        fclose(in);
    if (!bad && rename(tmp, dst) == 0)
        return ZB_OK;
    int saved = errno;
    remove(tmp);
    return zb_err_set(err, ZB_EIO, "--keep-last: cannot write %s: %s", dst, strerror(saved));
}

/* The step of a name BASE.stepDIGITS, -1 if it is not one. */
static long step_of(const char *name, const char *base)
{
    size_t bl = strlen(base);
    if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".step", 5) != 0)
        return -1;
    const char *d = name + bl + 5;
    if (!*d || strlen(d) > 18)
        return -1;
    long v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9')
            return -1;
        v = v * 10 + (*d - '0');
    }
    return v;
}

static int cmp_long_desc(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

zb_status_t zb_ckpt_rotate(const char *path, long step, int keep, zb_err_t *err)
{
    if (keep < 1)
        return ZB_OK;
    char link_path[4200];
    if (snprintf(link_path, sizeof link_path, "%s.step%06ld", path, step) >= (int)sizeof link_path)
        return zb_err_set(err, ZB_EINVAL, "--keep-last: path too long: %.64s...", path);
    /* through a symlink to the file it names: linking the link itself would make every kept
     * step point at whatever PATH names later; a device or FIFO has no copy to keep */
    struct stat sb;
    if (stat(path, &sb) != 0)
        return zb_err_set(err, ZB_EIO, "--keep-last: cannot read %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return zb_err_set(err, ZB_EINVAL, "--keep-last: %s is not a regular file", path);
    if (remove(link_path) != 0 && errno != ENOENT) /* a file of an earlier run at this step */
        return zb_err_set(err, ZB_EIO, "--keep-last: cannot replace %s: %s", link_path,
                          strerror(errno));
    if (linkat(AT_FDCWD, path, AT_FDCWD, link_path, AT_SYMLINK_FOLLOW) != 0) {
        zb_status_t st = copy_file(path, link_path, err);
        if (st != ZB_OK)
            return st;
    }
    /* the directory and base name of path */
    char dir[4200];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path + 1), path);
    else
        dir[0] = '\0';
    DIR *d = opendir(dir[0] ? dir : ".");
    if (!d)
        return zb_err_set(err, ZB_EIO, "--keep-last: cannot list %s: %s", dir[0] ? dir : ".",
                          strerror(errno));
    long *steps = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    zb_status_t st = ZB_OK;
    while ((e = readdir(d)) != NULL) {
        long s = step_of(e->d_name, base);
        if (s < 0 || s == step) /* the one just written is never removed */
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            long *grown = realloc(steps, cap * sizeof *grown);
            if (!grown) {
                st = zb_err_set(err, ZB_ENOMEM, "out of memory listing checkpoints");
                break;
            }
            steps = grown;
        }
        steps[n++] = s;
    }
    closedir(d);
    if (st == ZB_OK) {
        if (n > 0)
            qsort(steps, n, sizeof *steps, cmp_long_desc);
        /* keep-1 others (the newest by step) beside the one just written */
        for (size_t i = (size_t)keep - 1; i < n; i++) {
            char old[8500];
            if (snprintf(old, sizeof old, "%s%s.step%06ld", dir, base, steps[i]) >=
                (int)sizeof old)
                continue;
            if (remove(old) != 0 && errno != ENOENT) {
                st = zb_err_set(err, ZB_EIO, "--keep-last: cannot remove %s: %s", old,
                                strerror(errno));
                break;
            }
        }
    }
    free(steps);
    return st;
}
