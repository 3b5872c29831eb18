/* zbpp — training data: llm.c token shards, a byte-level tokenizer, and the batch loader.
 *
 * A data set is an ordered list of shards (each a run of uint16 token ids). The loader hands out
 * batches of B sequences of T tokens: B·T+1 consecutive tokens of one shard, inputs the first
 * B·T, targets the last B·T. Its position (zb_data_pos_t) is plain data so a training checkpoint
 * can store it and resume bit-exactly. See docs/training.md for the shuffle order. */
#ifndef ZBPP_DATA_H
#define ZBPP_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbpp/error.h"

/* llm.c token shard: 256 int32 header (magic, version, token count, rest 0), then uint16 ids. */
#define ZB_SHARD_MAGIC 20240520
#define ZB_SHARD_VERSION 1
#define ZB_SHARD_HEADER_INTS 256

/* ---- byte-level tokenizer ----
 * Token b (0..255) is the byte b; the literal text "<|endoftext|>" is the single token 256.
 * V = 257; models pad it to 384 (the next multiple of 128). */
#define ZB_TOK_EOT 256
#define ZB_TOK_VOCAB 257

/* Encode len bytes of text into out (capacity >= len tokens; never more tokens than bytes).
 * Returns the number of tokens written. */
size_t zb_tok_encode(const char *text, size_t len, uint16_t *out);
/* Decode n tokens into out (capacity cap bytes, NUL-terminated when cap > 0). Ids above 256 are
 * written as '?'. Returns the number of bytes the full text needs (excluding the NUL), like
 * snprintf, so a caller can detect truncation. */
size_t zb_tok_decode(const uint16_t *tokens, size_t n, char *out, size_t cap);

/* ---- data sets ---- */

typedef struct zb_data zb_data_t;

/* Open every file matching the glob(3) pattern, in sorted name order, as llm.c shards.
 * Each is checked: magic, version, count > 0, file size == header + 2·count bytes, every token
 * id < vocab. Errors name the offending file (ZB_EIO missing/unreadable/not a regular file or no
 * match, ZB_EFORMAT malformed or an id >= vocab). Shards are not mapped: each batch is read from
 * the file, and a shard truncated or replaced while in use makes zb_data_next fail with ZB_EIO. */
zb_status_t zb_data_open_glob(const char *pattern, int vocab, zb_data_t **out, zb_err_t *err);
/* A one-shard data set from tokens in memory (copied); `name` labels it in messages. */
zb_status_t zb_data_open_tokens(const char *name, const uint16_t *tokens, size_t n, int vocab,
                                zb_data_t **out, zb_err_t *err);
/* A one-shard data set from a UTF-8/ASCII text file, byte-level tokenized (zb_tok_encode). */
zb_status_t zb_data_open_text(const char *path, int vocab, zb_data_t **out, zb_err_t *err);
void zb_data_free(zb_data_t *d);

size_t zb_data_num_shards(const zb_data_t *d);
uint64_t zb_data_total_tokens(const zb_data_t *d);
/* 64-bit FNV-1a fingerprint of every shard's tokens in order (a checkpoint uses it to detect
 * resuming on different data). */
uint64_t zb_data_fingerprint(const zb_data_t *d);

/* Where the loader is: a checkpoint stores it, zb_data_seek restores it.
 * no-shuffle: `shard` is the shard index, `offset` the first token of the next batch.
 * shuffle:    `shard` is the position in this epoch's shard order, `offset` the position in
 *             that shard's permuted batch order. */
typedef struct {
    uint64_t epoch;
    uint64_t shard;
    uint64_t offset;
} zb_data_pos_t;

/* Set the batch shape and order and rewind to the start (epoch 0). ZB_EINVAL when B or T < 1 or
 * no shard holds B·T+1 tokens. shuffle=false: the stream in order (shards too short for a batch
 * are skipped; at the end it wraps to the first shard). shuffle=true: each epoch visits the
 * shards in a seeded random order and, inside a shard, its B·T-token batch slots in a seeded
 * random order; the order depends only on (seed, epoch, shard). */
zb_status_t zb_data_configure(zb_data_t *d, int B, int T, bool shuffle, uint64_t seed,
                              zb_err_t *err);
/* Write the next batch: inputs[B·T] and targets[B·T] (row b = sequence b) and advance.
 * Requires zb_data_configure. */
zb_status_t zb_data_next(zb_data_t *d, int *inputs, int *targets, zb_err_t *err);
zb_data_pos_t zb_data_tell(const zb_data_t *d);
/* Restore a position from zb_data_tell (same data and configuration). ZB_EFORMAT when it is out
 * of range for this data set. */
zb_status_t zb_data_seek(zb_data_t *d, const zb_data_pos_t *pos, zb_err_t *err);

/* Write tokens as an llm.c shard (atomically). ZB_EINVAL when n is 0 or exceeds INT32_MAX. */
zb_status_t zb_shard_write(const char *path, const uint16_t *tokens, size_t n, zb_err_t *err);

#endif
