/* One temporary directory for a test program's files (header-only; include it once per test).
 * test_dir_make: a fresh directory $TMPDIR/zbpp_test_<name>_XXXXXX (/tmp without TMPDIR) into
 * test_dir; test_dir_remove: it and everything under it; test_path: test_dir/name into buf.
 * Both return 0 or -1, as cmocka's setup and teardown functions do. */
#ifndef ZBPP_TEMPDIR_TESTUTIL_H
#define ZBPP_TEMPDIR_TESTUTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char test_dir[128];

static inline int test_dir_make(const char *name)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(test_dir, sizeof test_dir, "%s/zbpp_test_%s_XXXXXX", tmp && *tmp ? tmp : "/tmp",
             name);
    return mkdtemp(test_dir) ? 0 : -1;
}

/* path and everything under it (links are removed, never followed) */
static inline int test_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[1024];
        size_t lp = strlen(path), ln = strlen(e->d_name);
        if (lp + 1 + ln >= sizeof sub) {
            rc = -1;
            continue;
        }
        memcpy(sub, path, lp);
        sub[lp] = '/';
        memcpy(sub + lp + 1, e->d_name, ln + 1);
        rc |= test_remove_tree(sub);
    }
    closedir(d);
    return rmdir(path) == 0 && rc == 0 ? 0 : -1;
}

static inline int test_dir_remove(void) { return test_dir[0] ? test_remove_tree(test_dir) : 0; }

static inline const char *test_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", test_dir, name);
    return buf;
}

#endif
