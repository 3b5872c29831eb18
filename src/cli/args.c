/* zbpp CLI — strict argument parsing helpers (see args.h). */
#include "cli/args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

void zb_cli_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line, whatever the message contains. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "zbpp %s: %s\n", cmd, msg);
}

int zb_cli_bad_option(const char *cmd, int c, char **argv)
{
    extern int optind, optopt;
    /* glibc: optopt is the short option character, or a long option's `val` (not a char). */
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    bool short_opt = optopt > 0 && optopt < 128 && isprint(optopt) && strncmp(arg, "--", 2) != 0;
    if (c == ':') {
        if (short_opt)
            zb_cli_error(cmd, "option -%c needs a value (see zbpp %s --help)", optopt, cmd);
        else
            zb_cli_error(cmd, "option %s needs a value (see zbpp %s --help)", arg, cmd);
    } else if (short_opt) {
        zb_cli_error(cmd, "unknown option -%c (see zbpp %s --help)", optopt, cmd);
    } else {
        zb_cli_error(cmd, "unknown option %s%s (see zbpp %s --help)", arg,
                     optopt && strchr(arg, '=') ? " (it takes no value)" : "", cmd);
    }
    return ZB_EXIT_USAGE;
}

int zb_cli_exit_code(zb_status_t st)
{
    if (st == ZB_OK)
        return ZB_EXIT_OK;
    if (st == ZB_EINVAL || st == ZB_EMISMATCH)
        return ZB_EXIT_USAGE;
    return ZB_EXIT_FAIL;
}

int zb_cli_bad_value(const char *cmd, zb_status_t st, const zb_err_t *err)
{
    zb_cli_error(cmd, "%s", err->msg);
    return st == ZB_EIO ? ZB_EXIT_FAIL : ZB_EXIT_USAGE;
}

bool zb_cli_no_operands(const char *cmd, int argc, char **argv, int first)
{
    if (first >= argc)
        return true;
    zb_cli_error(cmd, "unexpected argument '%s' (see zbpp %s --help)", argv[first], cmd);
    return false;
}

const char *zb_cli_one_file(const char *cmd, int argc, char **argv, int first)
{
    if (argc - first == 1)
        return argv[first];
    if (argc <= first)
        zb_cli_error(cmd, "missing FILE.csv (see zbpp %s --help)", cmd);
    else
        zb_cli_error(cmd, "expected one FILE.csv, got %d arguments", argc - first);
    return NULL;
}

/* strtod that must consume the whole string (leading/trailing blanks refused too) and give a
 * finite value. Rejects "inf", "nan", "1e999", "", "1x". */
static bool parse_finite(const char *s, double *out)
{
    if (!s || !*s || *s == ' ' || *s == '\t')
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
        return false;
    *out = v;
    return true;
}

zb_status_t zb_cli_parse_number(const char *s, bool nonneg, const char *what, double *out,
                                zb_err_t *err)
{
    double v;
    if (!parse_finite(s, &v))
        return zb_err_set(err, ZB_EINVAL, "%s: '%s' is not a finite number", what, s ? s : "");
    if (nonneg && v < 0)
        return zb_err_set(err, ZB_EINVAL, "%s: '%s' is negative", what, s);
    *out = v == 0 ? 0 : v; /* no -0 in outputs */
    return ZB_OK;
}

zb_status_t zb_cli_parse_int(const char *s, int lo, int hi, const char *what, int *out,
                             zb_err_t *err)
{
    if (!s || !*s)
        return zb_err_set(err, ZB_EINVAL, "%s: empty value, need an integer in %d..%d", what, lo,
                          hi);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || *s == ' ' || *s == '\t')
        return zb_err_set(err, ZB_EINVAL, "%s: '%s' is not an integer", what, s);
    if (errno == ERANGE || v < lo || v > hi)
        return zb_err_set(err, ZB_EINVAL, "%s: %s is out of range %d..%d", what, s, lo, hi);
    *out = (int)v;
    return ZB_OK;
}

