/* PyTorch pipelining CSV: writer and a strict, bounded reader.
 *
 * The reader walks the buffer once, collecting (rank, action) pairs into a growable array, then
 * infers the shape (P, S, v, M, placement) and builds the schedule. Every number is parsed by
 * hand with an explicit bound so no input can overflow, allocate without limit or hang. */
#include "zbpp/schedule_io.h"

#include <stdlib.h>
#include <string.h>

/* PyTorch's names: our B is its I (input grad), our BW is its B (full backward). */
static const char *csv_type_name(zb_action_type_t t)
{
    switch (t) {
    case ZB_ACT_F: return "F";
    case ZB_ACT_B: return "I";
    case ZB_ACT_W: return "W";
    case ZB_ACT_BW: return "B";
    case ZB_ACT_SEND_F: return "SEND_F";
    case ZB_ACT_RECV_F: return "RECV_F";
    case ZB_ACT_SEND_B: return "SEND_B";
    case ZB_ACT_RECV_B: return "RECV_B";
    case ZB_ACT_R: return "R"; /* zbpp extensions: PyTorch has no recompute, */
    case ZB_ACT_O: return "O"; /* no offload */
    case ZB_ACT_L: return "L"; /* and no reload action */
    default: return NULL;
    }
}

zb_status_t zb_csv_write(const zb_schedule_t *s, FILE *out, zb_err_t *err)
{
    if (!s || !out)
        return zb_err_set(err, ZB_EINVAL, "csv: no schedule or no output");
    for (int r = 0; r < s->ranks; r++) {
        const zb_rank_program_t *rp = &s->rank[r];
        for (int i = 0; i < rp->len; i++) {
            const zb_action_t *a = &rp->actions[i];
            const char *tn = csv_type_name((zb_action_type_t)a->type);
            if (!tn)
                return zb_err_set(err, ZB_EINVAL, "csv: rank %d action %d has unknown type %d", r,
                                  i, a->type);
            fprintf(out, "%s%d%s%d", i ? "," : "", a->stage, tn, a->mb);
        }
        fputc('\n', out);
    }
    if (ferror(out))
        return zb_err_set(err, ZB_EIO, "csv: write failed");
    return ZB_OK;
}

/* ---- reader ---- */

typedef struct {
    int rank;
    zb_action_t a;
} parsed_action_t;

typedef struct {
    parsed_action_t *v;
    size_t len, cap;
} action_list_t;

