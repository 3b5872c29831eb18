/* libFuzzer harness: the llm.c model checkpoint reader (zb_gpt2_load_llmc). A file it accepts
 * is saved again and must read back to the same parameters bit for bit. */
#include "fuzz_common.h"
#include "zbpp/gpt2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[300], out[300];
    fz_write("model.bin", data, size, in, sizeof in);
    zb_gpt2_params_t p, back;
    zb_err_t err = {0};
    zb_status_t st = zb_gpt2_load_llmc(in, &p, &err);
    if (st != ZB_OK) {
        if (st != ZB_EFORMAT && st != ZB_EIO && st != ZB_ENOMEM)
            abort();
        fz_check_message(&err);
        return 0;
    }
    snprintf(out, sizeof out, "%s/model.out", fz_dir());
    if (zb_gpt2_save_llmc(out, &p, &err) != ZB_OK || zb_gpt2_load_llmc(out, &back, &err) != ZB_OK) {
        fprintf(stderr, "re-save/re-load failed: %s\n", err.msg);
        abort();
    }
    if (back.count != p.count || memcmp(&back.cfg, &p.cfg, sizeof p.cfg) != 0 ||
        memcmp(back.data, p.data, p.count * sizeof(float)) != 0) {
        fprintf(stderr, "round trip differs\n");
        abort();
    }
    zb_gpt2_params_free(&back);
    zb_gpt2_params_free(&p);
    return 0;
}
