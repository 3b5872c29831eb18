/* Training data: llm.c token shards, validation, and the batch loader.
 *
 * Every shard is fully validated when opened (header, exact size, token ids < vocab) so a bad file
 * fails before the first step, not hours into a run. Shards are not memory-mapped: a mapped file
 * truncated under a running job kills it with SIGBUS. Each batch is read with pread from the same
 * file (same device and inode, same size, ids re-checked), so a shard truncated, replaced or
 * rewritten during training gives a clear error instead (docs/reliability.md). */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zbpp/data.h"
#include "zbpp/util.h"

#define HEADER_BYTES (ZB_SHARD_HEADER_INTS * sizeof(int32_t))
#define TEXT_MAX_BYTES ((size_t)1 << 30)

typedef struct {
    char *name;
    const uint16_t *tok;
    size_t n;
    bool is_file;      /* read from `name` per batch (else `owned` holds the tokens) */
    dev_t dev;         /* identity and size of the file as validated */
    ino_t ino;
    off_t size;
    uint16_t *owned; /* in-memory tokens (NULL for a mapped shard) */
} shard_t;

struct zb_data {
    shard_t *shards;
    size_t nshards;
    int vocab;
    bool from_text;    /* opened by zb_data_open_text: messages speak of the text file */
    uint16_t *scratch; /* B·T+1 tokens read from a file shard */
    uint64_t total;
    uint64_t fingerprint;
    /* loader */
    int B, T;
    bool configured, shuffle;
    uint64_t seed;
    zb_data_pos_t pos;
    /* shuffle: this epoch's shard order and the current shard's batch order */
    uint64_t *shard_order;
    uint64_t *batch_order;
    size_t batch_order_len;
    uint64_t batch_order_epoch, batch_order_shard; /* what batch_order was built for */
    uint64_t order_epoch;                         /* what shard_order was built for */
    bool batch_order_valid, order_valid;
};