static zb_status_t list_push(action_list_t *l, int rank, zb_action_t a, zb_err_t *err)
{
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        parsed_action_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return zb_err_set(err, ZB_ENOMEM, "csv: out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->len++] = (parsed_action_t){rank, a};
    return ZB_OK;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* Parse a decimal index at *p (within [*p, end)), bounded by ZB_CSV_MAX_INDEX. Returns 0 on
 * success, -1 if there is no digit, -2 if the value is too large. */
static int parse_index(const char **p, const char *end, int32_t *out)
{
    const char *q = *p;
    long v = 0;
    if (q == end || !is_digit(*q))
        return -1;
    while (q < end && is_digit(*q)) {
        v = v * 10 + (*q - '0');
        if (v > ZB_CSV_MAX_INDEX)
            return -2;
        q++;
    }
    *p = q;
    *out = (int32_t)v;
    return 0;
}

/* Type tokens, matched in this order. Order matters where one token starts another: "BW" before
 * "B", and every longer token that starts with R (RECV_F, RECV_B, RESHARD, REDUCE_GRAD) before
 * "R" (recompute, a zbpp extension). O (offload) and L (reload) are zbpp extensions too; no
 * PyTorch token starts with either (its OVERLAP_F_B only ends a composite cell). The
 * FSDP tokens (UNSHARD, RESHARD, REDUCE_GRAD) carry a stage and usually no microbatch; they are
 * read and dropped (`fsdp`). */
static const struct {
    const char *tok;
    zb_action_type_t type;
    bool fsdp;
} type_tokens[] = {
    {"SEND_F", ZB_ACT_SEND_F, false}, {"RECV_F", ZB_ACT_RECV_F, false},
    {"SEND_B", ZB_ACT_SEND_B, false}, {"RECV_B", ZB_ACT_RECV_B, false},
    {"UNSHARD", ZB_ACT_COUNT, true},  {"RESHARD", ZB_ACT_COUNT, true},
    {"REDUCE_GRAD", ZB_ACT_COUNT, true}, {"BW", ZB_ACT_BW, false},
    {"F", ZB_ACT_F, false},           {"I", ZB_ACT_B, false},
    {"W", ZB_ACT_W, false},           {"B", ZB_ACT_BW, false},
    {"R", ZB_ACT_R, false},           {"O", ZB_ACT_O, false},
    {"L", ZB_ACT_L, false},
};

/* The type of a composite cell `(a;b)OVERLAP_F_B`: PyTorch's DualPipeV runs a forward and a
 * backward of two microbatches as one overlapped step. */
#define CSV_OVERLAP "OVERLAP_F_B"

/* Printable copy of a (possibly binary) cell for an error message. */
static void cell_excerpt(const char *c, size_t n, char *buf, size_t cap)
{
    size_t o = 0, i = 0;
    for (; i < n && o + 8 < cap; i++) {
        unsigned char ch = (unsigned char)c[i];
        if (ch >= 32 && ch < 127 && ch != '\'')
            buf[o++] = (char)ch;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
    }
    if (i < n) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
}

/* Where a cell is, for messages. */
typedef struct {
    int line, cell;
    const char *ex; /* printable excerpt of the whole cell */
} cell_pos_t;

/* Parse one plain action [p, e) (trimmed, not empty): `<stage><type><mb>`, or an FSDP action
 * `<stage><UNSHARD|RESHARD|REDUCE_GRAD>[<mb>]` (then *fsdp is set and *a is not filled). */
static zb_status_t parse_action(const char *p, const char *e, const cell_pos_t *at, bool *fsdp,
                                zb_action_t *a, zb_err_t *err)
{
    const int line = at->line, cell = at->cell;
    const char *ex = at->ex;
    int32_t stage, mb;
    int rc = parse_index(&p, e, &stage);
    if (rc == -1)
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s' does not start with a stage "
                                           "number", line, cell, ex);
    if (rc == -2)
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s' has a stage number above %d",
                          line, cell, ex, ZB_CSV_MAX_INDEX);
    size_t ntok = sizeof type_tokens / sizeof type_tokens[0];
    size_t k = 0;
    for (; k < ntok; k++) {
        size_t tl = strlen(type_tokens[k].tok);
        /* O and L are read only right before their microbatch number, so that PyTorch's
         * OVERLAP_F_B out of place is still reported as an unknown type */
        bool copy = type_tokens[k].type == ZB_ACT_O || type_tokens[k].type == ZB_ACT_L;
        if (copy && ((size_t)(e - p) <= tl || !is_digit(p[tl])))
            continue;
        if ((size_t)(e - p) >= tl && !memcmp(p, type_tokens[k].tok, tl)) {
            p += tl;
            break;
        }
    }
    if (k == ntok)
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s' has no known action type "
                                           "(F, I, W, B, BW, SEND_F, RECV_F, SEND_B, RECV_B, R, O, L, "
                                           "UNSHARD, RESHARD, REDUCE_GRAD, (..;..)" CSV_OVERLAP ")",
                          line, cell, ex);
    *fsdp = type_tokens[k].fsdp;
    rc = parse_index(&p, e, &mb);
    if (rc == -1 && !*fsdp)
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s' has no microbatch number after "
                                           "its type", line, cell, ex);
    if (rc == -2)
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s' has a microbatch number above "
                                           "%d", line, cell, ex, ZB_CSV_MAX_INDEX);
    if (p != e)
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s' has junk after the %s", line,
                          cell, ex, rc == -1 ? "action type" : "microbatch number");
    if (!*fsdp)
        *a = (zb_action_t){.type = (uint8_t)type_tokens[k].type, .stage = stage, .mb = mb};
    return ZB_OK;
}

/* A composite cell [b, e), starting with '(': `(<action>;<action>...)OVERLAP_F_B`. Its compute
 * actions are appended to `l` in the order written (PyTorch: the forward, then the backward). */
