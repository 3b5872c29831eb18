/* zbpp CLI — every file `zbpp train` will write, checked before the first step, so a long run
 * never trains to the end and then loses its work to an output it cannot write. */
#ifndef ZBPP_CLI_TRAIN_OUTPUTS_H
#define ZBPP_CLI_TRAIN_OUTPUTS_H

#include "zbpp/pipeline.h"
#include "zbpp/train.h"

/* --save, --save-model, --metrics, --trace, --trace-svg (`o` may be NULL: no pipeline flags):
 * each must be writable as zb_atomic_open would write it (no dangling symlink, no directory, no
 * FIFO without a reader, an existing writable directory), and --keep-last needs --save to be a
 * regular file (its kept copies are hard links). ZB_EIO or ZB_EINVAL naming the flag. */
zb_status_t zb_cli_check_train_outputs(const zb_train_config_t *c, const zb_pipeline_opts_t *o,
                                       zb_err_t *err);

#endif