/* ---- small helpers ---- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Fisher-Yates with a PRNG seeded from (seed, a, b): the order depends on nothing else. */
static void permute_u64(uint64_t *v, size_t n, uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t st = seed;
    st = splitmix64(&st) ^ a;
    st = splitmix64(&st) ^ b;
    for (size_t i = 0; i < n; i++)
        v[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix64(&st) % i);
        uint64_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

static uint64_t fnv1a_tokens(uint64_t h, const uint16_t *tok, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= tok[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

static zb_data_t *data_new(size_t nshards)
{
    zb_data_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->shards = calloc(nshards, sizeof *d->shards);
    d->shard_order = calloc(nshards, sizeof *d->shard_order);
    if (!d->shards || !d->shard_order) {
        free(d->shards);
        free(d->shard_order);
        free(d);
        return NULL;
    }
    d->nshards = nshards;
    return d;
}

/* Check ids against vocab and fold the shard into totals. */
static zb_status_t finish_shard(zb_data_t *d, const shard_t *s, int vocab, zb_err_t *err)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->tok[i] >= (unsigned)vocab)
            return zb_err_set(err, ZB_EINVAL,
                              "%s: token %u at position %zu is outside the model's vocabulary "
                              "(%d)",
                              s->name, (unsigned)s->tok[i], i, vocab);
    d->total += s->n;
    return ZB_OK;
}

#define SCAN_CHUNK (1u << 19) /* tokens per read while validating a shard */

/* Read n tokens from position off of a file shard into dst, checking that the file is still the
 * one validated at open (device, inode, size) and that every id is < vocab. */
static zb_status_t read_file_tokens(const shard_t *s, int vocab, size_t off, size_t n,
                                    uint16_t *dst, zb_err_t *err)
{
    int fd;
    zb_status_t st = zb_open_regular(s->name, "shard", &fd, err);
    if (st != ZB_OK)
        return st;
    struct stat sb;
    bool same = fstat(fd, &sb) == 0 && sb.st_dev == s->dev && sb.st_ino == s->ino &&
                sb.st_size == s->size;
    size_t want = n * sizeof *dst, got = 0;
    off_t at = (off_t)(HEADER_BYTES + off * sizeof *dst);
    while (same && got < want) {
        ssize_t r = pread(fd, (char *)dst + got, want - got, at + (off_t)got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!same || got != want)
        return zb_err_set(err, ZB_EIO,
                          "shard %s changed on disk while in use (truncated or replaced); "
                          "restore it and resume from the last checkpoint",
                          s->name);
    for (size_t i = 0; i < n; i++)
        if (dst[i] >= (unsigned)vocab)
            return zb_err_set(err, ZB_EIO,
                              "shard %s changed on disk while in use (token %u at position %zu "
                              "is outside the vocabulary %d)",
                              s->name, (unsigned)dst[i], off + i, vocab);
    return ZB_OK;
}

static zb_status_t map_shard(shard_t *s, const char *path, zb_err_t *err)
{
    s->name = strdup(path);
    if (!s->name)
        return zb_err_set(err, ZB_ENOMEM, "out of memory opening %s", path);
    int fd;
    zb_status_t ost = zb_open_regular(path, NULL, &fd, err);
    if (ost != ZB_OK)
        return ost;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return zb_err_set(err, ZB_EIO, "cannot open %s: %s", path, strerror(errno));
    }
    size_t size = (size_t)st.st_size;
    if (size < HEADER_BYTES) {
        close(fd);
        return zb_err_set(err, ZB_EFORMAT, "%s: truncated shard header (%zu bytes, need %zu)",
                          path, size, (size_t)HEADER_BYTES);
    }
    int32_t h[ZB_SHARD_HEADER_INTS];
    ssize_t got = pread(fd, h, sizeof h, 0);
    int saved = errno;
    s->dev = st.st_dev, s->ino = st.st_ino, s->size = st.st_size;
    close(fd);
    if (got != (ssize_t)sizeof h)
        return zb_err_set(err, ZB_EIO, "cannot read %s: %s", path,
                          got < 0 ? strerror(saved) : "short read");
    if (h[0] != ZB_SHARD_MAGIC)
        return zb_err_set(err, ZB_EFORMAT, "%s: not an llm.c token shard (magic %d, want %d)",
                          path, (int)h[0], ZB_SHARD_MAGIC);
    if (h[1] != ZB_SHARD_VERSION)
        return zb_err_set(err, ZB_EFORMAT, "%s: unsupported shard version %d (want %d)", path,
                          (int)h[1], ZB_SHARD_VERSION);
    if (h[2] <= 0)
        return zb_err_set(err, ZB_EFORMAT, "%s: shard token count is %d (must be > 0)", path,
                          (int)h[2]);
    size_t want = HEADER_BYTES + (size_t)h[2] * sizeof(uint16_t);
    if (size != want)
        return zb_err_set(err, ZB_EFORMAT,
                          "%s: %s shard: header says %d tokens (%zu bytes), file has %zu bytes",
                          path, size < want ? "truncated" : "oversized", (int)h[2], want, size);
    s->is_file = true;
    s->n = (size_t)h[2];
    return ZB_OK;
}

/* Validate every id of a file shard (< vocab) in chunks and fold it into the totals and the
 * fingerprint h. */
static zb_status_t scan_shard(zb_data_t *d, const shard_t *s, uint64_t *h, zb_err_t *err)
{
    uint16_t *buf = malloc(SCAN_CHUNK * sizeof *buf);
    if (!buf)
        return zb_err_set(err, ZB_ENOMEM, "out of memory opening %s", s->name);
    zb_status_t st = ZB_OK;
    for (size_t off = 0; off < s->n && st == ZB_OK; off += SCAN_CHUNK) {
        size_t n = s->n - off < SCAN_CHUNK ? s->n - off : SCAN_CHUNK;
        zb_err_t why;
        st = read_file_tokens(s, 65536, off, n, buf, &why);
        if (st != ZB_OK) {
            zb_err_set(err, st, "%s", why.msg);
            break;
        }
        for (size_t i = 0; i < n; i++)
            if (buf[i] >= (unsigned)d->vocab) {
                st = zb_err_set(err, ZB_EFORMAT,
                                "%s: token %u at position %zu is outside the model's vocabulary "
                                "(%d)",
                                s->name, (unsigned)buf[i], off + i, d->vocab);
                break;
            }
        if (st == ZB_OK)
            *h = fnv1a_tokens(*h, buf, n);
    }
    free(buf);
    if (st == ZB_OK)
        d->total += s->n;
    return st;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

zb_status_t zb_data_open_glob(const char *pattern, int vocab, zb_data_t **out, zb_err_t *err)
{
    *out = NULL;
    if (vocab < 1)
        return zb_err_set(err, ZB_EINVAL, "vocabulary size must be >= 1 (got %d)", vocab);
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
        if (rc == 0)
            globfree(&g);
        return zb_err_set(err, ZB_EIO, "no data file matches '%s'", pattern);
    }
    if (rc != 0)
        return zb_err_set(err, ZB_EIO, "cannot expand data pattern '%s'", pattern);
    /* glob sorts by the locale's collation; sort again bytewise so order never depends on it */
    qsort(g.gl_pathv, g.gl_pathc, sizeof(char *), cmp_str);
    zb_data_t *d = data_new(g.gl_pathc);
    if (!d) {
        globfree(&g);
        return zb_err_set(err, ZB_ENOMEM, "out of memory opening data");
    }
    zb_status_t st = ZB_OK;
    uint64_t h = 0xCBF29CE484222325ull;
    d->vocab = vocab;
    for (size_t i = 0; i < g.gl_pathc && st == ZB_OK; i++) {
        st = map_shard(&d->shards[i], g.gl_pathv[i], err);
        if (st == ZB_OK)
            st = scan_shard(d, &d->shards[i], &h, err);
    }
    globfree(&g);
    if (st != ZB_OK) {
        zb_data_free(d);
        return st;
    }
    d->fingerprint = h;
    *out = d;
    return ZB_OK;
}

zb_status_t zb_data_open_tokens(const char *name, const uint16_t *tokens, size_t n, int vocab,
                                zb_data_t **out, zb_err_t *err)
{
    *out = NULL;
    if (vocab < 1)
        return zb_err_set(err, ZB_EINVAL, "vocabulary size must be >= 1 (got %d)", vocab);
    if (n == 0)
        return zb_err_set(err, ZB_EINVAL, "%s: no tokens", name);
    zb_data_t *d = data_new(1);
    if (!d)
        return zb_err_set(err, ZB_ENOMEM, "out of memory opening %s", name);
    d->vocab = vocab;
    shard_t *s = &d->shards[0];
    s->name = strdup(name);
    s->owned = malloc(n * sizeof *s->owned);
    if (!s->name || !s->owned) {
        zb_data_free(d);
        return zb_err_set(err, ZB_ENOMEM, "out of memory opening %s", name);
    }
    memcpy(s->owned, tokens, n * sizeof *s->owned);
    s->tok = s->owned;
    s->n = n;
    zb_status_t st = finish_shard(d, s, vocab, err);
    if (st != ZB_OK) {
        zb_data_free(d);
        return st;
    }
    d->fingerprint = fnv1a_tokens(0xCBF29CE484222325ull, s->tok, s->n);
    *out = d;
    return ZB_OK;
}

zb_status_t zb_data_open_text(const char *path, int vocab, zb_data_t **out, zb_err_t *err)
{
    *out = NULL;
    char *text;
    size_t len;
    zb_status_t st = zb_read_file(path, TEXT_MAX_BYTES, &text, &len, err);
    if (st != ZB_OK)
        return st;
    if (len == 0) {
        free(text);
        return zb_err_set(err, ZB_EFORMAT, "%s: empty text file", path);
    }
    uint16_t *tok = malloc(len * sizeof *tok);
    if (!tok) {
        free(text);
        return zb_err_set(err, ZB_ENOMEM, "out of memory tokenizing %s", path);
    }
    size_t n = zb_tok_encode(text, len, tok);
    free(text);
    st = zb_data_open_tokens(path, tok, n, vocab, out, err);
    free(tok);
    if (st == ZB_OK)
        (*out)->from_text = true;
    return st;
}

void zb_data_free(zb_data_t *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->nshards; i++) {
        shard_t *s = &d->shards[i];
        free(s->owned);
        free(s->name);
    }
    free(d->shards);
    free(d->shard_order);
    free(d->batch_order);
    free(d->scratch);
    free(d);
}

