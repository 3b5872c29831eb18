/* zbpp — a GPU stage's stashes pooled by lifetime: the host pool's slots (stash_slots.c) with
 * their bytes in device memory. Each region has one device block of slots; a microbatch's
 * stash is a split CUDA stash (zb_cuda_stash_view_new) laid over its slots before each action.
 * A slot given back is taken by the next action that needs one in program order, and all the
 * rank's actions run on one stream in that order, so a slot's next writer follows its last
 * reader on the device as on the host.
 *
 * Offload (docs/offload.md): an O queues the download of the microbatch's FW and FB slots into
 * a pinned host slot on the stage's stash download stream, after the compute queued so far,
 * and gives the device slots back (at the O, or where the plan's release puts it:
 * stash_slots.h); an L takes device slots again and queues the upload on the stash upload
 * stream (zb_cuda_stash_copy: streams apart from the messages'). Neither waits on the host.
 * What keeps the bytes right is four orders, kept by events:
 * a device slot an O still reads is written again only after that O (slot_free: the compute
 * stream, or an L's upload, waits for it); an L's upload starts after the compute queued before
 * it (the slots' earlier users), and after its own O; the B after an L waits for the upload;
 * and a host slot an L still reads is written by the next O only after that L (host_free). */
#include <stdlib.h>
#include <string.h>

#include "cuda/stream.h"
#include "pipeline/rank_cuda_stash.h"

/* The host slots the program holds at once: an O takes one, its L gives it back. */
static int host_slots_needed(const zb_rank_program_t *prog, int stage)
{
    int now = 0, most = 0;
    for (int i = 0; i < prog->len; i++) {
        const zb_action_t *a = &prog->actions[i];
        if (a->stage != stage)
            continue;
        now += a->type == ZB_ACT_O;
        most = now > most ? now : most;
        now -= a->type == ZB_ACT_L;
    }
    return most;
}

static zb_status_t offload_init(pl_cu_stash_pool_t *p, const zb_rank_program_t *prog, int stage,
                                zb_err_t *err)
{
    pl_cu_offload_t *o = &p->off;
    o->n = host_slots_needed(prog, stage);
    if (o->n == 0)
        return ZB_OK;
    o->bytes = p->bytes[PL_FW] + p->bytes[PL_FB];
    size_t M = (size_t)p->slots.M;
    if (!(o->owner = malloc((size_t)o->n * sizeof *o->owner)) ||
        !(o->of = malloc(M * sizeof *o->of)) || !(o->out = calloc(M, sizeof *o->out)) ||
        !(o->in = calloc(M, sizeof *o->in)) ||
        !(o->slot_free[0] = calloc((size_t)p->slots.n[PL_FW], sizeof *o->slot_free[0])) ||
        !(o->slot_free[1] = calloc((size_t)p->slots.n[PL_FB], sizeof *o->slot_free[1])) ||
        !(o->host_free = calloc((size_t)o->n, sizeof *o->host_free)) ||
        !(o->reloaded = calloc(M, 1)))
        return zb_err_set(err, ZB_ENOMEM, "out of memory for a stage's offload slots");
    zb_status_t st = zb_cuda_host_alloc((size_t)o->n * o->bytes / sizeof(float), &o->mem, err);
    if (st == ZB_OK)
        st = zb_cuda_event_new(p->stage, &o->now, err);
    for (size_t m = 0; m < M && st == ZB_OK; m++)
        if ((st = zb_cuda_event_new(p->stage, &o->out[m], err)) == ZB_OK)
            st = zb_cuda_event_new(p->stage, &o->in[m], err);
    return st;
}

static void offload_free(pl_cu_offload_t *o, int M)
{
    zb_cuda_host_free(o->mem);
    zb_cuda_event_free(o->now);
    for (int m = 0; m < M; m++) {
        zb_cuda_event_free(o->out ? o->out[m] : NULL);
        zb_cuda_event_free(o->in ? o->in[m] : NULL);
    }
    free(o->owner), free(o->of), free(o->out), free(o->in);
    free(o->slot_free[0]), free(o->slot_free[1]), free(o->host_free), free(o->reloaded);
    memset(o, 0, sizeof *o);
}

static void offload_reset(pl_cu_stash_pool_t *p)
{
    pl_cu_offload_t *o = &p->off;
    if (o->n == 0)
        return;
    for (int i = 0; i < o->n; i++)
        o->owner[i] = -1, o->host_free[i] = NULL;
    for (int m = 0; m < p->slots.M; m++)
        o->of[m] = -1;
    for (int k = 0; k < 2; k++)
        memset(o->slot_free[k], 0, (size_t)p->slots.n[k] * sizeof *o->slot_free[k]);
    memset(o->reloaded, 0, (size_t)p->slots.M);
}

