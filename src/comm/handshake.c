/* zbpp — start-up handshake: hash what must agree, allgather, compare with rank 0. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/handshake.h"
#include "zbpp/util.h"

#define MAX_ITEMS 64 /* rows have a fixed size: a failed rank may not know n */

uint64_t zb_build_id(void)
{
    static uint64_t cached;
    if (cached)
        return cached;
    uint64_t h = ZB_HASH_SEED;
    FILE *f = fopen("/proc/self/exe", "rb");
    if (f) {
        static unsigned char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            h = zb_hash_bytes(h, buf, n);
        fclose(f);
    } else {
        h = zb_hash_str(h, __DATE__ " " __TIME__ " zbpp");
    }
    cached = h ? h : 1;
    return cached;
}

static void append(char *msg, size_t cap, const char *text)
{
    size_t len = strlen(msg);
    if (len + strlen(text) + 4 < cap)
        memcpy(msg + len, text, strlen(text) + 1);
    else if (len + 4 < cap && strcmp(msg + len - 3, "...") != 0)
        memcpy(msg + len, "...", 4);
}

/* Row layout (zb_allgather_u64): status, message hash, then one hash per item. */
enum { HDR = 2 };

static zb_status_t report_failures(const zb_transport_t *t, const uint64_t *all, int row_n,
                                   zb_status_t local, zb_err_t *err)
{
    int first_bad = -1, n_bad = 0;
    for (int r = 0; r < t->size; r++)
        if (all[(size_t)r * row_n] != 0) {
            n_bad++;
            if (first_bad < 0)
                first_bad = r;
        }
    if (local != ZB_OK) {
        const uint64_t *mine = all + (size_t)t->rank * row_n;
        for (int r = 0; r < t->rank; r++) {
            const uint64_t *o = all + (size_t)r * row_n;
            if (o[0] == mine[0] && o[1] == mine[1])
                return zb_err_set(err, ZB_EABORT, "rank %d failed during start-up (like rank %d)",
                                  t->rank, r);
        }
        return local; /* this rank's own message is the one to show */
    }
    if (n_bad > 1)
        return zb_err_set(err, ZB_EABORT,
                          "rank %d and %d other rank%s failed during start-up; stopping", first_bad,
                          n_bad - 1, n_bad > 2 ? "s" : "");
    return zb_err_set(err, ZB_EABORT, "rank %d failed during start-up; stopping", first_bad);
}

zb_status_t zb_handshake(zb_transport_t *t, const zb_hs_item_t *items, int n, zb_status_t local,
                         zb_err_t *err)
{
    if (n < 0 || n > MAX_ITEMS)
        return zb_err_set(err, ZB_EINVAL, "handshake of %d items (at most %d)", n, MAX_ITEMS);
    int row_n = HDR + MAX_ITEMS;
    uint64_t *mine = calloc((size_t)row_n, sizeof *mine);
    uint64_t *all = calloc((size_t)row_n * (size_t)t->size, sizeof *all);
    if (!mine || !all) {
        free(mine), free(all);
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the start-up handshake");
    }
    mine[0] = (uint64_t)local;
    if (local != ZB_OK) {
        mine[1] = zb_hash_str(ZB_HASH_SEED, err ? err->msg : "");
    } else {
        for (int i = 0; i < n; i++)
            mine[HDR + i] = items[i].hash;
    }
    zb_err_t xerr;
    zb_status_t st = zb_allgather_u64(t, mine, row_n, all, &xerr);
    if (st != ZB_OK) {
        /* a start-up failure explains a broken exchange better than the exchange does */
        if (local == ZB_OK && err)
            *err = xerr;
        free(mine), free(all);
        return local != ZB_OK ? local : st;
    }
    bool failed = false;
    for (int r = 0; r < t->size; r++)
        failed |= all[(size_t)r * row_n] != 0;
    if (failed) {
        st = report_failures(t, all, row_n, local, err);
        free(mine), free(all);
        return st;
    }
    char msg[sizeof ((zb_err_t *)0)->msg] = "";
    for (int r = 1; r < t->size; r++) {
        const uint64_t *o = all + (size_t)r * row_n;
        bool any = false;
        for (int i = 0; i < n; i++) {
            if (o[HDR + i] == all[HDR + i])
                continue;
            char part[96];
            if (!any)
                snprintf(part, sizeof part, "%srank %d disagrees on: %s", msg[0] ? "; " : "", r,
                         items[i].name);
            else
                snprintf(part, sizeof part, ", %s", items[i].name);
            append(msg, sizeof msg, part);
            any = true;
        }
    }
    free(mine), free(all);
    if (!msg[0])
        return ZB_OK;
    return zb_err_set(err, t->rank == 0 ? ZB_EMISMATCH : ZB_EABORT,
                      "ranks started with different settings (compared with rank 0): %s", msg);
}
