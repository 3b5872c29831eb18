/* llm.c model checkpoint (version 3: fp32, padded vocabulary).
 * Layout: int32 header[256] = {20240326, 3, maxT, V, L, NH, C, Vp, 0...}, then the 16 tensors as
 * little-endian fp32 in llm.c order. The file size must be exactly 1024 + 4·count bytes. */
#include "zbpp/gpt2.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/gpt2_internal.h"
#include "zbpp/handshake.h"
#include "zbpp/util.h"

#define LLMC_MAGIC 20240326
#define LLMC_VERSION 3
#define LLMC_HEADER_INTS 256

/* Open `path` and check its header and size: *f is positioned at the first tensor and *h holds
 * the header. */
static zb_status_t open_checked(const char *path, FILE **fp, int32_t h[LLMC_HEADER_INTS],
                                zb_gpt2_config_t *cfg, zb_err_t *err)
{
    FILE *f;
    zb_status_t ost = zb_fopen_regular(path, "checkpoint", &f, err);
    if (ost != ZB_OK)
        return ost;
    struct stat sb;
    zb_status_t st = ZB_OK;
    zb_err_t cerr;
    if (fstat(fileno(f), &sb) != 0)
        st = zb_err_set(err, ZB_EIO, "checkpoint %s: %s", path, strerror(errno));
    else if (fread(h, sizeof(int32_t), LLMC_HEADER_INTS, f) != LLMC_HEADER_INTS)
        st = zb_err_set(err, ZB_EFORMAT, "checkpoint %s: truncated header (%lld bytes, need %zu)",
                        path, (long long)sb.st_size, LLMC_HEADER_INTS * sizeof(int32_t));
    else if (h[0] != LLMC_MAGIC)
        st = zb_err_set(err, ZB_EFORMAT, "checkpoint %s: bad magic %d (expected %d)", path, h[0],
                        LLMC_MAGIC);
    else if (h[1] != LLMC_VERSION)
        st = zb_err_set(err, ZB_EFORMAT,
                        "checkpoint %s: unsupported version %d (only %d = fp32 padded vocab)", path,
                        h[1], LLMC_VERSION);
    if (st == ZB_OK) {
        *cfg = (zb_gpt2_config_t){.max_seq = h[2], .vocab = h[3], .layers = h[4], .heads = h[5],
                                  .channels = h[6], .padded_vocab = h[7]};
        if (zb_gpt2_config_check(cfg, &cerr) != ZB_OK)
            st = zb_err_set(err, ZB_EFORMAT, "checkpoint %s: %s", path, cerr.msg);
    }
    if (st == ZB_OK) {
        size_t sizes[ZB_GPT2_NUM_TENSORS], count = 0;
        zb_gpt2_tensor_sizes(cfg, sizes);
        for (int i = 0; i < ZB_GPT2_NUM_TENSORS; i++)
            count += sizes[i];
        unsigned long long expect =
            LLMC_HEADER_INTS * sizeof(int32_t) + (unsigned long long)count * sizeof(float);
        if ((unsigned long long)sb.st_size != expect)
            st = zb_err_set(err, ZB_EFORMAT, "checkpoint %s: %s: %lld bytes, expected %llu", path,
                            (unsigned long long)sb.st_size < expect ? "truncated" : "extra bytes",
                            (long long)sb.st_size, expect);
    }
    if (st != ZB_OK) {
        fclose(f);
        return st;
    }
    *fp = f;
    return ZB_OK;
}

zb_status_t zb_gpt2_peek_llmc(const char *path, zb_gpt2_config_t *cfg, zb_err_t *err)
{
    FILE *f;
    int32_t h[LLMC_HEADER_INTS];
    zb_status_t st = open_checked(path, &f, h, cfg, err);
    if (st == ZB_OK)
        fclose(f);
    return st;
}

