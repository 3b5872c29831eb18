/* zbpp — the profiler: time F, B, W of each part of the model for one microbatch, and one
 * activation message between two rank threads; turn the figures into cost models. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zbpp/nn.h"
#include "profile/profile_params.h"
#include "zbpp/profile.h"
#include "zbpp/transport.h"
#include "zbpp/util.h"
#include "zbpp/workers.h"

enum { PINGPONGS = 15 };

/* xorshift: inputs only need to be plausible, not good random numbers */
static uint32_t next_rand(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (uint32_t)(*s >> 32);
}

/* ---- compute: one thread, every part of the model ---- */

typedef struct {
    const zb_gpt2_params_t *params;
    int B, T, reps, parts; /* parts = layers + 2: embedding, blocks, head */
    int index, rank_threads; /* measuring thread i, its worker group's size */
    bool pin;
    double *times;         /* [reps][parts][3] */
    zb_status_t st;
    zb_err_t err;
} compute_job_t;

/* Part `part` of `parts` (embedding, blocks, head) in the model `cfg` the job times: the whole
 * model, or one block standing for each of them. */
static zb_gpt2_span_t part_span(const zb_gpt2_config_t *cfg, int parts, int part)
{
    int L = cfg->layers, l = (part - 1) % L;
    if (part == 0)
        return (zb_gpt2_span_t){0, 0, true, false};
    if (part == parts - 1)
        return (zb_gpt2_span_t){L, L, false, true};
    return (zb_gpt2_span_t){l, l + 1, false, false};
}

static zb_status_t time_parts(compute_job_t *job, zb_err_t *err)
{
    const zb_gpt2_config_t *cfg = &job->params->cfg;
    size_t n = (size_t)job->B * (size_t)job->T, nc = n * (size_t)cfg->channels;
    int *tokens = malloc(2 * n * sizeof *tokens);
    float *x = malloc(3 * nc * sizeof *x);
    zb_gpt2_stash_t **stash = calloc((size_t)job->parts, sizeof *stash);
    zb_gpt2_grads_t g;
    memset(&g, 0, sizeof g);
    zb_status_t st = ZB_OK;
    if (!tokens || !x || !stash)
        st = zb_err_set(err, ZB_ENOMEM, "profile: out of memory for the inputs");
    if (st == ZB_OK)
        st = zb_gpt2_grads_alloc(&g, cfg, err);
    for (int k = 0; st == ZB_OK && k < job->parts; k++) {
        zb_gpt2_span_t sp = part_span(cfg, job->parts, k);
        st = zb_gpt2_stash_new(cfg, &sp, job->B, job->T, &stash[k], err);
    }
    if (st != ZB_OK)
        goto done;
    uint64_t seed = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < 2 * n; i++)
        tokens[i] = (int)(next_rand(&seed) % (uint32_t)cfg->vocab);
    for (size_t i = 0; i < 3 * nc; i++)
        x[i] = (float)next_rand(&seed) / 4294967296.0f - 0.5f;
    const int *targets = tokens + n;
    float *x_in = x, *x_out = x + nc, *dx = x + 2 * nc, loss;
    float scale = 1.0f / (float)n;
    /* round -1 warms caches, page tables and the BLAS up; it is not recorded */
    for (int r = -1; r < job->reps && st == ZB_OK; r++)
        for (int k = 0; k < job->parts && st == ZB_OK; k++) {
            zb_gpt2_span_t sp = part_span(cfg, job->parts, k);
            double t0 = zb_now();
            st = zb_gpt2_forward(job->params, &sp, stash[k], sp.embed ? tokens : NULL,
                                 sp.embed ? NULL : x_in, sp.head ? targets : NULL,
                                 sp.head ? NULL : x_out, sp.head ? &loss : NULL, err);
            double t1 = zb_now();
            if (st == ZB_OK)
                st = zb_gpt2_backward_input(job->params, &sp, stash[k], sp.head ? NULL : dx, scale,
                                            sp.embed ? NULL : x_out, err);
            double t2 = zb_now();
            if (st == ZB_OK)
                st = zb_gpt2_backward_weight(job->params, &sp, stash[k], &g, err);
            double t3 = zb_now();
            if (r >= 0) {
                double *t = job->times + ((size_t)r * (size_t)job->parts + (size_t)k) * 3;
                t[0] = t1 - t0, t[1] = t2 - t1, t[2] = t3 - t2;
            }
        }
