/* llm.c's GPT-2 tokenizer file (tokenizer.h): a bounded reader over the whole file in memory,
 * the pieces in one blob with offsets, and a hash table of pieces for longest-match encoding. */
#include "zbpp/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/util.h"

#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * 4)
#define MAX_VOCAB (1 << 22)
#define MAX_FILE ((size_t)HEADER_BYTES + (size_t)MAX_VOCAB * 256)

struct zb_gpt2_tok {
    int vocab, eot, max_len;
    char *blob;     /* every piece's bytes, in id order */
    size_t *off;    /* [vocab + 1]: piece i is blob[off[i] .. off[i+1]) */
    int *table;     /* [table_cap] open addressing: token id or -1 */
    size_t table_cap;
};

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* Slot of the piece s[0..n) in the table: its id, or -1 when absent. */
static int lookup(const zb_gpt2_tok_t *t, const char *s, size_t n)
{
    size_t mask = t->table_cap - 1;
    for (size_t i = (size_t)hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        int id = t->table[i];
        if (id < 0)
            return -1;
        size_t len = t->off[id + 1] - t->off[id];
        if (len == n && !memcmp(t->blob + t->off[id], s, n))
            return id;
    }
}

static void insert(zb_gpt2_tok_t *t, int id)
{
    const char *s = t->blob + t->off[id];
    size_t n = t->off[id + 1] - t->off[id];
    if (lookup(t, s, n) >= 0)
        return; /* a duplicate piece: the lower id stays */
    size_t mask = t->table_cap - 1;
    size_t i = (size_t)hash_bytes(s, n) & mask;
    while (t->table[i] >= 0)
        i = (i + 1) & mask;
    t->table[i] = id;
}

void zb_gpt2_tok_free(zb_gpt2_tok_t *t)
{
    if (!t)
        return;
    free(t->blob);
    free(t->off);
    free(t->table);
    free(t);
}

zb_status_t zb_gpt2_tok_parse(const char *name, const unsigned char *data, size_t len,
                              zb_gpt2_tok_t **out, zb_err_t *err)
{
    *out = NULL;
    if (len < HEADER_BYTES)
        return zb_err_set(err, ZB_EFORMAT, "tokenizer %s: truncated header (%zu bytes, need %d)",
                          name, len, HEADER_BYTES);
    uint32_t magic = rd32(data), version = rd32(data + 4), vocab = rd32(data + 8);
    uint32_t eot = rd32(data + 12);
    if (magic != ZB_GPT2_TOK_MAGIC)
        return zb_err_set(err, ZB_EFORMAT,
                          "tokenizer %s: bad magic %u (expected %d, llm.c's GPT-2 tokenizer)",
                          name, magic, ZB_GPT2_TOK_MAGIC);
    if (version != 1 && version != 2)
        return zb_err_set(err, ZB_EFORMAT, "tokenizer %s: unsupported version %u (1 or 2)", name,
                          version);
    if (vocab < 1 || vocab > MAX_VOCAB)
        return zb_err_set(err, ZB_EFORMAT, "tokenizer %s: vocab size %u not in [1, %d]", name,
                          vocab, MAX_VOCAB);
    if (version == 2 && eot >= vocab)
        return zb_err_set(err, ZB_EFORMAT, "tokenizer %s: eot token %u not below vocab size %u",
                          name, eot, vocab);
    /* every piece needs at least its length byte and one byte */
    if ((len - HEADER_BYTES) / 2 < vocab)
        return zb_err_set(err, ZB_EFORMAT,
                          "tokenizer %s: truncated: %zu bytes cannot hold %u tokens", name, len,
                          vocab);
    zb_gpt2_tok_t *t = calloc(1, sizeof *t);
    if (!t)
        return zb_err_set(err, ZB_ENOMEM, "tokenizer %s: out of memory", name);
    t->vocab = (int)vocab;
    t->eot = version == 2 ? (int)eot : vocab == 50257 ? 50256 : -1;
    t->off = malloc(((size_t)vocab + 1) * sizeof *t->off);
    t->blob = malloc(len - HEADER_BYTES); /* pieces are shorter than what is left of the file */
    t->table_cap = 16;
    while (t->table_cap < 2 * (size_t)vocab)
        t->table_cap *= 2;
    t->table = malloc(t->table_cap * sizeof *t->table);
    if (!t->off || !t->blob || !t->table) {
        zb_gpt2_tok_free(t);
        return zb_err_set(err, ZB_ENOMEM, "tokenizer %s: out of memory", name);
    }
    size_t pos = HEADER_BYTES, used = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        if (pos >= len) {
            zb_gpt2_tok_free(t);
            return zb_err_set(err, ZB_EFORMAT,
                              "tokenizer %s: truncated at token %u of %u (no length byte)", name,
                              i, vocab);
        }
        size_t n = data[pos++];
        if (n == 0) {
            zb_gpt2_tok_free(t);
            return zb_err_set(err, ZB_EFORMAT, "tokenizer %s: token %u has length 0", name, i);
        }
        if (n > len - pos) {
            zb_gpt2_tok_free(t);
            return zb_err_set(err, ZB_EFORMAT,
                              "tokenizer %s: token %u of length %zu runs past the end of the "
                              "file (%zu bytes)",
                              name, i, n, len);
        }
        t->off[i] = used;
        memcpy(t->blob + used, data + pos, n);
        used += n;
        pos += n;
        if ((int)n > t->max_len)
            t->max_len = (int)n;
    }
    t->off[vocab] = used;
    if (pos != len) {
        zb_gpt2_tok_free(t);
        return zb_err_set(err, ZB_EFORMAT,
                          "tokenizer %s: %zu extra bytes after the last of %u tokens", name,
                          len - pos, vocab);
    }
    for (size_t i = 0; i < t->table_cap; i++)
        t->table[i] = -1;
    for (int i = 0; i < t->vocab; i++)
        insert(t, i);
    *out = t;
    return ZB_OK;
}

