/* cuBLASLt is not linked but opened on first use (src/cuda/cublaslt_lazy.c): the zbpp binary
 * must not need libcublasLt at start-up, and the first cuBLASLt call must reach the real library
 * (its status string, not the shim's "could not be loaded" text, and the library is mapped).
 * Needs the toolkit, not a GPU. Skipped (77) in a build without CUDA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifndef ZB_HAVE_CUDA
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#else

#include <cublasLt.h>

/* 1 when libcublasLt is mapped into this process, 0 when not, -1 without /proc */
static int cublaslt_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int mapped = 0;
    while (fgets(line, sizeof line, f))
        mapped |= strstr(line, "libcublasLt") != NULL;
    fclose(f);
    return mapped;
}

static void test_not_mapped_until_used(void **state)
{
    (void)state;
    if (cublaslt_mapped() < 0)
        skip();
    assert_int_equal(cublaslt_mapped(), 0); /* nothing here has used cuBLASLt yet */
}

static void test_first_call_loads_the_library(void **state)
{
    (void)state;
    const char *s = cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS);
    assert_non_null(s);
    printf("  cublasLtGetStatusString(SUCCESS) = %s\n", s);
    if (strstr(s, "could not be loaded"))
        fail_msg("%s", s);
    if (cublaslt_mapped() >= 0)
        assert_int_equal(cublaslt_mapped(), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_mapped_until_used),
        cmocka_unit_test(test_first_call_loads_the_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
