/* libFuzzer harness: the sharded checkpoint's shard reader (zb_ckpt_shard_read). The harness
 * gives the reader the input's own size and checksum (as an intact manifest would) and the rank,
 * step and parameter count its header claims (bounded), so the header and range checks are what
 * is exercised; every element an accepted shard covers must lie inside the buffers (ASan). */
#include "fuzz_common.h"
#include "zbpp/checkpoint_sharded.h"
#include "zbpp/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    fz_write("ck.1-00000000.rank0", data, size, path, sizeof path);
    zb_ckpt_shard_ref_t ref = {.bytes = size, .checksum = zb_hash_bytes(ZB_HASH_SEED, data, size)};
    snprintf(ref.file, sizeof ref.file, "ck.1-00000000.rank0");
    uint64_t h[8] = {0};
    memcpy(h, data, size < sizeof h ? size : sizeof h);
    int rank = h[2] < 1024 ? (int)h[2] : 0;
    long step = h[4] < (1u << 30) ? (long)h[4] : 1;
    size_t count = h[6] && h[6] <= (1u << 16) ? (size_t)h[6] : 64;
    float *buf = calloc(3 * count, sizeof *buf);
    unsigned char *covered = calloc(count, 1);
    if (!buf || !covered)
        abort();
    zb_err_t err = {0};
    zb_status_t st = zb_ckpt_shard_read(path, &ref, rank, step, count, NULL, 0, buf, buf + count,
                                        buf + 2 * count, covered, &err);
    if (st != ZB_OK) {
        if (st != ZB_EFORMAT && st != ZB_EIO && st != ZB_ENOMEM && st != ZB_EMISMATCH)
            abort();
        fz_check_message(&err);
    }
    free(buf);
    free(covered);
    return 0;
}
