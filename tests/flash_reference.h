/* Host reference of the tiled flash-attention algorithm of src/cuda/flash_attn.cu, in plain C on
 * fp32 qkv[B, T, 3C] (the stage's layout): the same tile walk, running max / sum rescaling in
 * log2 units with the scale folded in, masking of the diagonal and the last (partial) tiles, the
 * lse statistics, and the backward's D = rowsum(dO∘O), dK/dV walk (query tiles from the diagonal
 * to the end) and dQ walk (key tiles from 0 to the diagonal).
 *
 * bf16 = true rounds where the kernel rounds (P and dS before their products, out/dq/dk/dv when
 * stored); false keeps everything fp32, to check the algorithm itself against the materialised
 * attention. Tile sizes are parameters so several tile walks can be compared. Header-only: the
 * tests that use it include it once. */
#ifndef ZBPP_TESTS_FLASH_REFERENCE_H
#define ZBPP_TESTS_FLASH_REFERENCE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "util/bf16.h"

typedef struct {
    int B, T, NH, hs;
    bool bf16;
} flash_ref_shape_t;

static const float flash_ref_log2e = 1.4426950408889634f;

static inline float flash_ref_round(const flash_ref_shape_t *s, float x)
{
    return s->bf16 ? zb_bf16_round(x) : x;
}

static inline int flash_ref_min(int a, int b)
{
    return a < b ? a : b;
}

/* Head h of sequence b: pointer to row 0's slice of q (part 0), k (1) or v (2). */
static inline const float *flash_ref_part(const flash_ref_shape_t *s, const float *qkv, int b,
                                          int h, int part)
{
    size_t C = (size_t)s->NH * s->hs;
    return qkv + (size_t)b * s->T * 3 * C + (size_t)part * C + (size_t)h * s->hs;
}

