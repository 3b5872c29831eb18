/* Reading the training metrics file (JSON lines, docs/training.md) into series for plotting.
 * A deliberately small JSON reader: one flat object per line; nested values are skipped. */
#include "zbpp/svg.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { F_STEP, F_LOSS, F_VAL_LOSS, F_LR, F_TOKS, F_COUNT };
static const char *const field_names[F_COUNT] = {"step", "loss", "val_loss", "lr", "tokens_per_s"};

typedef struct {
    const char *p, *end;
    int line;
    zb_err_t *err;
} reader_t;

static void ws(reader_t *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r'))
        r->p++;
}

static zb_status_t bad(reader_t *r, const char *what)
{
    return zb_err_set(r->err, ZB_EFORMAT, "line %d: %s", r->line, what);
}

/* A string; its raw bytes (escapes kept) in key[0..cap) when key != NULL. */
static zb_status_t string(reader_t *r, char *key, size_t cap)
{
    if (r->p >= r->end || *r->p != '"')
        return bad(r, "expected a string");
    r->p++;
    size_t n = 0;
    while (r->p < r->end && *r->p != '"' && *r->p != '\n') {
        if (*r->p == '\\' && r->p + 1 < r->end && r->p[1] != '\n') {
            if (key && n + 1 < cap)
                key[n++] = *r->p;
            r->p++;
        }
        if (key && n + 1 < cap)
            key[n++] = *r->p;
        r->p++;
    }
    if (r->p >= r->end || *r->p != '"')
        return bad(r, "unterminated string");
    r->p++;
    if (key)
        key[n] = '\0';
    return ZB_OK;
}

/* Skip a nested object or array (strings respected). */
static zb_status_t skip_nested(reader_t *r)
{
    int depth = 0;
    while (r->p < r->end && *r->p != '\n') {
        char c = *r->p;
        if (c == '"') {
            zb_status_t st = string(r, NULL, 0);
            if (st != ZB_OK)
                return st;
            continue;
        }
        r->p++;
        if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0)
            return ZB_OK;
    }
    return bad(r, "unterminated nested value");
}

/* A value: a number (*num, *is_num), null (NaN), true/false/string/nested (*is_num false). */
static zb_status_t value(reader_t *r, double *num, bool *is_num)
{
    *is_num = false;
    *num = NAN;
    if (r->p >= r->end || *r->p == '\n')
        return bad(r, "missing value");
    char c = *r->p;
    if (c == '"')
        return string(r, NULL, 0);
    if (c == '{' || c == '[')
        return skip_nested(r);
    static const char *const words[] = {"null", "true", "false"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(words[k]);
        if ((size_t)(r->end - r->p) >= n && !memcmp(r->p, words[k], n)) {
            r->p += n;
            *is_num = k == 0; /* null counts as a (missing) number */
            return ZB_OK;
        }
    }
    if (c != '-' && !isdigit((unsigned char)c))
        return bad(r, "bad value");
    char buf[64];
    size_t n = 0;
    while (r->p + n < r->end && n + 1 < sizeof buf && strchr("+-.0123456789eE", r->p[n]))
        n++;
    memcpy(buf, r->p, n);
    buf[n] = '\0';
    char *e;
    *num = strtod(buf, &e);
    if (e != buf + n || n == 0)
        return bad(r, "bad number");
    r->p += n;
    *is_num = true;
    return ZB_OK;
}

static zb_status_t grow(zb_metrics_t *m, int *cap)
{
    if (m->count < *cap)
        return ZB_OK;
    int nc = *cap ? 2 * *cap : 256;
    double **arrs[] = {&m->step, &m->loss, &m->val_loss, &m->lr, &m->tokens_per_s};
    for (int k = 0; k < 5; k++) {
        double *p = realloc(*arrs[k], (size_t)nc * sizeof **arrs[k]);
        if (!p)
            return ZB_ENOMEM;
        *arrs[k] = p;
    }
    *cap = nc;
    return ZB_OK;
}