zb_status_t zb_cli_parse_list(const char *s, int min_n, int max_n, bool nonneg, const char *what,
                              double *out, int *n, zb_err_t *err)
{
    char buf[256];
    if (!s || strlen(s) >= sizeof buf)
        return zb_err_set(err, ZB_EINVAL, "%s: value missing or too long", what);
    snprintf(buf, sizeof buf, "%s", s);
    int k = 0;
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (k == max_n)
            return zb_err_set(err, ZB_EINVAL, "%s: '%s' has more than %d values", what, s, max_n);
        double v;
        if (!parse_finite(p, &v))
            return zb_err_set(err, ZB_EINVAL, "%s: value %d '%s' of '%s' is not a finite number",
                              what, k + 1, p, s);
        if (nonneg && v < 0)
            return zb_err_set(err, ZB_EINVAL, "%s: value %d of '%s' is negative", what, k + 1, s);
        out[k++] = v == 0 ? 0 : v;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (k < min_n)
        return zb_err_set(err, ZB_EINVAL, "%s: '%s' has %d value%s, need %d%s", what, s, k,
                          k == 1 ? "" : "s", min_n, max_n > min_n ? " or more" : "");
    *n = k;
    return ZB_OK;
}

static const char *const format_names[] = {"ascii", "csv", "csv-comms", "json", "trace", "svg"};

zb_status_t zb_cli_parse_format(const char *s, zb_cli_format_t *out, zb_err_t *err)
{
    for (size_t i = 0; i < sizeof format_names / sizeof format_names[0]; i++)
        if (s && !strcmp(s, format_names[i])) {
            *out = (zb_cli_format_t)i;
            return ZB_OK;
        }
    return zb_err_set(err, ZB_EINVAL, "--format: unknown format '%s' (known: %s)", s ? s : "",
                      zb_cli_format_names());
}

const char *zb_cli_format_names(void) { return "ascii, csv, csv-comms, json, trace, svg"; }

/* ---- output ---- */

zb_status_t zb_cli_out_open(zb_cli_out_t *o, const char *path, zb_err_t *err)
{
    memset(o, 0, sizeof *o);
    if (!path || !strcmp(path, "-")) {
        o->f = stdout;
        return ZB_OK;
    }
    if (!*path)
        return zb_err_set(err, ZB_EINVAL, "-o: empty file name");
    zb_status_t st = zb_atomic_open(&o->af, path, err);
    if (st != ZB_OK)
        return st;
    o->atomic = true;
    o->f = o->af.f;
    return ZB_OK;
}

zb_status_t zb_cli_out_commit(zb_cli_out_t *o, zb_err_t *err)
{
    if (o->atomic) {
        o->f = NULL;
        o->atomic = false;
        return zb_atomic_commit(&o->af, err);
    }
    if (o->f && (fflush(o->f) != 0 || ferror(o->f)))
        return zb_err_set(err, ZB_EIO, "cannot write to standard output");
    return ZB_OK;
}

void zb_cli_out_abort(zb_cli_out_t *o)
{
    if (o->atomic)
        zb_atomic_abort(&o->af);
    o->atomic = false;
    o->f = NULL;
}

/* ---- costs ---- */

void zb_cli_costs_init(zb_cli_costs_t *c)
{
    memset(c, 0, sizeof *c);
    c->t[0] = c->t[1] = c->t[2] = 1;
    c->t[3] = 0;
    c->mem[0] = 1;
    c->mem[1] = 0;
    c->mem[2] = -1;
    c->mem_limit = INFINITY;
    c->recompute = ZB_RECOMPUTE_NONE;
    c->r_time = NAN;
    c->offload = ZB_OFFLOAD_NONE;
    c->stash_bytes = NAN;
}

bool zb_cli_is_offload_option(int opt)
{
    return opt == ZB_OPT_OFFLOAD || opt == ZB_OPT_STASH_BYTES || opt == ZB_OPT_COPY_BW ||
           opt == ZB_OPT_COPY_LATENCY;
}

bool zb_cli_is_costs_option(int opt)
{
    switch (opt) {
    case ZB_OPT_COST:
    case ZB_OPT_COST_FILE:
    case ZB_OPT_MEM:
    case ZB_OPT_MEM_LIMIT:
    case ZB_OPT_MEM_LIMIT_RANKS:
    case ZB_OPT_RECOMPUTE:
    case ZB_OPT_MEM_RECOMPUTE:
    case ZB_OPT_RECOMPUTE_TIME: return true;
    default: return zb_cli_is_offload_option(opt);
    }
}

