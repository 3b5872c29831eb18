#include "zbpp/util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

zb_status_t zb_atomic_open(zb_atomic_file_t *af, const char *path, zb_err_t *err)
{
    af->f = NULL;
    if (strlen(path) >= sizeof af->path)
        return zb_err_set(err, ZB_EINVAL, "path too long: %.64s...", path);
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp_path, sizeof af->tmp_path, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp_path, "wb");
    if (!af->f)
        return zb_err_set(err, ZB_EIO, "cannot write %s: %s", path, strerror(errno));
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
    int bad = fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0;
    int saved = errno;
    bad |= fclose(af->f) != 0;
    af->f = NULL;
    if (bad) {
        remove(af->tmp_path);
        return zb_err_set(err, ZB_EIO, "cannot write %s: %s", af->path, strerror(saved));
    }
    if (rename(af->tmp_path, af->path) != 0) {
        saved = errno;
        remove(af->tmp_path);
        return zb_err_set(err, ZB_EIO, "cannot replace %s: %s", af->path, strerror(saved));
    }
    fsync_parent_dir(af->path);
    return ZB_OK;
}

void zb_atomic_abort(zb_atomic_file_t *af)
{
    if (af->f) {
        fclose(af->f);
        af->f = NULL;
    }
    remove(af->tmp_path);
}

zb_status_t zb_read_file(const char *path, size_t max_bytes, char **data, size_t *len,
                         zb_err_t *err)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return zb_err_set(err, ZB_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return zb_err_set(err, ZB_EIO, "%s is not a regular file", path);
    }
    if ((size_t)st.st_size > max_bytes) {
        fclose(f);
        return zb_err_set(err, ZB_EFORMAT, "%s is too large (%lld bytes, limit %zu)", path,
                          (long long)st.st_size, max_bytes);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        fclose(f);
        return zb_err_set(err, ZB_ENOMEM, "out of memory reading %s", path);
    }
    size_t n = fread(buf, 1, (size_t)st.st_size, f);
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
