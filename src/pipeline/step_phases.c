/* zbpp — the phases of a training step after its actions (step_phases.h). Host times come from
 * the monotonic clock on the step timeline's origin (R->in->t0); a device that times phases
 * (rank_device.h, time_phase) gets one event pair per segment and replaces the segments' times
 * and device_ms at the step's end (step_end); without it the host's figures stand for both. */
#include <string.h>

#include "pipeline/rank_device.h"
#include "pipeline/step_phases.h"
#include "zbpp/util.h"

const char *zb_step_phase_name(zb_step_phase_t p)
{
    static const char *const names[ZB_PHASES] = {"drain",     "tied-wte", "replicas",
                                                 "grad-norm", "norm-sync", "backup",
                                                 "optimizer", "rollback"};
    return (int)p >= 0 && p < ZB_PHASES ? names[p] : "?";
}

void pl_phases_step_begin(pl_rank_t *R)
{
    memset(&R->phases, 0, sizeof R->phases);
    R->phase_open = -1;
}

zb_status_t pl_phase(pl_rank_t *R, zb_step_phase_t p, bool begin, zb_err_t *err)
{
    zb_step_phases_t *ph = &R->phases;
    int seg = (int)ph->segments;
    bool kept = seg < ZB_STEP_SEGMENTS, on_device = kept && R->dev->time_phase;
    /* the host's interval holds the device's events: its clock read before the begin event
     * and after the end event */
    if (begin) {
        double now = zb_now() - R->in->t0;
        if (R->phase_open >= 0)
            return zb_err_set(err, ZB_EINVAL, "rank %d: phase %s begun inside %s", R->rank,
                              zb_step_phase_name(p), zb_step_phase_name(R->phase_open));
        R->phase_open = (int)p;
        R->phase_began = now;
        if (kept) {
            ph->seg_phase[seg] = p;
            ph->seg_start[seg] = now;
        }
        return on_device ? R->dev->time_phase(R, seg, true, err) : ZB_OK;
    }
    if (R->phase_open != (int)p)
        return zb_err_set(err, ZB_EINVAL, "rank %d: phase %s ended but not begun", R->rank,
                          zb_step_phase_name(p));
    zb_status_t st = on_device ? R->dev->time_phase(R, seg, false, err) : ZB_OK;
    double now = zb_now() - R->in->t0;
    R->phase_open = -1;
    double ms = (now - R->phase_began) * 1e3;
    ph->host_ms[p] += ms;
    if (!kept) /* more intervals than the trace keeps: the sums still count */
        return st;
    ph->seg_end[seg] = now;
    ph->segments = seg + 1;
    if (!on_device)
        ph->device_ms[p] += ms;
    return st;
}
