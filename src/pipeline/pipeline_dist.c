/* zbpp — the pipeline trainer across processes: handshake items, gathered and sharded
 * checkpoints. See pipeline_dist.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipeline/pipeline_dist.h"
#include "train/val.h"
#include "zbpp/checkpoint_sharded.h"
#include "zbpp/handshake.h"
#include "zbpp/util.h"

/* Rank r of replica 0 (global rank r, since global = d·P + p) is in this process: the rank
 * that writes shard r. Replica 0 speaks for every replica in checkpoints (they are identical). */
static bool is_local(const pl_t *pl, int r)
{
    return !pl->opts->transport || pl->opts->transport->rank == r;
}

/* ---- handshake ---- */

static uint64_t hv(const void *p, size_t n) { return zb_hash_bytes(ZB_HASH_SEED, p, n); }
#define HV(x) hv(&(x), sizeof(x))

static uint64_t schedule_hash(const zb_schedule_t *s)
{
    uint64_t h = zb_hash_str(ZB_HASH_SEED, s->name);
    int head[4] = {s->ranks, s->chunks, s->stages, s->microbatches};
    h = zb_hash_bytes(h, head, sizeof head);
    h = zb_hash_bytes(h, &s->placement, sizeof s->placement);
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            int32_t w[4] = {a->type, a->stage, a->mb, a->flags};
            h = zb_hash_bytes(h, w, sizeof w);
        }
    return h;
}

zb_status_t pl_handshake(pl_t *pl, const zb_trainer_t *t, zb_status_t local, zb_err_t *err)
{
    zb_transport_t *net = pl->opts->transport;
    if (!net)
        return local;
    zb_hs_item_t it[40];
    int n = 0;
    if (local == ZB_OK) {
        const zb_train_config_t *c = pl->cfg;
        const zb_pipeline_opts_t *o = pl->opts;
        it[n++] = (zb_hs_item_t){"binary", zb_build_id()};
        it[n++] = (zb_hs_item_t){"ranks", HV(o->ranks)};
        it[n++] = (zb_hs_item_t){"dp", HV(pl->N)};
        it[n++] = (zb_hs_item_t){"schedule", schedule_hash(pl->plan.sched)};
        it[n++] = (zb_hs_item_t){"partition", hv(pl->plan.first, (size_t)(pl->plan.S + 1) * sizeof(int))};
        it[n++] = (zb_hs_item_t){"partition costs", HV(o->profile)};
        it[n++] = (zb_hs_item_t){"optimizer-sync", HV(o->opt_sync)};
        it[n++] = (zb_hs_item_t){"mem-limit",
                                 HV(o->mem_limit) ^
                                     (o->mem_limit_ranks
                                          ? hv(o->mem_limit_ranks,
                                               (size_t)o->mem_limit_ranks_n * sizeof(double))
                                          : 0)};
        it[n++] = (zb_hs_item_t){"model", HV(pl->mcfg)};
        uint64_t init;
        if (c->resume_path && zb_ckpt_is_sharded(c->resume_path)) {
            zb_ckpt_manifest_t m;
            zb_err_t e2;
            init = zb_ckpt_manifest_read(c->resume_path, &m, &e2) == ZB_OK ? m.hash : 0;
            zb_ckpt_manifest_free(&m);
        } else { /* fresh: the seed and shape; --init-from: the file; --resume: its checksums */
            init = t->init_hash;
        }
        it[n++] = (zb_hs_item_t){"initial parameters", init};
        long steps[2] = {t->step, t->skipped};
        it[n++] = (zb_hs_item_t){"resume step", HV(steps)};
        uint64_t data[3] = {zb_data_fingerprint(t->data), zb_data_total_tokens(t->data),
                            zb_data_num_shards(t->data)};
        zb_data_pos_t pos = zb_data_tell(t->data);
        it[n++] = (zb_hs_item_t){"data", hv(data, sizeof data) ^ HV(pos)};
        it[n++] = (zb_hs_item_t){"batch", HV(c->batch)};
        it[n++] = (zb_hs_item_t){"seq", HV(c->seq)};
        it[n++] = (zb_hs_item_t){"microbatches", HV(c->microbatches)};
        it[n++] = (zb_hs_item_t){"steps", HV(c->steps)};
        it[n++] = (zb_hs_item_t){"seed", HV(c->seed)};
        it[n++] = (zb_hs_item_t){"shuffle", HV(c->shuffle)};
        it[n++] = (zb_hs_item_t){"lr", HV(c->adamw.lr)};
        it[n++] = (zb_hs_item_t){"beta1", HV(c->adamw.beta1)};
        it[n++] = (zb_hs_item_t){"beta2", HV(c->adamw.beta2)};
        it[n++] = (zb_hs_item_t){"eps", HV(c->adamw.eps)};
        it[n++] = (zb_hs_item_t){"weight-decay", HV(c->adamw.weight_decay)};
        it[n++] = (zb_hs_item_t){"grad-clip", HV(c->grad_clip)};
        it[n++] = (zb_hs_item_t){"lr-schedule", HV(c->lr_schedule)};
        it[n++] = (zb_hs_item_t){"warmup", HV(c->warmup)};
        it[n++] = (zb_hs_item_t){"lr-min", HV(c->lr_min)};
        long every[2] = {c->save_every, o->sharded_checkpoint};
        it[n++] = (zb_hs_item_t){"save", zb_hash_str(HV(every), c->save_path)};
        /* collective: validations (a forward-only program) and the stop flag's all-reduce */
        long val[4] = {t->val != NULL, c->val_every, c->val_steps, c->stop != NULL};
        uint64_t vdata = t->val ? zb_data_fingerprint(t->val->data) : 0;
        it[n++] = (zb_hs_item_t){"validation", HV(val) ^ vdata};
    }
    return zb_handshake(net, it, n, local, err);
}

