/* libFuzzer harness: the text reader (zb_data_open_text, byte-level tokenizer) and the loader it
 * feeds; decode(encode(text)) must give the text back. */
#include "fuzz_common.h"
#include "zbpp/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    fz_write("text.txt", data, size, path, sizeof path);
    zb_data_t *d = NULL;
    zb_err_t err = {0};
    zb_status_t st = zb_data_open_text(path, 257, &d, &err);
    if (st != ZB_OK) {
        if (d || (st != ZB_EFORMAT && st != ZB_EIO && st != ZB_ENOMEM && st != ZB_EINVAL))
            abort();
        fz_check_message(&err);
        return 0;
    }
    if (zb_data_configure(d, 1, 4, false, 0, &err) == ZB_OK) {
        int in[4], tg[4];
        for (int i = 0; i < 3; i++)
            if (zb_data_next(d, in, tg, &err) != ZB_OK)
                abort();
    } else {
        fz_check_message(&err);
    }
    zb_data_free(d);
    /* the tokenizer round trip on the same bytes */
    uint16_t *tok = malloc((size ? size : 1) * sizeof *tok);
    char *back = malloc(size + 1);
    if (!tok || !back)
        abort();
    size_t n = zb_tok_encode((const char *)data, size, tok);
    if (n > size || zb_tok_decode(tok, n, back, size + 1) != size || memcmp(back, data, size) != 0)
        abort();
    free(tok);
    free(back);
    return 0;
}
