/* Helpers shared by the schedule writers. */
#include "schedule/io_internal.h"

#include <math.h>

zb_status_t zb_io_check_sim(const zb_sim_t *sim, const char *what, zb_err_t *err)
{
    if (!sim || !sim->schedule || !sim->len || !sim->start || !sim->end)
        return zb_err_set(err, ZB_EINVAL, "%s: incomplete timeline (no schedule or times)", what);
    const zb_schedule_t *s = sim->schedule;
    if (sim->ranks != s->ranks)
        return zb_err_set(err, ZB_EINVAL, "%s: timeline has %d ranks, its schedule %d", what,
                          sim->ranks, s->ranks);
    for (int r = 0; r < sim->ranks; r++) {
        if (sim->len[r] != s->rank[r].len)
            return zb_err_set(err, ZB_EINVAL, "%s: rank %d timeline has %d actions, its schedule "
                                              "%d", what, r, sim->len[r], s->rank[r].len);
        for (int i = 0; i < sim->len[r]; i++)
            if (!isfinite(sim->start[r][i]) || !isfinite(sim->end[r][i]) ||
                sim->end[r][i] < sim->start[r][i])
                return zb_err_set(err, ZB_ENUMERIC, "%s: rank %d action %d has a bad time "
                                                    "interval", what, r, i);
    }
    return ZB_OK;
}

void zb_io_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

void zb_io_xml_text(FILE *out, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&apos;", out); break;
        default:
            if (*p >= 0x20 || *p == '\t')
                fputc(*p, out); /* XML 1.0 forbids other control characters */
        }
    }
}

int zb_io_local_chunk(const zb_schedule_t *s, int stage)
{
    /* Loop: stage s is chunk s / P of rank s mod P. V: stages < P are chunk 0, the rest chunk 1. */
    return s->ranks > 0 ? stage / s->ranks : 0;
}
