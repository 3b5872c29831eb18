/* zbpp — the files `zbpp train --trace FILE` writes after a pipeline run, so the measured
 * timeline and the simulator's prediction open side by side (docs/profile.md):
 *   FILE                      measured, Chrome trace JSON (µs)
 *   STEM.predicted.json       predicted with the run's cost model, Chrome trace JSON
 *   STEM.svg                  measured, SVG chart
 *   STEM.predicted.svg        predicted, SVG chart
 * where STEM is FILE without a trailing ".json". */
#ifndef ZBPP_PIPELINE_TRACE_H
#define ZBPP_PIPELINE_TRACE_H

#include <stddef.h>

#include "zbpp/error.h"

typedef enum {
    ZB_TRACE_MEASURED_JSON,
    ZB_TRACE_PREDICTED_JSON,
    ZB_TRACE_MEASURED_SVG,
    ZB_TRACE_PREDICTED_SVG,
    ZB_TRACE_FILES
} zb_trace_file_t;

/* Path of file `which` for --trace `path` into out[cap]. ZB_EINVAL if it does not fit. */
zb_status_t zb_pipeline_trace_path(const char *path, zb_trace_file_t which, char *out, size_t cap,
                                   zb_err_t *err);

#endif