/* One line: a flat object. vals[F_*] = NaN when absent; *step_seen. */
static zb_status_t record(reader_t *r, double vals[F_COUNT], bool *step_seen)
{
    for (int k = 0; k < F_COUNT; k++)
        vals[k] = NAN;
    *step_seen = false;
    if (*r->p != '{')
        return bad(r, "not a JSON object");
    r->p++;
    ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return ZB_OK;
    }
    for (;;) {
        char key[64];
        ws(r);
        zb_status_t st = string(r, key, sizeof key);
        if (st != ZB_OK)
            return st;
        ws(r);
        if (r->p >= r->end || *r->p != ':')
            return bad(r, "expected ':' after a key");
        r->p++;
        ws(r);
        double v;
        bool is_num;
        if ((st = value(r, &v, &is_num)) != ZB_OK)
            return st;
        for (int k = 0; k < F_COUNT; k++)
            if (!strcmp(key, field_names[k])) {
                if (!is_num) {
                    char msg[96];
                    snprintf(msg, sizeof msg, "\"%s\" is not a number", field_names[k]);
                    return bad(r, msg);
                }
                vals[k] = v;
                if (k == F_STEP)
                    *step_seen = true;
            }
        ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            return ZB_OK;
        }
        return bad(r, "expected ',' or '}'");
    }
}

zb_status_t zb_metrics_parse(const char *data, size_t len, zb_metrics_t *out, zb_err_t *err)
{
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "metrics: no output");
    memset(out, 0, sizeof *out);
    if (!data && len)
        return zb_err_set(err, ZB_EINVAL, "metrics: no data");
    reader_t r = {.p = data, .end = data + len, .line = 0, .err = err};
    int cap = 0;
    zb_status_t st = ZB_OK;
    while (st == ZB_OK && r.p < r.end) {
        r.line++;
        ws(&r);
        if (r.p < r.end && *r.p == '\n') { /* blank line */
            r.p++;
            continue;
        }
        if (r.p >= r.end)
            break;
        double vals[F_COUNT];
        bool step_seen;
        if ((st = record(&r, vals, &step_seen)) != ZB_OK)
            break;
        ws(&r);
        if (r.p < r.end && *r.p != '\n') {
            st = bad(&r, "junk after the object");
            break;
        }
        if (r.p < r.end)
            r.p++;
        if (!step_seen || !isfinite(vals[F_STEP])) {
            st = bad(&r, "no numeric \"step\"");
            break;
        }
        if ((st = grow(out, &cap)) != ZB_OK) {
            st = zb_err_set(err, ZB_ENOMEM, "metrics: out of memory");
            break;
        }
        int i = out->count++;
        out->step[i] = vals[F_STEP];
        out->loss[i] = vals[F_LOSS];
        out->val_loss[i] = vals[F_VAL_LOSS];
        out->lr[i] = vals[F_LR];
        out->tokens_per_s[i] = vals[F_TOKS];
        out->has_loss |= !isnan(vals[F_LOSS]);
        out->has_val_loss |= !isnan(vals[F_VAL_LOSS]);
        out->has_lr |= !isnan(vals[F_LR]);
        out->has_tokens_per_s |= !isnan(vals[F_TOKS]);
    }
    if (st == ZB_OK && !out->has_loss && !out->has_val_loss)
        st = zb_err_set(err, ZB_EFORMAT, "metrics: %s", out->count ? "no record has a loss or "
                                                                    "val_loss" : "no records");
    if (st != ZB_OK)
        zb_metrics_free(out);
    return st;
}

void zb_metrics_free(zb_metrics_t *m)
{
    if (!m)
        return;
    free(m->step);
    free(m->loss);
    free(m->val_loss);
    free(m->lr);
    free(m->tokens_per_s);
    memset(m, 0, sizeof *m);
}
