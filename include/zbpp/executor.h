/* zbpp — the executor: runs one rank's lowered action list, exactly as the schedule says.
 *
 * The executor knows nothing about the model: compute actions (F, B, W, BW, R), copies (O, L)
 * and the buffers of messages are delegated to an ops vtable, communication actions (SEND_F, RECV_F, SEND_B,
 * RECV_B) go through a zb_transport_t. It runs the actions of its rank in program order, nothing
 * more, and records when each started and ended, so a measured timeline can be laid next to the
 * simulator's prediction (zb_exec_fill_sim). On any failure it aborts the transport, so every
 * other rank stops too, with a message naming this rank and the action. */
#ifndef ZBPP_EXECUTOR_H
#define ZBPP_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "zbpp/error.h"
#include "zbpp/schedule.h"
#include "zbpp/transport.h"

typedef struct {
    void *ctx;
    /* F, B, W or BW of (a->stage, a->mb). Required. */
    zb_status_t (*compute)(void *ctx, const zb_action_t *a, zb_err_t *err);
    /* SEND_F(s, m): the activation leaving stage s; SEND_B(s, m): the gradient w.r.t. stage s's
     * input. Sets *buf / *bytes; the buffer need only stay valid until the call after it
     * (sends are buffered). Required if the program has sends. */
    zb_status_t (*send_payload)(void *ctx, const zb_action_t *a, const void **buf, size_t *bytes,
                                zb_err_t *err);
    /* RECV_F(s, m) / RECV_B(s, m): where the message lands and its exact size. Required if the
     * program has receives. */
    zb_status_t (*recv_payload)(void *ctx, const zb_action_t *a, void **buf, size_t *bytes,
                                zb_err_t *err);
    /* Optional: size of the message of a RECV action, known before its buffer is, so the
     * executor can announce upcoming receives (zb_post_recv) `recv_lookahead` actions ahead. */
    size_t (*recv_bytes)(void *ctx, const zb_action_t *a);
    /* Optional: for a send_payload that returns a buffer still being filled (a device's copy
     * into host memory, queued): *ready = the buffer holds the message (wait: block until it
     * does). With it the executor defers sends: it goes on with the program and hands each
     * buffer to the transport once filled, at the latest before it would block in a receive
     * whose message has not arrived and at the end of the program. So every send still leaves
     * before any receive after it in the program can wait (no deadlock the plain order does
     * not have). A deferred buffer must stay valid until it is handed over. */
    zb_status_t (*send_ready)(void *ctx, const zb_action_t *a, bool wait, bool *ready,
                              zb_err_t *err);
    /* O(s, m) / L(s, m): offload the stash of (s, m) to host memory / reload it (queued on the
     * device's copy channels; the B after an L must find it there). Required if the program
     * has O/L actions. */
    zb_status_t (*copy)(void *ctx, const zb_action_t *a, zb_err_t *err);
} zb_exec_ops_t;

typedef struct {
    int recv_lookahead; /* RECVs announced ahead of time via zb_post_recv (0 = none) */
    double t0;          /* time origin (zb_now() scale) for the recorded timeline */
} zb_exec_opts_t;

/* Measured start/end (seconds since opts->t0) of each action of one rank's program. */
typedef struct {
    int len;
    double *start, *end;
} zb_exec_timeline_t;

zb_status_t zb_exec_timeline_alloc(zb_exec_timeline_t *tl, int len, zb_err_t *err);
void zb_exec_timeline_free(zb_exec_timeline_t *tl);

/* Run rank t->rank's program of `s`. `s` must be lowered (zb_insert_comms) unless it has one
 * rank, and s->ranks must equal t->size (ZB_EMISMATCH). tl may be NULL; else it must have
 * len == the rank's program length and receives the timeline. A failing op or transport call
 * returns its status with the message prefixed by the rank and action, after aborting the
 * transport (unless the failure was itself an abort, ZB_EABORT). */
zb_status_t zb_execute(const zb_schedule_t *s, zb_transport_t *t, const zb_exec_ops_t *ops,
                       const zb_exec_opts_t *opts, zb_exec_timeline_t *tl, zb_err_t *err);

/* Peer rank and tag of a SEND/RECV action in schedule `s` (ZB_EINVAL for a compute action or a
 * message leaving the pipeline). */
zb_status_t zb_exec_route(const zb_schedule_t *s, const zb_action_t *a, int *peer,
                          uint32_t *tag, zb_err_t *err);

/* Fill a zb_sim_t (the simulator's result type, read by the trace writer) from measured
 * timelines tls[0..P-1] of schedule `s`: span, busy, bubble rate and makespan with the design's
 * definitions. peak_bytes (may be NULL) is copied into peak_mem. Times are shifted so the
 * earliest start is 0. Free with zb_exec_sim_free (the same as zb_sim_free). */
zb_status_t zb_exec_fill_sim(const zb_schedule_t *s, const zb_exec_timeline_t *tls,
                             const double *peak_bytes, zb_sim_t *out, zb_err_t *err);
void zb_exec_sim_free(zb_sim_t *sim);

#endif