static inline float flash_ref_dot(const float *a, const float *b, int n)
{
    float acc = 0.0f;
    for (int i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

/* out[B, T, C], lse[B, NH, T]; query tiles of br rows, key tiles of bc keys. */
static inline void flash_ref_forward(const flash_ref_shape_t *s, float *out, float *lse,
                              const float *qkv, int br, int bc)
{
    int T = s->T, hs = s->hs, C = s->NH * hs;
    size_t ld = 3 * (size_t)C;
    float sl2 = flash_ref_log2e / sqrtf((float)hs);
    float *p = malloc((size_t)bc * sizeof *p), *o = malloc((size_t)hs * sizeof *o);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++) {
            const float *q = flash_ref_part(s, qkv, b, h, 0), *k = flash_ref_part(s, qkv, b, h, 1),
                        *v = flash_ref_part(s, qkv, b, h, 2);
            for (int q0 = 0; q0 < T; q0 += br) {
                int last_row = flash_ref_min(q0 + br, T) - 1;
                for (int row = q0; row <= last_row; row++) {
                    float m = -INFINITY, l = 0.0f;
                    for (int d = 0; d < hs; d++)
                        o[d] = 0.0f;
                    /* key tiles 0 .. the one holding the tile's last row, in order */
                    for (int k0 = 0; k0 <= last_row; k0 += bc) {
                        float mx = -INFINITY;
                        for (int j = 0; j < bc; j++) {
                            int key = k0 + j;
                            p[j] = (key > row || key >= T)
                                       ? -INFINITY
                                       : flash_ref_dot(q + (size_t)row * ld, k + (size_t)key * ld,
                                                       hs) * sl2;
                            mx = fmaxf(mx, p[j]);
                        }
                        /* key 0 is visible to every row and tile 0 comes first: finite */
                        float mnew = fmaxf(m, mx);
                        float alpha = exp2f(m - mnew);
                        m = mnew;
                        l *= alpha;
                        for (int d = 0; d < hs; d++)
                            o[d] *= alpha;
                        for (int j = 0; j < bc; j++) {
                            float e = exp2f(p[j] - m);
                            l += e;
                            if (e == 0.0f)
                                continue;
                            float pe = flash_ref_round(s, e);
                            const float *vr = v + (size_t)(k0 + j) * ld;
                            for (int d = 0; d < hs; d++)
                                o[d] += pe * vr[d];
                        }
                    }
                    float *orow = out + ((size_t)b * T + row) * C + (size_t)h * hs;
                    for (int d = 0; d < hs; d++)
                        orow[d] = flash_ref_round(s, o[d] / l);
                    lse[((size_t)b * s->NH + h) * T + row] = (m + log2f(l)) / flash_ref_log2e;
                }
            }
        }
    free(p);
    free(o);
}

/* P (bf16-rounded when the kernel rounds) of query row qr and key `key`, 0 where masked; ls =
 * the row's lse in log2 units. */
static inline float flash_ref_p(const flash_ref_shape_t *s, const float *q, const float *k,
                                size_t ld, int qr, int key, float ls)
{
    if (key > qr || key >= s->T || qr >= s->T)
        return 0.0f;
    float sl2 = flash_ref_log2e / sqrtf((float)s->hs);
    return exp2f(flash_ref_dot(q + (size_t)qr * ld, k + (size_t)key * ld, s->hs) * sl2 - ls);
}

/* dqkv[B, T, 3C] = the gradients (written); dout, out[B, T, C]; lse from the forward.
 * dK/dV: key tiles of bk keys walking query tiles of brk rows; dQ: query tiles of brq rows
 * walking key tiles of bcq keys. */
static inline void flash_ref_backward(const flash_ref_shape_t *s, float *dqkv, const float *dout,
                               const float *qkv, const float *out, const float *lse, int bk,
                               int brk, int brq, int bcq)
{
    int T = s->T, hs = s->hs, NH = s->NH, C = NH * hs;
    size_t ld = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);
    float *D = malloc((size_t)T * sizeof *D), *ls = malloc((size_t)T * sizeof *ls);
    float *acc_a = malloc((size_t)hs * sizeof *acc_a), *acc_b = malloc((size_t)hs * sizeof *acc_b);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = flash_ref_part(s, qkv, b, h, 0), *k = flash_ref_part(s, qkv, b, h, 1),
                        *v = flash_ref_part(s, qkv, b, h, 2);
            const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;
            const float *y = out + (size_t)b * T * C + (size_t)h * hs;
            float *dq = dqkv + (size_t)b * T * ld + (size_t)h * hs, *dk = dq + C, *dv = dq + 2 * C;
            /* (a) D and the lse in log2 units */
            for (int t = 0; t < T; t++) {
                D[t] = flash_ref_dot(dy + (size_t)t * C, y + (size_t)t * C, hs);
                ls[t] = lse[((size_t)b * NH + h) * T + t] * flash_ref_log2e;
            }
            /* (b) dK, dV per key; query tiles from the one holding the key tile's first key */
            for (int k0 = 0; k0 < T; k0 += bk)
                for (int key = k0; key < flash_ref_min(k0 + bk, T); key++) {
                    for (int d = 0; d < hs; d++)
                        acc_a[d] = acc_b[d] = 0.0f; /* dk, dv */
                    for (int q0 = k0 / brk * brk; q0 < T; q0 += brk)
                        for (int qr = q0; qr < flash_ref_min(q0 + brk, T); qr++) {
                            float p = flash_ref_p(s, q, k, ld, qr, key, ls[qr]);
                            if (p == 0.0f)
                                continue;
                            float dp = flash_ref_dot(v + (size_t)key * ld, dy + (size_t)qr * C, hs);
                            float pr = flash_ref_round(s, p),
                                  dsr = flash_ref_round(s, p * (dp - D[qr]));
                            for (int d = 0; d < hs; d++) {
                                acc_b[d] += pr * dy[(size_t)qr * C + d];
                                acc_a[d] += dsr * q[(size_t)qr * ld + d];
                            }
                        }
                    for (int d = 0; d < hs; d++) {
                        dk[(size_t)key * ld + d] = flash_ref_round(s, acc_a[d] * scale);
                        dv[(size_t)key * ld + d] = flash_ref_round(s, acc_b[d]);
                    }
                }
            /* (c) dQ per query; key tiles 0 .. the one holding the query tile's last row */
            for (int q0 = 0; q0 < T; q0 += brq) {
                int last_row = flash_ref_min(q0 + brq, T) - 1;
                for (int qr = q0; qr <= last_row; qr++) {
                    for (int d = 0; d < hs; d++)
                        acc_a[d] = 0.0f;
                    for (int k0 = 0; k0 <= last_row; k0 += bcq)
                        for (int key = k0; key < k0 + bcq; key++) {
                            float p = flash_ref_p(s, q, k, ld, qr, key, ls[qr]);
                            if (p == 0.0f)
                                continue;
                            float dp = flash_ref_dot(dy + (size_t)qr * C, v + (size_t)key * ld, hs);
                            float dsr = flash_ref_round(s, p * (dp - D[qr]));
                            for (int d = 0; d < hs; d++)
                                acc_a[d] += dsr * k[(size_t)key * ld + d];
                        }
                    for (int d = 0; d < hs; d++)
                        dq[(size_t)qr * ld + d] = flash_ref_round(s, acc_a[d] * scale);
                }
            }
        }
    free(D);
    free(ls);
    free(acc_a);
    free(acc_b);
}

