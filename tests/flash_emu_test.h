/* What the two emulated flash-attention tests (test_flash_emulated.c, test_flash32_emulated.c)
 * share: their inputs' random numbers, the check of one error against its bound, and the
 * emulation's launch-error report. Include after <cmocka.h>, once. */
#ifndef ZBPP_TESTS_FLASH_EMU_TEST_H
#define ZBPP_TESTS_FLASH_EMU_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* 0, or the error of the last launch the emulation refused (1) or left copies pending (2);
 * reading it clears it (tests/flash_emulation.h) */
int zb_flash_emu_take_error(void);

static uint64_t flash_emu_rng = 0x2545f4914f6cdd1dull;
static float frand(void) /* uniform in [-1, 1) */
{
    flash_emu_rng = flash_emu_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((flash_emu_rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* err within tol (NaN fails); printed with FLASH_VERBOSE set */
static void expect(const char *what, int T, int hs, double err, double tol)
{
    if (getenv("FLASH_VERBOSE"))
        printf("%-12s T %3d hs %3d err %.3g (bound %g)\n", what, T, hs, err, tol);
    if (!(err <= tol))
        fail_msg("%s (T %d, hs %d): relative error %g > %g", what, T, hs, err, tol);
}

#endif
