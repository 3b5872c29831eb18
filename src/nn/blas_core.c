/* Which OpenBLAS kernel should run on this CPU, and whether the one running is it.
 *
 * OpenBLAS (DYNAMIC_ARCH) picks its kernel from the CPU model when the library loads; on a CPU
 * it does not know (a new model, or a VM that hides the model) it falls back to an old, slow
 * kernel, silently: Prescott (SSE3) on an AVX-512 Xeon ran 4x slower. The feature bits tell
 * what the CPU can run whatever its model, so the decision below compares two levels: the
 * kernel in use against the best kernel the library has for those bits. The only fix is
 * OPENBLAS_CORETYPE, read at load time, so the CLI re-executes itself with it (cli/blas_env.c);
 * a variable the user set is respected as it is. docs/blas.md, "Kernel choice". */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "zbpp/nn.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(ZB_BLAS_OPENBLAS)
#include <cblas.h>
#include <dlfcn.h>
#include <ctype.h>
#endif

/* The level of a kernel: what its code needs of the CPU, higher is faster where it runs. */
enum { L_SSE3 = 1, L_SSE42, L_AVX, L_AVX2, L_AVX512, L_AVX512_BF16, L_AMX };

typedef struct {
    const char *name; /* as OpenBLAS spells it for OPENBLAS_CORETYPE */
    int level;
    unsigned needs;   /* ZB_CPU_* bits that must all be present */
    bool amd;         /* preferred on AMD CPUs only (same level as an Intel kernel) */
} core_t;

#define AVX512_BASE (ZB_CPU_AVX512F | ZB_CPU_AVX512BW | ZB_CPU_AVX512VL | ZB_CPU_AVX512DQ)

/* The candidates, best first: the first whose needs the CPU meets (and that the library has)
 * is the best. Zen's kernels are Haswell's with AMD's cache blocking. */
static const core_t candidates[] = {
    {"SapphireRapids", L_AMX, AVX512_BASE | ZB_CPU_AVX512_BF16 | ZB_CPU_AMX_TILE | ZB_CPU_AMX_BF16,
     false},
    {"Cooperlake", L_AVX512_BF16, AVX512_BASE | ZB_CPU_AVX512_BF16, false},
    {"SkylakeX", L_AVX512, AVX512_BASE, false},
    {"Zen", L_AVX2, ZB_CPU_AVX2 | ZB_CPU_FMA | ZB_CPU_AMD, true},
    {"Haswell", L_AVX2, ZB_CPU_AVX2 | ZB_CPU_FMA, false},
    {"Sandybridge", L_AVX, ZB_CPU_AVX, false},
    {"Nehalem", L_SSE42, ZB_CPU_SSE42, false},
    {"Prescott", L_SSE3, ZB_CPU_SSE3, false},
};

/* Every other x86-64 kernel OpenBLAS may report, with its level (never chosen by zbpp: each is
 * at most as fast as a candidate of the same level). */
static const core_t others[] = {
    {"Core2", L_SSE3, 0, false},       {"Penryn", L_SSE3, 0, false},
    {"Dunnington", L_SSE3, 0, false},  {"Atom", L_SSE3, 0, false},
    {"Nano", L_SSE3, 0, false},        {"Opteron", L_SSE3, 0, false},
    {"Barcelona", L_SSE3, 0, false},   {"Bobcat", L_SSE3, 0, false},
    {"Athlon", L_SSE3, 0, false},      {"Katmai", L_SSE3, 0, false},
    {"Coppermine", L_SSE3, 0, false},  {"Northwood", L_SSE3, 0, false},
    {"Banias", L_SSE3, 0, false},      {"Bulldozer", L_AVX, 0, false},
    {"Piledriver", L_AVX, 0, false},   {"Steamroller", L_AVX, 0, false},
    {"Excavator", L_AVX, 0, false},
};

static const core_t *find_core(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
        if (!strcasecmp(name, candidates[i].name))
            return &candidates[i];
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        if (!strcasecmp(name, others[i].name))
            return &others[i];
    return NULL;
}

const char *zb_blas_best_core(unsigned features, int (*has_core)(const char *))
{
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        const core_t *c = &candidates[i];
        if ((features & c->needs) == c->needs && (!has_core || has_core(c->name)))
            return c->name;
    }
    return NULL;
}

