/* libFuzzer harness for the PyTorch CSV reader and everything downstream of it.
 *
 * Any input: the reader must either reject it with ZB_EFORMAT (one-line message) or return a
 * schedule. A parsed schedule then goes through validate, simulate and every writer, and an
 * export + re-import must give an equal schedule (abort otherwise, so libFuzzer reports it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/schedule.h"
#include "zbpp/schedule_io.h"

static FILE *sink(void)
{
    static FILE *null_out;
    if (!null_out)
        null_out = fopen("/dev/null", "w");
    if (!null_out)
        abort();
    return null_out;
}

static void check_message(const zb_err_t *err)
{
    if (!err->msg[0] || strchr(err->msg, '\n')) {
        fprintf(stderr, "bad error message: '%s'\n", err->msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zb_schedule_t *s = NULL, *back = NULL;
    zb_err_t err = {0};
    zb_status_t st = zb_csv_read((const char *)data, size, &s, &err);
    if (st != ZB_OK) {
        if (s || (st != ZB_EFORMAT && st != ZB_ENOMEM))
            abort();
        check_message(&err);
        return 0;
    }

    zb_costs_t costs;
    if (zb_costs_init_uniform(&costs, s->stages, 1, 1, 0.5, 0.1, 1, 0, -1, &err) != ZB_OK)
        abort();
    costs.mem_limit = 4;
    if (zb_validate(s, &costs, &err) != ZB_OK)
        check_message(&err);
    zb_sim_t sim;
    if (zb_simulate(s, &costs, &sim, &err) == ZB_OK) {
        FILE *out = sink();
        if (zb_json_write_summary(s, &costs, &sim, out, &err) != ZB_OK ||
            zb_trace_write(&sim, 1000.0, out, &err) != ZB_OK ||
            zb_svg_write(&sim, NULL, out, &err) != ZB_OK ||
            zb_ascii_write(&sim, 120, out, &err) != ZB_OK) {
            fprintf(stderr, "writer failed on a simulated schedule: %s\n", err.msg);
            abort();
        }
        zb_sim_free(&sim);
    } else {
        check_message(&err);
    }

    /* Round trip: what we write we must read back identically. */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem || zb_csv_write(s, mem, &err) != ZB_OK)
        abort();
    fclose(mem);
    if (zb_csv_read(text, len, &back, &err) != ZB_OK) {
        fprintf(stderr, "re-import failed: %s\n", err.msg);
        abort();
    }
    if (!zb_schedule_equal(s, back)) {
        fprintf(stderr, "round trip differs\n");
        abort();
    }
    free(text);
    zb_schedule_free(back);
    zb_costs_free(&costs);
    zb_schedule_free(s);
    return 0;
}
