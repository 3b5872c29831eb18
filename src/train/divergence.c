#include "train/divergence.h"

void zb_diverge_init(zb_diverge_t *d, long limit)
{
    d->limit = limit >= 1 ? limit : ZB_DIVERGE_MAX_SKIPS;
    d->run = 0;
}

zb_status_t zb_diverge_step(zb_diverge_t *d, bool skipped, long step, zb_err_t *err)
{
    d->run = skipped ? d->run + 1 : 0;
    if (d->run < d->limit)
        return ZB_OK;
    return zb_err_set(err, ZB_ENUMERIC,
                      "training diverged: steps %ld-%ld all had a non-finite gradient norm and "
                      "were skipped; stopped without saving (lower --lr, or resume from an "
                      "earlier checkpoint)",
                      step - d->run + 1, step);
}

bool zb_diverge_may_save(const zb_diverge_t *d) { return d->run == 0; }
