/* Sorting and medians of timing samples (the benchmarks, the profiler, the trainers' summaries). */
#include "zbpp/util.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void zb_sort_doubles(double *v, size_t n) { qsort(v, n, sizeof *v, cmp_double); }

double zb_median(double *v, size_t n)
{
    zb_sort_doubles(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