/* --offload, --stash-bytes, --copy-bw D2H[,H2D] (one value: both ways), --copy-latency. */
static zb_status_t offload_option(zb_cli_costs_t *c, int opt, const char *arg, zb_err_t *err)
{
    double v[2] = {0, 0};
    int n = 0;
    zb_status_t st;
    switch (opt) {
    case ZB_OPT_OFFLOAD: return zb_offload_parse(arg, &c->offload, err);
    case ZB_OPT_STASH_BYTES:
        st = zb_cli_parse_number(arg, true, "--stash-bytes", &c->stash_bytes, err);
        if (st == ZB_OK && c->stash_bytes > ZB_COST_MAX)
            st = zb_err_set(err, ZB_EINVAL, "--stash-bytes: %s is above %g", arg, ZB_COST_MAX);
        return st;
    case ZB_OPT_COPY_BW:
        if ((st = zb_cli_parse_list(arg, 1, 2, true, "--copy-bw", v, &n, err)) != ZB_OK)
            return st;
        c->copy_bw[0] = v[0];
        c->copy_bw[1] = n == 2 ? v[1] : v[0];
        if (c->copy_bw[0] > ZB_COST_MAX || c->copy_bw[1] > ZB_COST_MAX)
            return zb_err_set(err, ZB_EINVAL, "--copy-bw: %s is above %g", arg, ZB_COST_MAX);
        return ZB_OK;
    default:
        st = zb_cli_parse_number(arg, true, "--copy-latency", &c->copy_latency, err);
        if (st == ZB_OK && c->copy_latency > ZB_COST_MAX)
            st = zb_err_set(err, ZB_EINVAL, "--copy-latency: %s is above %g", arg, ZB_COST_MAX);
        return st;
    }
}

void zb_cli_costs_free(zb_cli_costs_t *c)
{
    free(c->rank_limits);
    c->rank_limits = NULL;
    c->n_rank_limits = 0;
    free(c->file_t);
    c->file_t = NULL;
    c->file_stages = 0;
}

/* Parse a cost file held in `text` (NUL-terminated). */
static zb_status_t parse_cost_file(zb_cli_costs_t *c, const char *path, char *text, zb_err_t *err)
{
    enum { MAX_STAGES = 1 << 16 };
    int cap = 0, max_stage = -1;
    double *rows = NULL; /* indexed by stage, 4 values each; NAN = not given yet */
    int line = 0;
    zb_status_t st = ZB_OK;
    for (char *p = text, *next; p && *p; p = next) {
        line++;
        char *nl = strchr(p, '\n');
        next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        size_t n = strlen(p);
        if (n && p[n - 1] == '\r')
            p[--n] = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#' || !strncasecmp(p, "stage", 5))
            continue; /* blank, comment, header */
        double v[5];
        int k = 0;
        char what[64];
        snprintf(what, sizeof what, "--cost-file %.20s line %d", path, line);
        if ((st = zb_cli_parse_list(p, 4, 5, true, what, v, &k, err)) != ZB_OK)
            goto fail;
        if (v[0] != floor(v[0]) || v[0] >= MAX_STAGES) {
            st = zb_err_set(err, ZB_EINVAL, "%s: stage %g is not an integer below %d", what, v[0],
                            MAX_STAGES);
            goto fail;
        }
        for (int i = 1; i < k; i++)
            if (v[i] > ZB_COST_MAX) {
                st = zb_err_set(err, ZB_EINVAL, "%s: %g is too large (times are at most %g)",
                                what, v[i], ZB_COST_MAX);
                goto fail;
            }
        int s = (int)v[0];
        if (s >= cap) {
            int ncap = cap ? cap : 16;
            while (ncap <= s)
                ncap *= 2;
            double *nr = realloc(rows, (size_t)ncap * 4 * sizeof *nr);
            if (!nr) {
                st = zb_err_set(err, ZB_ENOMEM, "--cost-file: out of memory");
                goto fail;
            }
            for (size_t i = (size_t)cap * 4; i < (size_t)ncap * 4; i++)
                nr[i] = NAN;
            rows = nr;
            cap = ncap;
        }
        if (!isnan(rows[s * 4])) {
            st = zb_err_set(err, ZB_EINVAL, "%s: stage %d given twice", what, s);
            goto fail;
        }
        rows[s * 4 + 0] = v[1];
        rows[s * 4 + 1] = v[2];
        rows[s * 4 + 2] = v[3];
        rows[s * 4 + 3] = k == 5 ? v[4] : 0;
        if (s > max_stage)
            max_stage = s;
    }
    if (max_stage < 0) {
        st = zb_err_set(err, ZB_EINVAL, "--cost-file %s: no stage rows", path);
        goto fail;
    }
    for (int s = 0; s <= max_stage; s++)
        if (isnan(rows[s * 4])) {
            st = zb_err_set(err, ZB_EINVAL, "--cost-file %s: stage %d missing (stages 0..%d "
                                            "needed)", path, s, max_stage);
            goto fail;
        }
    free(c->file_t);
    c->file_t = rows;
    c->file_stages = max_stage + 1;
    return ZB_OK;
fail:
    free(rows);
    return st;
}