/* ---- measured costs: rank 0's profile, shared ---- */

/* Message layout (doubles; integers are exact): a header, then F, B, W of the embedding, the
 * head and every block. Fixed size (the largest model), so ranks that disagree on the model, or
 * failed before knowing it, still receive it whole; the handshake names the disagreement. */
enum {
    SHARE_MAGIC,    /* SHARE_MAGIC_VALUE: sanity check of the layout */
    SHARE_HAVE,     /* 1 = rank 0 profiled successfully, 0 = no figures follow */
    SHARE_LAYERS,
    SHARE_BATCH,
    SHARE_SEQ,
    SHARE_REPS,
    SHARE_THREADS,
    SHARE_MSG_BYTES,
    SHARE_COMM,
    SHARE_WALL,
    SHARE_COPY, /* copy_d2h, copy_h2d, copy_d2h_alone, copy_h2d_alone, copy_both */
    SHARE_DEVICE = SHARE_COPY + 5, /* share.n, then share.f[3][ZB_SHARE_MAX] */
    SHARE_MIX = SHARE_DEVICE + 1 + 3 * ZB_SHARE_MAX, /* share.mix[3][3], share.bw, then
                                                      * share.copy_slow[3] */
    SHARE_EMBED = SHARE_MIX + 13,                   /* f, b, w */
    SHARE_HEAD = SHARE_EMBED + 3,
    SHARE_BLOCKS = SHARE_HEAD + 3, /* 3 per block */
    SHARE_MAX_LAYERS = 1024,   /* the model's limit (ZB_GPT2_MAX_LAYERS) */
    SHARE_LEN = SHARE_BLOCKS + 3 * SHARE_MAX_LAYERS
};
#define SHARE_MAGIC_VALUE 20261128.1 /* the layout above: changed with it */

static void put_op(double *d, zb_op_time_t t) { d[0] = t.f, d[1] = t.b, d[2] = t.w; }
static zb_op_time_t get_op(const double *d) { return (zb_op_time_t){d[0], d[1], d[2]}; }

