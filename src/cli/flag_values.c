/* zbpp CLI — the value parsers of the training flags (train, pipeline, device; see args.h).
 * Each checks the whole word and says in one line what the flag expects:
 * "--steps expects an integer in [0, 4611686018427387903], got 'x'". */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"

static zb_status_t expects(zb_err_t *err, const char *flag, const char *what, const char *s)
{
    return zb_err_set(err, ZB_EINVAL, "%s expects %s, got '%s'", flag, what, s ? s : "");
}

/* strtol over the whole word (no sign check): false when it is not one integer. */
static bool whole_long(const char *s, long *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    *out = strtol(s, &end, 10);
    return !errno && end != s && *end == '\0';
}

zb_status_t zb_cli_flag_long(const char *s, long lo, long hi, const char *flag, long *out,
                             zb_err_t *err)
{
    long v = 0;
    if (!whole_long(s, &v) || v < lo || v > hi) {
        char what[80];
        snprintf(what, sizeof what, "an integer in [%ld, %ld]", lo, hi);
        return expects(err, flag, what, s);
    }
    *out = v;
    return ZB_OK;
}

zb_status_t zb_cli_flag_int(const char *s, int lo, int hi, const char *flag, int *out,
                            zb_err_t *err)
{
    long v = 0;
    zb_status_t st = zb_cli_flag_long(s, lo, hi, flag, &v, err);
    if (st == ZB_OK)
        *out = (int)v;
    return st;
}

zb_status_t zb_cli_flag_count(const char *s, int hi, const char *flag, int *out, zb_err_t *err)
{
    long v = 0;
    if (!whole_long(s, &v) || v < 1 || v > hi)
        return expects(err, flag, "a positive integer", s);
    *out = (int)v;
    return ZB_OK;
}

zb_status_t zb_cli_flag_float(const char *s, float lo, const char *flag, float *out,
                              zb_err_t *err)
{
    char *end = NULL;
    errno = 0;
    float v = s && *s ? strtof(s, &end) : NAN;
    if (!s || errno || end == s || *end != '\0' || !isfinite(v) || v < lo) {
        char what[48];
        snprintf(what, sizeof what, "a number >= %g", lo);
        return expects(err, flag, what, s);
    }
    *out = v;
    return ZB_OK;
}

zb_status_t zb_cli_flag_positive(const char *s, const char *flag, double *out, zb_err_t *err)
{
    char *end = NULL;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : NAN;
    if (!s || errno || end == s || *end != '\0' || !(v > 0) || !isfinite(v))
        return expects(err, flag, "a positive number", s);
    *out = v;
    return ZB_OK;
}

zb_status_t zb_cli_flag_u64(const char *s, const char *flag, uint64_t *out, zb_err_t *err)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = s && *s && s[0] != '-' ? strtoull(s, &end, 10) : 0;
    if (!s || !end || errno || end == s || *end != '\0')
        return expects(err, flag, "a non-negative integer", s);
    *out = v;
    return ZB_OK;
}

zb_status_t zb_cli_flag_choice(const char *s, const char *const names[], const char *flag,
                               int *out, zb_err_t *err)
{
    int n = 0;
    for (; names[n]; n++)
        if (s && !strcmp(s, names[n])) {
            *out = n;
            return ZB_OK;
        }
    char what[160] = "";
    size_t used = 0;
    for (int i = 0; i < n && used < sizeof what; i++)
        used += (size_t)snprintf(what + used, sizeof what - used, "%s%s",
                                 i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
    return expects(err, flag, what, s);
}
