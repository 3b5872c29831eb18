#include "train/divergence.h"

#include <math.h>

void zb_diverge_init(zb_diverge_t *d, long limit)
{
    d->limit = limit >= 1 ? limit : ZB_DIVERGE_MAX_SKIPS;
    d->run = 0;
    d->loss_bad = false;
    d->loss_step = 0;
    d->loss = 0;
}

zb_status_t zb_diverge_step(zb_diverge_t *d, bool skipped, float loss, long step, zb_err_t *err)
{
    d->run = skipped ? d->run + 1 : 0;
    d->loss_bad = !isfinite(loss);
    d->loss_step = step;
    d->loss = loss;
    if (d->run < d->limit)
        return ZB_OK;
    return zb_err_set(err, ZB_ENUMERIC,
                      "training diverged: steps %ld-%ld all had a non-finite gradient norm and "
                      "were skipped; stopped without saving (lower --lr, or resume from an "
                      "earlier checkpoint)",
                      step - d->run + 1, step);
}

bool zb_diverge_may_save(const zb_diverge_t *d) { return d->run == 0 && !d->loss_bad; }

zb_status_t zb_diverge_final(const zb_diverge_t *d, zb_err_t *err)
{
    if (!d->loss_bad)
        return ZB_OK;
    return zb_err_set(err, ZB_ENUMERIC,
                      "training diverged: the loss of step %ld is %s; nothing saved at the end "
                      "(lower --lr, or resume from an earlier checkpoint)",
                      d->loss_step, isnan(d->loss) ? "NaN" : "infinite");
}

zb_status_t zb_diverge_check_weights(const float *w, size_t n, const char *what, zb_err_t *err)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(w[i]);
    if (bad == 0)
        return ZB_OK;
    return zb_err_set(err, ZB_ENUMERIC,
                      "training diverged: %zu of %zu weights are NaN or infinite; %s not saved "
                      "(lower --lr, or resume from an earlier checkpoint)",
                      bad, n, what);
}