zb_status_t pl_cu_stash_pool_init(pl_cu_stash_pool_t *p, zb_cuda_stage_t *s,
                                  const zb_rank_program_t *prog, int stage, int M,
                                  const int *release, zb_err_t *err)
{
    memset(p, 0, sizeof *p);
    p->stage = s;
    zb_cuda_stash_regions(s, p->bytes);
    zb_status_t st = pl_stash_slots_init(&p->slots, prog, stage, M, release, err);
    if (st == ZB_OK && !(p->view = calloc((size_t)M, sizeof *p->view)))
        st = zb_err_set(err, ZB_ENOMEM, "out of memory for a stage's stashes");
    for (int k = 0; k < 3 && st == ZB_OK; k++) {
        size_t bytes = (size_t)p->slots.n[k] * p->bytes[k];
        if (bytes > 0)
            st = zb_cuda_buffer_alloc(s, bytes / sizeof(float), &p->mem[k], err);
    }
    for (int m = 0; m < M && st == ZB_OK; m++)
        st = zb_cuda_stash_view_new(s, &p->view[m], err);
    if (st == ZB_OK)
        st = offload_init(p, prog, stage, err);
    if (st == ZB_OK)
        offload_reset(p);
    return st;
}

void pl_cu_stash_pool_free(pl_cu_stash_pool_t *p)
{
    for (int m = 0; p->view && m < p->slots.M; m++)
        zb_cuda_stash_free(p->view[m]);
    free(p->view);
    for (int k = 0; k < 3; k++)
        zb_cuda_buffer_free(p->mem[k]);
    offload_free(&p->off, p->slots.M);
    pl_stash_slots_free(&p->slots);
    memset(p, 0, sizeof *p);
}

void pl_cu_stash_pool_reset(pl_cu_stash_pool_t *p)
{
    pl_stash_slots_reset(&p->slots);
    offload_reset(p);
    for (int m = 0; p->view && m < p->slots.M; m++)
        zb_cuda_stash_reset(p->view[m]);
}

static char *slot_at(const pl_cu_stash_pool_t *p, int k, int slot)
{
    return slot >= 0 && p->mem[k] ? (char *)p->mem[k] + (size_t)slot * p->bytes[k] : NULL;
}

static void *slot_mem(const pl_cu_stash_pool_t *p, int k, int mb)
{
    return slot_at(p, k, pl_stash_slots_at(&p->slots, k, mb));
}

/* The slots of FW and FB that action a just took (before[k]: mb's slot before it): writers
 * queued on `upload` (an L) or the compute stream wait for an O still reading them. */
static zb_status_t wait_slots_read(pl_cu_stash_pool_t *p, int mb, const int before[2],
                                   bool upload, zb_err_t *err)
{
    pl_cu_offload_t *o = &p->off;
    zb_status_t st = ZB_OK;
    for (int k = 0; k < 2 && o->n > 0 && st == ZB_OK; k++) {
        int s = pl_stash_slots_at(&p->slots, k, mb);
        if (s < 0 || s == before[k] || !o->slot_free[k][s])
            continue;
        st = upload ? zb_cuda_stash_wait(p->stage, true, o->slot_free[k][s], err)
                    : zb_cuda_stage_wait(p->stage, o->slot_free[k][s], err);
        o->slot_free[k][s] = NULL;
    }
    return st;
}

zb_cuda_stash_t *pl_cu_stash_pool_begin(pl_cu_stash_pool_t *p, const zb_action_t *a,
                                        zb_err_t *err)
{
    int mb = a->mb;
    int before[2] = {mb >= 0 && mb < p->slots.M ? pl_stash_slots_at(&p->slots, PL_FW, mb) : -1,
                     mb >= 0 && mb < p->slots.M ? pl_stash_slots_at(&p->slots, PL_FB, mb) : -1};
    if (!pl_stash_slots_begin(&p->slots, a, err))
        return NULL;
    pl_cu_offload_t *o = &p->off;
    zb_status_t st = wait_slots_read(p, mb, before, false, err);
    if (st == ZB_OK && o->n > 0 && o->reloaded[mb] && a->type != ZB_ACT_W) {
        st = zb_cuda_stage_wait(p->stage, o->in[mb], err); /* the B reads what L brought */
        o->reloaded[mb] = 0;
    }
    if (st != ZB_OK)
        return NULL;
    void *region[3] = {slot_mem(p, PL_FW, mb), slot_mem(p, PL_FB, mb), slot_mem(p, PL_BW, mb)};
    zb_cuda_stash_bind(p->view[mb], region);
    return p->view[mb];
}

void pl_cu_stash_pool_end(pl_cu_stash_pool_t *p, const zb_action_t *a)
{
    if (a->type == ZB_ACT_F && (a->flags & ZB_ACT_NOSAVE)) /* its input stays in x_in; the R
                                                           * rebuilds the rest */
        zb_cuda_stash_reset(p->view[a->mb]);
    pl_stash_slots_end(&p->slots, a);
}

/* O: FW and FB of microbatch mb down into a free host slot, after the compute queued so far
 * (its F) and after the L that last read that host slot; the device slots go back, marked as
 * read until the download ends. */
