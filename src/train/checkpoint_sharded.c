/* zbpp — sharded checkpoints: shard files (binary) and the manifest (text). The pipeline glue
 * that decides who writes what lives in pipeline_dist.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gpt2_internal.h"
#include "zbpp/checkpoint_sharded.h"
#include "zbpp/handshake.h"
#include "zbpp/util.h"

#define SHARD_MAGIC 0x314448535050425Aull /* "ZBPPSHD1" on a little-endian host */
#define SHARD_VERSION 1
#define SHARD_HDR 8
#define MANIFEST_MAX (16u << 20)
#define MAX_RANGES (1u << 20)

enum { S_MAGIC, S_VERSION, S_RANK, S_RANKS, S_STEP, S_NRANGES, S_PCOUNT, S_RESERVED };

/* ---- shards ---- */

typedef struct {
    FILE *f;
    zb_hasher_t hs;
    uint64_t bytes;
    bool ok;
} hwriter_t;

static void hw_put(hwriter_t *w, const void *p, size_t n)
{
    if (!w->ok || n == 0)
        return;
    w->ok = fwrite(p, 1, n, w->f) == n;
    zb_hasher_add(&w->hs, p, n);
    w->bytes += n;
}

zb_status_t zb_ckpt_shard_write(const char *file, int rank, int ranks, long step,
                                const zb_ckpt_range_t *ranges, int n, const float *params,
                                const float *m, const float *v, size_t param_count,
                                zb_ckpt_shard_ref_t *ref, zb_err_t *err)
{
    for (int i = 0; i < n; i++)
        if (ranges[i].off > param_count || ranges[i].count > param_count - ranges[i].off)
            return zb_err_set(err, ZB_EINVAL, "shard %s: range %d outside the parameters", file, i);
    zb_atomic_file_t af;
    zb_status_t st = zb_atomic_open(&af, file, err);
    if (st != ZB_OK)
        return st;
    uint64_t hdr[SHARD_HDR] = {SHARD_MAGIC, SHARD_VERSION, (uint64_t)rank, (uint64_t)ranks,
                               (uint64_t)step, (uint64_t)n, param_count, 0};
    /* each header piece and range is hashed as it is written: one pass over the data */
    hwriter_t w = {.f = af.f, .ok = true};
    zb_hasher_init(&w.hs, ZB_HASH_SEED);
    hw_put(&w, hdr, sizeof hdr);
    for (int i = 0; i < n; i++) {
        uint64_t r[2] = {ranges[i].off, ranges[i].count};
        hw_put(&w, r, sizeof r);
    }
    const float *bufs[3] = {params, m, v};
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < n; i++)
            hw_put(&w, bufs[b] + ranges[i].loc, ranges[i].count * sizeof(float));
    if (!w.ok) {
        zb_atomic_abort(&af);
        return zb_err_set(err, ZB_EIO, "cannot write checkpoint shard %s: %s", file,
                          strerror(errno));
    }
    if ((st = zb_atomic_commit(&af, err)) != ZB_OK)
        return st;
    ref->bytes = w.bytes;
    ref->checksum = zb_hasher_end(&w.hs);
    return ZB_OK;
}

/* The checksum was verified over the whole file before: reads need only check their length. */
static zb_status_t hr_get(FILE *f, void *p, size_t n, const char *file, zb_err_t *err)
{
    if (n && fread(p, 1, n, f) != n)
        return zb_err_set(err, ZB_EFORMAT, "checkpoint shard %s is truncated", file);
    return ZB_OK;
}

typedef struct {
    const zb_gpt2_params_t *layout; /* NULL: the buffers are whole-model flat buffers */
    float *buf[3];                  /* params, m, v */
    unsigned char *covered;
} shard_dst_t;

static void cover_piece(void *ctx, size_t local, size_t at, size_t n)
{
    (void)at;
    memset((unsigned char *)ctx + local, 1, n);
}

#define STREAM_FLOATS ((size_t)1 << 18)

/* Range r of the shard's block b (f positioned at it) into dst: straight into whole-model
 * buffers, or in bounded pieces scattered into a stage-local layout. */
