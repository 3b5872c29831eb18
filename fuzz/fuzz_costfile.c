/* libFuzzer harness: the per-stage cost file reader (--cost-file) and what it feeds: a file it
 * accepts must give a cost model zb_costs_check accepts, and a 1F1B schedule over those stages
 * must simulate and go through every writer (the 1e308 defect failed here). */
#include "fuzz_common.h"
#include "cli/args.h"
#include "zbpp/schedule.h"
#include "zbpp/schedule_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    fz_write("costs.csv", data, size, path, sizeof path);
    zb_cli_costs_t c;
    zb_cli_costs_init(&c);
    zb_err_t err = {0};
    zb_status_t st = zb_cli_costs_option(&c, ZB_OPT_COST_FILE, path, &err);
    if (st != ZB_OK) {
        if (st != ZB_EINVAL && st != ZB_EFORMAT && st != ZB_EIO && st != ZB_ENOMEM)
            abort();
        fz_check_message(&err);
        zb_cli_costs_free(&c);
        return 0;
    }
    int S = c.file_stages;
    zb_costs_t costs;
    if (zb_cli_costs_build(&c, S, 1, &costs, &err) != ZB_OK || zb_costs_check(&costs, &err) != ZB_OK) {
        fprintf(stderr, "accepted cost file gives a bad cost model: %s\n", err.msg);
        abort();
    }
    if (S <= 16) {
        zb_gen_params_t gp = {.ranks = S, .microbatches = 2 * S, .chunks = 1, .costs = &costs};
        zb_schedule_t *s = NULL;
        if (zb_generate("1f1b", &gp, &s, &err) != ZB_OK)
            abort();
        zb_sim_t sim;
        if (zb_simulate(s, &costs, &sim, &err) != ZB_OK) {
            fprintf(stderr, "simulate failed: %s\n", err.msg);
            abort();
        }
        FILE *out = fz_sink();
        if (zb_json_write_summary(s, &costs, &sim, out, &err) != ZB_OK ||
            zb_trace_write(&sim, 1000.0, out, &err) != ZB_OK ||
            zb_svg_write(&sim, NULL, out, &err) != ZB_OK ||
            zb_ascii_write(&sim, 120, out, &err) != ZB_OK) {
            fprintf(stderr, "writer failed: %s\n", err.msg);
            abort();
        }
        zb_sim_free(&sim);
        zb_schedule_free(s);
    }
    zb_costs_free(&costs);
    zb_cli_costs_free(&c);
    return 0;
}