done:
    for (int k = 0; stash && k < job->parts; k++)
        zb_gpt2_stash_free(stash[k]);
    free(stash), free(tokens), free(x);
    zb_gpt2_grads_free(&g);
    return st;
}

static zb_status_t compute_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    (void)t;
    compute_job_t *job = arg;
    zb_workers_t *w = NULL;
    zb_status_t st = zb_workers_new_for_rank(job->index, job->rank_threads, job->pin, &w, err);
    if (st != ZB_OK)
        return st;
    zb_workers_enter(w);
    st = time_parts(job, err);
    zb_workers_enter(NULL);
    zb_workers_free(w);
    return st;
}

/* ---- one message: ping-pong between two rank threads ---- */

typedef struct {
    size_t bytes;
    float *buf; /* per rank */
    double rtt[PINGPONGS];
} pingpong_t;

static zb_status_t pingpong_rank(zb_transport_t *t, void *arg, zb_err_t *err)
{
    pingpong_t *pp = arg;
    uint32_t tag = zb_tag(ZB_TAG_USER, 0, 0);
    zb_status_t st = ZB_OK;
    for (int i = -1; i < PINGPONGS && st == ZB_OK; i++) {
        double t0 = zb_now();
        if (t->rank == 0) {
            st = zb_send(t, pp->buf, pp->bytes, 1, tag, err);
            if (st == ZB_OK)
                st = zb_recv(t, pp->buf, pp->bytes, 1, tag, err);
            if (i >= 0)
                pp->rtt[i] = zb_now() - t0;
        } else {
            st = zb_recv(t, pp->buf, pp->bytes, 0, tag, err);
            if (st == ZB_OK)
                st = zb_send(t, pp->buf, pp->bytes, 0, tag, err);
        }
    }
    return st;
}

static zb_status_t measure_comm(size_t bytes, bool pin, double *comm, zb_err_t *err)
{
    zb_thread_world_t *w = NULL;
    pingpong_t pp[2] = {{.bytes = bytes}, {.bytes = bytes}};
    pp[0].buf = calloc(bytes / sizeof(float) + 1, sizeof(float));
    pp[1].buf = calloc(bytes / sizeof(float) + 1, sizeof(float));
    zb_status_t st = (pp[0].buf && pp[1].buf)
                         ? zb_thread_world_new(2, 4, 60, &w, err)
                         : zb_err_set(err, ZB_ENOMEM, "profile: out of memory for messages");
    if (st == ZB_OK) {
        void *args[2] = {&pp[0], &pp[1]};
        st = zb_thread_world_run(w, pingpong_rank, args, pin, NULL, err);
    }
    if (st == ZB_OK)
        *comm = zb_median(pp[0].rtt, PINGPONGS) / 2;
    zb_thread_world_free(w);
    free(pp[0].buf), free(pp[1].buf);
    return st;
}

/* ---- public ---- */

zb_status_t zb_profile_measure(const zb_gpt2_params_t *params, const zb_gpt2_config_t *cfg, int B,
                               int T, int reps, int threads, bool pin, zb_profile_t *out,
                               zb_err_t *err)
{
    return zb_profile_measure_ranks(params, cfg, B, T, reps, threads, 1, pin, out, err);
}

zb_status_t zb_profile_params(const zb_gpt2_config_t *cfg, const zb_gpt2_params_t *params,
                              zb_gpt2_params_t *own, const zb_gpt2_params_t **use, zb_err_t *err)
{
    memset(own, 0, sizeof *own);
    *use = params;
    if (params)
        return ZB_OK;
    zb_gpt2_config_t one = *cfg;
    one.layers = 1;
    zb_status_t st = zb_gpt2_params_alloc(own, &one, err);
    if (st == ZB_OK) {
        zb_gpt2_params_init_random(own, 1);
        *use = own;
    }
    return st;
}