static zb_status_t parse_composite(const char *b, const char *e, const cell_pos_t *at, int rank,
                                   action_list_t *l, zb_err_t *err)
{
    if (memchr(b + 1, '(', (size_t)(e - b - 1)))
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s' nests parentheses", at->line,
                          at->cell, at->ex);
    const char *close = memchr(b, ')', (size_t)(e - b));
    if (!close)
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s' opens '(' but never closes it",
                          at->line, at->cell, at->ex);
    size_t tl = strlen(CSV_OVERLAP);
    if ((size_t)(e - close - 1) != tl || memcmp(close + 1, CSV_OVERLAP, tl) != 0)
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s': a composite cell must be "
                                           "'(<action>;<action>)" CSV_OVERLAP "'",
                          at->line, at->cell, at->ex);
    int n = 0;
    for (const char *p = b + 1; p < close;) {
        const char *semi = memchr(p, ';', (size_t)(close - p));
        const char *se = semi ? semi : close, *sb = p;
        p = semi ? semi + 1 : close;
        while (sb < se && is_blank(*sb))
            sb++;
        while (se > sb && is_blank(se[-1]))
            se--;
        if (sb == se)
            continue; /* PyTorch skips empty sub-actions too */
        bool fsdp = false;
        zb_action_t a = {0};
        zb_status_t st = parse_action(sb, se, at, &fsdp, &a, err);
        if (st != ZB_OK)
            return st;
        if (fsdp || !zb_action_is_compute((zb_action_type_t)a.type))
            return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s': only compute actions "
                                               "(F, I, W, B) can be overlapped",
                              at->line, at->cell, at->ex);
        if ((st = list_push(l, rank, a, err)) != ZB_OK)
            return st;
        n++;
    }
    if (n == 0)
        return zb_err_set(err, ZB_EFORMAT, "line %d, cell %d: '%s' has no action inside its "
                                           "parentheses", at->line, at->cell, at->ex);
    return ZB_OK;
}

/* Parse one cell [c, end) (already without its separators) of rank `rank`, appending what it
 * holds to `l`: nothing for an empty cell or an FSDP action (counted in info), one action, or
 * the actions of a composite cell. */
static zb_status_t parse_cell(const char *c, const char *end, int line, int cell, int rank,
                              action_list_t *l, zb_csv_info_t *info, zb_err_t *err)
{
    char ex[64];
    const char *b = c, *e = end;
    while (b < e && is_blank(*b))
        b++;
    while (e > b && is_blank(e[-1]))
        e--;
    /* A quoted cell ("0F0") is legal CSV; quotes inside would not be. */
    if (e - b >= 2 && *b == '"' && e[-1] == '"') {
        b++;
        e--;
    }
    if (b == e)
        return ZB_OK; /* idle slot */
    cell_excerpt(c, (size_t)(end - c), ex, sizeof ex);
    const cell_pos_t at = {.line = line, .cell = cell, .ex = ex};
    if (*b == '(') {
        zb_status_t st = parse_composite(b, e, &at, rank, l, err);
        if (st == ZB_OK)
            info->composite++;
        return st;
    }
    bool fsdp = false;
    zb_action_t a = {0};
    zb_status_t st = parse_action(b, e, &at, &fsdp, &a, err);
    if (st != ZB_OK)
        return st;
    if (fsdp) {
        info->ignored_fsdp++;
        return ZB_OK;
    }
    return list_push(l, rank, a, err);
}

/* Does every action sit on the rank `placement` assigns to its stage? */
static bool placement_fits(const action_list_t *l, int ranks, int chunks, zb_placement_t pl)
{
    for (size_t i = 0; i < l->len; i++)
        if (zb_stage_rank_of(ranks, chunks, pl, l->v[i].a.stage) != l->v[i].rank)
            return false;
    return true;
}

/* Split the buffer into rows and cells, appending actions to `l`. Sets *rows. */
static zb_status_t scan_rows(const char *data, size_t len, action_list_t *l, int *rows,
                             zb_csv_info_t *info, zb_err_t *err)
{
    const char *p = data, *end = data + len;
    int line = 0, nrows = 0, pending_blank = 0;
    while (p < end) {
        line++;
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *next = eol ? eol + 1 : end;
        const char *le = eol ? eol : end;
        if (le > p && le[-1] == '\r')
            le--;
        /* Blank lines are fine only at the end; remember them until a row follows. */
        const char *q = p;
        while (q < le && is_blank(*q))
            q++;
        if (q == le) {
            if (!pending_blank)
                pending_blank = line;
            p = next;
            continue;
        }
        if (pending_blank)
            return zb_err_set(err, ZB_EFORMAT, "line %d: blank line between rows (each line is "
                                               "one rank, and every rank has actions)",
                              pending_blank);
        if (nrows == ZB_CSV_MAX_RANKS)
            return zb_err_set(err, ZB_EFORMAT, "line %d: more than %d rows (ranks)", line,
                              ZB_CSV_MAX_RANKS);
        int cell = 0;
        const char *c = p;
        size_t before = l->len;
        int fsdp_before = info->ignored_fsdp;
        for (;;) {
            const char *ce = memchr(c, ',', (size_t)(le - c));
            if (!ce)
                ce = le;
            cell++;
            zb_status_t st = parse_cell(c, ce, line, cell, nrows, l, info, err);
            if (st != ZB_OK)
                return st;
            if (ce == le)
                break;
            c = ce + 1;
        }
        /* Every rank of a real schedule holds a stage, so an all-idle row is a mistake. */
        if (l->len == before && info->ignored_fsdp == fsdp_before)
            return zb_err_set(err, ZB_EFORMAT, "line %d: the row of rank %d has only empty cells "
                                               "(no actions)", line, nrows);
        if (l->len == before)
            return zb_err_set(err, ZB_EFORMAT, "line %d: the row of rank %d has only "
                                               "UNSHARD/RESHARD/REDUCE_GRAD actions (no compute)",
                              line, nrows);
        nrows++;
        p = next;
    }
    *rows = nrows;
    return ZB_OK;
}