size_t zb_data_num_shards(const zb_data_t *d) { return d->nshards; }
uint64_t zb_data_total_tokens(const zb_data_t *d) { return d->total; }
uint64_t zb_data_fingerprint(const zb_data_t *d) { return d->fingerprint; }

/* ---- loader ---- */

static size_t batch_tokens(const zb_data_t *d) { return (size_t)d->B * (size_t)d->T; }

/* Batch slots of a shard: start positions k·B·T with k·B·T + B·T + 1 <= n. */
static uint64_t slots_in(const zb_data_t *d, const shard_t *s)
{
    size_t bt = batch_tokens(d);
    return s->n < bt + 1 ? 0 : (uint64_t)((s->n - 1) / bt);
}

zb_status_t zb_data_configure(zb_data_t *d, int B, int T, bool shuffle, uint64_t seed,
                              zb_err_t *err)
{
    if (B < 1 || T < 1)
        return zb_err_set(err, ZB_EINVAL, "batch size and sequence length must be >= 1 (B=%d, T=%d)",
                          B, T);
    uint16_t *scratch = realloc(d->scratch, ((size_t)B * (size_t)T + 1) * sizeof *scratch);
    if (!scratch)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a batch of %d x %d tokens", B, T);
    d->scratch = scratch;
    d->B = B;
    d->T = T;
    uint64_t usable = 0;
    size_t largest = 0;
    for (size_t i = 0; i < d->nshards; i++) {
        usable += slots_in(d, &d->shards[i]);
        largest = d->shards[i].n > largest ? d->shards[i].n : largest;
    }
    if (usable == 0 && d->from_text)
        return zb_err_set(err, ZB_EINVAL,
                          "text file %s is too short: %zu tokens, a batch needs B*T+1 = %zu",
                          d->shards[0].name, largest, batch_tokens(d) + 1);
    if (usable == 0)
        return zb_err_set(err, ZB_EINVAL,
                          "no data shard holds a full batch: need B*T+1 = %zu tokens, largest "
                          "shard has %zu",
                          batch_tokens(d) + 1, largest);
    d->shuffle = shuffle;
    d->seed = seed;
    d->pos = (zb_data_pos_t){0, 0, 0};
    d->order_valid = d->batch_order_valid = false;
    d->configured = true;
    return ZB_OK;
}