static zb_status_t read_range(FILE *f, const char *file, const zb_ckpt_range_t *r, size_t at,
                              int b, const shard_dst_t *dst, float *piece, zb_err_t *err)
{
    if (!dst->layout)
        return hr_get(f, dst->buf[b] + at, r->count * sizeof(float), file, err);
    zb_status_t st = ZB_OK;
    for (size_t done = 0; done < r->count && st == ZB_OK; done += STREAM_FLOATS) {
        size_t n = r->count - done < STREAM_FLOATS ? r->count - done : STREAM_FLOATS;
        if ((st = hr_get(f, piece, n * sizeof(float), file, err)) == ZB_OK)
            zb_gpt2_scatter(dst->layout, dst->buf[b], r->off + done, piece, n);
    }
    return st;
}

static zb_status_t shard_read(const char *file, const zb_ckpt_shard_ref_t *ref, int rank,
                              long step, size_t param_count, const zb_ckpt_range_t *want, int n,
                              const shard_dst_t *dst, zb_err_t *err)
{
    FILE *f;
    zb_status_t st = zb_fopen_regular(file, "checkpoint shard", &f, err);
    if (st != ZB_OK)
        return st;
    uint64_t hdr[SHARD_HDR];
    zb_ckpt_range_t *rg = NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (uint64_t)ftell(f) != ref->bytes) {
        st = zb_err_set(err, ZB_EFORMAT, "checkpoint shard %s has %ld bytes, the manifest says %" PRIu64,
                        file, ftell(f), ref->bytes);
        goto out;
    }
    /* checksum first: a damaged file gets "corrupt", not whatever its damaged header implies */
    rewind(f);
    {
        static unsigned char chunk[1 << 16];
        zb_hasher_t whole;
        zb_hasher_init(&whole, ZB_HASH_SEED);
        size_t got;
        while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
            zb_hasher_add(&whole, chunk, got);
        if (zb_hasher_end(&whole) != ref->checksum) {
            st = zb_err_set(err, ZB_EFORMAT, "checkpoint shard %s is corrupt (checksum mismatch)",
                            file);
            goto out;
        }
    }
    rewind(f);
    if ((st = hr_get(f, hdr, sizeof hdr, file, err)) != ZB_OK)
        goto out;
    if (hdr[S_MAGIC] != SHARD_MAGIC || hdr[S_VERSION] != SHARD_VERSION) {
        st = zb_err_set(err, ZB_EFORMAT, "%s is not a zbpp checkpoint shard (version 1)", file);
        goto out;
    }
    if (hdr[S_RANK] != (uint64_t)rank || hdr[S_STEP] != (uint64_t)step ||
        hdr[S_PCOUNT] != param_count || hdr[S_NRANGES] > MAX_RANGES) {
        st = zb_err_set(err, ZB_EFORMAT,
                        "checkpoint shard %s belongs elsewhere (rank %" PRIu64 ", step %" PRIu64
                        ", %" PRIu64 " parameters; expected rank %d, step %ld, %zu)",
                        file, hdr[S_RANK], hdr[S_STEP], hdr[S_PCOUNT], rank, step, param_count);
        goto out;
    }
    int nr = (int)hdr[S_NRANGES];
    rg = malloc((nr ? (size_t)nr : 1) * sizeof *rg);
    if (!rg) {
        st = zb_err_set(err, ZB_ENOMEM, "out of memory reading %s", file);
        goto out;
    }
    for (int i = 0; i < nr && st == ZB_OK; i++) {
        uint64_t r[2];
        if ((st = hr_get(f, r, sizeof r, file, err)) != ZB_OK)
            break;
        if (r[0] > param_count || r[1] > param_count - r[0])
            st = zb_err_set(err, ZB_EFORMAT, "checkpoint shard %s: range %d out of bounds", file, i);
        rg[i] = (zb_ckpt_range_t){(size_t)r[0], (size_t)r[1], (size_t)r[0]};
    }
    if (st == ZB_OK && want) {
        bool same = nr == n;
        for (int i = 0; same && i < n; i++)
            same = rg[i].off == want[i].off && rg[i].count == want[i].count;
        if (!same)
            st = zb_err_set(err, ZB_EMISMATCH,
                            "checkpoint shard %s holds other parameters than rank %d updates now",
                            file, rank);
    }
    float *piece = NULL;
    if (st == ZB_OK && dst->layout && !(piece = malloc(STREAM_FLOATS * sizeof *piece)))
        st = zb_err_set(err, ZB_ENOMEM, "out of memory reading %s", file);
    for (int b = 0; b < 3 && st == ZB_OK; b++)
        for (int i = 0; i < nr && st == ZB_OK; i++)
            st = read_range(f, file, &rg[i], want ? want[i].loc : rg[i].off, b, dst, piece, err);
    free(piece);
    for (int i = 0; st == ZB_OK && dst->covered && i < nr; i++) {
        if (dst->layout)
            zb_gpt2_params_pieces(dst->layout, rg[i].off, rg[i].count, cover_piece, dst->covered);
        else
            memset(dst->covered + rg[i].off, 1, rg[i].count);
    }