/* The exact log-sum-exp of the scaled scores of row t of head h of sequence b, in double from
 * the materialised row (what lse must approximate). */
static inline double flash_ref_lse_exact(const flash_ref_shape_t *s, const float *qkv, int b,
                                         int h, int t)
{
    size_t ld = 3 * (size_t)s->NH * s->hs;
    const float *q = flash_ref_part(s, qkv, b, h, 0), *k = flash_ref_part(s, qkv, b, h, 1);
    double scale = 1.0 / sqrt((double)s->hs), mx = -INFINITY, sum = 0.0;
    for (int u = 0; u <= t; u++) {
        double x = 0.0;
        for (int d = 0; d < s->hs; d++)
            x += (double)q[(size_t)t * ld + d] * k[(size_t)u * ld + d];
        x *= scale;
        sum = x > mx ? sum * exp(mx - x) + 1.0 : sum + exp(x - mx);
        mx = x > mx ? x : mx;
    }
    return mx + log(sum);
}

/* The same on bf16 storage, with zb_cuk_flash_forward / zb_cuk_flash_backward's signatures
 * minus the stream and scratch (for a host stand-in of the kernels, e.g. a fake device): the
 * kernel's tiles and rounding points. */
static inline float *flash_ref_widen(const uint16_t *x, size_t n)
{
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; f && i < n; i++)
        f[i] = zb_bf16_to_f32(x[i]);
    return f;
}

static inline void flash_ref_narrow(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = zb_bf16_from_f32(src[i]);
}

/* The kernel's tiles for head size hs (src/cuda/flash_attn.cu, Tiles<HS>). */
static inline void flash_ref_kernel_tiles(int hs, int *fwd_keys, int *dq_keys, int *dkdv_keys,
                                          int *dkdv_queries)
{
    *fwd_keys = hs > 64 ? 32 : 64;
    *dq_keys = hs > 64 ? 32 : 64;
    *dkdv_keys = hs > 64 ? 32 : 64;
    *dkdv_queries = hs > 64 ? 32 : 64;
}

/* Returns 0, or -1 when out of memory. */
static inline int flash_ref_forward_bf16(uint16_t *out, float *lse, const uint16_t *qkv, int B,
                                         int T, int NH, int hs)
{
    flash_ref_shape_t s = {.B = B, .T = T, .NH = NH, .hs = hs, .bf16 = true};
    size_t n1 = (size_t)B * T * NH * hs;
    float *q = flash_ref_widen(qkv, 3 * n1), *o = malloc(n1 * sizeof *o);
    int fk, dqk, dk, dkq, rc = -1;
    flash_ref_kernel_tiles(hs, &fk, &dqk, &dk, &dkq);
    if (q && o) {
        flash_ref_forward(&s, o, lse, q, 64, fk);
        flash_ref_narrow(out, o, n1);
        rc = 0;
    }
    free(q);
    free(o);
    return rc;
}

static inline int flash_ref_backward_bf16(uint16_t *dqkv, const uint16_t *dout,
                                          const uint16_t *qkv, const uint16_t *out,
                                          const float *lse, int B, int T, int NH, int hs)
{
    flash_ref_shape_t s = {.B = B, .T = T, .NH = NH, .hs = hs, .bf16 = true};
    size_t n1 = (size_t)B * T * NH * hs;
    float *q = flash_ref_widen(qkv, 3 * n1), *dy = flash_ref_widen(dout, n1),
          *y = flash_ref_widen(out, n1), *d = malloc(3 * n1 * sizeof *d);
    int fk, dqk, dk, dkq, rc = -1;
    flash_ref_kernel_tiles(hs, &fk, &dqk, &dk, &dkq);
    if (q && dy && y && d) {
        flash_ref_backward(&s, d, dy, q, y, lse, dk, dkq, 64, dqk);
        flash_ref_narrow(dqkv, d, 3 * n1);
        rc = 0;
    }
    free(q);
    free(dy);
    free(y);
    free(d);
    return rc;
}

#endif
