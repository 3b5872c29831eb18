#define _GNU_SOURCE /* flock, realpath */
#include "zbpp/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

zb_status_t zb_open_regular(const char *path, const char *what, int *fd, zb_err_t *err)
{
    *fd = -1;
    const char *w = what ? what : "", *sp = what ? " " : "";
    /* O_NONBLOCK: opening a FIFO (or some devices) must not wait for a writer */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0)
        return zb_err_set(err, ZB_EIO, "cannot open %s%s%s: %s", w, sp, path, strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
        int saved = errno;
        close(f);
        return zb_err_set(err, ZB_EIO, "%s%s%s is not a regular file (%s)", w, sp, path,
                          S_ISREG(st.st_mode) ? strerror(saved) : file_kind(st.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags >= 0)
        (void)fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
    *fd = f;
    return ZB_OK;
}

zb_status_t zb_fopen_regular(const char *path, const char *what, FILE **out, zb_err_t *err)
{
    *out = NULL;
    int fd;
    zb_status_t st = zb_open_regular(path, what, &fd, err);
    if (st != ZB_OK)
        return st;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return zb_err_set(err, ZB_ENOMEM, "out of memory opening %s", path);
    }
    *out = f;
    return ZB_OK;
}

/* True if `s` is ".tmp." followed by one or more digits and nothing else. */
static int is_tmp_suffix(const char *s)
{
    if (strncmp(s, ".tmp.", 5) != 0 || !s[5])
        return 0;
    for (s += 5; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

int zb_remove_stale_temps(const char *dir, const char *prefix,
                          int (*keep)(const char *name, void *ctx), void *ctx)
{
    DIR *d = opendir(dir && *dir ? dir : ".");
    if (!d)
        return 0;
    size_t plen = strlen(prefix);
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strncmp(name, prefix, plen) != 0)
            continue;
        /* the last ".tmp." must start a ".tmp.<digits>" ending (it may overlap the prefix) */
        const char *t = NULL;
        for (const char *q = strstr(name, ".tmp."); q; q = strstr(q + 1, ".tmp."))
            t = q;
        if (!t || !is_tmp_suffix(t) || (size_t)(t - name) + 5 < plen || (keep && keep(name, ctx)))
            continue;
        char full[4400];
        snprintf(full, sizeof full, "%s%s", dir ? dir : "", name);
        /* a live writer holds an exclusive flock on its temp file: leave those alone */
        int fd = open(full, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            unlink(full) == 0)
            removed++;
        close(fd); /* drops our lock */
    }
    closedir(d);
    return removed;
}

/* Directory part of `path` with a trailing '/', "" for the current directory. */
static void dir_of(const char *path, char *dir, size_t cap, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        dir[0] = '\0';
        *base = path;
        return;
    }
    snprintf(dir, cap, "%.*s", (int)(slash - path + 1), path);
    *base = slash + 1;
}

/* zb_remove_stale_temps veto: keep anything but exactly "<prefix><digits>". */
static int only_digits_after(const char *name, void *prefix)
{
    const char *p = name + strlen(prefix);
    if (!*p)
        return 1;
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return 1;
    return 0;
}

/* `path` itself, or for a symlink the file it points to (written through, the link kept: renaming
 * over the link would replace the link). A dangling link is refused, naming its target. */
static zb_status_t resolve_link(const char *path, const char *prefix, char *out, size_t cap,
                                zb_err_t *err)
{
    snprintf(out, cap, "%s", path);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode))
        return ZB_OK;
    char resolved[PATH_MAX];
    if (!realpath(path, resolved)) {
        int saved = errno;
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        if (saved == ENOENT)
            return zb_err_set(err, ZB_EIO, "%s%s: it is a symlink to a missing file (%s)", prefix,
                              path, n > 0 ? target : "?");
        return zb_err_set(err, ZB_EIO, "%s%s: it is a symlink to %s (%s)", prefix, path,
                          n > 0 ? target : "?", strerror(saved));
    }
    if (strlen(resolved) >= cap)
        return zb_err_set(err, ZB_EINVAL, "path too long: %.64s...", resolved);
    snprintf(out, cap, "%s", resolved);
    return ZB_OK;
}

/* Open a character device or FIFO for writing in place (no temp file, no rename). */
static zb_status_t open_in_place(zb_atomic_file_t *af, const char *shown, zb_err_t *err)
{
    int fd = open(af->path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENXIO)
            return zb_err_set(err, ZB_EIO, "cannot write %s: it is a FIFO and nothing reads it",
                              shown);
        return zb_err_set(err, ZB_EIO, "cannot write %s: %s", shown, strerror(errno));
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        close(fd);
        return zb_err_set(err, ZB_ENOMEM, "out of memory opening %s", shown);
    }
    af->tmp_path[0] = '\0';
    return ZB_OK;
}

