/* Training checkpoints: everything needed to continue a run bit-exactly.
 *
 * Layout (little-endian, as written by x86/ARM hosts; docs/training.md has the table):
 *   64 uint64 header words, then params, AdamW m, AdamW v (count float32 each).
 * Floats in the header are stored as their IEEE bit patterns so they round-trip exactly. The
 * payload carries an FNV-1a checksum, and the header (version 2) one of its own, so a corrupted
 * file is rejected instead of resumed: a flipped byte in lr, step or seed would otherwise change
 * the continuation silently. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zbpp/train.h"
#include "zbpp/util.h"

#define CKPT_MAGIC 0x314E52545050425Aull /* the bytes "ZBPPTRN1" on a little-endian host */
#define CKPT_VERSION 2 /* 2: the header carries its own checksum (H_HEADER_SUM) */
#define HEADER_WORDS 64

enum {
    H_MAGIC, H_VERSION, H_HEADER_WORDS,
    H_MAXT, H_VOCAB, H_PVOCAB, H_LAYERS, H_HEADS, H_CHANNELS, H_PARAM_COUNT,
    H_STEP, H_SKIPPED,
    H_BATCH, H_SEQ, H_MICRO, H_STEPS, H_SHUFFLE, H_SEED,
    H_DATA_FP, H_DATA_TOKENS, H_DATA_SHARDS, H_POS_EPOCH, H_POS_SHARD, H_POS_OFFSET,
    H_LR, H_BETA1, H_BETA2, H_EPS, H_WD, H_CLIP, H_SCHED, H_WARMUP, H_LR_MIN,
    H_CHECKSUM,
    H_HEADER_SUM, /* FNV-1a of all HEADER_WORDS words with this one zero */
    H_USED
};