/* Actual shard index at position p.shard of epoch p.epoch. */
static size_t shard_at(zb_data_t *d, uint64_t epoch, uint64_t ordinal)
{
    if (!d->shuffle)
        return (size_t)ordinal;
    if (!d->order_valid || d->order_epoch != epoch) {
        permute_u64(d->shard_order, d->nshards, d->seed, 0x5348415244ull /* "SHARD" */, epoch);
        d->order_epoch = epoch;
        d->order_valid = true;
    }
    return d->shard_order[ordinal];
}

static zb_status_t build_batch_order(zb_data_t *d, uint64_t epoch, size_t shard, uint64_t n,
                                     zb_err_t *err)
{
    if (d->batch_order_valid && d->batch_order_epoch == epoch && d->batch_order_shard == shard)
        return ZB_OK;
    if (n > d->batch_order_len) {
        uint64_t *p = realloc(d->batch_order, n * sizeof *p);
        if (!p)
            return zb_err_set(err, ZB_ENOMEM, "out of memory shuffling %s", d->shards[shard].name);
        d->batch_order = p;
        d->batch_order_len = n;
    }
    permute_u64(d->batch_order, n, d->seed, epoch, shard);
    d->batch_order_epoch = epoch;
    d->batch_order_shard = shard;
    d->batch_order_valid = true;
    return ZB_OK;
}

