/* Byte-level tokenizer: one token per byte, plus "<|endoftext|>" as token 256.
 * Simple on purpose: the demo corpus needs no download and no merges table. */
#include <string.h>

#include "zbpp/data.h"

static const char eot_text[] = "<|endoftext|>";
#define EOT_LEN (sizeof eot_text - 1)

size_t zb_tok_encode(const char *text, size_t len, uint16_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (len - i >= EOT_LEN && text[i] == '<' && !memcmp(text + i, eot_text, EOT_LEN)) {
            out[n++] = ZB_TOK_EOT;
            i += EOT_LEN;
        } else {
            out[n++] = (uint8_t)text[i++];
        }
    }
    return n;
}

size_t zb_tok_decode(const uint16_t *tokens, size_t n, char *out, size_t cap)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++) {
        const char *piece;
        size_t piece_len;
        char byte;
        if (tokens[i] == ZB_TOK_EOT) {
            piece = eot_text;
            piece_len = EOT_LEN;
        } else {
            byte = tokens[i] < 256 ? (char)tokens[i] : '?';
            piece = &byte;
            piece_len = 1;
        }
        for (size_t k = 0; k < piece_len; k++, need++)
            if (cap > 0 && need < cap - 1)
                out[need] = piece[k];
    }
    if (cap > 0)
        out[need < cap - 1 ? need : cap - 1] = '\0';
    return need;
}
