#include "zbpp/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *zb_strerror(zb_status_t status)
{
    static const char *const texts[] = {
#define ZB_STATUS_TEXT(name, text) text,
        ZB_STATUS_LIST(ZB_STATUS_TEXT)
#undef ZB_STATUS_TEXT
    };
    if ((int)status < 0 || status >= ZB_STATUS_COUNT)
        return "unknown status";
    return texts[status];
}

zb_status_t zb_err_set(zb_err_t *err, zb_status_t status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

void zb_err_clear(zb_err_t *err)
{
    if (err) {
        err->status = ZB_OK;
        err->msg[0] = '\0';
    }
}