zb_status_t zb_gpt2_load_llmc(const char *path, zb_gpt2_params_t *out, zb_err_t *err)
{
    memset(out, 0, sizeof *out);
    FILE *f;
    int32_t h[LLMC_HEADER_INTS];
    zb_gpt2_config_t cfg;
    zb_status_t s = open_checked(path, &f, h, &cfg, err);
    if (s != ZB_OK)
        return s;
    if ((s = zb_gpt2_params_alloc(out, &cfg, err)) != ZB_OK) {
        fclose(f);
        return s;
    }
    if (fread(out->data, sizeof(float), out->count, f) != out->count) {
        fclose(f);
        zb_gpt2_params_free(out);
        return zb_err_set(err, ZB_EIO, "checkpoint %s: read failed", path);
    }
    fclose(f);
    return ZB_OK;
}

#define STREAM_FLOATS ((size_t)1 << 18) /* 1 MiB pieces */

zb_status_t zb_gpt2_load_llmc_into(const char *path, zb_gpt2_params_t *p, uint64_t *hash,
                                   zb_err_t *err)
{
    FILE *f;
    int32_t h[LLMC_HEADER_INTS];
    zb_gpt2_config_t cfg;
    zb_status_t st = open_checked(path, &f, h, &cfg, err);
    if (st != ZB_OK)
        return st;
    if (memcmp(&cfg, &p->cfg, sizeof cfg) != 0) {
        fclose(f);
        return zb_err_set(err, ZB_EMISMATCH,
                          "checkpoint %s holds another model (L=%d NH=%d C=%d V=%d maxT=%d) than "
                          "the one being built", path, cfg.layers, cfg.heads, cfg.channels,
                          cfg.vocab, cfg.max_seq);
    }
    size_t sizes[ZB_GPT2_NUM_TENSORS], count = 0;
    zb_gpt2_tensor_sizes(&cfg, sizes);
    for (int i = 0; i < ZB_GPT2_NUM_TENSORS; i++)
        count += sizes[i];
    float *buf = malloc(STREAM_FLOATS * sizeof *buf);
    if (!buf) {
        fclose(f);
        return zb_err_set(err, ZB_ENOMEM, "out of memory reading %s", path);
    }
    zb_hasher_t hs;
    zb_hasher_init(&hs, ZB_HASH_SEED);
    zb_hasher_add(&hs, h, sizeof h);
    for (size_t at = 0; at < count && st == ZB_OK; at += STREAM_FLOATS) {
        size_t n = count - at < STREAM_FLOATS ? count - at : STREAM_FLOATS;
        if (fread(buf, sizeof(float), n, f) != n) {
            st = zb_err_set(err, ZB_EIO, "checkpoint %s: read failed", path);
            break;
        }
        zb_hasher_add(&hs, buf, n * sizeof(float));
        zb_gpt2_scatter(p, p->data, at, buf, n);
    }
    free(buf);
    fclose(f);
    if (st == ZB_OK && hash)
        *hash = zb_hasher_end(&hs);
    return st;
}

zb_status_t zb_gpt2_save_llmc(const char *path, const zb_gpt2_params_t *p, zb_err_t *err)
{
    zb_status_t s = zb_gpt2_config_check(&p->cfg, err);
    if (s != ZB_OK)
        return s;
    int32_t h[LLMC_HEADER_INTS] = {LLMC_MAGIC,        LLMC_VERSION,    p->cfg.max_seq,
                                   p->cfg.vocab,      p->cfg.layers,   p->cfg.heads,
                                   p->cfg.channels,   p->cfg.padded_vocab};
    zb_atomic_file_t af;
    if ((s = zb_atomic_open(&af, path, err)) != ZB_OK)
        return s;
    if (fwrite(h, sizeof h, 1, af.f) != 1 ||
        fwrite(p->data, sizeof(float), p->count, af.f) != p->count) {
        int e = errno;
        zb_atomic_abort(&af);
        return zb_err_set(err, ZB_EIO, "cannot write checkpoint %s: %s", path, strerror(e));
    }
    return zb_atomic_commit(&af, err);
}
