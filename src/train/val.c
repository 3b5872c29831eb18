/* The validation data of a training run and the single-process validation (forward only). */
#include <stdlib.h>
#include <string.h>

#include "train/val.h"
#include "zbpp/util.h"

bool zb_train_val_due(const zb_train_config_t *cfg, long steps_done)
{
    if (!cfg->val_data_glob && !cfg->val_text_path)
        return false;
    return steps_done == cfg->steps || (cfg->val_every > 0 && steps_done % cfg->val_every == 0);
}

zb_status_t zb_val_open(const zb_train_config_t *c, int vocab, struct zb_val **out,
                        zb_err_t *err)
{
    *out = NULL;
    if (!c->val_data_glob && !c->val_text_path)
        return ZB_OK;
    struct zb_val *v = calloc(1, sizeof *v);
    if (!v)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the validation data");
    v->steps = c->val_steps;
    size_t bt = (size_t)c->batch * (size_t)c->seq;
    v->inputs = malloc(bt * sizeof *v->inputs);
    v->targets = malloc(bt * sizeof *v->targets);
    zb_status_t st = ZB_OK;
    if (!v->inputs || !v->targets)
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for the validation batch");
    zb_err_t inner;
    zb_err_clear(&inner);
    if (st == ZB_OK)
        st = c->val_data_glob ? zb_data_open_glob(c->val_data_glob, vocab, &v->data, &inner)
                              : zb_data_open_text(c->val_text_path, vocab, &v->data, &inner);
    if (st == ZB_OK)
        st = zb_data_configure(v->data, c->batch, c->seq, false, c->seed, &inner);
    if (st != ZB_OK && inner.msg[0])
        zb_err_set(err, st, "%s: %s", c->val_data_glob ? "--val-data" : "--val-text", inner.msg);
    if (st == ZB_OK) {
        v->start = zb_data_tell(v->data);
        *out = v;
    } else {
        zb_val_free(v);
    }
    return st;
}

void zb_val_free(struct zb_val *v)
{
    if (!v)
        return;
    zb_data_free(v->data);
    free(v->inputs);
    free(v->targets);
    free(v);
}

zb_status_t zb_val_rewind(struct zb_val *v, zb_err_t *err)
{
    return zb_data_seek(v->data, &v->start, err);
}

zb_status_t zb_val_next(struct zb_val *v, zb_err_t *err)
{
    return zb_data_next(v->data, v->inputs, v->targets, err);
}

zb_status_t zb_trainer_validate(zb_trainer_t *t, float *loss, zb_err_t *err)
{
    struct zb_val *v = t->val;
    if (!v)
        return zb_err_set(err, ZB_EINVAL, "no validation data (--val-data or --val-text)");
    const zb_train_config_t *c = &t->cfg;
    int M = c->microbatches, K = v->steps;
    size_t mb_tokens = (size_t)(c->batch / M) * (size_t)c->seq;
    zb_gpt2_span_t whole = {0, t->params.cfg.layers, true, true};
    float *mb = malloc((size_t)(M + K) * sizeof *mb);
    if (!mb)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the validation losses");
    float *batch = mb + M;
    zb_status_t st = zb_val_rewind(v, err);
    for (int k = 0; k < K && st == ZB_OK; k++) {
        st = zb_val_next(v, err);
        for (int m = 0; m < M && st == ZB_OK; m++) {
            st = zb_gpt2_forward(&t->params, &whole, t->stash, v->inputs + (size_t)m * mb_tokens,
                                 NULL, v->targets + (size_t)m * mb_tokens, NULL, &mb[m], err);
            zb_gpt2_stash_reset(t->stash); /* nothing is kept for a backward */
        }
        if (st == ZB_OK)
            batch[k] = zb_train_mean_loss(mb, M);
    }
    if (st == ZB_OK)
        *loss = zb_train_mean_loss(batch, K);
    free(mb);
    return st;
}