static zb_status_t offload(pl_cu_stash_pool_t *p, const zb_action_t *a, zb_err_t *err)
{
    pl_cu_offload_t *o = &p->off;
    int mb = a->mb, h = 0;
    while (h < o->n && o->owner[h] >= 0)
        h++;
    if (h == o->n)
        return zb_err_set(err, ZB_ESCHEDULE, "no free host slot to offload microbatch %d", mb);
    int dev[2] = {pl_stash_slots_at(&p->slots, PL_FW, mb), pl_stash_slots_at(&p->slots, PL_FB, mb)};
    if (!pl_stash_slots_begin(&p->slots, a, err))
        return ZB_ESCHEDULE;
    zb_status_t st = zb_cuda_event_record(p->stage, o->now, err); /* after its F */
    if (st == ZB_OK)
        st = zb_cuda_stash_wait(p->stage, false, o->now, err);
    if (st == ZB_OK && o->host_free[h])
        st = zb_cuda_stash_wait(p->stage, false, o->host_free[h], err);
    o->host_free[h] = NULL;
    char *host = (char *)o->mem + (size_t)h * o->bytes;
    for (int k = 0; k < 2 && st == ZB_OK; k++)
        if (p->bytes[k] > 0)
            st = zb_cuda_stash_copy(p->stage, false, (float *)(host + (k ? p->bytes[PL_FW] : 0)),
                                    (const float *)slot_at(p, k, dev[k]),
                                    p->bytes[k] / sizeof(float), o->out[mb], err);
    if (st != ZB_OK)
        return st;
    o->owner[h] = mb, o->of[mb] = h;
    o->slot_free[PL_FW][dev[PL_FW]] = o->out[mb];
    o->slot_free[PL_FB][dev[PL_FB]] = o->out[mb];
    pl_stash_slots_end(&p->slots, a);
    return ZB_OK;
}

/* L: device slots taken again and the host slot uploaded into them, after the compute queued so
 * far (the slots' earlier users), any O still reading them, and this microbatch's own O. */
static zb_status_t reload(pl_cu_stash_pool_t *p, const zb_action_t *a, zb_err_t *err)
{
    pl_cu_offload_t *o = &p->off;
    int mb = a->mb, h = o->of[mb];
    int before[2] = {-1, -1};
    if (!pl_stash_slots_begin(&p->slots, a, err))
        return ZB_ESCHEDULE;
    zb_status_t st = zb_cuda_event_record(p->stage, o->now, err);
    if (st == ZB_OK)
        st = zb_cuda_stash_wait(p->stage, true, o->now, err);
    if (st == ZB_OK)
        st = wait_slots_read(p, mb, before, true, err);
    if (st == ZB_OK)
        st = zb_cuda_stash_wait(p->stage, true, o->out[mb], err);
    const char *host = (const char *)o->mem + (size_t)h * o->bytes;
    for (int k = 0; k < 2 && st == ZB_OK; k++)
        if (p->bytes[k] > 0)
            st = zb_cuda_stash_copy(p->stage, true, (float *)slot_mem(p, k, mb),
                                    (const float *)(host + (k ? p->bytes[PL_FW] : 0)),
                                    p->bytes[k] / sizeof(float), o->in[mb], err);
    if (st != ZB_OK)
        return st;
    o->owner[h] = -1, o->of[mb] = -1;
    o->host_free[h] = o->in[mb];
    o->reloaded[mb] = 1;
    return ZB_OK;
}

zb_status_t pl_cu_stash_pool_copy(pl_cu_stash_pool_t *p, const zb_action_t *a, zb_err_t *err)
{
    if (p->off.n == 0 || a->mb < 0 || a->mb >= p->slots.M)
        return zb_err_set(err, ZB_ESCHEDULE, "%s of microbatch %d: the stage plans no offload",
                          a->type == ZB_ACT_O ? "O" : "L", a->mb);
    if (a->type == ZB_ACT_O)
        return offload(p, a, err);
    if (a->type == ZB_ACT_L)
        return p->off.of[a->mb] < 0
                   ? zb_err_set(err, ZB_ESCHEDULE, "L of microbatch %d without an O before it",
                                a->mb)
                   : reload(p, a, err);
    return zb_err_set(err, ZB_EINVAL, "not a copy action");
}

zb_cuda_stash_t *pl_cu_stash_pool_eval(pl_cu_stash_pool_t *p)
{
    void *region[3] = {p->mem[PL_FW], p->mem[PL_FB], NULL};
    zb_cuda_stash_reset(p->view[0]);
    zb_cuda_stash_bind(p->view[0], region);
    return p->view[0];
}

size_t pl_cu_stash_pool_live(const pl_cu_stash_pool_t *p)
{
    size_t live = 0;
    for (int m = 0; p->view && m < p->slots.M; m++)
        if (!p->slots.away[m]) /* an offloaded stash is in host memory */
            live += zb_cuda_stash_live_bytes(p->view[m]);
    return live;
}

size_t pl_cu_stash_pool_bytes(const pl_cu_stash_pool_t *p)
{
    size_t sum = 0;
    for (int k = 0; k < 3; k++)
        sum += (size_t)p->slots.n[k] * p->bytes[k];
    return sum;
}

size_t pl_cu_stash_pool_host_bytes(const pl_cu_stash_pool_t *p)
{
    return (size_t)p->off.n * p->off.bytes;
}
