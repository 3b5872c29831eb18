/* Tests of the BLAS kernel choice (src/nn/blas_core.c): feature sets to the best kernel, table by
 * table, with every kernel and with Debian OpenBLAS 0.3.21's set; the decision's states; that an
 * OPENBLAS_CORETYPE the user set is never overridden and that no kernel the CPU cannot run is
 * ever proposed (both over every feature combination); and that this process's report agrees
 * with /proc/cpuinfo and with the library. Whatever the environment sets, these hold. Also the
 * reasons `--precision bf16` is refused on a CPU, in the order they are checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "zbpp/nn.h"

#if defined(ZB_BLAS_OPENBLAS)
#include <cblas.h>
#endif

#define AVX512 (ZB_CPU_AVX512F | ZB_CPU_AVX512BW | ZB_CPU_AVX512VL | ZB_CPU_AVX512DQ)
#define AVX2 (ZB_CPU_SSE3 | ZB_CPU_SSE42 | ZB_CPU_AVX | ZB_CPU_AVX2 | ZB_CPU_FMA)
#define AMX (ZB_CPU_AMX_TILE | ZB_CPU_AMX_BF16)
#define ALL_BITS ((ZB_CPU_AMD << 1) - 1)

/* The kernels of Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH; no SapphireRapids yet). */
static int debian_0321(const char *name) { return strcasecmp(name, "SapphireRapids") != 0; }
/* A build without AMD's blocking. */
static int no_zen(const char *name) { return strcasecmp(name, "Zen") != 0; }