static void pack_profile(const zb_profile_t *p, double *msg)
{
    msg[SHARE_HAVE] = 1;
    msg[SHARE_LAYERS] = p->layers;
    msg[SHARE_BATCH] = p->batch;
    msg[SHARE_SEQ] = p->seq;
    msg[SHARE_REPS] = p->reps;
    msg[SHARE_THREADS] = p->threads;
    msg[SHARE_MSG_BYTES] = (double)p->msg_bytes;
    msg[SHARE_COMM] = p->comm;
    msg[SHARE_WALL] = p->wall;
    msg[SHARE_COPY] = p->copy_d2h, msg[SHARE_COPY + 1] = p->copy_h2d;
    msg[SHARE_COPY + 2] = p->copy_d2h_alone, msg[SHARE_COPY + 3] = p->copy_h2d_alone;
    msg[SHARE_COPY + 4] = p->copy_both;
    msg[SHARE_DEVICE] = p->share.n;
    for (int ph = 0; ph < 3; ph++)
        for (int k = 0; k < ZB_SHARE_MAX; k++)
            msg[SHARE_DEVICE + 1 + ph * ZB_SHARE_MAX + k] = p->share.f[ph][k];
    for (int ph = 0; ph < 3; ph++)
        for (int q = 0; q < 3; q++)
            msg[SHARE_MIX + 3 * ph + q] = p->share.mix[ph][q];
    msg[SHARE_MIX + 9] = p->share.bw;
    for (int ph = 0; ph < 3; ph++)
        msg[SHARE_MIX + 10 + ph] = p->share.copy_slow[ph];
    put_op(msg + SHARE_EMBED, p->embed);
    put_op(msg + SHARE_HEAD, p->head);
    for (int l = 0; l < p->layers; l++)
        put_op(msg + SHARE_BLOCKS + 3 * l, p->block[l]);
}

/* Rank 0's figures for this rank's run, or NULL when they do not fit it (another model shape
 * or microbatch: then the handshake refuses the run anyway). */
static zb_profile_t *unpack_profile(const pl_t *pl, const double *msg)
{
    int L = pl->mcfg.layers;
    if (msg[SHARE_MAGIC] != SHARE_MAGIC_VALUE || msg[SHARE_HAVE] != 1 ||
        msg[SHARE_LAYERS] != L || L < 1 || L > SHARE_MAX_LAYERS ||
        msg[SHARE_BATCH] != pl->mbB || msg[SHARE_SEQ] != pl->T)
        return NULL;
    zb_profile_t *p = calloc(1, sizeof *p);
    zb_op_time_t *block = malloc((size_t)L * sizeof *block);
    if (!p || !block) {
        free(p), free(block);
        return NULL;
    }
    p->cfg = pl->mcfg; /* equal to rank 0's, or the handshake refuses the run */
    p->batch = pl->mbB, p->seq = pl->T, p->layers = L;
    p->reps = (int)msg[SHARE_REPS];
    p->threads = (int)msg[SHARE_THREADS];
    p->msg_bytes = (size_t)msg[SHARE_MSG_BYTES];
    p->comm = msg[SHARE_COMM];
    p->wall = msg[SHARE_WALL];
    p->copy_d2h = msg[SHARE_COPY], p->copy_h2d = msg[SHARE_COPY + 1];
    p->copy_d2h_alone = msg[SHARE_COPY + 2], p->copy_h2d_alone = msg[SHARE_COPY + 3];
    p->copy_both = msg[SHARE_COPY + 4];
    p->share.n = (int)msg[SHARE_DEVICE];
    for (int ph = 0; ph < 3; ph++)
        for (int k = 0; k < ZB_SHARE_MAX; k++)
            p->share.f[ph][k] = msg[SHARE_DEVICE + 1 + ph * ZB_SHARE_MAX + k];
    for (int ph = 0; ph < 3; ph++)
        for (int q = 0; q < 3; q++)
            p->share.mix[ph][q] = msg[SHARE_MIX + 3 * ph + q];
    p->share.bw = msg[SHARE_MIX + 9];
    for (int ph = 0; ph < 3; ph++)
        p->share.copy_slow[ph] = msg[SHARE_MIX + 10 + ph];
    p->embed = get_op(msg + SHARE_EMBED);
    p->head = get_op(msg + SHARE_HEAD);
    for (int l = 0; l < L; l++)
        block[l] = get_op(msg + SHARE_BLOCKS + 3 * l);
    p->block = block;
    return p;
}

