/* Sampling speed: the KV-cache path (zb_gpt2_generate: one position per new token) against
 * recomputing the full-sequence forward of the whole prefix for every new token (what
 * generation costs without a cache), on a random model. One thread. Median of 3 runs.
 * Usage: bench_generate [layers channels heads vocab tokens]   (default 6 384 6 50257 128) */
#include <stdio.h>
#include <stdlib.h>

#include "zbpp/gpt2.h"
#include "zbpp/gpt2_infer.h"
#include "zbpp/nn.h"
#include "zbpp/util.h"

static double median3(double a, double b, double c)
{
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

int main(int argc, char **argv)
{
    int L = argc > 1 ? atoi(argv[1]) : 6, C = argc > 2 ? atoi(argv[2]) : 384;
    int NH = argc > 3 ? atoi(argv[3]) : 6, V = argc > 4 ? atoi(argv[4]) : 50257;
    int N = argc > 5 ? atoi(argv[5]) : 128;
    zb_gpt2_config_t cfg = {.max_seq = N + 1, .vocab = V, .padded_vocab = (V + 127) / 128 * 128,
                            .layers = L, .heads = NH, .channels = C};
    zb_gpt2_params_t p;
    zb_err_t e;
    if (zb_gpt2_params_alloc(&p, &cfg, &e) != ZB_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    zb_gpt2_params_init_random(&p, 1);
    printf("BLAS %s; model L=%d C=%d NH=%d V=%d; %d new tokens after a 1-token prompt\n",
           zb_blas_init(), L, C, NH, V, N);
    int *toks = malloc((size_t)(N + 1) * sizeof *toks), prompt = 0;
    double kv[3], full[3];
    for (int rep = 0; rep < 3; rep++) {
        zb_sampler_t s;
        zb_sampler_init(&s, 0.0f, 0, V, 1, &e);
        double t0 = zb_now();
        if (zb_gpt2_generate(&p, &prompt, 1, N, &s, toks + 1, NULL, NULL, NULL, &e) != ZB_OK) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        kv[rep] = zb_now() - t0;
        zb_sampler_free(&s);
        /* without a cache: the forward of the whole prefix t = 1..N, once per new token */
        toks[0] = prompt;
        zb_gpt2_span_t whole = {.layer_begin = 0, .layer_end = L, .embed = true, .head = true};
        t0 = zb_now();
        for (int t = 1; t <= N; t++) {
            zb_gpt2_stash_t *st;
            float loss;
            if (zb_gpt2_stash_new(&cfg, &whole, 1, t, &st, &e) != ZB_OK ||
                zb_gpt2_forward(&p, &whole, st, toks, NULL, toks, NULL, &loss, &e) != ZB_OK) {
                fprintf(stderr, "%s\n", e.msg);
                return 1;
            }
            zb_gpt2_stash_free(st);
        }
        full[rep] = zb_now() - t0;
    }
    double a = median3(kv[0], kv[1], kv[2]), b = median3(full[0], full[1], full[2]);
    printf("%-28s %10s %12s\n", "path", "seconds", "tokens/s");
    printf("%-28s %10.3f %12.1f\n", "KV cache (zb_gpt2_generate)", a, N / a);
    printf("%-28s %10.3f %12.1f\n", "full forward per token", b, N / b);
    printf("KV cache speed-up: %.1fx\n", b / a);
    free(toks);
    zb_gpt2_params_free(&p);
    return 0;
}