out:
    free(rg);
    fclose(f);
    return st;
}

zb_status_t zb_ckpt_shard_read(const char *file, const zb_ckpt_shard_ref_t *ref, int rank,
                               long step, size_t param_count, const zb_ckpt_range_t *want, int n,
                               float *params, float *m, float *v, unsigned char *covered,
                               zb_err_t *err)
{
    shard_dst_t dst = {NULL, {params, m, v}, covered};
    return shard_read(file, ref, rank, step, param_count, want, n, &dst, err);
}

zb_status_t zb_ckpt_shard_read_into(const char *file, const zb_ckpt_shard_ref_t *ref, int rank,
                                    long step, size_t param_count,
                                    const zb_gpt2_params_t *layout, float *params, float *m,
                                    float *v, unsigned char *covered, zb_err_t *err)
{
    shard_dst_t dst = {layout, {params, m, v}, covered};
    return shard_read(file, ref, rank, step, param_count, NULL, 0, &dst, err);
}

/* ---- manifest ---- */

bool zb_ckpt_is_sharded(const char *path)
{
    FILE *f = NULL;
    if (!path || zb_fopen_regular(path, NULL, &f, NULL) != ZB_OK)
        return false;
    char head[sizeof ZB_CKPT_MANIFEST_MAGIC] = "";
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    return strcmp(head, ZB_CKPT_MANIFEST_MAGIC) == 0;
}

zb_status_t zb_ckpt_manifest_alloc(zb_ckpt_manifest_t *m, int ranks, int stages, zb_err_t *err)
{
    memset(m, 0, sizeof *m);
    if (ranks < 1 || ranks > 1024 || stages < 1 || stages > 1024)
        return zb_err_set(err, ZB_EFORMAT, "checkpoint manifest: %d ranks, %d stages out of range",
                          ranks, stages);
    m->ranks = ranks;
    m->stages = stages;
    m->stage_rank = calloc((size_t)stages, sizeof *m->stage_rank);
    m->first = calloc((size_t)stages + 1, sizeof *m->first);
    m->shard = calloc((size_t)ranks, sizeof *m->shard);
    if (!m->stage_rank || !m->first || !m->shard) {
        zb_ckpt_manifest_free(m);
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a checkpoint manifest");
    }
    return ZB_OK;
}

void zb_ckpt_manifest_free(zb_ckpt_manifest_t *m)
{
    free(m->stage_rank);
    free(m->first);
    free(m->shard);
    m->stage_rank = m->first = NULL;
    m->shard = NULL;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Append printf-style text to a growing buffer. */
typedef struct {
    char *s;
    size_t len, cap;
    bool ok;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    if (!b->ok)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->ok = false;
            return;
        }
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *g = realloc(b->s, cap);
        if (!g) {
            b->ok = false;
            return;
        }
        b->s = g;
        b->cap = cap;
    }
}