zb_status_t pl_share_profile(pl_t *pl, zb_status_t local, zb_err_t *err)
{
    zb_transport_t *net = pl->opts->transport;
    if (!net)
        return local;
    double *msg = calloc(SHARE_LEN, sizeof *msg);
    if (!msg) /* the others then time out waiting for rank 0, or rank 0 for nobody */
        return local != ZB_OK ? local : zb_err_set(err, ZB_ENOMEM, "out of memory");
    const size_t bytes = SHARE_LEN * sizeof *msg;
    const uint32_t tag = zb_tag(ZB_TAG_USER, ZB_TAG_MAX_STAGE, 0); /* used by nothing else */
    zb_err_t xerr;
    zb_err_clear(&xerr);
    zb_status_t st = ZB_OK;
    if (net->rank == 0) {
        msg[SHARE_MAGIC] = SHARE_MAGIC_VALUE;
        if (local == ZB_OK && pl->prof && pl->prof->layers <= SHARE_MAX_LAYERS)
            pack_profile(pl->prof, msg);
        for (int r = 1; r < net->size && st == ZB_OK; r++)
            st = zb_send(net, msg, bytes, r, tag, &xerr);
    } else {
        st = zb_recv(net, msg, bytes, 0, tag, &xerr);
        if (st == ZB_OK && local == ZB_OK && pl->opts->profile)
            pl->prof = unpack_profile(pl, msg); /* NULL: FLOP model, the handshake objects */
    }
    free(msg);
    if (local != ZB_OK)
        return local;
    if (st != ZB_OK && err)
        *err = xerr;
    return st;
}

/* ---- one status for everyone ---- */

zb_status_t pl_agree(pl_t *pl, zb_status_t local, const char *what, zb_err_t *err)
{
    zb_transport_t *net = pl->opts->transport;
    if (!net)
        return local;
    uint64_t mine = (uint64_t)local, *all = calloc((size_t)net->size, sizeof *all);
    if (!all)
        return zb_err_set(err, ZB_ENOMEM, "out of memory");
    zb_err_t xerr;
    zb_status_t st = zb_allgather_u64(net, &mine, 1, all, &xerr);
    if (st == ZB_OK && local == ZB_OK)
        for (int r = 0; r < net->size && st == ZB_OK; r++)
            if (all[r] != 0)
                st = zb_err_set(err, (zb_status_t)(int)all[r], "rank %d could not %s", r, what);
    free(all);
    if (local != ZB_OK)
        return local;
    if (st != ZB_OK && err && err->status != st)
        *err = xerr;
    return st;
}

/* ---- gathered single-file checkpoint ---- */

