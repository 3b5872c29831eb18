/* Training data: llm.c token shards (memory-mapped), validation, and the batch loader.
 *
 * Every shard is fully validated when opened (header, exact size, token ids < vocab) so a bad file
 * fails before the first step, not hours into a run. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    void *map; /* mmap'd file (NULL for an in-memory shard) */
    size_t map_len;
    uint16_t *owned; /* in-memory tokens (NULL for a mapped shard) */
} shard_t;

struct zb_data {
    shard_t *shards;
    size_t nshards;
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
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);
    if (map == MAP_FAILED)
        return zb_err_set(err, ZB_EIO, "cannot map %s: %s", path, strerror(saved));
    s->map = map;
    s->map_len = size;
    const int32_t *h = map;
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
    s->tok = (const uint16_t *)((const char *)map + HEADER_BYTES);
    s->n = (size_t)h[2];
    return ZB_OK;
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
    for (size_t i = 0; i < g.gl_pathc && st == ZB_OK; i++) {
        st = map_shard(&d->shards[i], g.gl_pathv[i], err);
        if (st == ZB_OK)
            st = finish_shard(d, &d->shards[i], vocab, err);
        if (st == ZB_OK)
            h = fnv1a_tokens(h, d->shards[i].tok, d->shards[i].n);
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
    return st;
}

void zb_data_free(zb_data_t *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->nshards; i++) {
        shard_t *s = &d->shards[i];
        if (s->map)
            munmap(s->map, s->map_len);
        free(s->owned);
        free(s->name);
    }
    free(d->shards);
    free(d->shard_order);
    free(d->batch_order);
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
    d->B = B;
    d->T = T;
    uint64_t usable = 0;
    for (size_t i = 0; i < d->nshards; i++)
        usable += slots_in(d, &d->shards[i]);
    if (usable == 0)
        return zb_err_set(err, ZB_EINVAL,
                          "no data shard holds a full batch: need B*T+1 = %zu tokens, largest "
                          "shard is smaller",
                          batch_tokens(d) + 1);
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

static void emit(const zb_data_t *d, const uint16_t *src, int *inputs, int *targets)
{
    size_t bt = batch_tokens(d);
    for (size_t i = 0; i < bt; i++) {
        inputs[i] = src[i];
        targets[i] = src[i + 1];
    }
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
                emit(d, s->tok + d->pos.offset, inputs, targets);
                d->pos.offset += bt;
                return ZB_OK;
            }
        } else {
            uint64_t n = slots_in(d, s);
            if (d->pos.offset < n) {
                zb_status_t st = build_batch_order(d, d->pos.epoch, si, n, err);
                if (st != ZB_OK)
                    return st;
                emit(d, s->tok + d->batch_order[d->pos.offset] * bt, inputs, targets);
                d->pos.offset++;
                return ZB_OK;
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