zb_status_t zb_ckpt_manifest_write(const char *path, zb_ckpt_manifest_t *m, zb_err_t *err)
{
    const zb_train_config_t *c = &m->cfg;
    const zb_gpt2_config_t *g = &c->model;
    sbuf_t b = {.ok = true};
    sb_printf(&b, "%s %d\n", ZB_CKPT_MANIFEST_MAGIC, ZB_CKPT_MANIFEST_VERSION);
    sb_printf(&b, "step %ld\nskipped %ld\nranks %d\n", m->step, m->skipped, m->ranks);
    sb_printf(&b, "schedule %s %d %d\nstage_rank", m->schedule, m->chunks, m->stages);
    for (int s = 0; s < m->stages; s++)
        sb_printf(&b, " %d", m->stage_rank[s]);
    sb_printf(&b, "\npartition");
    for (int s = 0; s <= m->stages; s++)
        sb_printf(&b, " %d", m->first[s]);
    sb_printf(&b, "\nmodel %d %d %d %d %d %d\nparams %zu\n", g->max_seq, g->vocab,
              g->padded_vocab, g->layers, g->heads, g->channels, m->param_count);
    sb_printf(&b,
              "config %d %d %d %ld %d %" PRIu64 " %08x %08x %08x %08x %08x %08x %d %ld %08x\n",
              c->batch, c->seq, c->microbatches, c->steps, c->shuffle ? 1 : 0, c->seed,
              fbits(c->adamw.lr), fbits(c->adamw.beta1), fbits(c->adamw.beta2),
              fbits(c->adamw.eps), fbits(c->adamw.weight_decay), fbits(c->grad_clip),
              (int)c->lr_schedule, c->warmup, fbits(c->lr_min));
    sb_printf(&b, "data %016" PRIx64 " %" PRIu64 " %" PRIu64 "\n", m->data_fp, m->data_tokens,
              m->data_shards);
    sb_printf(&b, "position %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", (uint64_t)m->pos.epoch,
              (uint64_t)m->pos.shard, (uint64_t)m->pos.offset);
    for (int r = 0; r < m->ranks; r++)
        sb_printf(&b, "shard %d %s %" PRIu64 " %016" PRIx64 "\n", r, m->shard[r].file,
                  m->shard[r].bytes, m->shard[r].checksum);
    if (b.ok)
        m->hash = zb_hash_bytes(ZB_HASH_SEED, b.s, b.len);
    sb_printf(&b, "end %016" PRIx64 "\n", m->hash);
    if (!b.ok) {
        free(b.s);
        return zb_err_set(err, ZB_ENOMEM, "out of memory writing manifest %s", path);
    }
    zb_atomic_file_t af;
    zb_status_t st = zb_atomic_open(&af, path, err);
    if (st == ZB_OK) {
        if (fwrite(b.s, 1, b.len, af.f) != b.len) {
            zb_atomic_abort(&af);
            st = zb_err_set(err, ZB_EIO, "cannot write manifest %s: %s", path, strerror(errno));
        } else {
            st = zb_atomic_commit(&af, err);
        }
    }
    free(b.s);
    return st;
}

/* Next line of the manifest text starting with `key` and a space; NULL if absent. */
static const char *field(const char *text, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, key, k) && p[k] == ' ')
            return p + k + 1;
    return NULL;
}

/* Read `n` integers separated by spaces from a field. */
static bool ints(const char *p, int *out, int n, int lo, int hi)
{
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        long v = p ? strtol(p, &end, 10) : 0;
        if (!p || errno || end == p || v < lo || v > hi || (*end != ' ' && *end != '\n'))
            return false;
        out[i] = (int)v;
        p = end;
    }
    return true;
}

static zb_status_t bad(const char *path, const char *what, zb_err_t *err)
{
    return zb_err_set(err, ZB_EFORMAT, "checkpoint manifest %s: %s", path, what);
}

/* Bound the model by the shards on disk before anyone allocates for it: a small manifest could
 * otherwise name a model of gigabytes. The parameter count must follow from the model shape,
 * every shard must be a regular file of the size the manifest gives, and together they must be
 * able to hold params, m and v (12 bytes per parameter). */
static zb_status_t check_sizes(const char *path, const zb_ckpt_manifest_t *m, zb_err_t *err)
{
    size_t sizes[ZB_GPT2_NUM_TENSORS], count = 0;
    zb_gpt2_tensor_sizes(&m->cfg.model, sizes);
    for (int i = 0; i < ZB_GPT2_NUM_TENSORS; i++)
        count += sizes[i];
    if (count != m->param_count)
        return bad(path, "params does not match the model shape", err);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + 1) : 0, path);
    uint64_t total = 0;
    for (int r = 0; r < m->ranks; r++) {
        char file[4400];
        snprintf(file, sizeof file, "%s%s", dir, m->shard[r].file);
        struct stat sb;
        if (stat(file, &sb) != 0)
            return zb_err_set(err, ZB_EIO, "cannot open checkpoint shard %s: %s", file,
                              strerror(errno));
        if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != m->shard[r].bytes)
            return zb_err_set(err, ZB_EFORMAT,
                              "checkpoint shard %s %s, the manifest says %" PRIu64 " bytes", file,
                              S_ISREG(sb.st_mode) ? "has another size" : "is not a regular file",
                              m->shard[r].bytes);
        total += (uint64_t)sb.st_size;
    }
    if (total / 12 < (uint64_t)count)
        return bad(path, "its shards are too small for the model it names", err);
    return ZB_OK;
}

