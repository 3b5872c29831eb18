#include "schedule/generators.h"
zb_status_t zb_gen_zbh1(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    (void)p;
    *out = NULL;
    return zb_err_set(err, ZB_EUNSUPPORTED, "zb-h1: not implemented yet");
}
zb_status_t zb_gen_zbh2(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    (void)p;
    *out = NULL;
    return zb_err_set(err, ZB_EUNSUPPORTED, "zb-h2: not implemented yet");
}
