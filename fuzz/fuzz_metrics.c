/* libFuzzer harness: the training-metrics reader (`zbpp plot`: JSON lines as `zbpp train
 * --metrics` writes them). A refused file gets one line naming the problem; an accepted one has
 * at least one record with a loss or a val_loss, series of its count, and must draw. */
#include <math.h>

#include "fuzz_common.h"
#include "zbpp/svg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zb_metrics_t m;
    zb_err_t err = {0};
    zb_status_t st = zb_metrics_parse((const char *)data, size, &m, &err);
    if (st != ZB_OK) {
        if (st != ZB_EFORMAT && st != ZB_ENOMEM && st != ZB_EINVAL)
            abort();
        fz_check_message(&err);
        return 0;
    }
    if (m.count < 1 || !(m.has_loss || m.has_val_loss)) {
        fprintf(stderr, "accepted a metrics file without a loss record (%d records)\n", m.count);
        abort();
    }
    for (int i = 0; i < m.count; i++)
        if (isnan(m.step[i])) { /* "step" is required on every record */
            fprintf(stderr, "record %d has no step\n", i);
            abort();
        }
    if (zb_metrics_svg_write(&m, "fuzz", fz_sink(), &err) != ZB_OK) {
        fprintf(stderr, "an accepted metrics file did not draw: %s\n", err.msg);
        abort();
    }
    zb_metrics_free(&m);
    return 0;
}
