/* A program outside the zbpp tree that uses the installed library (tests/install.sh builds it
 * via pkg-config and via find_package(zbpp)). Prints the header and library versions, then the
 * makespan and bubble rate of ZB-H1 and of the GLPK-backed `optimal` family when available. */
#include <stdio.h>
#include <string.h>

#include <zbpp/schedule.h>
#include <zbpp/version.h>

static int run(const char *family, int ranks, int mbs)
{
    zb_err_t err = {0};
    zb_costs_t costs;
    if (zb_costs_init_uniform(&costs, ranks, 1, 1, 1, 0, 1, 0, -1, &err) != ZB_OK) {
        fprintf(stderr, "consumer: %s\n", err.msg);
        return 1;
    }
    zb_gen_params_t p = {.ranks = ranks, .microbatches = mbs, .costs = &costs, .time_limit = 5};
    zb_schedule_t *s = NULL;
    zb_sim_t sim;
    zb_status_t st = zb_generate(family, &p, &s, &err);
    if (st == ZB_OK)
        st = zb_validate(s, &costs, &err);
    if (st == ZB_OK)
        st = zb_simulate(s, &costs, &sim, &err);
    if (st == ZB_OK) {
        printf("%s makespan %g bubble %.4f\n", family, sim.makespan, sim.bubble_rate);
        zb_sim_free(&sim);
    } else {
        printf("%s failed: %s\n", family, err.msg);
    }
    zb_schedule_free(s);
    zb_costs_free(&costs);
    return st == ZB_OK ? 0 : 1;
}

int main(void)
{
    printf("headers %s library %s\n", ZB_VERSION_STRING, zb_version());
    if (strcmp(ZB_VERSION_STRING, zb_version()) != 0)
        return 1;
    int rc = run("zb-h1", 4, 8);
    run("optimal", 2, 2); /* fails cleanly when the library was built without GLPK */
    return rc;
}