zb_status_t pl_save_gathered(pl_t *pl, zb_trainer_t *t, zb_err_t *err)
{
    zb_transport_t *net = pl->opts->transport;
    int me = net->rank;
    const pl_rank_t *R = &pl->ranks[me];
    zb_status_t st = ZB_OK;
    for (int u = 0; u < pl->plan.n_units && st == ZB_OK; u++) {
        int owner = pl->plan.unit_owner[u];
        if (me != 0 && me != owner)
            continue;
        /* the owner holds the whole unit: its local ranges pair with the global ones */
        size_t off[16], cnt[16], loc[16] = {0}, lcnt[16];
        int n = zb_gpt2_unit_ranges(&pl->mcfg, u, off, cnt);
        if (me == owner)
            zb_gpt2_params_unit_ranges(&R->params, u, loc, lcnt);
        const float *src[3] = {R->params.data, R->opt.m.data, R->opt.v.data};
        float *dst[3] = {t->params.data, t->opt.m.data, t->opt.v.data};
        for (int i = 0; i < n && st == ZB_OK; i++)
            for (int k = 0; k < 3 && st == ZB_OK; k++) {
                uint32_t tag = zb_tag(ZB_TAG_USER, k, u * 16 + i);
                size_t bytes = cnt[i] * sizeof(float);
                if (owner == 0)
                    memcpy(dst[k] + off[i], src[k] + loc[i], bytes);
                else if (me == 0)
                    st = zb_recv(net, dst[k] + off[i], bytes, owner, tag, err);
                else
                    st = zb_send(net, src[k] + loc[i], bytes, 0, tag, err);
            }
    }
    if (st == ZB_OK)
        st = zb_flush(net, err);
    if (st != ZB_OK)
        return st; /* a transport failure: the run aborts */
    if (me == 0)
        st = zb_train_save(t, pl->cfg->save_path, err);
    return pl_agree(pl, st, "write the checkpoint", err);
}

/* ---- sharded checkpoints ---- */

static void split_path(const char *path, char *dir, size_t cap, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    snprintf(dir, cap, "%.*s", slash ? (int)(slash - path + 1) : 0, path);
}

static zb_ckpt_range_t *ranges_of(const pl_rank_t *R)
{
    zb_ckpt_range_t *rg = malloc((R->n_upd ? (size_t)R->n_upd : 1) * sizeof *rg);
    for (int i = 0; rg && i < R->n_upd; i++)
        rg[i] = (zb_ckpt_range_t){R->upd[i].goff, R->upd[i].count, R->upd[i].off};
    return rg;
}

static zb_status_t write_shard(pl_t *pl, const pl_rank_t *R, const char *dir, long step,
                               zb_ckpt_shard_ref_t *ref, zb_err_t *err)
{
    zb_ckpt_range_t *rg = ranges_of(R);
    if (!rg)
        return zb_err_set(err, ZB_ENOMEM, "out of memory writing a shard");
    char file[4400];
    snprintf(file, sizeof file, "%s%s", dir, ref->file);
    zb_status_t st = zb_ckpt_shard_write(file, R->rank, pl->P, step, rg, R->n_upd,
                                         R->params.data, R->opt.m.data, R->opt.v.data,
                                         pl->param_count, ref, err);
    free(rg);
    return st;
}

static zb_status_t fill_manifest(pl_t *pl, const zb_trainer_t *t, zb_ckpt_manifest_t *m,
                                 zb_err_t *err)
{
    zb_status_t st = zb_ckpt_manifest_alloc(m, pl->P, pl->plan.S, err);
    if (st != ZB_OK)
        return st;
    m->step = t->step;
    m->skipped = t->skipped;
    m->chunks = pl->plan.sched->chunks;
    snprintf(m->schedule, sizeof m->schedule, "%s",
             pl->opts->schedule_file ? pl->plan.sched->name : pl->opts->schedule);
    for (int s = 0; s < pl->plan.S; s++)
        m->stage_rank[s] = zb_stage_rank(pl->plan.sched, s);
    memcpy(m->first, pl->plan.first, (size_t)(pl->plan.S + 1) * sizeof(int));
    m->cfg = t->cfg;
    m->cfg.model = pl->mcfg;
    m->param_count = pl->param_count;
    m->data_fp = zb_data_fingerprint(t->data);
    m->data_tokens = zb_data_total_tokens(t->data);
    m->data_shards = zb_data_num_shards(t->data);
    m->pos = zb_data_tell(t->data);
    return ZB_OK;
}