static uint64_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint64_t w)
{
    uint32_t u = (uint32_t)w;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

static uint64_t header_sum(const uint64_t *h)
{
    uint64_t c[HEADER_WORDS];
    memcpy(c, h, sizeof c);
    c[H_HEADER_SUM] = 0;
    return fnv1a(0xCBF29CE484222325ull, c, sizeof c);
}

static void put_config(uint64_t *h, const zb_train_config_t *c, const zb_gpt2_config_t *m)
{
    h[H_MAXT] = (uint64_t)m->max_seq;
    h[H_VOCAB] = (uint64_t)m->vocab;
    h[H_PVOCAB] = (uint64_t)m->padded_vocab;
    h[H_LAYERS] = (uint64_t)m->layers;
    h[H_HEADS] = (uint64_t)m->heads;
    h[H_CHANNELS] = (uint64_t)m->channels;
    h[H_BATCH] = (uint64_t)c->batch;
    h[H_SEQ] = (uint64_t)c->seq;
    h[H_MICRO] = (uint64_t)c->microbatches;
    h[H_STEPS] = (uint64_t)c->steps;
    h[H_SHUFFLE] = c->shuffle;
    h[H_SEED] = c->seed;
    h[H_LR] = fbits(c->adamw.lr);
    h[H_BETA1] = fbits(c->adamw.beta1);
    h[H_BETA2] = fbits(c->adamw.beta2);
    h[H_EPS] = fbits(c->adamw.eps);
    h[H_WD] = fbits(c->adamw.weight_decay);
    h[H_CLIP] = fbits(c->grad_clip);
    h[H_SCHED] = (uint64_t)c->lr_schedule;
    h[H_WARMUP] = (uint64_t)c->warmup;
    h[H_LR_MIN] = fbits(c->lr_min);
}

static void get_config(const uint64_t *h, zb_train_config_t *c)
{
    c->model.max_seq = (int)h[H_MAXT];
    c->model.vocab = (int)h[H_VOCAB];
    c->model.padded_vocab = (int)h[H_PVOCAB];
    c->model.layers = (int)h[H_LAYERS];
    c->model.heads = (int)h[H_HEADS];
    c->model.channels = (int)h[H_CHANNELS];
    c->batch = (int)h[H_BATCH];
    c->seq = (int)h[H_SEQ];
    c->microbatches = (int)h[H_MICRO];
    c->steps = (long)h[H_STEPS];
    c->shuffle = h[H_SHUFFLE] != 0;
    c->seed = h[H_SEED];
    c->adamw.lr = bitsf(h[H_LR]);
    c->adamw.beta1 = bitsf(h[H_BETA1]);
    c->adamw.beta2 = bitsf(h[H_BETA2]);
    c->adamw.eps = bitsf(h[H_EPS]);
    c->adamw.weight_decay = bitsf(h[H_WD]);
    c->grad_clip = bitsf(h[H_CLIP]);
    c->lr_schedule = (zb_lr_kind_t)h[H_SCHED];
    c->warmup = (long)h[H_WARMUP];
    c->lr_min = bitsf(h[H_LR_MIN]);
}

zb_status_t zb_train_save(const zb_trainer_t *t, const char *path, zb_err_t *err)
{
    uint64_t h[HEADER_WORDS] = {0};
    h[H_MAGIC] = CKPT_MAGIC;
    h[H_VERSION] = CKPT_VERSION;
    h[H_HEADER_WORDS] = HEADER_WORDS;
    put_config(h, &t->cfg, &t->params.cfg);
    size_t count = t->params.count;
    h[H_PARAM_COUNT] = count;
    h[H_STEP] = (uint64_t)t->step;
    h[H_SKIPPED] = (uint64_t)t->skipped;
    h[H_DATA_FP] = zb_data_fingerprint(t->data);
    h[H_DATA_TOKENS] = zb_data_total_tokens(t->data);
    h[H_DATA_SHARDS] = zb_data_num_shards(t->data);
    zb_data_pos_t pos = zb_data_tell(t->data);
    h[H_POS_EPOCH] = pos.epoch;
    h[H_POS_SHARD] = pos.shard;
    h[H_POS_OFFSET] = pos.offset;
    const float *blocks[3] = {t->params.data, t->opt.m.data, t->opt.v.data};
    uint64_t sum = 0xCBF29CE484222325ull;
    for (int b = 0; b < 3; b++)
        sum = fnv1a(sum, blocks[b], count * sizeof(float));
    h[H_CHECKSUM] = sum;
    h[H_HEADER_SUM] = header_sum(h);

    zb_atomic_file_t af;
    zb_status_t st = zb_atomic_open(&af, path, err);
    if (st != ZB_OK)
        return st;
    int ok = fwrite(h, sizeof h, 1, af.f) == 1;
    for (int b = 0; b < 3 && ok; b++)
        ok = fwrite(blocks[b], sizeof(float), count, af.f) == count;
    if (!ok) {
        zb_atomic_abort(&af);
        return zb_err_set(err, ZB_EIO, "cannot write checkpoint %s: %s", path, strerror(errno));
    }
    return zb_atomic_commit(&af, err);
}

/* Parameters of a GPT-2 shape (llm.c layout), or 0 if it overflows: a header whose count does not
 * follow from its shape is rejected before anything is allocated. */
static uint64_t shape_param_count(const zb_gpt2_config_t *m)
{
    double C = m->channels, L = m->layers;
    double n = (double)m->padded_vocab * C + (double)m->max_seq * C +
               L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
    return n < 9e15 ? (uint64_t)n : 0;
}

/* The stored training settings must be valid on their own: a bad value read from the file is the
 * file's fault (ZB_EFORMAT, exit 1), not that of a flag the user never passed. */
static zb_status_t check_stored_settings(const char *path, const uint64_t *h, zb_err_t *err)
{
    static const int words[] = {H_BATCH, H_SEQ, H_MICRO, H_WARMUP};
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    get_config(h, &c);
    c.text_path = path; /* data is not stored: only the settings are checked */
    zb_err_t why;
    zb_err_clear(&why);
    bool fits = (int64_t)h[H_STEPS] <= INT64_MAX / 2 && (int64_t)h[H_STEPS] >= -1;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) /* stored from ints */
        fits = fits && (int64_t)h[words[i]] >= INT32_MIN && (int64_t)h[words[i]] <= INT32_MAX;
    if (!fits)
        return zb_err_set(err, ZB_EFORMAT, "checkpoint %s holds an out-of-range setting", path);
    if (zb_train_config_check(&c, &why) != ZB_OK)
        return zb_err_set(err, ZB_EFORMAT, "checkpoint %s holds an invalid setting: %s", path,
                          why.msg);
    if (c.seq > (int)h[H_MAXT])
        return zb_err_set(err, ZB_EFORMAT,
                          "checkpoint %s holds sequence length %d, more than its model's "
                          "maximum %d",
                          path, c.seq, (int)h[H_MAXT]);
    return ZB_OK;
}

