/* zbpp — llm.c's GPT-2 tokenizer file, for decoding sampled tokens (`zbpp generate
 * --tokenizer`). The byte-level tokenizer of the demo corpus is in data.h.
 *
 * Format (little-endian): a header of 256 uint32 {20240328, version 1 or 2, vocab_size,
 * eot_token (version 2; 0 in version 1)}, the rest zero, then for each of the vocab_size tokens
 * in id order a uint8 length L (1..255) and L bytes (the token's raw bytes). The file ends right
 * after the last token. The file carries no merge rules, so zb_gpt2_tok_encode is a greedy
 * longest match over the vocabulary, not GPT-2's BPE: good for prompts, not bit-identical to
 * tiktoken's ids. */
#ifndef ZBPP_TOKENIZER_H
#define ZBPP_TOKENIZER_H

#include <stddef.h>

#include "zbpp/error.h"

#define ZB_GPT2_TOK_MAGIC 20240328

typedef struct zb_gpt2_tok zb_gpt2_tok_t;

/* Read and check the file: magic, version 1 or 2, 1 <= vocab_size <= 2^22, eot_token <
 * vocab_size (version 2), every length >= 1, no truncation, no bytes after the last token.
 * ZB_EIO for a missing/unreadable/non-regular file, ZB_EFORMAT (message naming the file and the
 * problem, e.g. the token whose length runs past the end) otherwise. */
zb_status_t zb_gpt2_tok_load(const char *path, zb_gpt2_tok_t **out, zb_err_t *err);
/* The same from bytes in memory; `name` labels messages. */
zb_status_t zb_gpt2_tok_parse(const char *name, const unsigned char *data, size_t len,
                              zb_gpt2_tok_t **out, zb_err_t *err);
void zb_gpt2_tok_free(zb_gpt2_tok_t *t);

int zb_gpt2_tok_vocab(const zb_gpt2_tok_t *t);
/* The end-of-text token: the header's (version 2); for version 1, 50256 when vocab_size is
 * 50257 (GPT-2's), else -1 (none). */
int zb_gpt2_tok_eot(const zb_gpt2_tok_t *t);
/* The bytes of token `id` (*len of them, not NUL-terminated); NULL for an id out of range. */
const char *zb_gpt2_tok_piece(const zb_gpt2_tok_t *t, int id, size_t *len);
/* Greedy longest-match encoding of text[0..len) into out[0..cap): at each position the longest
 * token whose bytes match (the lowest id among equal pieces). *n receives the count.
 * ZB_EINVAL when a byte is not the start of any token, or cap is too small. */
zb_status_t zb_gpt2_tok_encode(const zb_gpt2_tok_t *t, const char *text, size_t len, int *out,
                               size_t cap, size_t *n, zb_err_t *err);

#endif
