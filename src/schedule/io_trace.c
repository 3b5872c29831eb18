/* Chrome / Perfetto trace JSON of a timeline (simulated or measured).
 *
 * Format: the "JSON object" flavour of the Trace Event Format: {"traceEvents": [...]}.
 * Metadata events name the process and one thread per rank; compute actions are complete
 * events (ph "X", ts + dur); SEND/RECV are thread-scoped instant events (ph "i"). Copies (O, L)
 * run beside the compute, so they are complete events on a thread of their own per rank
 * ("rank R copies", tid P + R), present only when the schedule has copies. */
#include "zbpp/schedule_io.h"

#include <math.h>

#include "schedule/io_internal.h"

/* Reserved colour names of the Chrome trace viewer (Perfetto ignores them, which is harmless). */
static const char *trace_cname(zb_action_type_t t)
{
    switch (t) {
    case ZB_ACT_F: return "rail_response";   /* blue */
    case ZB_ACT_B: return "rail_animation";  /* purple */
    case ZB_ACT_W: return "good";            /* green */
    case ZB_ACT_BW: return "bad";            /* orange-red */
    case ZB_ACT_R: return "olive";           /* recompute */
    case ZB_ACT_O: return "yellow";          /* offload */
    case ZB_ACT_L: return "rail_load";       /* reload */
    default: return "grey";
    }
}

zb_status_t zb_trace_write(const zb_sim_t *sim, double time_scale, FILE *out, zb_err_t *err)
{
    zb_status_t st = zb_io_check_sim(sim, "trace", err);
    if (st != ZB_OK)
        return st;
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "trace: no output");
    if (!(time_scale > 0) || !isfinite(time_scale))
        return zb_err_set(err, ZB_EINVAL, "trace: time scale must be a positive finite number");
    const zb_schedule_t *s = sim->schedule;

    fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", out);
    fputs("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": ",
          out);
    zb_io_json_string(out, s->name);
    fputs("}}", out);
    const bool copies = zb_schedule_has_offload(s);
    for (int t = 0; t < sim->ranks * (copies ? 2 : 1); t++) {
        /* the copy thread of rank r sorts right below it */
        int r = t % sim->ranks, sort = !copies ? r : t < sim->ranks ? 2 * r : 2 * r + 1;
        fprintf(out, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
                     "\"args\": {\"name\": \"rank %d%s\"}}",
                t, r, t < sim->ranks ? "" : " copies");
        fprintf(out, ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
                     "\"args\": {\"sort_index\": %d}}", t, sort);
    }
    for (int r = 0; r < sim->ranks; r++) {
        for (int i = 0; i < sim->len[r]; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            zb_action_type_t t = (zb_action_type_t)a->type;
            const char *tn = zb_action_type_name(t);
            double ts = sim->start[r][i] * time_scale;
            double dur = (sim->end[r][i] - sim->start[r][i]) * time_scale;
            if (!isfinite(ts) || !isfinite(dur))
                return zb_err_set(err, ZB_ENUMERIC, "trace: rank %d action %d has a non-finite "
                                                    "time", r, i);
            if (zb_action_is_compute(t) || zb_action_is_copy(t))
                fprintf(out, ",\n{\"name\": \"%s s%d mb%d\", \"cat\": \"%s\", \"ph\": \"X\", "
                             "\"pid\": 0, \"tid\": %d, \"ts\": %.6f, \"dur\": %.6f, "
                             "\"cname\": \"%s\", \"args\": {\"stage\": %d, \"mb\": %d, "
                             "\"type\": \"%s\"}}",
                        tn, a->stage, a->mb, zb_action_is_copy(t) ? "copy" : "compute",
                        zb_action_is_copy(t) ? sim->ranks + r : r, ts, dur, trace_cname(t),
                        a->stage, a->mb, tn);
            else
                fprintf(out, ",\n{\"name\": \"%s s%d mb%d\", \"cat\": \"comm\", \"ph\": \"i\", "
                             "\"s\": \"t\", \"pid\": 0, \"tid\": %d, \"ts\": %.6f, "
                             "\"cname\": \"%s\", \"args\": {\"stage\": %d, \"mb\": %d, "
                             "\"type\": \"%s\"}}",
                        tn, a->stage, a->mb, r, ts, trace_cname(t), a->stage, a->mb, tn);
        }
    }
    fputs("\n]}\n", out);
    if (ferror(out))
        return zb_err_set(err, ZB_EIO, "trace: write failed");
    return ZB_OK;
}
