/* This process's resident memory, from /proc/self/status (Linux); 0 where it cannot be read. */
#include <stdio.h>
#include <string.h>

#include "zbpp/util.h"

static double status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    double kib = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') {
            if (sscanf(line + n + 1, "%lf", &kib) != 1)
                kib = 0;
            break;
        }
    fclose(f);
    return kib;
}

double zb_rss_peak_bytes(void)
{
    return status_kib("VmHWM") * 1024.0;
}

double zb_rss_bytes(void)
{
    return status_kib("VmRSS") * 1024.0;
}