/* --mem-limit-ranks A,B,...: one limit per rank, each a number >= 0 or "inf" (no limit). */
static zb_status_t parse_rank_limits(zb_cli_costs_t *c, const char *arg, zb_err_t *err)
{
    enum { MAX_LIMITS = 4096 }; /* the generators' largest P */
    const char *what = "--mem-limit-ranks";
    if (!arg || !*arg)
        return zb_err_set(err, ZB_EINVAL, "%s: empty value, need one limit per rank", what);
    double *lim = malloc(sizeof(double) * MAX_LIMITS);
    char *copy = strdup(arg);
    zb_status_t st = ZB_OK;
    int n = 0;
    if (!lim || !copy) {
        st = zb_err_set(err, ZB_ENOMEM, "%s: out of memory", what);
        goto done;
    }
    for (char *p = copy;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (n == MAX_LIMITS) {
            st = zb_err_set(err, ZB_EINVAL, "%s: more than %d values", what, MAX_LIMITS);
            goto done;
        }
        char name[48];
        snprintf(name, sizeof name, "%s (rank %d)", what, n);
        if (!strcmp(p, "inf"))
            lim[n] = INFINITY;
        else if ((st = zb_cli_parse_number(p, true, name, &lim[n], err)) != ZB_OK)
            goto done;
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    free(c->rank_limits);
    c->rank_limits = lim;
    c->n_rank_limits = n;
    lim = NULL;
done:
    free(lim);
    free(copy);
    return st;
}

zb_status_t zb_cli_costs_option(zb_cli_costs_t *c, int opt, const char *arg, zb_err_t *err)
{
    int n = 0;
    double v[4];
    zb_status_t st;
    switch (opt) {
    case ZB_OPT_COST:
        if (c->cost_file)
            return zb_err_set(err, ZB_EINVAL, "--cost and --cost-file cannot be used together");
        if ((st = zb_cli_parse_list(arg, 3, 4, true, "--cost", v, &n, err)) != ZB_OK)
            return st;
        for (int i = 0; i < 4; i++)
            c->t[i] = i < n ? v[i] : 0;
        c->cost_given = true;
        return ZB_OK;
    case ZB_OPT_MEM:
        if ((st = zb_cli_parse_list(arg, 3, 3, false, "--mem", v, &n, err)) != ZB_OK)
            return st;
        /* Same tolerance as zb_costs_init_uniform, checked here for a clearer message. */
        double sum = v[0] + v[1] + v[2];
        double scale = fabs(v[0]) + fabs(v[1]) + fabs(v[2]);
        if (fabs(sum) > 1e-9 * (scale > 1 ? scale : 1))
            return zb_err_set(err, ZB_EINVAL, "--mem: deltas %s sum to %g, they must sum to 0 "
                                              "(what F holds, B and W release)", arg, sum);
        memcpy(c->mem, v, sizeof c->mem);
        return ZB_OK;
    case ZB_OPT_MEM_LIMIT:
        return zb_cli_parse_number(arg, true, "--mem-limit", &c->mem_limit, err);
    case ZB_OPT_MEM_LIMIT_RANKS:
        return parse_rank_limits(c, arg, err);
    case ZB_OPT_COST_FILE: {
        if (c->cost_given)
            return zb_err_set(err, ZB_EINVAL, "--cost and --cost-file cannot be used together");
        char *text;
        size_t len;
        if ((st = zb_read_file(arg, 16u << 20, &text, &len, err)) != ZB_OK)
            return st;
        if (memchr(text, '\0', len)) {
            free(text);
            return zb_err_set(err, ZB_EINVAL, "--cost-file %s: binary data (NUL byte)", arg);
        }
        c->cost_file = arg;
        st = parse_cost_file(c, arg, text, err);
        free(text);
        return st;
    }
    case ZB_OPT_OFFLOAD:
    case ZB_OPT_STASH_BYTES:
    case ZB_OPT_COPY_BW:
    case ZB_OPT_COPY_LATENCY: return offload_option(c, opt, arg, err);
    case ZB_OPT_RECOMPUTE:
        return zb_recompute_parse(arg, &c->recompute, err); /* names the flag */
    case ZB_OPT_MEM_RECOMPUTE:
        c->recompute_given = true;
        return zb_cli_parse_number(arg, true, "--mem-recompute", &c->mem_keep, err);
    case ZB_OPT_RECOMPUTE_TIME:
        c->recompute_given = true;
        if ((st = zb_cli_parse_number(arg, true, "--recompute-time", &c->r_time, err)) != ZB_OK)
            return st;
        if (c->r_time > ZB_COST_MAX)
            return zb_err_set(err, ZB_EINVAL, "--recompute-time: %s is above %g", arg,
                              ZB_COST_MAX);
        return ZB_OK;
    default:
        return zb_err_set(err, ZB_EINVAL, "internal: option %d is not a cost option", opt);
    }
}

zb_status_t zb_cli_costs_build(const zb_cli_costs_t *c, int stages, int chunks, zb_costs_t *out,
                               zb_err_t *err)
{
    if (c->file_stages && c->file_stages != stages)
        return zb_err_set(err, ZB_EINVAL, "--cost-file %s has %d stages, the schedule has %d",
                          c->cost_file, c->file_stages, stages);
    if (chunks < 1)
        return zb_err_set(err, ZB_EINVAL, "internal: %d chunks per rank", chunks);
    /* --cost, --mem and the recompute costs describe one rank's share of the model: each of
     * its `chunks` stages gets that share divided by the chunks (comm and the limit stay) */
    const double v = chunks;
    zb_status_t st = zb_costs_init_uniform(out, stages, c->t[0] / v, c->t[1] / v, c->t[2] / v,
                                           c->t[3], c->mem[0] / v, c->mem[1] / v, c->mem[2] / v,
                                           err);
    if (st != ZB_OK)
        return st;
    for (int s = 0; s < c->file_stages; s++) {
        out->t_f[s] = c->file_t[s * 4 + 0];
        out->t_b[s] = c->file_t[s * 4 + 1];
        out->t_w[s] = c->file_t[s * 4 + 2];
        out->comm[s] = c->file_t[s * 4 + 3];
    }
    out->mem_limit = c->mem_limit;
    if (c->n_rank_limits) {
        const int ranks = stages / chunks;
        if (c->n_rank_limits != ranks) {
            zb_costs_free(out);
            return zb_err_set(err, ZB_EINVAL,
                              "--mem-limit-ranks: %d limit%s given, the schedule has %d rank%s "
                              "(one limit per rank)",
                              c->n_rank_limits, c->n_rank_limits == 1 ? "" : "s", ranks,
                              ranks == 1 ? "" : "s");
        }
        if ((st = zb_costs_set_rank_limits(out, ranks, c->rank_limits, err)) != ZB_OK) {
            zb_costs_free(out);
            return st;
        }
    }
    /* the stash bytes are one rank's share too; bandwidths and latency are the rank's */
    st = zb_costs_set_offload(out, isnan(c->stash_bytes) ? -1 : c->stash_bytes / v,
                              c->copy_bw[0], c->copy_bw[1], c->copy_latency, err);
    if (st != ZB_OK) {
        zb_costs_free(out);
        return st;
    }
    if (c->recompute == ZB_RECOMPUTE_NONE && !c->recompute_given)
        return ZB_OK;
    if (c->mem_keep > c->mem[0]) {
        zb_costs_free(out);
        return zb_err_set(err, ZB_EINVAL,
                          "--mem-recompute: %g is more than an F's memory (M_F = %g): a "
                          "non-saving F cannot keep more than a saving one",
                          c->mem_keep, c->mem[0]);
    }
    st = zb_costs_set_recompute(out, 0, c->mem_keep / v, err);
    if (st != ZB_OK) {
        zb_costs_free(out);
        return st;
    }
    for (int s = 0; s < stages; s++)
        out->t_r[s] = isnan(c->r_time) ? out->t_f[s] : c->r_time / v;
    return ZB_OK;
}

void zb_cli_costs_help(FILE *out, bool with_times)
{
    if (with_times)
        fputs("  --cost F,B,W[,C]    time of F, B (input grad) and W (weight grad) of one rank's\n"
              "                      share of the model (all its stages together: a family with\n"
              "                      v chunks per rank gives each chunk 1/v), and C the latency\n"
              "                      of a message between ranks; non-negative (default 1,1,1,0)\n"
              "  --cost-file FILE    per-stage times instead: CSV rows 'stage,F,B,W[,C]' for\n"
              "                      stages 0..S-1, '#' comments and a 'stage,...' header allowed\n",
              out);
    fputs("  --mem F,B,W         memory added by an F, a B and a W of one rank's share (each of\n"
          "                      v chunks adds 1/v); must sum to 0 (a fused BW adds B+W)\n"
          "                      (default 1,0,-1)\n"
          "  --mem-limit X       per-rank limit on the running memory sum, in --mem units\n"
          "                      (default none)\n"
          "  --mem-limit-ranks A,B,...  one limit per rank instead (rank 0 first; 'inf' =\n"
          "                      none); exactly P values\n",
          out);
}

void zb_cli_recompute_help(FILE *out, bool with_mode, bool with_time)
{
    if (with_mode)
        fputs("  --recompute MODE    activation recomputation: none (default), all (an F keeps\n"
              "                      only its input, an R rebuilds the rest right before its\n"
              "                      B, unless the B follows the F directly; any family, or\n"
              "                      a FILE.csv without R's), auto\n"
              "                      (schedule/plan with -s auto: the search picks which stages\n"
              "                      recompute and where each R goes to fit --mem-limit fastest)\n",
              out);
    fputs("  --mem-recompute X   memory a non-saving F keeps, in --mem units (default 0;\n"
          "                      at most M_F); its R adds M_F - X\n",
          out);
    if (with_time)
        fputs("  --recompute-time X  duration of an R in --cost units (default: the F's time)\n",
              out);
}

void zb_cli_offload_help(FILE *out, bool with_mode)
{
    if (with_mode)
        fputs("  --offload MODE      activation offload to host memory: none (default), all\n"
              "                      (every stash leaves after its F, an O, and comes back for\n"
              "                      its B, an L timed not to make the B wait), auto (per\n"
              "                      microbatch and stage: keep, offload or recompute, to fit\n"
              "                      --mem-limit in the least time); not with --recompute\n",
              out);
    fputs("  --stash-bytes X     bytes one rank's F keeps for its B, what an O/L moves\n"
          "                      (default: M_F, the --mem units taken as bytes)\n"
          "  --copy-bw D[,H]     device->host and host->device bandwidth in bytes per --cost\n"
          "                      unit (one value: both; default: a copy takes the F's time)\n"
          "  --copy-latency X    fixed time of each copy, in --cost units (default 0)\n",
          out);
}

void zb_cli_all_costs_help(FILE *out)
{
    zb_cli_costs_help(out, true);
    zb_cli_recompute_help(out, true, true);
    zb_cli_offload_help(out, true);
}

zb_status_t zb_cli_check_writable(const char *flag, const char *path, zb_err_t *err)
{
    /* a FIFO with a reader stays open for writing until the process ends, so the reader
     * does not see end-of-file before the real write */
    int held = -1;
    zb_err_t why;
    zb_err_clear(&why);
    zb_status_t st = zb_atomic_check(path, &held, &why);
    if (st != ZB_OK)
        return zb_err_set(err, st, "%s %s", flag, why.msg);
    return ZB_OK;
}
