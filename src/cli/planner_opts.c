/* zbpp CLI — the option loop shared by the planner commands. */
#include "cli/planner_opts.h"

#include "cli/planner_out.h"

int zb_cli_planner_options(const zb_cli_command_t *cmd, int argc, char **argv,
                           zb_cli_costs_t *copt)
{
    zb_err_t err = {0};
    int c;
    zb_cli_costs_init(copt);
    optind = 0; /* glibc: full re-initialisation */
    opterr = 0;
    while ((c = getopt_long(argc, argv, cmd->optstring, cmd->longopts, NULL)) != -1) {
        zb_status_t st;
        if (c == 'h') {
            cmd->help(stdout);
            return ZB_EXIT_OK;
        }
        if (zb_cli_is_costs_option(c))
            st = zb_cli_costs_option(copt, c, optarg, &err);
        else if (c != '?' && c != ':' && cmd->own)
            st = cmd->own(cmd->own_ctx, c, optarg, &err);
        else
            return zb_cli_bad_option(cmd->name, c, argv);
        if (st != ZB_OK)
            return zb_cli_bad_value(cmd->name, st, &err);
    }
    return ZB_CLI_OPTIONS_READ;
}

int zb_cli_read_csv_command(const zb_cli_command_t *cmd, int argc, char **argv,
                            zb_cli_csv_input_t *in)
{
    in->file = NULL;
    in->s = NULL;
    in->loaded = false;
    int rc = zb_cli_planner_options(cmd, argc, argv, &in->copt);
    if (rc != ZB_CLI_OPTIONS_READ)
        return rc;
    if (!(in->file = zb_cli_one_file(cmd->name, argc, argv, optind)))
        return ZB_EXIT_USAGE;
    if ((rc = zb_cli_load_csv(cmd->name, in->file, &in->copt, &in->s, &in->costs)) != ZB_EXIT_OK)
        return rc;
    in->loaded = true;
    zb_err_t err = {0};
    if (zb_validate(in->s, &in->costs, &err) != ZB_OK) {
        zb_cli_error(cmd->name, "%s: %s", in->file, err.msg);
        return ZB_EXIT_FAIL;
    }
    return ZB_CLI_OPTIONS_READ;
}

void zb_cli_csv_input_free(zb_cli_csv_input_t *in)
{
    if (in->loaded) {
        zb_costs_free(&in->costs);
        zb_schedule_free(in->s);
    }
    zb_cli_costs_free(&in->copt);
}

zb_status_t zb_cli_output_option(void *output, int c, const char *arg, zb_err_t *err)
{
    zb_cli_output_t *o = output;
    switch (c) {
    case 'o': o->path = arg; return ZB_OK;
    case ZB_OPT_FORMAT: return zb_cli_parse_format(arg, &o->fmt, err);
    case ZB_OPT_WIDTH: return zb_cli_parse_int(arg, 8, 100000, "--width", &o->width, err);
    default: return zb_err_set(err, ZB_EINVAL, "internal: option %d is not an output option", c);
    }
}