static zb_status_t parse(const char *path, char *text, size_t len, zb_ckpt_manifest_t *m,
                         zb_err_t *err)
{
    /* the last line carries the checksum of everything before it */
    char *end = len >= 2 ? text + len - 2 : text;
    while (end > text && *end != '\n')
        end--;
    uint64_t want;
    if (end == text || sscanf(end + 1, "end %" SCNx64, &want) != 1)
        return bad(path, "truncated (no end line)", err);
    uint64_t got = zb_hash_bytes(ZB_HASH_SEED, text, (size_t)(end + 1 - text));
    if (got != want)
        return bad(path, "corrupt (checksum mismatch)", err);
    end[1] = '\0';
    int version;
    char magic[64];
    if (sscanf(text, "%63s %d", magic, &version) != 2 || strcmp(magic, ZB_CKPT_MANIFEST_MAGIC))
        return bad(path, "not a sharded checkpoint manifest", err);
    if (version != ZB_CKPT_MANIFEST_VERSION)
        return zb_err_set(err, ZB_EFORMAT, "checkpoint manifest %s: unsupported version %d", path,
                          version);
    int ranks = 0, chunks = 0, stages = 0;
    long step = -1, skipped = -1;
    char sched[48] = "";
    const char *p;
    if (!(p = field(text, "step")) || sscanf(p, "%ld", &step) != 1 ||
        !(p = field(text, "skipped")) || sscanf(p, "%ld", &skipped) != 1 ||
        !(p = field(text, "ranks")) || sscanf(p, "%d", &ranks) != 1 ||
        !(p = field(text, "schedule")) || sscanf(p, "%47s %d %d", sched, &chunks, &stages) != 3 ||
        step < 0 || skipped < 0 || skipped > step || chunks < 1)
        return bad(path, "bad step/ranks/schedule lines", err);
    zb_status_t st = zb_ckpt_manifest_alloc(m, ranks, stages, err);
    if (st != ZB_OK)
        return st == ZB_EFORMAT ? bad(path, "ranks or stages out of range", err) : st;
    m->step = step;
    m->skipped = skipped;
    m->chunks = chunks;
    snprintf(m->schedule, sizeof m->schedule, "%s", sched);
    if (!ints(field(text, "stage_rank"), m->stage_rank, stages, 0, ranks - 1) ||
        !ints(field(text, "partition"), m->first, stages + 1, 0, 1 << 20))
        return bad(path, "bad stage_rank/partition lines", err);
    zb_gpt2_config_t *g = &m->cfg.model;
    int mv[6];
    if (!ints(field(text, "model"), mv, 6, 1, 1 << 30))
        return bad(path, "bad model line", err);
    *g = (zb_gpt2_config_t){mv[0], mv[1], mv[2], mv[3], mv[4], mv[5]};
    if (zb_gpt2_config_check(g, NULL) != ZB_OK)
        return bad(path, "invalid model shape", err);
    zb_train_config_t *c = &m->cfg;
    int shuffle, sched_kind;
    unsigned lr, b1, b2, eps, wd, clip, lrmin;
    if (!(p = field(text, "params")) || sscanf(p, "%zu", &m->param_count) != 1 ||
        !(p = field(text, "config")) ||
        sscanf(p, "%d %d %d %ld %d %" SCNu64 " %x %x %x %x %x %x %d %ld %x", &c->batch, &c->seq,
               &c->microbatches, &c->steps, &shuffle, &c->seed, &lr, &b1, &b2, &eps, &wd, &clip,
               &sched_kind, &c->warmup, &lrmin) != 15)
        return bad(path, "bad params/config lines", err);
    c->shuffle = shuffle != 0;
    c->adamw.lr = bitsf(lr), c->adamw.beta1 = bitsf(b1), c->adamw.beta2 = bitsf(b2);
    c->adamw.eps = bitsf(eps), c->adamw.weight_decay = bitsf(wd), c->grad_clip = bitsf(clip);
    c->lr_schedule = (zb_lr_kind_t)sched_kind;
    c->lr_min = bitsf(lrmin);
    {
        /* a bad stored value is the file's fault, not that of a flag never passed */
        zb_train_config_t chk;
        zb_train_config_defaults(&chk);
        chk.batch = c->batch, chk.seq = c->seq, chk.microbatches = c->microbatches;
        chk.steps = c->steps, chk.adamw = c->adamw, chk.grad_clip = c->grad_clip;
        chk.lr_schedule = c->lr_schedule, chk.warmup = c->warmup, chk.lr_min = c->lr_min;
        chk.text_path = path;
        zb_err_t why;
        zb_err_clear(&why);
        if (zb_train_config_check(&chk, &why) != ZB_OK)
            return zb_err_set(err, ZB_EFORMAT,
                              "checkpoint manifest %s holds an invalid setting: %s", path, why.msg);
        if (c->seq > g->max_seq)
            return zb_err_set(err, ZB_EFORMAT,
                              "checkpoint manifest %s holds sequence length %d, more than its "
                              "model's maximum %d",
                              path, c->seq, g->max_seq);
    }
    uint64_t pe, ps, po;
    if (!(p = field(text, "data")) ||
        sscanf(p, "%" SCNx64 " %" SCNu64 " %" SCNu64, &m->data_fp, &m->data_tokens,
               &m->data_shards) != 3 ||
        !(p = field(text, "position")) ||
        sscanf(p, "%" SCNu64 " %" SCNu64 " %" SCNu64, &pe, &ps, &po) != 3)
        return bad(path, "bad data/position lines", err);
    m->pos.epoch = pe, m->pos.shard = ps, m->pos.offset = po;
    int seen = 0;
    for (p = field(text, "shard"); p; p = field(p, "shard")) {
        int r;
        char file[256];
        zb_ckpt_shard_ref_t ref;
        if (sscanf(p, "%d %255s %" SCNu64 " %" SCNx64, &r, file, &ref.bytes, &ref.checksum) != 4 ||
            r < 0 || r >= ranks || m->shard[r].file[0] || strchr(file, '/') ||
            !strcmp(file, ".") || !strcmp(file, ".."))
            return bad(path, "bad shard line", err);
        snprintf(ref.file, sizeof ref.file, "%s", file);
        m->shard[r] = ref;
        seen++;
    }
    if (seen != ranks)
        return bad(path, "a shard line is missing", err);
    m->hash = got;
    return ZB_OK;
}

