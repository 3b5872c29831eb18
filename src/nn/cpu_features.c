/* CPU feature detection for the BLAS kernel choice (blas_core.c). A vector extension counts only
 * when both the CPU has it (CPUID) and the OS saves its registers on a context switch (XCR0 via
 * XGETBV): a hypervisor may hide either, and running AVX-512 code without the second is an
 * illegal instruction. */
#include "zbpp/nn.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

static unsigned long long read_xcr0(void)
{
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static unsigned detect(void)
{
    unsigned a, b, c, d, f = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return 0;
    unsigned max_leaf = a;
    char vendor[13];
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    vendor[12] = '\0';
    if (!strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine"))
        f |= ZB_CPU_AMD;

    __cpuid(1, a, b, c, d);
    if (c & (1u << 0))
        f |= ZB_CPU_SSE3;
    if (c & (1u << 20))
        f |= ZB_CPU_SSE42;
    unsigned long long xcr0 = (c & (1u << 27)) ? read_xcr0() : 0; /* OSXSAVE */
    bool os_avx = (xcr0 & 0x6) == 0x6;                             /* XMM and YMM state */
    bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;               /* opmask, ZMM halves */
    bool os_amx = (xcr0 & 0x60000) == 0x60000;                      /* TILECFG, TILEDATA */
    if (os_avx && (c & (1u << 28)))
        f |= ZB_CPU_AVX;
    if (os_avx && (c & (1u << 12)))
        f |= ZB_CPU_FMA;
    if (max_leaf < 7)
        return f;

    __cpuid_count(7, 0, a, b, c, d);
    unsigned subleaves = a;
    if (os_avx && (b & (1u << 5)))
        f |= ZB_CPU_AVX2;
    if (os_avx512) {
        if (b & (1u << 16))
            f |= ZB_CPU_AVX512F;
        if (b & (1u << 17))
            f |= ZB_CPU_AVX512DQ;
        if (b & (1u << 30))
            f |= ZB_CPU_AVX512BW;
        if (b & (1u << 31))
            f |= ZB_CPU_AVX512VL;
    }
    if (os_amx) {
        if (d & (1u << 24))
            f |= ZB_CPU_AMX_TILE;
        if (d & (1u << 22))
            f |= ZB_CPU_AMX_BF16;
    }
    if (subleaves >= 1 && os_avx512) {
        __cpuid_count(7, 1, a, b, c, d);
        if (a & (1u << 5))
            f |= ZB_CPU_AVX512_BF16;
    }
    return f;
}
#else
static unsigned detect(void) { return 0; }
#endif

unsigned zb_cpu_features(void)
{
    static unsigned cached;
    static int known; /* CPUID gives the same answer to every thread: a race only repeats it */
    if (!__atomic_load_n(&known, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&cached, detect(), __ATOMIC_RELAXED);
        __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&cached, __ATOMIC_RELAXED);
}

const char *zb_cpu_features_str(unsigned features, char *buf, size_t size)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{ZB_CPU_SSE3, "sse3"},          {ZB_CPU_SSE42, "sse4.2"},
                 {ZB_CPU_AVX, "avx"},            {ZB_CPU_AVX2, "avx2"},
                 {ZB_CPU_FMA, "fma"},            {ZB_CPU_AVX512F, "avx512f"},
                 {ZB_CPU_AVX512BW, "avx512bw"},  {ZB_CPU_AVX512VL, "avx512vl"},
                 {ZB_CPU_AVX512DQ, "avx512dq"},  {ZB_CPU_AVX512_BF16, "avx512_bf16"},
                 {ZB_CPU_AMX_TILE, "amx_tile"},  {ZB_CPU_AMX_BF16, "amx_bf16"}};
    if (!size)
        return buf;
    buf[0] = '\0';
    size_t len = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(features & names[i].bit))
            continue;
        int n = snprintf(buf + len, size - len, "%s%s", len ? " " : "", names[i].name);
        if (n < 0 || (size_t)n >= size - len)
            break;
        len += (size_t)n;
    }
    if (!len)
        snprintf(buf, size, "%s", "none of sse3..amx");
    return buf;
}
