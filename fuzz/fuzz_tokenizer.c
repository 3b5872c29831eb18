/* libFuzzer harness: llm.c's GPT-2 tokenizer file (zb_gpt2_tok_load). For a file it accepts:
 * every piece is 1..255 bytes, the eot token is in range or -1, each piece encodes to one token
 * with the same bytes, and whatever the input's own bytes encode to decodes back to them. */
#include "fuzz_common.h"
#include "zbpp/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    fz_write("tok.bin", data, size, path, sizeof path);
    zb_gpt2_tok_t *t = NULL;
    zb_err_t err = {0};
    zb_status_t st = zb_gpt2_tok_load(path, &t, &err);
    if (st != ZB_OK) {
        if (t || (st != ZB_EFORMAT && st != ZB_EIO && st != ZB_ENOMEM))
            abort();
        fz_check_message(&err);
        return 0;
    }
    int V = zb_gpt2_tok_vocab(t), eot = zb_gpt2_tok_eot(t);
    if (V < 1 || eot < -1 || eot >= V)
        abort();
    int ids[300];
    size_t n, len;
    for (int i = 0; i < V && i < 4096; i++) {
        const char *p = zb_gpt2_tok_piece(t, i, &len);
        if (!p || len < 1 || len > 255)
            abort();
        if (zb_gpt2_tok_encode(t, p, len, ids, 300, &n, &err) != ZB_OK || n != 1)
            abort();
        size_t len2;
        const char *q = zb_gpt2_tok_piece(t, ids[0], &len2);
        if (ids[0] > i || len2 != len || memcmp(p, q, len) != 0)
            abort();
    }
    /* the tail of the input as text: encode, then decode must give it back */
    size_t tl = size < 256 ? size : 256;
    const char *text = (const char *)data + (size - tl);
    st = zb_gpt2_tok_encode(t, text, tl, ids, 300, &n, &err);
    if (st == ZB_OK) {
        size_t pos = 0;
        for (size_t k = 0; k < n; k++) {
            const char *p = zb_gpt2_tok_piece(t, ids[k], &len);
            if (!p || pos + len > tl || memcmp(text + pos, p, len) != 0)
                abort();
            pos += len;
        }
        if (pos != tl)
            abort();
    } else {
        fz_check_message(&err);
    }
    zb_gpt2_tok_free(t);
    return 0;
}