/* Open a checkpoint, read and check its header (magic, version, size against the model shape).
 * The file is left open in *fp for the payload, or closed when fp is NULL (the header only). */
static zb_status_t read_header(const char *path, uint64_t h[HEADER_WORDS], FILE **fp,
                               zb_err_t *err)
{
    if (fp)
        *fp = NULL;
    FILE *f;
    zb_status_t ost = zb_fopen_regular(path, "checkpoint", &f, err);
    if (ost != ZB_OK)
        return ost;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        fclose(f);
        return zb_err_set(err, ZB_EIO, "cannot read checkpoint %s: %s", path, strerror(errno));
    }
    size_t size = (size_t)sb.st_size;
    if (size < HEADER_WORDS * sizeof(uint64_t) || fread(h, sizeof(uint64_t), HEADER_WORDS, f) !=
                                                      HEADER_WORDS) {
        fclose(f);
        return zb_err_set(err, ZB_EFORMAT, "checkpoint %s: truncated header (%zu bytes)", path,
                          size);
    }
    zb_status_t st = ZB_OK;
    if (h[H_MAGIC] != CKPT_MAGIC)
        st = zb_err_set(err, ZB_EFORMAT, "%s is not a zbpp training checkpoint (bad magic)", path);
    else if (h[H_VERSION] == 1)
        st = zb_err_set(err, ZB_EFORMAT,
                        "checkpoint %s: version 1 (no header checksum) is no longer read; resume "
                        "it with the zbpp that wrote it, or start again", path);
    else if (h[H_VERSION] != CKPT_VERSION)
        st = zb_err_set(err, ZB_EFORMAT, "checkpoint %s: unsupported version %llu (want %d)", path,
                        (unsigned long long)h[H_VERSION], CKPT_VERSION);
    else if (h[H_HEADER_WORDS] != HEADER_WORDS)
        st = zb_err_set(err, ZB_EFORMAT, "checkpoint %s: bad header size", path);
    else if (h[H_HEADER_SUM] != header_sum(h))
        st = zb_err_set(err, ZB_EFORMAT, "checkpoint %s is corrupt (header checksum mismatch)",
                        path);
    zb_train_config_t c;
    memset(&c, 0, sizeof c);
    if (st == ZB_OK) {
        get_config(h, &c);
        /* the tensor sizes follow from the shape; check it before trusting H_PARAM_COUNT */
        if (h[H_MAXT] > INT32_MAX || h[H_VOCAB] > INT32_MAX || h[H_PVOCAB] > INT32_MAX ||
            h[H_LAYERS] > INT32_MAX || h[H_HEADS] > INT32_MAX || h[H_CHANNELS] > INT32_MAX ||
            zb_gpt2_config_check(&c.model, NULL) != ZB_OK)
            st = zb_err_set(err, ZB_EFORMAT, "checkpoint %s: invalid model shape", path);
    }
    if (st == ZB_OK)
        st = check_stored_settings(path, h, err);
    if (st == ZB_OK) {
        uint64_t count = h[H_PARAM_COUNT];
        if (count != shape_param_count(&c.model)) {
            fclose(f);
            return zb_err_set(err, ZB_EFORMAT,
                              "checkpoint %s: parameter count does not match its model shape", path);
        }
        uint64_t want = HEADER_WORDS * sizeof(uint64_t) + 3 * count * sizeof(float);
        if (count == 0 || count > ((uint64_t)1 << 40) || size != want)
            st = zb_err_set(err, ZB_EFORMAT,
                            "checkpoint %s: %s file (%zu bytes, expected %llu for %llu parameters)",
                            path, size < want ? "truncated" : "oversized", size,
                            (unsigned long long)want, (unsigned long long)count);
    }
    if (st != ZB_OK) {
        fclose(f);
        return st;
    }
    if (fp)
        *fp = f;
    else
        fclose(f);
    return ZB_OK;
}

zb_status_t zb_train_peek(const char *path, zb_train_config_t *cfg, zb_err_t *err)
{
    uint64_t h[HEADER_WORDS];
    zb_status_t st = read_header(path, h, NULL, err);
    if (st != ZB_OK)
        return st;
    get_config(h, cfg);
    return ZB_OK;
}

#define MISMATCH(field, fmt, a, b)                                                               \
    zb_err_set(err, ZB_EMISMATCH, "checkpoint %s was saved with " field " " fmt                  \
                                  ", this run has " fmt, path, a, b)

