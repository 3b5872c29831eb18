/* GPT-2 initialisation of a whole or a stage-local parameter buffer.
 *
 * The weights are one Box-Muller stream over splitmix64, drawn tensor after tensor in a fixed
 * order (WTE's real rows, WPE, QKVW, ATTPROJW, FCW, FCPROJW, each over all L blocks). splitmix64
 * is a counter: its state after k draws is seed + k·golden, so any element's value can be
 * computed without drawing the ones before it. A buffer that holds only some blocks fills just
 * those, and every element gets the bits it would have in a whole model initialised in one
 * process: a pipeline rank initialises its own units only, whatever the partition. */
#include <math.h>
#include <string.h>

#include "model/gpt2_internal.h"
#include "zbpp/gpt2.h"

#define GOLDEN 0x9E3779B97F4A7C15ull

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += GOLDEN);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) /* (0, 1] */
{
    return ((splitmix64(s) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

/* Elements [lo, hi) of a normal fill whose first draw is the stream's draw number `first`, into
 * dst[0 .. hi-lo). Values come in Box-Muller pairs (element 2i cos, 2i+1 sin, from draws
 * first+2i and first+2i+1), so a range may start or end inside a pair. */
static void fill_normal_range(float *dst, size_t lo, size_t hi, double std, uint64_t seed,
                              uint64_t first)
{
    for (size_t pair = lo / 2; 2 * pair < hi; pair++) {
        uint64_t s = seed + (first + 2 * (uint64_t)pair) * GOLDEN;
        double r = sqrt(-2.0 * log(uniform01(&s))), th = 6.283185307179586 * uniform01(&s);
        size_t i = 2 * pair;
        if (i >= lo)
            dst[i - lo] = (float)(std * r * cos(th));
        if (i + 1 >= lo && i + 1 < hi)
            dst[i + 1 - lo] = (float)(std * r * sin(th));
    }
}

void zb_gpt2_params_init_random(zb_gpt2_params_t *p, uint64_t seed)
{
    const zb_gpt2_config_t *c = &p->cfg;
    size_t full[ZB_GPT2_NUM_TENSORS];
    zb_gpt2_tensor_sizes(c, full);
    double resid_std = 0.02 / sqrt(2.0 * c->layers);
    /* the drawing order, each tensor with its standard deviation and its filled length */
    const struct {
        zb_gpt2_tensor_t t;
        double std;
        size_t n;
    } fills[] = {
        {ZB_WTE, 0.02, (size_t)c->vocab * (size_t)c->channels}, /* padded rows stay 0 */
        {ZB_WPE, 0.02, full[ZB_WPE]},
        {ZB_QKVW, 0.02, full[ZB_QKVW]},
        {ZB_ATTPROJW, resid_std, full[ZB_ATTPROJW]},
        {ZB_FCW, 0.02, full[ZB_FCW]},
        {ZB_FCPROJW, resid_std, full[ZB_FCPROJW]},
    };
    memset(p->data, 0, p->count * sizeof(float));
    uint64_t first = 0; /* draws before this tensor: two per pair, a pair per started two */
    for (size_t k = 0; k < sizeof fills / sizeof fills[0]; k++) {
        zb_gpt2_tensor_t t = fills[k].t;
        bool layered = t >= ZB_LN1W && t <= ZB_FCPROJB;
        for (int l = 0; l < (layered ? c->layers : 1); l++) {
            size_t n = 0;
            float *d = zb_gpt2_slice(p, t, l, &n);
            if (!d)
                continue;
            size_t lo = layered ? (size_t)l * n : 0, hi = layered ? lo + n : fills[k].n;
            fill_normal_range(d, lo, hi, fills[k].std, seed, first);
        }
        first += fills[k].n + (fills[k].n & 1);
    }
    static const zb_gpt2_tensor_t ones[] = {ZB_LN1W, ZB_LN2W, ZB_LNFW};
    for (size_t k = 0; k < sizeof ones / sizeof ones[0]; k++)
        for (size_t i = 0; i < p->sizes[ones[k]]; i++)
            p->t[ones[k]][i] = 1.0f;
}
