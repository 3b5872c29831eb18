/* zbpp — status codes and error messages shared by every module.
 *
 * Library functions never print or exit: they return a zb_status_t and, when given a non-NULL
 * zb_err_t, fill it with a one-line human-readable message naming the problem. The CLI prints
 * that line to stderr and exits non-zero. */
#ifndef ZBPP_ERROR_H
#define ZBPP_ERROR_H

#include <stddef.h>

#define ZB_STATUS_LIST(X)                                          \
    X(ZB_OK, "ok")                                                 \
    X(ZB_EINVAL, "invalid argument")                               \
    X(ZB_ENOMEM, "out of memory")                                  \
    X(ZB_EIO, "input/output error")                                \
    X(ZB_EFORMAT, "malformed input")                               \
    X(ZB_EUNSUPPORTED, "unsupported configuration")                \
    X(ZB_ESCHEDULE, "invalid schedule")                            \
    X(ZB_EDEADLOCK, "deadlock")                                    \
    X(ZB_EMEMLIMIT, "memory limit cannot be met")                  \
    X(ZB_ENUMERIC, "non-finite value")                             \
    X(ZB_ESOLVER, "solver failure")                                \
    X(ZB_ECOMM, "communication failure")                           \
    X(ZB_ETIMEOUT, "timed out")                                    \
    X(ZB_EMISMATCH, "configuration mismatch between ranks")        \
    X(ZB_EABORT, "aborted because another rank failed")

typedef enum {
#define ZB_STATUS_ENUM(name, text) name,
    ZB_STATUS_LIST(ZB_STATUS_ENUM)
#undef ZB_STATUS_ENUM
    ZB_STATUS_COUNT
} zb_status_t;

/* Room for one message line. Functions that fail write here; the caller owns it. */
typedef struct zb_err {
    zb_status_t status;
    char msg[512];
} zb_err_t;

/* Short text for a status code ("invalid schedule"). Never NULL. */
const char *zb_strerror(zb_status_t status);

/* Record a failure: sets err->status and formats err->msg (printf-style, no trailing newline).
 * err may be NULL (the message is dropped). Returns status, so callers can write
 * `return zb_err_set(err, ZB_EINVAL, "...", ...);`. */
zb_status_t zb_err_set(zb_err_t *err, zb_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reset err to ZB_OK with an empty message. err may be NULL. */
void zb_err_clear(zb_err_t *err);

#endif
