/* zbpp — a fast 64-bit hash of bytes, for comparing state across ranks and files (the
 * start-up handshake, replica checks, model-file identity). */
#ifndef ZBPP_HASH_H
#define ZBPP_HASH_H

#include <stddef.h>
#include <stdint.h>

/* 64-bit hash of bytes, continuing from `h` (start with ZB_HASH_SEED). Fast (8 bytes per
 * round), deterministic on every little-endian host; not cryptographic. */
#define ZB_HASH_SEED 0xCBF29CE484222325ull
uint64_t zb_hash_bytes(uint64_t h, const void *data, size_t n);
/* The same hash fed in pieces: the result depends only on the concatenated bytes, never on how
 * they were split (zb_hash_bytes(seed, all) == init(seed), add(piece)..., end). */
typedef struct {
    uint64_t h, total;
    unsigned char tail[8];
    size_t n_tail;
} zb_hasher_t;
void zb_hasher_init(zb_hasher_t *hs, uint64_t seed);
void zb_hasher_add(zb_hasher_t *hs, const void *data, size_t n);
uint64_t zb_hasher_end(const zb_hasher_t *hs);

/* Convenience: hash a NUL-terminated string (NULL hashes like ""). */
uint64_t zb_hash_str(uint64_t h, const char *s);

#endif