/* The B·T+1 tokens from position off of shard s as inputs and targets. */
static zb_status_t emit(zb_data_t *d, const shard_t *s, size_t off, int *inputs, int *targets,
                        zb_err_t *err)
{
    size_t bt = batch_tokens(d);
    const uint16_t *src = s->tok ? s->tok + off : NULL;
    if (!src) {
        zb_status_t st = read_file_tokens(s, d->vocab, off, bt + 1, d->scratch, err);
        if (st != ZB_OK)
            return st;
        src = d->scratch;
    }
    for (size_t i = 0; i < bt; i++) {
        inputs[i] = src[i];
        targets[i] = src[i + 1];
    }
    return ZB_OK;
}

/* Move to the next shard ordinal, wrapping into a new epoch. */
static void advance_shard(zb_data_t *d)
{
    d->pos.offset = 0;
    if (++d->pos.shard >= d->nshards) {
        d->pos.shard = 0;
        d->pos.epoch++;
    }
}

zb_status_t zb_data_next(zb_data_t *d, int *inputs, int *targets, zb_err_t *err)
{
    if (!d->configured)
        return zb_err_set(err, ZB_EINVAL, "data loader used before zb_data_configure");
    size_t bt = batch_tokens(d);
    /* configure guaranteed one usable shard, so this finds a batch within nshards+1 moves */
    for (size_t tries = 0; tries <= 2 * d->nshards + 1; tries++) {
        size_t si = shard_at(d, d->pos.epoch, d->pos.shard);
        const shard_t *s = &d->shards[si];
        if (!d->shuffle) {
            if (d->pos.offset + bt + 1 <= s->n) {
                zb_status_t st = emit(d, s, d->pos.offset, inputs, targets, err);
                if (st == ZB_OK)
                    d->pos.offset += bt;
                return st;
            }
        } else {
            uint64_t n = slots_in(d, s);
            if (d->pos.offset < n) {
                zb_status_t st = build_batch_order(d, d->pos.epoch, si, n, err);
                if (st != ZB_OK)
                    return st;
                st = emit(d, s, (size_t)(d->batch_order[d->pos.offset] * bt), inputs, targets,
                          err);
                if (st == ZB_OK)
                    d->pos.offset++;
                return st;
            }
        }
        advance_shard(d);
    }
    return zb_err_set(err, ZB_EINVAL, "data loader found no shard holding a full batch");
}

zb_data_pos_t zb_data_tell(const zb_data_t *d) { return d->pos; }

zb_status_t zb_data_seek(zb_data_t *d, const zb_data_pos_t *pos, zb_err_t *err)
{
    if (!d->configured)
        return zb_err_set(err, ZB_EINVAL, "data loader used before zb_data_configure");
    if (pos->shard >= d->nshards)
        return zb_err_set(err, ZB_EFORMAT, "data position names shard %llu of %zu",
                          (unsigned long long)pos->shard, d->nshards);
    size_t si = shard_at(d, pos->epoch, pos->shard);
    uint64_t limit = d->shuffle ? slots_in(d, &d->shards[si]) : (uint64_t)d->shards[si].n;
    if (pos->offset > limit)
        return zb_err_set(err, ZB_EFORMAT, "data position %llu is past the end of %s",
                          (unsigned long long)pos->offset, d->shards[si].name);
    d->pos = *pos;
    return ZB_OK;
}

zb_status_t zb_shard_write(const char *path, const uint16_t *tokens, size_t n, zb_err_t *err)
{
    if (n == 0 || n > INT32_MAX)
        return zb_err_set(err, ZB_EINVAL, "cannot write shard %s with %zu tokens", path, n);
    int32_t header[ZB_SHARD_HEADER_INTS] = {0};
    header[0] = ZB_SHARD_MAGIC;
    header[1] = ZB_SHARD_VERSION;
    header[2] = (int32_t)n;
    zb_atomic_file_t af;
    zb_status_t st = zb_atomic_open(&af, path, err);
    if (st != ZB_OK)
        return st;
    if (fwrite(header, sizeof header, 1, af.f) != 1 || fwrite(tokens, sizeof *tokens, n, af.f) != n) {
        zb_atomic_abort(&af);
        return zb_err_set(err, ZB_EIO, "cannot write %s", path);
    }
    return zb_atomic_commit(&af, err);
}
