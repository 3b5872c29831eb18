/* libFuzzer harness: the single-file training checkpoint reader. zb_train_peek must reject or
 * return settings zb_train_config_check accepts (a bad stored value is the file's fault); a small
 * accepted checkpoint is then resumed by a trainer on the demo corpus (zb_train_load: payload
 * checksum, settings match, data position). */
#include "fuzz_common.h"
#include "zbpp/train.h"

#ifndef ZB_SOURCE_DIR
#define ZB_SOURCE_DIR "."
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    fz_write("train.ckpt", data, size, path, sizeof path);
    zb_train_config_t c;
    zb_train_config_defaults(&c);
    zb_err_t err = {0};
    zb_status_t st = zb_train_peek(path, &c, &err);
    if (st != ZB_OK) {
        if (st != ZB_EFORMAT && st != ZB_EIO)
            abort();
        fz_check_message(&err);
        return 0;
    }
    c.text_path = ZB_SOURCE_DIR "/data/demo_corpus.txt";
    c.quiet = true;
    if (zb_train_config_check(&c, &err) != ZB_OK) {
        fprintf(stderr, "peek accepted settings the trainer rejects: %s\n", err.msg);
        abort();
    }
    /* resume only small models with small batches: the point is the reader, not training */
    if ((size_t)c.batch * (size_t)c.seq <= 256 && c.seq <= c.model.max_seq &&
        (size - 512) / 12 <= 200000) {
        c.resume_path = path;
        zb_trainer_t t;
        st = zb_trainer_init(&t, &c, &err);
        if (st == ZB_OK) {
            zb_step_stats_t s;
            if (c.steps > t.step)
                (void)zb_trainer_step(&t, &s, &err);
            zb_trainer_free(&t);
        } else {
            fz_check_message(&err);
        }
    }
    return 0;
}
