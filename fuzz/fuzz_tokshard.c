/* libFuzzer harness: the llm.c token shard reader (zb_data_open_glob) and the batch loader it
 * feeds: every accepted shard is configured for small batches (in order and shuffled) and read;
 * ids must be < vocab, tell/seek must round-trip. */
#include "fuzz_common.h"
#include "zbpp/data.h"

static void drive(zb_data_t *d, int B, int T, bool shuffle, int vocab)
{
    zb_err_t err = {0};
    if (zb_data_configure(d, B, T, shuffle, 7, &err) != ZB_OK) {
        fz_check_message(&err);
        return;
    }
    int in[64], tg[64];
    for (int i = 0; i < 5; i++) {
        zb_data_pos_t pos = zb_data_tell(d);
        if (zb_data_next(d, in, tg, &err) != ZB_OK) {
            fprintf(stderr, "next failed on an accepted shard: %s\n", err.msg);
            abort();
        }
        for (int k = 0; k < B * T; k++)
            if (in[k] < 0 || in[k] >= vocab || tg[k] < 0 || tg[k] >= vocab)
                abort();
        int in2[64], tg2[64];
        if (zb_data_seek(d, &pos, &err) != ZB_OK || zb_data_next(d, in2, tg2, &err) != ZB_OK ||
            memcmp(in, in2, sizeof(int) * (size_t)(B * T)) != 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    fz_write("tokens.bin", data, size, path, sizeof path);
    zb_data_t *d = NULL;
    zb_err_t err = {0};
    const int vocab = 257;
    zb_status_t st = zb_data_open_glob(path, vocab, &d, &err);
    if (st != ZB_OK) {
        if (d || (st != ZB_EFORMAT && st != ZB_EIO && st != ZB_ENOMEM))
            abort();
        fz_check_message(&err);
        return 0;
    }
    if (zb_data_num_shards(d) != 1 || zb_data_total_tokens(d) == 0)
        abort();
    (void)zb_data_fingerprint(d);
    drive(d, 2, 4, false, vocab);
    drive(d, 1, 3, true, vocab);
    zb_data_free(d);
    return 0;
}
