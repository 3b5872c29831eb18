/* Internal: handcrafted families' schedules generated once and handed on, so that auto (which
 * offers every family of each chunking it searches) and plan (which shows every family) do not
 * generate the same schedule again. The handcrafted generators do not read the costs, so a
 * schedule of (family, chunks) serves any cost model of that chunking. */
#ifndef ZBPP_SCHEDULE_FAMILY_POOL_H
#define ZBPP_SCHEDULE_FAMILY_POOL_H

#include "zbpp/schedule.h"

typedef struct {
    const char *family; /* registry name (static string) */
    int chunks;         /* v asked for */
    zb_schedule_t *s;   /* owned; NULL once taken, or when the generation failed */
    bool failed;        /* the family does not apply at this (P, M, v) */
} zb_family_entry_t;

typedef struct {
    zb_family_entry_t *e;
    int n, cap;
} zb_family_pool_t;

/* Park a schedule (owned from now on; NULL with failed = true records a refusal). ZB_ENOMEM
 * when the pool cannot grow (s is freed then). */
zb_status_t zb_family_pool_put(zb_family_pool_t *pool, const char *family, int chunks,
                               zb_schedule_t *s, bool failed);
/* The entry of (family, chunks), NULL when none. */
zb_family_entry_t *zb_family_pool_find(zb_family_pool_t *pool, const char *family, int chunks);
void zb_family_pool_free(zb_family_pool_t *pool);

/* auto with a pool: families found there are taken instead of generated, and the ones generated
 * for another chunking are parked there for it. zb_gen_auto uses a pool of its own. */
zb_status_t zb_gen_auto_pool(zb_gen_params_t *p, zb_family_pool_t *pool, zb_schedule_t **out,
                             zb_err_t *err);

#endif
