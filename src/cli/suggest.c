/* zbpp CLI — "did you mean ...?" for a mistyped schedule family (args.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "zbpp/schedule.h"

enum { MAX_NAME = 48 };

/* Edit distance (insertions, deletions, substitutions and swaps of neighbours), ignoring case. */
static int distance(const char *a, const char *b)
{
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n >= MAX_NAME || m >= MAX_NAME)
        return MAX_NAME;
    int d[MAX_NAME + 1][MAX_NAME + 1];
    for (int i = 0; i <= n; i++)
        d[i][0] = i;
    for (int j = 0; j <= m; j++)
        d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

const char *zb_cli_suggest_schedule(const char *name)
{
    if (!name || !*name)
        return NULL;
    size_t count;
    const zb_generator_info_t *g = zb_generators(&count);
    const char *best = NULL;
    int best_d = MAX_NAME, ties = 0;
    for (size_t i = 0; i < count; i++) {
        int d = distance(name, g[i].name);
        if (d < best_d)
            best = g[i].name, best_d = d, ties = 0;
        else if (d == best_d)
            ties++;
    }
    /* close enough to be a typo (a third of the name), and only one such family */
    int allowed = (int)strlen(name) / 3 > 1 ? (int)strlen(name) / 3 : 1;
    return best_d <= allowed && ties == 0 ? best : NULL;
}