static void best_core_table(void **state)
{
    (void)state;
    static const struct {
        unsigned features;
        int (*has)(const char *);
        const char *best;
    } cases[] = {
        {AVX2 | AVX512 | ZB_CPU_AVX512_BF16 | AMX, NULL, "SapphireRapids"},
        {AVX2 | AVX512 | ZB_CPU_AVX512_BF16 | AMX, debian_0321, "Cooperlake"},
        {AVX2 | AVX512 | ZB_CPU_AVX512_BF16, NULL, "Cooperlake"},
        {AVX2 | AVX512 | ZB_CPU_AVX512_BF16 | ZB_CPU_AMD, debian_0321, "Cooperlake"}, /* Zen 4 */
        {AVX2 | AVX512, NULL, "SkylakeX"},
        {AVX2 | AVX512 | ZB_CPU_AMX_TILE, NULL, "SkylakeX"}, /* AMX without bf16 */
        {AVX2 | ZB_CPU_AVX512F, NULL, "Haswell"},         /* Knights Landing: no BW/VL */
        {AVX2 | (AVX512 & ~ZB_CPU_AVX512VL), NULL, "Haswell"},
        {AVX2 | ZB_CPU_AMD, NULL, "Zen"},
        {AVX2 | ZB_CPU_AMD, no_zen, "Haswell"},
        {AVX2, NULL, "Haswell"},
        {AVX2 & ~ZB_CPU_FMA, NULL, "Sandybridge"},
        {ZB_CPU_SSE3 | ZB_CPU_SSE42 | ZB_CPU_AVX, NULL, "Sandybridge"},
        {ZB_CPU_SSE3 | ZB_CPU_SSE42, NULL, "Nehalem"},
        {ZB_CPU_SSE3, NULL, "Prescott"},
        {ZB_CPU_SSE3 | ZB_CPU_AMD, NULL, "Prescott"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = zb_blas_best_core(cases[i].features, cases[i].has);
        if (!got || strcmp(got, cases[i].best)) {
            char f[200];
            fail_msg("features %s: best %s, want %s",
                     zb_cpu_features_str(cases[i].features, f, sizeof f), got ? got : "(none)",
                     cases[i].best);
        }
    }
    assert_null(zb_blas_best_core(0, NULL));
}

static void decision_states(void **state)
{
    (void)state;
    static const struct {
        unsigned features;
        const char *in_use, *user_env, *zbpp_env;
        zb_blas_core_state_t want;
        const char *best, *chosen;
    } cases[] = {
        /* the hidden Xeon: OpenBLAS fell back to SSE3 */
        {AVX2 | AVX512 | ZB_CPU_AVX512_BF16 | AMX, "Prescott", NULL, NULL, ZB_BLAS_CORE_LOW,
         "SapphireRapids", ""},
        {AVX2 | AVX512, "Haswell", NULL, NULL, ZB_BLAS_CORE_LOW, "SkylakeX", ""},
        {AVX2 | AVX512, "SkylakeX", NULL, NULL, ZB_BLAS_CORE_BEST, "SkylakeX", ""},
        {AVX2 | AVX512, "COOPERLAKE", NULL, NULL, ZB_BLAS_CORE_BEST, "SkylakeX", ""},
        {AVX2 | ZB_CPU_AMD, "Haswell", NULL, NULL, ZB_BLAS_CORE_BEST, "Zen", ""}, /* same level */
        {AVX2, "Zen", NULL, NULL, ZB_BLAS_CORE_BEST, "Haswell", ""},
        {AVX2, "Excavator", NULL, NULL, ZB_BLAS_CORE_LOW, "Haswell", ""},
        {AVX2, "Core2", NULL, NULL, ZB_BLAS_CORE_LOW, "Haswell", ""},
        {ZB_CPU_SSE3, "Core2", NULL, NULL, ZB_BLAS_CORE_BEST, "Prescott", ""},
        {AVX2, "FutureLake", NULL, NULL, ZB_BLAS_CORE_UNKNOWN, "Haswell", ""},
        {AVX2, NULL, NULL, NULL, ZB_BLAS_CORE_OTHER, "Haswell", ""},
        /* the user's variable, whatever its value, is kept */
        {AVX2 | AVX512, "Prescott", "Prescott", NULL, ZB_BLAS_CORE_USER, "SkylakeX", ""},
        {AVX2 | AVX512, "Haswell", "", NULL, ZB_BLAS_CORE_USER, "SkylakeX", ""},
        {AVX2 | AVX512, "Haswell", "Haswell", "Prescott>SkylakeX", ZB_BLAS_CORE_USER,
         "SkylakeX", ""},
        /* zbpp's own variable, after the re-execution */
        {AVX2 | AVX512, "SkylakeX", "SkylakeX", "Prescott>SkylakeX", ZB_BLAS_CORE_SWITCHED,
         "SkylakeX", "Prescott"},
        {AVX2 | AVX512, "Prescott", "SkylakeX", "Prescott>SkylakeX", ZB_BLAS_CORE_FAILED,
         "SkylakeX", "Prescott"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zb_blas_kernel_t k;
        zb_blas_core_decide(&k, cases[i].features, NULL, cases[i].in_use, cases[i].user_env,
                            cases[i].zbpp_env);
        if (k.state != cases[i].want || strcmp(k.best, cases[i].best) ||
            strcmp(k.chosen, cases[i].chosen))
            fail_msg("case %zu (%s): state %d best %s chosen '%s', want %d %s '%s'", i,
                     cases[i].in_use ? cases[i].in_use : "-", (int)k.state, k.best, k.chosen,
                     (int)cases[i].want, cases[i].best, cases[i].chosen);
        assert_true(strlen(k.line) > 0);
        assert_null(strchr(k.line, '\n'));
        bool warn = k.state == ZB_BLAS_CORE_LOW || k.state == ZB_BLAS_CORE_FAILED;
        assert_int_equal(warn, strncmp(k.line, "warning:", 8) == 0);
        if (k.state == ZB_BLAS_CORE_LOW) /* the line says what to set */
            assert_non_null(strstr(k.line, cases[i].best));
    }
}

static const char *const names[] = {"Prescott", "Core2",       "Nehalem",  "Sandybridge",
                                    "Haswell",  "Zen",         "SkylakeX", "Cooperlake",
                                    "SapphireRapids", "Excavator", "Atom", "FutureLake"};
#define NNAMES (sizeof names / sizeof names[0])

/* Over every combination of feature bits and every kernel OpenBLAS might run: a variable the
 * user set is reported as the user's and never proposed for change, and a kernel proposed is one
 * whose instructions the CPU has. */
static void user_setting_never_overridden(void **state)
{
    (void)state;
    static const char *const notes[] = {NULL, "Prescott>SkylakeX", "Haswell>Zen", "garbage"};
    for (unsigned f = 0; f <= ALL_BITS; f++) {
        const char *best = zb_blas_best_core(f, NULL);
        if (best) { /* proposed kernels are runnable: the feature tests of a few by name */
            if (!strcmp(best, "SkylakeX") || !strcmp(best, "Cooperlake"))
                assert_true((f & AVX512) == AVX512);
            if (!strcmp(best, "Haswell") || !strcmp(best, "Zen"))
                assert_true((f & (ZB_CPU_AVX2 | ZB_CPU_FMA)) == (ZB_CPU_AVX2 | ZB_CPU_FMA));
            if (!strcmp(best, "SapphireRapids"))
                assert_true((f & AMX) == AMX);
        }
        for (size_t u = 0; u < NNAMES; u += 3) /* kernels in use: a sample of levels */
            for (size_t e = 0; e < NNAMES; e++)
                for (size_t n = 0; n < sizeof notes / sizeof notes[0]; n++) {
                    zb_blas_kernel_t k;
                    zb_blas_core_decide(&k, f, NULL, names[u], names[e], notes[n]);
                    if (!best)
                        assert_int_equal(k.state, ZB_BLAS_CORE_OTHER);
                    else if (notes[n] && strchr(notes[n], '>') &&
                             !strcmp(strchr(notes[n], '>') + 1, names[e])) /* zbpp's */
                        assert_true(k.state == ZB_BLAS_CORE_SWITCHED ||
                                    k.state == ZB_BLAS_CORE_FAILED);
                    else
                        assert_int_equal(k.state, ZB_BLAS_CORE_USER);
                }
    }
}

static bool cpuinfo_has(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = strstr(flags, flag); p; p = strstr(p + 1, flag))
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

/* The CPUID bits against the kernel's own view in /proc/cpuinfo (which also drops what the OS
 * does not enable). */
static void features_match_cpuinfo(void **state)
{
    (void)state;
#if defined(__x86_64__) && defined(__linux__)
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp)
        skip();
    static char line[8192];
    bool found = false;
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, "flags", 5)) {
            found = true;
            break;
        }
    fclose(fp);
    if (!found)
        skip();
    static const struct {
        unsigned bit;
        const char *flag;
    } map[] = {{ZB_CPU_SSE3, "pni"},           {ZB_CPU_SSE42, "sse4_2"},
               {ZB_CPU_AVX, "avx"},            {ZB_CPU_AVX2, "avx2"},
               {ZB_CPU_FMA, "fma"},            {ZB_CPU_AVX512F, "avx512f"},
               {ZB_CPU_AVX512BW, "avx512bw"},  {ZB_CPU_AVX512VL, "avx512vl"},
               {ZB_CPU_AVX512DQ, "avx512dq"},  {ZB_CPU_AVX512_BF16, "avx512_bf16"},
               {ZB_CPU_AMX_TILE, "amx_tile"},  {ZB_CPU_AMX_BF16, "amx_bf16"}};
    unsigned f = zb_cpu_features();
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!!(f & map[i].bit) != cpuinfo_has(line, map[i].flag))
            fail_msg("%s: CPUID says %d, /proc/cpuinfo says %d", map[i].flag,
                     !!(f & map[i].bit), cpuinfo_has(line, map[i].flag));
