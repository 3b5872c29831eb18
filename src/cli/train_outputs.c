/* zbpp CLI — the outputs of `zbpp train`, checked before training (train_outputs.h). */
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/train_outputs.h"

/* --keep-last keeps each save as a hard link PATH.stepN: PATH (through a symlink) must be a
 * regular file or not exist yet; a link to a device would make device nodes. */
static zb_status_t check_keep_last(const zb_train_config_t *c, zb_err_t *err)
{
    struct stat st;
    if (c->keep_last <= 0 || !c->save_path || stat(c->save_path, &st) != 0 || S_ISREG(st.st_mode))
        return ZB_OK;
    return zb_err_set(err, ZB_EINVAL,
                      "--keep-last needs --save to be a regular file (%s is not): its kept "
                      "checkpoints are links to the saved file",
                      c->save_path);
}

zb_status_t zb_cli_check_train_outputs(const zb_train_config_t *c, const zb_pipeline_opts_t *o,
                                       zb_err_t *err)
{
    const char *outputs[][2] = {{"--save", c->save_path},
                                {"--save-model", c->save_model_path},
                                {"--metrics", c->metrics_path},
                                {"--trace", o ? o->trace_path : NULL},
                                {"--trace-svg", o ? o->trace_svg_path : NULL}};
    for (size_t k = 0; k < sizeof outputs / sizeof outputs[0]; k++) {
        if (!outputs[k][1])
            continue;
        zb_status_t st = zb_cli_check_writable(outputs[k][0], outputs[k][1], err);
        if (st != ZB_OK)
            return st;
    }
    return check_keep_last(c, err);
}