zb_status_t pl_save_sharded(pl_t *pl, zb_trainer_t *t, zb_err_t *err)
{
    zb_transport_t *net = pl->opts->transport;
    const char *path = pl->cfg->save_path, *base;
    char dir[4096];
    split_path(path, dir, sizeof dir, &base);
    /* a nonce from rank 0 keeps a re-save of the same step from overwriting live shards */
    uint64_t nonce = ((uint32_t)time(NULL) * 2654435761u) ^ (uint32_t)getpid() ^
                     (uint32_t)(zb_now() * 1e6);
    zb_status_t st = ZB_OK;
    if (net) {
        uint64_t *all = calloc((size_t)net->size, sizeof *all);
        if (!all)
            return zb_err_set(err, ZB_ENOMEM, "out of memory");
        st = zb_allgather_u64(net, &nonce, 1, all, err);
        nonce = all[0];
        free(all);
        if (st != ZB_OK)
            return st;
    }
    zb_ckpt_manifest_t old, m;
    zb_err_t ignore;
    bool have_old = zb_ckpt_is_sharded(path) && zb_ckpt_manifest_read(path, &old, &ignore) == ZB_OK;
    if ((st = fill_manifest(pl, t, &m, err)) != ZB_OK) {
        if (have_old)
            zb_ckpt_manifest_free(&old);
        return st;
    }
    for (int r = 0; r < pl->P; r++)
        snprintf(m.shard[r].file, sizeof m.shard[r].file, "%.200s.%ld-%08x.rank%d", base, t->step,
                 (uint32_t)nonce, r);
    for (int r = 0; r < pl->P && st == ZB_OK; r++)
        if (is_local(pl, r))
            st = write_shard(pl, &pl->ranks[r], dir, t->step, &m.shard[r], err);
    if (net && st != ZB_OK) /* a transport error later would hide the real cause */
        st = pl_agree(pl, st, "write its checkpoint shard", err);
    else if (net) {
        /* rank 0 needs every shard's size and checksum for the manifest */
        int me = net->rank;
        uint64_t row[2] = {0, 0}; /* other replicas write no shard: zeros */
        if (me < pl->P)
            row[0] = m.shard[me].bytes, row[1] = m.shard[me].checksum;
        uint64_t *all = calloc(2 * (size_t)net->size, sizeof *all);
        if (!all)
            st = zb_err_set(err, ZB_ENOMEM, "out of memory");
        else if ((st = zb_allgather_u64(net, row, 2, all, err)) == ZB_OK)
            for (int r = 0; r < pl->P; r++) { /* replica 0's rows: global ranks 0..P-1 */
                m.shard[r].bytes = all[2 * (size_t)r];
                m.shard[r].checksum = all[2 * (size_t)r + 1];
            }
        free(all);
    }
    bool maybe_committed = false;
    if (st == ZB_OK) {
        zb_status_t local = ZB_OK;
        if (!net || net->rank == 0) /* the manifest last: it makes the new shards the checkpoint */
            local = zb_ckpt_manifest_write(path, &m, err);
        /* from here rank 0 may have committed the new shards even if the agreement below fails
         * (a rank stopped or died): nobody may delete them; the next save's orphan sweep
         * removes them if the manifest did not take them */
        maybe_committed = local == ZB_OK;
        st = pl_agree(pl, local, "write the checkpoint manifest", err);
    }
    if (st != ZB_OK && !maybe_committed) { /* the previous checkpoint stands: drop our shards */
        for (int r = 0; r < pl->P; r++)
            if (is_local(pl, r) && m.shard[r].bytes) {
                char file[4400];
                snprintf(file, sizeof file, "%s%s", dir, m.shard[r].file);
                unlink(file);
            }
    } else if (st == ZB_OK && have_old) { /* committed: the previous checkpoint's shards are garbage now */
        for (int r = 0; r < old.ranks; r++) {
            bool mine = r < pl->P ? is_local(pl, r) : (!net || net->rank == 0);
            if (!mine || (r < pl->P && !strcmp(old.shard[r].file, m.shard[r].file)))
                continue;
            char file[4400];
            snprintf(file, sizeof file, "%s%s", dir, old.shard[r].file);
            unlink(file);
        }
    }
    if (st == ZB_OK && (!net || net->rank == 0)) /* and what killed saves left behind */
        zb_ckpt_remove_orphans(path, &m);
    if (have_old)
        zb_ckpt_manifest_free(&old);
    zb_ckpt_manifest_free(&m);
    return st;
}