zb_status_t zb_ckpt_manifest_read(const char *path, zb_ckpt_manifest_t *m, zb_err_t *err)
{
    memset(m, 0, sizeof *m);
    char *text;
    size_t len;
    zb_status_t st = zb_read_file(path, MANIFEST_MAX, &text, &len, err);
    if (st != ZB_OK)
        return st;
    st = parse(path, text, len, m, err);
    free(text);
    if (st != ZB_OK)
        zb_ckpt_manifest_free(m);
    return st;
}

zb_status_t zb_ckpt_sharded_peek(const char *path, zb_train_config_t *cfg, zb_err_t *err)
{
    zb_ckpt_manifest_t m;
    zb_status_t st = zb_ckpt_manifest_read(path, &m, err);
    if (st != ZB_OK)
        return st;
    /* the caller allocates a model of this shape next: bound it by the shards on disk first */
    if ((st = check_sizes(path, &m, err)) != ZB_OK) {
        zb_ckpt_manifest_free(&m);
        return st;
    }
    const zb_train_config_t *s = &m.cfg;
    cfg->model = s->model;
    cfg->batch = s->batch, cfg->seq = s->seq, cfg->microbatches = s->microbatches;
    cfg->steps = s->steps, cfg->shuffle = s->shuffle, cfg->seed = s->seed;
    cfg->adamw = s->adamw, cfg->grad_clip = s->grad_clip;
    cfg->lr_schedule = s->lr_schedule, cfg->warmup = s->warmup, cfg->lr_min = s->lr_min;
    zb_ckpt_manifest_free(&m);
    return ZB_OK;
}

#define DIFF(flag, fmt, a, b)                                                                    \
    zb_err_set(err, ZB_EMISMATCH, "checkpoint %s was saved with " flag " " fmt                   \
                                  ", this run has " fmt, path, a, b)

