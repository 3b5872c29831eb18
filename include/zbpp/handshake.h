/* zbpp — the start-up handshake of a distributed run: every rank hashes what must be identical
 * (binary, flags, schedule, model, initial parameters, ...) and all compare, so a mismatched
 * binary or flag stops the job with a message naming the rank and the items that differ
 * instead of training garbage or deadlocking later.
 *
 * It doubles as the "did everyone start?" barrier: a rank that failed during start-up still
 * takes part, with its status, so the others learn of it instead of waiting for it. */
#ifndef ZBPP_HANDSHAKE_H
#define ZBPP_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "zbpp/error.h"
#include "zbpp/hash.h"
#include "zbpp/transport.h"

/* Hash of this process's executable file (/proc/self/exe), else of the build date and version.
 * Two hosts running the same binary get the same value. */
uint64_t zb_build_id(void);

/* One thing every rank must agree on. `name` is what the message shows ("lr", "schedule"). */
typedef struct {
    const char *name;
    uint64_t hash;
} zb_hs_item_t;

/* Collective: every rank calls it at the same point with the same item names in the same order
 * (at most 64 items). `local` is this rank's start-up status so far; when it is not ZB_OK, *err
 * holds this rank's message and the items are ignored.
 *
 * Returns ZB_OK when every rank started and every item matches rank 0's. Otherwise every rank
 * returns an error and exactly one message per distinct problem is meant to be printed: the rank
 * that should print it returns the problem's own status (a rank's own start-up failure: the
 * lowest rank with that message; a disagreement: rank 0, with "rank 1 disagrees on: schedule,
 * lr" listing every disagreeing rank); every other rank returns ZB_EABORT with a short summary.
 * Transport failures during the exchange itself are returned as they are. */
zb_status_t zb_handshake(zb_transport_t *t, const zb_hs_item_t *items, int n, zb_status_t local,
                         zb_err_t *err);

#endif