static bool same_layout(const pl_t *pl, const zb_ckpt_manifest_t *m)
{
    if (m->ranks != pl->P || m->stages != pl->plan.S)
        return false;
    for (int s = 0; s < pl->plan.S; s++)
        if (m->stage_rank[s] != zb_stage_rank(pl->plan.sched, s))
            return false;
    return memcmp(m->first, pl->plan.first, (size_t)(pl->plan.S + 1) * sizeof(int)) == 0;
}

/* Another layout's shards into rank R: from each shard the parameters R holds; every one of
 * them must be covered. */
static zb_status_t assemble(const zb_ckpt_manifest_t *m, const char *dir, pl_rank_t *R,
                            zb_err_t *err)
{
    const zb_gpt2_params_t *p = &R->params;
    unsigned char *covered = calloc(p->count ? p->count : 1, 1);
    if (!covered)
        return zb_err_set(err, ZB_ENOMEM, "out of memory resuming");
    zb_status_t st = ZB_OK;
    for (int r = 0; r < m->ranks && st == ZB_OK; r++) {
        char file[4400];
        snprintf(file, sizeof file, "%s%s", dir, m->shard[r].file);
        st = zb_ckpt_shard_read_into(file, &m->shard[r], r, m->step, m->param_count, p, p->data,
                                     R->opt.m.data, R->opt.v.data, covered, err);
    }
    for (size_t i = 0; st == ZB_OK && i < p->count; i++)
        if (!covered[i])
            st = zb_err_set(err, ZB_EFORMAT,
                            "sharded checkpoint: a parameter of rank %d is in no shard", R->rank);
    free(covered);
    return st;
}

zb_status_t pl_resume_sharded(pl_t *pl, zb_trainer_t *t, const char *path, zb_err_t *err)
{
    zb_ckpt_manifest_t m;
    zb_status_t st = zb_ckpt_manifest_read(path, &m, err);
    if (st != ZB_OK)
        return st;
    const char *base;
    char dir[4096];
    split_path(path, dir, sizeof dir, &base);
    if ((st = zb_ckpt_manifest_check(path, &m, t, err)) == ZB_OK)
        st = zb_data_seek(t->data, &m.pos, err);
    bool own = same_layout(pl, &m);
    for (int g = 0; g < pl->P * pl->N && st == ZB_OK; g++) { /* every replica restores */
        if (pl->opts->transport && pl->opts->transport->rank != g)
            continue;
        pl_rank_t *R = &pl->ranks[g];
        int r = R->rank;
        R->skipped = m.skipped;
        R->touch_opt = false; /* restored below */
        if (!own) {
            st = assemble(&m, dir, R, err);
            continue;
        }
        zb_ckpt_range_t *rg = ranges_of(R);
        char file[4400];
        snprintf(file, sizeof file, "%s%s", dir, m.shard[r].file);
        st = rg ? zb_ckpt_shard_read(file, &m.shard[r], r, m.step, pl->param_count, rg, R->n_upd,
                                     R->params.data, R->opt.m.data, R->opt.v.data, NULL, err)
                : zb_err_set(err, ZB_ENOMEM, "out of memory resuming");
        free(rg);
    }
    if (st == ZB_OK) {
        t->step = m.step;
        t->skipped = m.skipped;
    }
    zb_ckpt_manifest_free(&m);
    return st;
}