static void copy_name(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

void zb_blas_core_decide(zb_blas_kernel_t *out, unsigned features, int (*has_core)(const char *),
                         const char *in_use, const char *user_env, const char *zbpp_env)
{
    memset(out, 0, sizeof *out);
    out->features = features;
    copy_name(out->in_use, sizeof out->in_use, in_use);
    const char *best = zb_blas_best_core(features, has_core);
    copy_name(out->best, sizeof out->best, best);
    const core_t *cur = find_core(in_use);

    /* Did zbpp set OPENBLAS_CORETYPE? Only if its note names that very value. */
    const char *sep = zbpp_env ? strchr(zbpp_env, '>') : NULL;
    bool by_zbpp = user_env && sep && !strcasecmp(sep + 1, user_env);
    if (by_zbpp)
        snprintf(out->chosen, sizeof out->chosen, "%.*s", (int)(sep - zbpp_env), zbpp_env);

    if (!in_use || !best) {
        out->state = ZB_BLAS_CORE_OTHER;
        if (in_use) /* a build with one kernel, or a CPU none of the table fits */
            snprintf(out->line, sizeof out->line, "OpenBLAS %s (nothing to choose from here)",
                     in_use);
        else
            snprintf(out->line, sizeof out->line, "not OpenBLAS");
    } else if (by_zbpp) {
        bool took = !strcasecmp(in_use, user_env);
        out->state = took ? ZB_BLAS_CORE_SWITCHED : ZB_BLAS_CORE_FAILED;
        if (took)
            snprintf(out->line, sizeof out->line,
                     "OpenBLAS %s (OpenBLAS chose %s for this CPU; zbpp set "
                     "OPENBLAS_CORETYPE=%s)",
                     in_use, out->chosen, user_env);
        else
            snprintf(out->line, sizeof out->line,
                     "warning: OpenBLAS %s kernels, below this CPU's %s: OpenBLAS did not take "
                     "OPENBLAS_CORETYPE=%s",
                     in_use, user_env, user_env);
    } else if (user_env) {
        out->state = ZB_BLAS_CORE_USER;
        const core_t *b = find_core(best);
        bool lower = cur && cur->level < b->level;
        snprintf(out->line, sizeof out->line, "OpenBLAS %s (OPENBLAS_CORETYPE=%s set by the user%s%s)",
                 in_use, user_env, lower ? "; this CPU could run " : "", lower ? best : "");
    } else if (!cur) {
        out->state = ZB_BLAS_CORE_UNKNOWN;
        snprintf(out->line, sizeof out->line,
                 "OpenBLAS %s (a kernel zbpp does not know; left as is, this CPU's best in "
                 "zbpp's table is %s)",
                 in_use, best);
    } else if (cur->level < find_core(best)->level) {
        out->state = ZB_BLAS_CORE_LOW;
        snprintf(out->line, sizeof out->line,
                 "warning: OpenBLAS chose %s kernels, below this CPU's %s: set "
                 "OPENBLAS_CORETYPE=%s",
                 in_use, best, best);
    } else {
        out->state = ZB_BLAS_CORE_BEST;
        snprintf(out->line, sizeof out->line, "OpenBLAS %s (the best this OpenBLAS has for the CPU)",
                 in_use);
    }
}

#if defined(ZB_BLAS_OPENBLAS)
/* The library has a kernel when its dispatch table for it is linked in (OpenBLAS exports
 * gotoblas_<NAME> for each kernel of a DYNAMIC_ARCH build). */
static int openblas_has_core(const char *name)
{
    char sym[64] = "gotoblas_";
    size_t n = strlen(sym);
    for (const char *p = name; *p && n + 1 < sizeof sym; p++)
        sym[n++] = (char)toupper((unsigned char)*p);
    sym[n] = '\0';
    return dlsym(RTLD_DEFAULT, sym) != NULL;
}
#endif

static pthread_once_t kernel_once = PTHREAD_ONCE_INIT;
static zb_blas_kernel_t kernel;

static void kernel_decide_once(void)
{
#if defined(ZB_BLAS_OPENBLAS) /* off x86-64 the features are 0: nothing to choose */
    const char *in_use = openblas_get_corename();
    /* for the CLI test of the re-execution only: pretend OpenBLAS chose this kernel (ignored
     * once zbpp has set OPENBLAS_CORETYPE) */
    const char *pretend = getenv("ZBPP_TEST_BLAS_CHOSE");
    if (pretend && *pretend && !getenv(ZB_BLAS_CORE_ENV))
        in_use = pretend;
    zb_blas_core_decide(&kernel, zb_cpu_features(), openblas_has_core, in_use,
                        getenv("OPENBLAS_CORETYPE"), getenv(ZB_BLAS_CORE_ENV));
#else
    zb_blas_core_decide(&kernel, zb_cpu_features(), NULL, NULL, NULL, NULL);
    snprintf(kernel.line, sizeof kernel.line, "%s", zb_blas_init());
#endif
}

const zb_blas_kernel_t *zb_blas_kernel(void)
{
    pthread_once(&kernel_once, kernel_decide_once);
    return &kernel;
}