zb_status_t zb_atomic_open(zb_atomic_file_t *af, const char *path, zb_err_t *err)
{
    af->f = NULL;
    af->tmp_path[0] = '\0';
    if (strlen(path) >= sizeof af->path)
        return zb_err_set(err, ZB_EINVAL, "path too long: %.64s...", path);
    zb_status_t rs = resolve_link(path, "cannot write ", af->path, sizeof af->path, err);
    if (rs != ZB_OK)
        return rs;
    struct stat st;
    if (stat(af->path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
            return open_in_place(af, path, err);
        return zb_err_set(err, ZB_EIO, "cannot write %s: it is %s, not a regular file", path,
                          file_kind(st.st_mode));
    }
    bool replacing = stat(af->path, &st) == 0; /* a regular file (others returned above) */
    snprintf(af->tmp_path, sizeof af->tmp_path, "%s.tmp.%ld", af->path, (long)getpid());
    int fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) { /* marks it live for zb_remove_stale_temps */
        close(fd);
        fd = -1;
    }
    /* the new file takes the permissions of the one it replaces (not the umask's default) */
    if (fd >= 0 && replacing)
        (void)fchmod(fd, st.st_mode & 07777);
    af->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!af->f) {
        int saved = errno;
        if (fd >= 0) {
            close(fd);
            remove(af->tmp_path);
        }
        return zb_err_set(err, ZB_EIO, "cannot write %s: %s", path, strerror(saved));
    }
    /* temp files of earlier writers of this path that were killed (kill -9, power loss) */
    char dir[4096], prefix[4200];
    const char *base;
    dir_of(af->path, dir, sizeof dir, &base);
    snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    zb_remove_stale_temps(dir, prefix, only_digits_after, prefix);
    return ZB_OK;
}

zb_status_t zb_atomic_check(const char *path, int *held_fd, zb_err_t *err)
{
    if (held_fd)
        *held_fd = -1;
    struct stat st;
    if (!*path || path[strlen(path) - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
        return zb_err_set(err, ZB_EIO, "%s: is a directory, not a file", path);
    char real[4096];
    zb_status_t rs = resolve_link(path, "", real, sizeof real, err);
    if (rs != ZB_OK)
        return rs;
    if (stat(real, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
            return zb_err_set(err, ZB_EIO, "%s: is %s, not a regular file", path,
                              file_kind(st.st_mode));
        /* written in place: it must open now, without waiting (a FIFO needs its reader) */
        int fd = open(real, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno == ENXIO)
            return zb_err_set(err, ZB_EIO, "%s: is a FIFO and nothing reads it", path);
        if (fd < 0)
            return zb_err_set(err, ZB_EIO, "%s: cannot write: %s", path, strerror(errno));
        if (held_fd && S_ISFIFO(st.st_mode))
            *held_fd = fd;
        else
            close(fd);
        return ZB_OK;
    }
    /* a new file or a replaced one: made in the directory, then renamed */
    char dir[4096];
    const char *slash = strrchr(real, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == real)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - real), real);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return zb_err_set(err, ZB_EIO, "%s: directory %s does not exist", path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return zb_err_set(err, ZB_EIO, "%s: directory %s is not writable", path, dir);
    return ZB_OK;
}

static void fsync_parent_dir(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    int fd = open(dirname(buf), O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

zb_status_t zb_atomic_commit(zb_atomic_file_t *af, zb_err_t *err)
{
    if (!af->f)
        return zb_err_set(err, ZB_EIO, "cannot write %s: not open", af->path);
    if (!af->tmp_path[0]) { /* in place (a device or FIFO): nothing to sync or rename */
        int bad = fflush(af->f) != 0 || ferror(af->f);
        int saved = errno;
        bad |= fclose(af->f) != 0;
        af->f = NULL;
        if (bad)
            return zb_err_set(err, ZB_EIO, "cannot write %s: %s", af->path, strerror(saved));
        return ZB_OK;
    }
    int bad = fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0;
    int saved = errno;
    if (bad) {
        fclose(af->f);
        af->f = NULL;
        remove(af->tmp_path);
        return zb_err_set(err, ZB_EIO, "cannot write %s: %s", af->path, strerror(saved));
    }
    /* rename while the lock is still held, so a cleaner never sees it unlocked */
    if (rename(af->tmp_path, af->path) != 0) {
        saved = errno;
        fclose(af->f);
        af->f = NULL;
        remove(af->tmp_path);
        return zb_err_set(err, ZB_EIO, "cannot replace %s: %s", af->path, strerror(saved));
    }
    bad = fclose(af->f) != 0;
    af->f = NULL;
    if (bad)
        return zb_err_set(err, ZB_EIO, "cannot write %s: %s", af->path, strerror(errno));
    fsync_parent_dir(af->path);
    return ZB_OK;
}

void zb_atomic_abort(zb_atomic_file_t *af)
{
    if (af->f) {
        fclose(af->f);
        af->f = NULL;
    }
    if (af->tmp_path[0])
        remove(af->tmp_path);
}

zb_status_t zb_read_file(const char *path, size_t max_bytes, char **data, size_t *len,
                         zb_err_t *err)
{
    *data = NULL;
    *len = 0;
    FILE *f;
    zb_status_t st = zb_fopen_regular(path, NULL, &f, err);
    if (st != ZB_OK)
        return st;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        fclose(f);
        return zb_err_set(err, ZB_EIO, "cannot read %s: %s", path, strerror(errno));
    }
    if ((size_t)sb.st_size > max_bytes) {
        fclose(f);
        return zb_err_set(err, ZB_EFORMAT, "%s is too large (%lld bytes, limit %zu)", path,
                          (long long)sb.st_size, max_bytes);
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    if (!buf) {
        fclose(f);
        return zb_err_set(err, ZB_ENOMEM, "out of memory reading %s", path);
    }
    size_t n = fread(buf, 1, (size_t)sb.st_size, f);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return zb_err_set(err, ZB_EIO, "cannot read %s", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return ZB_OK;
}