zb_status_t zb_gpt2_tok_load(const char *path, zb_gpt2_tok_t **out, zb_err_t *err)
{
    *out = NULL;
    FILE *f;
    zb_status_t st = zb_fopen_regular(path, "tokenizer", &f, err);
    if (st != ZB_OK)
        return st;
    fclose(f);
    char *data;
    size_t len;
    if ((st = zb_read_file(path, MAX_FILE, &data, &len, err)) != ZB_OK)
        return st == ZB_EIO || st == ZB_ENOMEM ? st : ZB_EFORMAT;
    st = zb_gpt2_tok_parse(path, (const unsigned char *)data, len, out, err);
    free(data);
    return st;
}

int zb_gpt2_tok_vocab(const zb_gpt2_tok_t *t)
{
    return t->vocab;
}

int zb_gpt2_tok_eot(const zb_gpt2_tok_t *t)
{
    return t->eot;
}

const char *zb_gpt2_tok_piece(const zb_gpt2_tok_t *t, int id, size_t *len)
{
    if (id < 0 || id >= t->vocab) {
        *len = 0;
        return NULL;
    }
    *len = t->off[id + 1] - t->off[id];
    return t->blob + t->off[id];
}

zb_status_t zb_gpt2_tok_encode(const zb_gpt2_tok_t *t, const char *text, size_t len, int *out,
                               size_t cap, size_t *n, zb_err_t *err)
{
    *n = 0;
    for (size_t i = 0; i < len;) {
        size_t most = len - i < (size_t)t->max_len ? len - i : (size_t)t->max_len;
        int id = -1;
        size_t k = most;
        for (; k >= 1 && id < 0; k--)
            id = lookup(t, text + i, k);
        if (id < 0)
            return zb_err_set(err, ZB_EINVAL,
                              "tokenizer: byte 0x%02x at offset %zu is not in the vocabulary",
                              (unsigned char)text[i], i);
        if (*n >= cap)
            return zb_err_set(err, ZB_EINVAL, "tokenizer: more than %zu tokens", cap);
        out[(*n)++] = id;
        i += k + 1; /* the loop decremented k once after the match */
    }
    return ZB_OK;
}
