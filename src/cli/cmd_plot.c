/* zbpp plot — draw a training metrics file (JSON lines from `zbpp train --metrics`) as SVG. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "zbpp/svg.h"
#include "zbpp/util.h"

static const char *const CMD = "plot";

static void help(FILE *out)
{
    fputs("usage: zbpp plot METRICS.jsonl [-o FILE.svg] [--title TEXT]\n\n"
          "Plot a training metrics file (zbpp train --metrics) as an SVG chart a browser shows:\n"
          "loss (and validation loss when present) against step, then learning rate and\n"
          "tokens/s in their own panels when the file has them.\n\n"
          "  -o, --output FILE   write there (atomically) instead of standard output\n"
          "  --title TEXT        chart title (default: the metrics file name)\n"
          "  -h, --help          this help\n",
          out);
}

int zb_cmd_plot(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"title", required_argument, NULL, 3001},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL, *title = NULL;
    int c;
    optind = 0; /* glibc: full re-initialisation */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': path = optarg; break;
        case 3001: title = optarg; break;
        case 'h': help(stdout); return ZB_EXIT_OK;
        default: return zb_cli_bad_option(CMD, c, argv);
        }
    }
    if (argc - optind != 1) {
        zb_cli_error(CMD, argc <= optind ? "missing METRICS.jsonl (see zbpp plot --help)"
                                         : "expected one METRICS.jsonl, got %d arguments",
                     argc - optind);
        return ZB_EXIT_USAGE;
    }
    const char *file = argv[optind];
    zb_err_t err = {0};
    if (path && zb_cli_check_writable("-o", path, &err) != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        return ZB_EXIT_FAIL;
    }
    char *data = NULL;
    size_t len = 0;
    if (zb_read_file(file, (size_t)1 << 30, &data, &len, &err) != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        return ZB_EXIT_FAIL;
    }
    zb_metrics_t m;
    zb_status_t st = zb_metrics_parse(data, len, &m, &err);
    free(data);
    if (st != ZB_OK) {
        zb_cli_error(CMD, "%s: %s", file, err.msg);
        return ZB_EXIT_FAIL;
    }
    zb_cli_out_t out;
    if ((st = zb_cli_out_open(&out, path, &err)) == ZB_OK) {
        st = zb_metrics_svg_write(&m, title ? title : file, out.f, &err);
        if (st == ZB_OK)
            st = zb_cli_out_commit(&out, &err);
        else
            zb_cli_out_abort(&out);
    }
    zb_metrics_free(&m);
    if (st != ZB_OK) {
        zb_cli_error(CMD, "%s", err.msg);
        return ZB_EXIT_FAIL;
    }
    return ZB_EXIT_OK;
}
