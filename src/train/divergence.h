/* Internal: stop a diverged run. A step whose global gradient norm is not finite is skipped (no
 * update); a few in a row can be a spike, but K in a row means the run has diverged and every
 * further step is wasted. The training loops feed each step's `skipped` flag here, stop with
 * ZB_ENUMERIC after K consecutive skips, and do not save (docs/reliability.md). */
#ifndef ZBPP_RUNTIME_DIVERGENCE_H
#define ZBPP_RUNTIME_DIVERGENCE_H

#include <stdbool.h>
#include <stddef.h>

#include "zbpp/error.h"

#define ZB_DIVERGE_MAX_SKIPS 8 /* K: consecutive skipped steps that end a run */

typedef struct {
    long limit;      /* K (>= 1) */
    long run;        /* consecutive skipped steps so far */
    bool loss_bad;   /* the latest step's loss was NaN or infinite */
    long loss_step;  /* that step (1-based) */
    float loss;      /* and its loss */
} zb_diverge_t;

/* Start counting with limit K (values < 1 mean ZB_DIVERGE_MAX_SKIPS). */
void zb_diverge_init(zb_diverge_t *d, long limit);

/* Record step `step` (1-based, the step just completed) and its loss. ZB_ENUMERIC with a
 * message once `limit` consecutive steps were skipped; ZB_OK otherwise. */
zb_status_t zb_diverge_step(zb_diverge_t *d, bool skipped, float loss, long step, zb_err_t *err);

/* False while the latest steps were skipped or the latest loss was not finite: a periodic save
 * then waits for a good step, so a run that goes on to diverge never replaces the last good
 * checkpoint with its state. */
bool zb_diverge_may_save(const zb_diverge_t *d);

/* At the end of a run: ZB_ENUMERIC with a message when the last step's loss was not finite (the
 * weights give NaN on real data: saving them as the run's result would hand over an unusable
 * model), ZB_OK otherwise. */
zb_status_t zb_diverge_final(const zb_diverge_t *d, zb_err_t *err);

/* ZB_OK when all n values are finite; ZB_ENUMERIC naming `what` and the count otherwise (a
 * last update that overflowed leaves weights no loss has seen yet). */
zb_status_t zb_diverge_check_weights(const float *w, size_t n, const char *what, zb_err_t *err);

#endif
