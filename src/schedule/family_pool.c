/* Handcrafted families' schedules kept for a second use (family_pool.h). */
#include "schedule/family_pool.h"

#include <stdlib.h>
#include <string.h>

zb_status_t zb_family_pool_put(zb_family_pool_t *pool, const char *family, int chunks,
                               zb_schedule_t *s, bool failed)
{
    if (pool->n == pool->cap) {
        int cap = pool->cap ? 2 * pool->cap : 16;
        zb_family_entry_t *e = realloc(pool->e, sizeof *e * (size_t)cap);
        if (!e) {
            zb_schedule_free(s);
            return ZB_ENOMEM;
        }
        pool->e = e;
        pool->cap = cap;
    }
    pool->e[pool->n++] = (zb_family_entry_t){family, chunks, s, failed};
    return ZB_OK;
}

zb_family_entry_t *zb_family_pool_find(zb_family_pool_t *pool, const char *family, int chunks)
{
    for (int i = 0; pool && i < pool->n; i++)
        if (pool->e[i].chunks == chunks && !strcmp(pool->e[i].family, family))
            return &pool->e[i];
    return NULL;
}

void zb_family_pool_free(zb_family_pool_t *pool)
{
    for (int i = 0; i < pool->n; i++)
        zb_schedule_free(pool->e[i].s);
    free(pool->e);
    memset(pool, 0, sizeof *pool);
}