/* Every stored setting but `steps` must match: they decide the bits of the continuation. */
static zb_status_t check_match(const char *path, const uint64_t *h, const zb_trainer_t *t,
                               zb_err_t *err)
{
    zb_train_config_t s;
    memset(&s, 0, sizeof s);
    get_config(h, &s);
    const zb_train_config_t *c = &t->cfg;
    const zb_gpt2_config_t *m = &t->model;
    if (memcmp(&s.model, m, sizeof *m) != 0)
        return zb_err_set(err, ZB_EMISMATCH,
                          "checkpoint %s holds a different model (L=%d NH=%d C=%d V=%d maxT=%d)",
                          path, s.model.layers, s.model.heads, s.model.channels, s.model.vocab,
                          s.model.max_seq);
    if (h[H_PARAM_COUNT] != t->param_count)
        return zb_err_set(err, ZB_EMISMATCH, "checkpoint %s: parameter count differs", path);
    if (s.batch != c->batch)
        return MISMATCH("--batch", "%d", s.batch, c->batch);
    if (s.seq != c->seq)
        return MISMATCH("--seq", "%d", s.seq, c->seq);
    if (s.microbatches != c->microbatches)
        return MISMATCH("--microbatches", "%d", s.microbatches, c->microbatches);
    if (s.shuffle != c->shuffle)
        return MISMATCH("shuffle", "%s", s.shuffle ? "on" : "off", c->shuffle ? "on" : "off");
    if (s.seed != c->seed)
        return MISMATCH("--seed", "%llu", (unsigned long long)s.seed,
                        (unsigned long long)c->seed);
    if (fbits(s.adamw.lr) != fbits(c->adamw.lr))
        return MISMATCH("--lr", "%g", s.adamw.lr, c->adamw.lr);
    if (fbits(s.adamw.beta1) != fbits(c->adamw.beta1))
        return MISMATCH("--beta1", "%g", s.adamw.beta1, c->adamw.beta1);
    if (fbits(s.adamw.beta2) != fbits(c->adamw.beta2))
        return MISMATCH("--beta2", "%g", s.adamw.beta2, c->adamw.beta2);
    if (fbits(s.adamw.eps) != fbits(c->adamw.eps))
        return MISMATCH("--eps", "%g", s.adamw.eps, c->adamw.eps);
    if (fbits(s.adamw.weight_decay) != fbits(c->adamw.weight_decay))
        return MISMATCH("--weight-decay", "%g", s.adamw.weight_decay, c->adamw.weight_decay);
    if (fbits(s.grad_clip) != fbits(c->grad_clip))
        return MISMATCH("--grad-clip", "%g", s.grad_clip, c->grad_clip);
    if (s.lr_schedule != c->lr_schedule)
        return MISMATCH("--lr-schedule", "%s", zb_lr_kind_name(s.lr_schedule),
                        zb_lr_kind_name(c->lr_schedule));
    if (s.warmup != c->warmup)
        return MISMATCH("--warmup", "%ld", s.warmup, c->warmup);
    if (fbits(s.lr_min) != fbits(c->lr_min))
        return MISMATCH("--lr-min", "%g", s.lr_min, c->lr_min);
    if (h[H_DATA_FP] != zb_data_fingerprint(t->data) ||
        h[H_DATA_TOKENS] != zb_data_total_tokens(t->data) ||
        h[H_DATA_SHARDS] != zb_data_num_shards(t->data))
        return zb_err_set(err, ZB_EMISMATCH,
                          "checkpoint %s was trained on different data (%llu tokens in %llu "
                          "shards; this run has %llu in %zu)",
                          path, (unsigned long long)h[H_DATA_TOKENS],
                          (unsigned long long)h[H_DATA_SHARDS],
                          (unsigned long long)zb_data_total_tokens(t->data),
                          zb_data_num_shards(t->data));
    if (h[H_SKIPPED] > h[H_STEP] || h[H_STEP] > (uint64_t)INT64_MAX / 2)
        return zb_err_set(err, ZB_EFORMAT, "checkpoint %s: bad step counters", path);
    return ZB_OK;
}

#define STREAM_FLOATS ((size_t)1 << 18) /* 1 MiB pieces */

/* The payload (params, m, v of the whole model, in that order) from f, positioned after the
 * header, checked against the header's checksum. With `layout` NULL it is only checked; else
 * every piece that layout holds goes into dst[0..2] (buffers of layout's shape). */
