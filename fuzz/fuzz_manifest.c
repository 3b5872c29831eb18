/* libFuzzer harness: the sharded checkpoint manifest reader. For each "shard" line the harness
 * creates a zero-filled file of the size the line gives (up to 1 MiB), so inputs get past the
 * size checks into what a read feeds: when zb_ckpt_sharded_peek accepts it, its settings must
 * pass zb_train_config_check and the model must fit in the shards (12 bytes per parameter). */
#include <sys/stat.h>

#include "fuzz_common.h"
#include "zbpp/checkpoint_sharded.h"

static void make_shards(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    for (char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        int r;
        char file[64];
        unsigned long long bytes;
        if (strncmp(p, "shard ", 6) || sscanf(p + 6, "%d %63s %llu", &r, file, &bytes) != 3 ||
            bytes > (1u << 20) || strchr(file, '/') || file[0] == '.')
            continue;
        char path[400];
        snprintf(path, sizeof path, "%s/%s", fz_dir(), file);
        FILE *f = fopen(path, "wb");
        if (f) {
            if (bytes && fseek(f, (long)bytes - 1, SEEK_SET) == 0)
                fputc(0, f);
            fclose(f);
        }
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    make_shards(data, size);
    fz_write("ck", data, size, path, sizeof path);
    zb_ckpt_manifest_t m;
    zb_err_t err = {0};
    zb_status_t st = zb_ckpt_manifest_read(path, &m, &err);
    if (st != ZB_OK) {
        if (st != ZB_EFORMAT && st != ZB_EIO && st != ZB_ENOMEM)
            abort();
        fz_check_message(&err);
        return 0;
    }
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    st = zb_ckpt_sharded_peek(path, &c, &err);
    if (st != ZB_OK) {
        fz_check_message(&err);
        zb_ckpt_manifest_free(&m);
        return 0;
    }
    uint64_t total = 0; /* peek accepted it: the shards can hold the model it names */
    for (int r = 0; r < m.ranks; r++)
        total += m.shard[r].bytes;
    if (total / 12 < m.param_count) {
        fprintf(stderr, "accepted a manifest whose shards cannot hold its model\n");
        abort();
    }
    zb_ckpt_manifest_free(&m);
    c.text_path = path;
    if (zb_train_config_check(&c, &err) != ZB_OK) {
        fprintf(stderr, "peek accepted settings the trainer rejects: %s\n", err.msg);
        abort();
    }
    return 0;
}
