/* zbpp — SVG charts beyond the plain Gantt chart of schedule_io.h: options (axis unit, message
 * arrows), the measured-vs-predicted overlay, and the training metrics plot (`zbpp plot`).
 * Writers print to a caller-given FILE* and never close it; a write error is ZB_EIO. Plain
 * SVG 1.1, no scripts or external resources. Formats: docs/formats.md. */
#ifndef ZBPP_SVG_H
#define ZBPP_SVG_H

#include <stdbool.h>
#include <stdio.h>

#include "zbpp/error.h"
#include "zbpp/schedule.h"

typedef struct {
    const char *title;     /* NULL: the schedule name */
    const char *time_unit; /* axis unit; NULL: "cost units" */
    bool arrows;           /* draw one arrow per cross-rank message (activation or gradient) */
    double predicted_scale; /* overlay only: the prediction's times are multiplied by this
                               (0 = 1), e.g. to show a FLOP-model prediction in seconds */
} zb_svg_opts_t;

/* The Gantt chart of zb_svg_write (schedule_io.h) with options: one row per rank, one rectangle
 * per compute action coloured by type (a rank's second chunk lighter, said in the legend, which
 * lists only the kinds present), microbatch numbers where they fit, a time axis with its unit,
 * and with `arrows` an arrow from the end of each action whose result crosses to another rank
 * (F to the next stage's F, B/BW to the previous stage's B/BW) to the start of its consumer.
 * opts may be NULL (defaults). ZB_EINVAL when arrows are asked for more than 20000 messages. */
zb_status_t zb_svg_write_opts(const zb_sim_t *sim, const zb_svg_opts_t *opts, FILE *out,
                              zb_err_t *err);

/* Measured against predicted in one chart: per rank two lanes on one time axis, the prediction
 * (lighter, top) and the measurement (below), each timeline shifted to start at 0; the title
 * gives both makespans and their ratio. The two timelines must have the same number of ranks
 * and be in the same time unit (opts->time_unit, e.g. "s") once the prediction is multiplied by
 * opts->predicted_scale. ZB_EINVAL otherwise (or for a negative or non-finite scale). */
zb_status_t zb_svg_write_overlay(const zb_sim_t *measured, const zb_sim_t *predicted,
                                 const zb_svg_opts_t *opts, FILE *out, zb_err_t *err);

/* ---- training metrics (the JSON-lines file `zbpp train --metrics` writes) ---- */

/* The series read from a metrics file, one entry per record that has a "step". NaN where a
 * record lacks the field. Free with zb_metrics_free. */
typedef struct {
    int count;
    double *step, *loss, *val_loss, *lr, *tokens_per_s;
    bool has_loss, has_val_loss, has_lr, has_tokens_per_s; /* the field occurs at least once */
} zb_metrics_t;

/* Parse JSON lines from data[0..len): one object per non-blank line with numeric fields; "step"
 * is required on every record, "loss", "val_loss", "lr" and "tokens_per_s" are read when present
 * (other fields are ignored). ZB_EFORMAT with "line L: <what>" for a line that is not a flat JSON
 * object, lacks a step, or has a non-numeric value for a field read; also when no record has a
 * loss or val_loss. */
zb_status_t zb_metrics_parse(const char *data, size_t len, zb_metrics_t *out, zb_err_t *err);
void zb_metrics_free(zb_metrics_t *m);

/* Plot the series against step: one panel for loss (and val_loss when present, on the same
 * axes), one for the learning rate and one for tokens/s when present; axes with ticks and units;
 * a legend. title may be NULL. */
zb_status_t zb_metrics_svg_write(const zb_metrics_t *m, const char *title, FILE *out,
                                 zb_err_t *err);

#endif