static zb_status_t stream_payload(FILE *f, const char *path, const uint64_t *h,
                                  const zb_gpt2_params_t *layout, float *const dst[3],
                                  zb_err_t *err)
{
    size_t count = (size_t)h[H_PARAM_COUNT];
    float *buf = malloc(STREAM_FLOATS * sizeof *buf);
    if (!buf)
        return zb_err_set(err, ZB_ENOMEM, "out of memory reading checkpoint %s", path);
    zb_status_t st = ZB_OK;
    uint64_t sum = 0xCBF29CE484222325ull;
    for (int b = 0; b < 3 && st == ZB_OK; b++)
        for (size_t at = 0; at < count; at += STREAM_FLOATS) {
            size_t n = count - at < STREAM_FLOATS ? count - at : STREAM_FLOATS;
            if (fread(buf, sizeof *buf, n, f) != n) {
                st = zb_err_set(err, ZB_EIO, "cannot read checkpoint %s", path);
                break;
            }
            sum = fnv1a(sum, buf, n * sizeof *buf);
            if (layout)
                zb_gpt2_scatter(layout, dst[b], at, buf, n);
        }
    free(buf);
    if (st == ZB_OK && sum != h[H_CHECKSUM])
        st = zb_err_set(err, ZB_EFORMAT, "checkpoint %s is corrupt (checksum mismatch)", path);
    return st;
}

zb_status_t zb_train_resume_header(zb_trainer_t *t, const char *path, uint64_t *hash,
                                   zb_err_t *err)
{
    uint64_t h[HEADER_WORDS];
    zb_status_t st = read_header(path, h, NULL, err);
    if (st != ZB_OK)
        return st;
    zb_data_pos_t pos = {h[H_POS_EPOCH], h[H_POS_SHARD], h[H_POS_OFFSET]};
    if ((st = check_match(path, h, t, err)) == ZB_OK &&
        (st = zb_data_seek(t->data, &pos, err)) == ZB_OK) {
        t->step = (long)h[H_STEP];
        t->skipped = (long)h[H_SKIPPED];
        if (hash) /* covers the payload's checksum, the step and the data position */
            *hash = h[H_HEADER_SUM];
    }
    return st;
}

zb_status_t zb_train_load_into(const char *path, const zb_gpt2_params_t *layout, float *params,
                               float *m, float *v, zb_err_t *err)
{
    uint64_t h[HEADER_WORDS];
    FILE *f;
    zb_status_t st = read_header(path, h, &f, err);
    if (st != ZB_OK)
        return st;
    zb_train_config_t c;
    get_config(h, &c);
    if (memcmp(&c.model, &layout->cfg, sizeof c.model) != 0)
        st = zb_err_set(err, ZB_EMISMATCH, "checkpoint %s holds a different model", path);
    float *const dst[3] = {params, m, v};
    if (st == ZB_OK)
        st = stream_payload(f, path, h, layout, dst, err);
    fclose(f);
    return st;
}

zb_status_t zb_train_load(zb_trainer_t *t, const char *path, zb_err_t *err)
{
    uint64_t h[HEADER_WORDS];
    FILE *f;
    zb_status_t st = read_header(path, h, &f, err);
    if (st != ZB_OK)
        return st;
    st = check_match(path, h, t, err);
    /* checked in a first pass, so a corrupt file leaves the trainer untouched */
    float *const dst[3] = {t->params.data, t->opt.m.data, t->opt.v.data};
    long payload = (long)(HEADER_WORDS * sizeof(uint64_t));
    if (st == ZB_OK)
        st = stream_payload(f, path, h, NULL, dst, err);
    if (st == ZB_OK && fseek(f, payload, SEEK_SET) != 0)
        st = zb_err_set(err, ZB_EIO, "cannot read checkpoint %s", path);
    zb_data_pos_t pos = {h[H_POS_EPOCH], h[H_POS_SHARD], h[H_POS_OFFSET]};
    if (st == ZB_OK)
        st = zb_data_seek(t->data, &pos, err);
    if (st == ZB_OK)
        st = stream_payload(f, path, h, &t->params, dst, err);
    fclose(f);
    if (st == ZB_OK) {
        t->step = (long)h[H_STEP];
        t->skipped = (long)h[H_SKIPPED];
    }
    return st;
}