#else
    skip();
#endif
}

/* This process's report: the kernel it names is the one running, and a variable set outside
 * zbpp is the user's. */
static void process_report(void **state)
{
    (void)state;
    const zb_blas_kernel_t *k = zb_blas_kernel();
    assert_true(strlen(k->line) > 0);
#if defined(ZB_BLAS_OPENBLAS) && defined(__x86_64__)
    if (!getenv("ZBPP_TEST_BLAS_CHOSE"))
        assert_string_equal(k->in_use, openblas_get_corename());
    const char *user = getenv("OPENBLAS_CORETYPE");
    if (user && !getenv(ZB_BLAS_CORE_ENV))
        assert_int_equal(k->state, ZB_BLAS_CORE_USER);
    if (!user)
        assert_true(k->state == ZB_BLAS_CORE_BEST || k->state == ZB_BLAS_CORE_LOW ||
                    k->state == ZB_BLAS_CORE_UNKNOWN);
    /* the best kernel is one this library has: it names it back when asked for it */
    assert_true(strlen(k->best) > 0);
#endif
}

static void bf16_refusal(void **state)
{
    (void)state;
    zb_err_t e;
    assert_int_equal(zb_cpu_bf16_check_for(AVX2 | AVX512, NULL, &e), ZB_EUNSUPPORTED);
    assert_non_null(strstr(e.msg, "no AVX512-BF16 or AMX-BF16"));
    assert_non_null(strstr(e.msg, "avx512f")); /* says what the CPU has */
    /* the instructions are checked before the backend */
    assert_int_equal(zb_cpu_bf16_check_for(AVX2 | AVX512, "no backend", &e), ZB_EUNSUPPORTED);
    assert_non_null(strstr(e.msg, "no AVX512-BF16 or AMX-BF16"));
    assert_int_equal(zb_cpu_bf16_check_for(AVX2 | AVX512 | ZB_CPU_AVX512_BF16, "no backend", &e),
                     ZB_EUNSUPPORTED);
    assert_string_equal(e.msg, "no backend");
    assert_int_equal(zb_cpu_bf16_check_for(AVX2 | AVX512 | AMX, "no backend", &e),
                     ZB_EUNSUPPORTED);
    assert_string_equal(e.msg, "no backend");
    assert_int_equal(zb_cpu_bf16_check_for(AVX2 | AVX512 | ZB_CPU_AVX512_BF16, NULL, &e), ZB_OK);
    assert_int_equal(zb_cpu_bf16_check_for(AVX2 | AVX512 | AMX, NULL, &e), ZB_OK);
    /* this process: on a CPU without the instructions, refused for that reason */
    if (!(zb_cpu_features() & (ZB_CPU_AVX512_BF16 | ZB_CPU_AMX_BF16))) {
        zb_err_t here;
        assert_int_equal(zb_cpu_bf16_check(&here), ZB_EUNSUPPORTED);
        assert_non_null(strstr(here.msg, "no AVX512-BF16"));
        assert_null(strchr(here.msg, '\n'));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(best_core_table),
        cmocka_unit_test(decision_states),
        cmocka_unit_test(user_setting_never_overridden),
        cmocka_unit_test(features_match_cpuinfo),
        cmocka_unit_test(process_report),
        cmocka_unit_test(bf16_refusal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