zb_status_t zb_profile_measure_ranks(const zb_gpt2_params_t *params, const zb_gpt2_config_t *cfg,
                                     int B, int T, int reps, int threads, int rank_threads,
                                     bool pin, zb_profile_t *out, zb_err_t *err)
{
    memset(out, 0, sizeof *out);
    zb_status_t st = zb_gpt2_config_check(cfg, err);
    if (st != ZB_OK)
        return st;
    if (B < 1 || T < 1 || T > cfg->max_seq || reps < 1 || reps > 1000 || threads < 1 ||
        threads > ZB_PROFILE_MAX_THREADS || rank_threads < 1 || rank_threads > ZB_WORKERS_MAX)
        return zb_err_set(err, ZB_EINVAL,
                          "profile: need B >= 1, 1 <= T <= max_seq (%d), 1..1000 repetitions, "
                          "1..%d threads of 1..%d worker threads (got B %d, T %d, %d, %d, %d)",
                          cfg->max_seq, ZB_PROFILE_MAX_THREADS, ZB_WORKERS_MAX, B, T, reps,
                          threads, rank_threads);
    double start = zb_now();
    zb_blas_init(); /* single-threaded BLAS, as in a pipeline rank */
    zb_gpt2_params_t own;
    if ((st = zb_profile_params(cfg, params, &own, &params, err)) != ZB_OK)
        return st;
    int L = cfg->layers, nt = threads; /* the model's blocks, whatever params holds */
    size_t per = (size_t)reps * (size_t)(L + 2) * 3;
    compute_job_t jobs[ZB_PROFILE_MAX_THREADS];
    void *args[ZB_PROFILE_MAX_THREADS];
    double *times = malloc((size_t)nt * per * sizeof(double));
    double *col = malloc((size_t)nt * (size_t)reps * sizeof *col);
    out->block = calloc((size_t)L, sizeof *out->block);
    zb_thread_world_t *w = NULL;
    if (!times || !col || !out->block)
        st = zb_err_set(err, ZB_ENOMEM, "profile: out of memory");
    for (int i = 0; i < nt; i++) {
        jobs[i] = (compute_job_t){.params = params, .B = B, .T = T, .reps = reps, .parts = L + 2,
                                  .index = i, .rank_threads = rank_threads, .pin = pin,
                                  .times = times ? times + (size_t)i * per : NULL};
        args[i] = &jobs[i];
    }
    /* measure on rank threads, pinned like the pipeline's ranks; with threads > 1 every one
     * measures at once, so the cores are as busy (clock, caches, memory) as during training */
    if (st == ZB_OK && (st = zb_thread_world_new(nt, 1, 0, &w, err)) == ZB_OK)
        st = zb_thread_world_run(w, compute_rank, args, pin, NULL, err);
    zb_thread_world_free(w);
    for (int k = 0; st == ZB_OK && k < L + 2; k++) {
        double m[3];
        for (int op = 0; op < 3; op++) {
            int c = 0;
            for (int i = 0; i < nt; i++)
                for (int r = 0; r < reps; r++)
                    col[c++] = times[(size_t)i * per +
                                     ((size_t)r * (size_t)(L + 2) + (size_t)k) * 3 + (size_t)op];
            m[op] = zb_median(col, (size_t)c);
        }
        zb_op_time_t ot = {m[0], m[1], m[2]};
        if (k == 0)
            out->embed = ot;
        else if (k == L + 1)
            out->head = ot;
        else
            out->block[k - 1] = ot;
    }
    out->msg_bytes = (size_t)B * (size_t)T * (size_t)cfg->channels * sizeof(float);
    if (st == ZB_OK)
        st = measure_comm(out->msg_bytes, pin, &out->comm, err);
    free(times), free(col);
    zb_gpt2_params_free(&own);
    if (st != ZB_OK) {
        zb_profile_free(out);
        return st;
    }
    out->cfg = *cfg;
    out->batch = B, out->seq = T, out->reps = reps, out->layers = L, out->threads = threads;
    out->rank_threads = rank_threads;
    out->wall = zb_now() - start;
    return ZB_OK;
}

void zb_profile_free(zb_profile_t *p)
{
    free(p->block);
    memset(p, 0, sizeof *p);
}

static double total(zb_op_time_t t)
{
    return t.f + t.b + t.w;
}

void zb_profile_block_costs(const zb_profile_t *p, zb_block_costs_t *bc)
{
    bc->layers = p->layers;
    for (int l = 0; l < p->layers; l++)
        bc->block[l] = total(p->block[l]);
    bc->embed = total(p->embed);
    bc->head = total(p->head);
}