zb_status_t zb_csv_read(const char *data, size_t len, zb_schedule_t **out, zb_err_t *err)
{
    return zb_csv_read_info(data, len, out, NULL, err);
}

zb_status_t zb_csv_read_info(const char *data, size_t len, zb_schedule_t **out,
                             zb_csv_info_t *info, zb_err_t *err)
{
    zb_csv_info_t scratch;
    if (!info)
        info = &scratch;
    memset(info, 0, sizeof *info);
    *out = NULL;
    if (!data && len)
        return zb_err_set(err, ZB_EINVAL, "csv: no data");
    if (len > ZB_CSV_MAX_BYTES)
        return zb_err_set(err, ZB_EFORMAT, "csv: input of %zu bytes exceeds the %u byte limit",
                          len, ZB_CSV_MAX_BYTES);
    action_list_t l = {0};
    int rows = 0;
    zb_status_t st = scan_rows(data, len, &l, &rows, info, err);
    if (st != ZB_OK)
        goto done;
    if (rows == 0) {
        st = zb_err_set(err, ZB_EFORMAT, "csv: no actions (empty schedule)");
        goto done;
    }
    int max_stage = 0, max_mb = 0;
    for (size_t i = 0; i < l.len; i++) {
        if (l.v[i].a.stage > max_stage)
            max_stage = l.v[i].a.stage;
        if (l.v[i].a.mb > max_mb)
            max_mb = l.v[i].a.mb;
    }
    int stages = max_stage + 1, mbs = max_mb + 1;
    if (stages % rows != 0) {
        st = zb_err_set(err, ZB_EFORMAT, "csv: %d stages (largest stage %d) do not divide evenly "
                                         "over %d ranks (rows)", stages, max_stage, rows);
        goto done;
    }
    /* A complete schedule holds at least one F per (stage, mb); refusing anything far smaller
     * keeps a tiny hostile file from claiming a gigantic shape that later passes would allocate. */
    if ((double)stages * (double)mbs > (double)l.len) {
        st = zb_err_set(err, ZB_EFORMAT, "csv: %d stages x %d microbatches needs at least %.0f "
                                         "actions but the file holds %zu: incomplete schedule",
                        stages, mbs, (double)stages * mbs, l.len);
        goto done;
    }
    int chunks = stages / rows;
    zb_placement_t pl;
    if (placement_fits(&l, rows, chunks, ZB_PLACE_LOOP)) {
        pl = ZB_PLACE_LOOP;
    } else if (chunks == 2 && placement_fits(&l, rows, chunks, ZB_PLACE_V)) {
        pl = ZB_PLACE_V;
    } else {
        /* Name the first action that breaks the loop placement: the most useful hint. */
        size_t i = 0;
        while (i < l.len && zb_stage_rank_of(rows, chunks, ZB_PLACE_LOOP, l.v[i].a.stage) ==
                                l.v[i].rank)
            i++;
        st = zb_err_set(err, ZB_EFORMAT, "csv: no stage placement fits (P=%d, S=%d): stage %d "
                                         "appears on rank %d, which neither loop%s placement "
                                         "allows", rows, stages, l.v[i].a.stage, l.v[i].rank,
                        chunks == 2 ? " nor V" : "");
        goto done;
    }
    zb_schedule_t *s = zb_schedule_new("csv", rows, chunks, pl, mbs);
    if (!s) {
        st = zb_err_set(err, ZB_ENOMEM, "csv: out of memory");
        goto done;
    }
    for (size_t i = 0; i < l.len; i++) {
        if ((st = zb_schedule_push(s, l.v[i].rank, l.v[i].a)) != ZB_OK) {
            zb_schedule_free(s);
            st = zb_err_set(err, st, "csv: cannot store action %zu", i);
            goto done;
        }
    }
    if ((st = zb_schedule_mark_recompute(s, err)) != ZB_OK) { /* an F with an R keeps only its input */
        zb_schedule_free(s);
        goto done;
    }
    *out = s;
done:
    free(l.v);
    return st;
}