zb_status_t zb_ckpt_manifest_check(const char *path, const zb_ckpt_manifest_t *m,
                                   const zb_trainer_t *t, zb_err_t *err)
{
    const zb_train_config_t *s = &m->cfg, *c = &t->cfg;
    if (memcmp(&s->model, &t->model, sizeof s->model) != 0 || m->param_count != t->param_count)
        return zb_err_set(err, ZB_EMISMATCH, "checkpoint %s holds a different model (L=%d NH=%d C=%d V=%d maxT=%d)",
                          path, s->model.layers, s->model.heads, s->model.channels,
                          s->model.vocab, s->model.max_seq);
    if (s->batch != c->batch)
        return DIFF("--batch", "%d", s->batch, c->batch);
    if (s->seq != c->seq)
        return DIFF("--seq", "%d", s->seq, c->seq);
    if (s->microbatches != c->microbatches)
        return DIFF("--microbatches", "%d", s->microbatches, c->microbatches);
    if (s->shuffle != c->shuffle)
        return DIFF("shuffle", "%s", s->shuffle ? "on" : "off", c->shuffle ? "on" : "off");
    if (s->seed != c->seed)
        return DIFF("--seed", "%" PRIu64, s->seed, c->seed);
    static const char *const names[] = {"--lr", "--beta1", "--beta2", "--eps", "--weight-decay",
                                        "--grad-clip", "--lr-min"};
    const float a[] = {s->adamw.lr, s->adamw.beta1, s->adamw.beta2, s->adamw.eps,
                       s->adamw.weight_decay, s->grad_clip, s->lr_min};
    const float b[] = {c->adamw.lr, c->adamw.beta1, c->adamw.beta2, c->adamw.eps,
                       c->adamw.weight_decay, c->grad_clip, c->lr_min};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if (fbits(a[i]) != fbits(b[i]))
            return zb_err_set(err, ZB_EMISMATCH, "checkpoint %s was saved with %s %g, this run has %g",
                              path, names[i], a[i], b[i]);
    if (s->lr_schedule != c->lr_schedule)
        return DIFF("--lr-schedule", "%s", zb_lr_kind_name(s->lr_schedule),
                    zb_lr_kind_name(c->lr_schedule));
    if (s->warmup != c->warmup)
        return DIFF("--warmup", "%ld", s->warmup, c->warmup);
    if (m->data_fp != zb_data_fingerprint(t->data) ||
        m->data_tokens != zb_data_total_tokens(t->data) ||
        m->data_shards != zb_data_num_shards(t->data))
        return zb_err_set(err, ZB_EMISMATCH, "checkpoint %s was trained on different data", path);
    return ZB_OK;
}

/* ---- orphans ---- */

typedef struct {
    const char *prefix; /* "<base>." */
    const zb_ckpt_manifest_t *m;
} orphan_ctx_t;

/* True if name is "<prefix><step>-<8 hex>.rank<digits>" (then *tail is what follows: "" or a
 * ".tmp.<pid>" suffix) with step <= the manifest's and not one of its shards. */
static bool is_orphan(const char *name, const orphan_ctx_t *o, const char **tail)
{
    size_t plen = strlen(o->prefix);
    if (strncmp(name, o->prefix, plen) != 0)
        return false;
    const char *p = name + plen;
    if (*p < '0' || *p > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long step = strtoull(p, &end, 10);
    if (errno || *end != '-')
        return false;
    p = end + 1;
    for (int i = 0; i < 8; i++, p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    if (strncmp(p, ".rank", 5) != 0 || p[5] < '0' || p[5] > '9')
        return false;
    for (p += 5; *p >= '0' && *p <= '9'; p++)
        ;
    *tail = p;
    if (step > (unsigned long long)o->m->step)
        return false; /* a later save may be writing it now */
    size_t shard_len = (size_t)(p - name);
    for (int r = 0; r < o->m->ranks; r++)
        if (strlen(o->m->shard[r].file) == shard_len && !strncmp(o->m->shard[r].file, name, shard_len))
            return false; /* the live checkpoint's shard (or a temp of its name) */
    return true;
}

static int keep_tmp(const char *name, void *ctx)
{
    const char *tail;
    return !is_orphan(name, ctx, &tail) || !*tail;
}

int zb_ckpt_remove_orphans(const char *path, const zb_ckpt_manifest_t *m)
{
    char dir[4096], prefix[512];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + 1) : 0, path);
    snprintf(prefix, sizeof prefix, "%s.", base);
    orphan_ctx_t o = {prefix, m};
    int removed = zb_remove_stale_temps(dir, prefix, keep_tmp, &o); /* unlocked temps only */
    DIR *d = opendir(*dir ? dir : ".");
    if (!d)
        return removed;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *tail;
        if (!is_orphan(e->d_name, &o, &tail) || *tail)
            continue;
        char file[4400];
        snprintf(file, sizeof file, "%s%s", dir, e->d_name);
        if (unlink(file) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
