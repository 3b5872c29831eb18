#include "schedule/generators.h"
zb_status_t zb_gen_interleaved(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    (void)p;
    *out = NULL;
    return zb_err_set(err, ZB_EUNSUPPORTED, "interleaved-1f1b: not implemented yet");
}