zb_status_t zb_profile_stage_costs(const zb_profile_t *p, const int *first, int stages,
                                   zb_costs_t *out, zb_err_t *err)
{
    if (stages < 1 || first[0] != 0 || first[stages] != p->layers)
        return zb_err_set(err, ZB_EINVAL, "profile: partition does not cover the %d blocks",
                          p->layers);
    for (int s = 0; s < stages; s++)
        if (first[s + 1] <= first[s])
            return zb_err_set(err, ZB_EINVAL, "profile: stage %d of the partition is empty", s);
    zb_status_t st = zb_costs_init_uniform(out, stages, 0, 0, 0, p->comm, 0, 0, 0, err);
    if (st == ZB_OK && (st = zb_costs_set_recompute(out, 0, 0, err)) != ZB_OK)
        zb_costs_free(out);
    for (int s = 0; st == ZB_OK && s < stages; s++) {
        zb_op_time_t t = {0, 0, 0};
        for (int l = first[s]; l < first[s + 1]; l++)
            t.f += p->block[l].f, t.b += p->block[l].b, t.w += p->block[l].w;
        if (s == 0)
            t.f += p->embed.f, t.b += p->embed.b, t.w += p->embed.w;
        if (s == stages - 1)
            t.f += p->head.f, t.b += p->head.b, t.w += p->head.w;
        out->t_f[s] = t.f, out->t_b[s] = t.b, out->t_w[s] = t.w;
        zb_gpt2_span_t span = zb_partition_span(first, stages, s);
        size_t after_f, after_b;
        zb_gpt2_stage_mem(&p->cfg, &span, p->batch, p->seq, &after_f, &after_b);
        out->m_f[s] = (double)after_f;
        out->m_b[s] = (double)after_b - (double)after_f;
        out->m_w[s] = -(double)after_b;
        /* recompute: R is the stage's forward again; a non-saving F keeps only its input (the
         * tokens on the embedding stage, else the [B,T,C] activation it received) */
        out->t_r[s] = t.f;
        out->m_keep[s] = (double)p->batch * p->seq *
                         (span.embed ? sizeof(int) : (double)p->cfg.channels * sizeof(float));
    }
    if (st == ZB_OK && (st = zb_costs_check(out, err)) != ZB_OK)
        zb_costs_free(out);
    return st;
}

zb_status_t zb_profile_partition(const zb_profile_t *p, int stages, int *first, zb_costs_t *out,
                                 zb_err_t *err)
{
    zb_block_costs_t bc = {.block = malloc((size_t)p->layers * sizeof(double))};
    if (!bc.block)
        return zb_err_set(err, ZB_ENOMEM, "out of memory partitioning the profile");
    zb_profile_block_costs(p, &bc);
    zb_status_t st = zb_partition(&bc, stages, first, err);
    free(bc.block);
    return st == ZB_OK ? zb_profile_stage_costs(p, first, stages, out, err) : st;
}

zb_status_t zb_profile_rank_costs(const zb_costs_t *stage, int ranks, int chunks,
                                  zb_placement_t pl, zb_costs_t *out, zb_err_t *err)
{
    if (ranks < 1 || chunks < 1 || stage->stages != ranks * chunks ||
        (pl == ZB_PLACE_V && chunks != 2))
        return zb_err_set(err, ZB_EINVAL,
                          "profile: %d stages cannot be %d ranks x %d chunks (%s placement)",
                          stage->stages, ranks, chunks, zb_placement_name(pl));
    zb_status_t st = zb_costs_init_uniform(out, ranks, 0, 0, 0, 0, 0, 0, 0, err);
    if (st != ZB_OK)
        return st;
    for (int s = 0; s < stage->stages; s++) {
        int r = zb_stage_rank_of(ranks, chunks, pl, s);
        out->t_f[r] += stage->t_f[s], out->t_b[r] += stage->t_b[s], out->t_w[r] += stage->t_w[s];
        out->m_f[r] += stage->m_f[s], out->m_b[r] += stage->m_b[s], out->m_w[r] += stage->m_w[s];
        out->comm[r] = fmax(out->comm[r], stage->comm[s]);
    }
    out->mem_limit = stage->mem_limit;
    return ZB_OK;
}
