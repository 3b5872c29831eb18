/* Event-driven simulation of a schedule under a cost model.
 *
 * Each rank executes its program in order; an action starts at max(end of the previous action on
 * its rank, time its inputs are ready). Ranks advance until they block; a rank blocked on another
 * rank's output is woken when that output is produced (a worklist), so the whole sweep is O(n).
 *
 * Compute-only schedules: a cross-rank dependency is ready `comm[src]` after the producer ends.
 * Lowered schedules: SEND/RECV take no time; a message is available at the receiver `comm[src]`
 * after its SEND ends; RECV blocks until then, and a compute action with a cross-rank input also
 * waits for that message (so a missing RECV cannot make data appear early). Memory deltas are
 * applied when an action starts.
 *
 * Copies (O, L): the rank issues one when it reaches it in its program, at no compute time; the
 * copy then runs on the rank's device->host (O) or host->device (L) channel, one copy at a time
 * per channel in program order, once its input exists (O: the F ran; L: the O ended). An O frees
 * the stash when it ends, an L takes it back when it starts, and a B/BW of a reloaded pair waits
 * for its L to end. Memory is therefore a timeline, not a program-order sum: each rank's
 * changes are sorted by time (a copy's release before an action starting at the same time,
 * actions in program order) and the peak is read from that.
 *
 * Ranks sharing one device (costs->share, n > 0): an action's duration is no longer fixed when
 * it starts, so run_shared advances time from event to event (an action ends, a message
 * arrives, a fused BW's B part ends) over every rank at once, each computing rank progressing
 * at 1 / f[phase][k] of its cost's rate while k other ranks compute (times the mix of what
 * they compute, where the share has one). With every factor 1 it gives run()'s timeline.
 * Where the share has a host link (share.link), the ranks' copies share it too: a copy's end is
 * then an event as well, each of the k copies in flight in one direction running at the link's
 * bandwidth / k where that is below a copy's own (the costs' bw_d2h / bw_h2d). */
#include "zbpp/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/sched_index.h"

typedef struct {
    const zb_schedule_t *s;
    const zb_costs_t *c;
    int S, M;
    bool lowered;
    int *owner; /* [S] rank of each stage (placement lookup without a call) */
    /* [S*M], -1 = not produced yet */
    double *end_f, *end_b, *arr_f, *arr_b;
    double *end_o, *end_l; /* [S*M] copies; NULL when the schedule has none */
    bool *reloaded;        /* [S*M] the pair has an L its backward waits for */
    int *pos;       /* [ranks] next action index */
    double *free_t; /* [ranks] time the rank becomes free */
    double *d2h_free, *h2d_free; /* [ranks] time each copy channel becomes free */
    struct mem_event *events;    /* [ranks][max len]: one memory change per action */
    int *n_events;               /* [ranks] */
    int max_len;
    int *queue;     /* ring of ranks to advance */
    bool *queued;
    int qhead, qlen;
    /* run_shared: per rank, the work left of its running compute action (in cost time; the
     * action is x->pos[r], not yet counted as done), or a negative value when it runs none */
    double *left;
    /* run_shared on a shared host link: per channel q = 2·rank + (L ? 1 : 0), the copies issued
     * and not yet ended, in program order (a ring of action indices, max_len each), and the
     * work left of the first once it started (cost time at the copy's own bandwidth; -1 before).
     * NULL without a link. */
    int *cq, *cq_head, *cq_len;
    double *cleft;
} sim_ctx_t;

/* One change of a rank's memory. `order` sorts changes at equal times: a copy's release (-1)
 * first, then actions in program order. */
struct mem_event {
    double t, delta;
    int order;
};

static void wake(sim_ctx_t *x, int rank)
{
    if (rank < 0 || x->queued[rank])
        return;
    x->queued[rank] = true;
    x->queue[(x->qhead + x->qlen) % x->s->ranks] = rank;
    x->qlen++;
}

/* Time a cross-rank or same-rank input produced at `stage_src` becomes usable on `rank`:
 * `done` is the producer's end time (or -1), `arrival` the message arrival (lowered only). */
/* arrival: the input's arrival time in a lowered schedule (the arrays exist only then). */
static double input_ready(const sim_ctx_t *x, int rank, int stage_src, double done,
                          const double *arrival, size_t i)
{
    if (x->owner[stage_src] == rank)
        return done;
    if (x->lowered)
        return arrival[i];
    return done < 0 ? -1 : done + x->c->comm[stage_src];
}

/* Ready time of action `a` on `rank`, or -1 if an input is missing. */
static double ready_time(const sim_ctx_t *x, int rank, const zb_action_t *a)
{
    const int s = a->stage, M = x->M;
    const size_t i = (size_t)s * M + a->mb;
    double t = 0;
    switch (a->type) {
    case ZB_ACT_F:
        if (s > 0)
            t = input_ready(x, rank, s - 1, x->end_f[i - M], x->arr_f, i);
        break;
    case ZB_ACT_B:
    case ZB_ACT_BW:
        t = x->end_f[i];
        if (t >= 0 && s < x->S - 1) {
            double tb = input_ready(x, rank, s + 1, x->end_b[i + M], x->arr_b, i);
            t = tb < 0 ? -1 : zb_later(t, tb);
        }
        if (t >= 0 && x->reloaded && x->reloaded[i])
            t = x->end_l[i] < 0 ? -1 : zb_later(t, x->end_l[i]);
        break;
    case ZB_ACT_O: /* same rank, after its F and before its L (the validator's rules) */
        t = x->end_f[i];
        break;
    case ZB_ACT_L:
        t = x->end_o[i];
        break;
    case ZB_ACT_W:
    case ZB_ACT_SEND_B:
        t = x->end_b[i];
        break;
    case ZB_ACT_R: /* same rank as its F, later in the program (the validator's rule) */
    case ZB_ACT_SEND_F:
        t = x->end_f[i];
        break;
    case ZB_ACT_RECV_F:
        t = x->arr_f[i];
        break;
    case ZB_ACT_RECV_B:
        t = x->arr_b[i];
        break;
    }
    return t;
}

/* Record the output of a finished action and wake the rank that consumes it. */
static void publish(sim_ctx_t *x, const zb_action_t *a, double end)
{
    const int s = a->stage, M = x->M;
    const size_t i = (size_t)s * M + a->mb;
    switch (a->type) {
    case ZB_ACT_F:
        x->end_f[i] = end;
        if (s + 1 < x->S)
            wake(x, x->owner[s + 1]);
        break;
    case ZB_ACT_B:
    case ZB_ACT_BW:
        x->end_b[i] = end;
        if (s > 0)
            wake(x, x->owner[s - 1]);
        break;
    case ZB_ACT_SEND_F:
        x->arr_f[i + M] = end + x->c->comm[s];
        wake(x, x->owner[s + 1]);
        break;
    case ZB_ACT_SEND_B:
        x->arr_b[i - M] = end + x->c->comm[s];
        wake(x, x->owner[s - 1]);
        break;
    default:
        break;
    }
}

double zb_sim_span_idle(const zb_sim_t *sim)
{
    if (!sim || sim->ranks < 1 || !(sim->span_max > 0))
        return 0;
    double busy = 0;
    for (int r = 0; r < sim->ranks; r++)
        busy += sim->busy[r];
    double idle = 1 - busy / ((double)sim->ranks * sim->span_max);
    return idle > 0 ? idle : 0;
}

double zb_sim_type_time(const zb_sim_t *sim, const zb_schedule_t *s, int r, zb_action_type_t t,
                        int *count)
{
    int n = 0;
    double sum = 0;
    if (sim && s && r >= 0 && r < sim->ranks && r < s->ranks && sim->len[r] == s->rank[r].len)
        for (int i = 0; i < sim->len[r]; i++)
            if (s->rank[r].actions[i].type == t) {
                sum += sim->end[r][i] - sim->start[r][i];
                n++;
            }
    if (count)
        *count = n;
    return sum;
}

int zb_sim_last_ranks(const zb_sim_t *sim, double tol, unsigned char *last)
{
    double latest = -INFINITY, earliest = INFINITY;
    for (int r = 0; sim && r < sim->ranks; r++)
        for (int i = 0; i < sim->len[r]; i++) {
            latest = fmax(latest, sim->end[r][i]);
            earliest = fmin(earliest, sim->start[r][i]);
        }
    int n = 0;
    for (int r = 0; sim && r < sim->ranks; r++) {
        double end = -INFINITY;
        for (int i = 0; i < sim->len[r]; i++)
            end = fmax(end, sim->end[r][i]);
        last[r] = isfinite(latest) && end >= latest - tol * (latest - earliest);
        n += last[r];
    }
    return n;
}

void zb_sim_free(zb_sim_t *sim)
{
    if (!sim)
        return;
    if (sim->start)
        for (int r = 0; r < sim->ranks; r++)
            free(sim->start[r]);
    if (sim->end)
        for (int r = 0; r < sim->ranks; r++)
            free(sim->end[r]);
    free(sim->start);
    free(sim->end);
    free(sim->len);
    free(sim->span);
    free(sim->busy);
    free(sim->peak_mem);
    free(sim->peak_time);
    memset(sim, 0, sizeof *sim);
}

static zb_status_t alloc_result(zb_sim_t *o, const zb_schedule_t *s)
{
    const int P = s->ranks;
    o->ranks = P;
    o->schedule = s;
    o->len = calloc((size_t)P, sizeof *o->len);
    o->start = calloc((size_t)P, sizeof *o->start);
    o->end = calloc((size_t)P, sizeof *o->end);
    o->span = calloc((size_t)P, sizeof *o->span);
    o->busy = calloc((size_t)P, sizeof *o->busy);
    o->peak_mem = calloc((size_t)P, sizeof *o->peak_mem);
    o->peak_time = calloc((size_t)P, sizeof *o->peak_time);
    if (!o->len || !o->start || !o->end || !o->span || !o->busy || !o->peak_mem || !o->peak_time)
        return ZB_ENOMEM;
    for (int r = 0; r < P; r++) {
        int n = s->rank[r].len;
        o->len[r] = n;
        o->start[r] = malloc((size_t)(n ? n : 1) * sizeof(double));
        o->end[r] = malloc((size_t)(n ? n : 1) * sizeof(double));
        if (!o->start[r] || !o->end[r])
            return ZB_ENOMEM;
    }
    return ZB_OK;
}

/* Describe why `rank` cannot run its next action (for the deadlock message). */
static int describe_wait(const sim_ctx_t *x, int rank, char *buf, size_t cap)
{
    const zb_action_t *a = &x->s->rank[rank].actions[x->pos[rank]];
    return snprintf(buf, cap, "rank %d stuck at %s(stage %d, mb %d), action %d of %d", rank,
                    zb_action_type_name(a->type), a->stage, a->mb, x->pos[rank],
                    x->s->rank[rank].len);
}

static void add_event(sim_ctx_t *x, int rank, double t, double delta, int order)
{
    x->events[(size_t)rank * (size_t)x->max_len + (size_t)x->n_events[rank]++] =
        (struct mem_event){t, delta, order};
}

/* Issue copy `a` (action i of `rank`), `ready` being when its input exists: it starts when the
 * rank reaches it, its channel is free and the input exists. */
static void run_copy(sim_ctx_t *x, int rank, int i, const zb_action_t *a, double ready,
                     zb_sim_t *o)
{
    const size_t k = (size_t)a->stage * x->M + a->mb;
    double *chan = a->type == ZB_ACT_O ? &x->d2h_free[rank] : &x->h2d_free[rank];
    double t0 = zb_later(zb_later(ready, x->free_t[rank]), *chan);
    double t1 = t0 + zb_sched_copy_time(x->c, a->type, a->stage);
    o->start[rank][i] = t0;
    o->end[rank][i] = t1;
    *chan = t1;
    if (a->type == ZB_ACT_O) {
        x->end_o[k] = t1;
        add_event(x, rank, t1, -x->c->m_f[a->stage], -1);
    } else {
        x->end_l[k] = t1;
        add_event(x, rank, t0, x->c->m_f[a->stage], i);
    }
}

static int event_cmp(const void *pa, const void *pb)
{
    const struct mem_event *a = pa, *b = pb;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* Peak of each rank's memory timeline (the running sum starts at 0, reached at the first
 * change's time). */
static void memory_peaks(sim_ctx_t *x, zb_sim_t *o)
{
    for (int r = 0; r < x->s->ranks; r++) {
        struct mem_event *ev = &x->events[(size_t)r * (size_t)x->max_len];
        /* a rank's actions start in program order, so only copies (an O frees memory when it
         * ends, a few actions later) put the events out of order, and not far: a stable
         * insertion sort costs about one step per event (qsort's merge sort was a fifth of
         * the offload planner's time) */
        for (int i = 1; i < x->n_events[r]; i++) {
            struct mem_event e = ev[i];
            int j = i;
            for (; j > 0 && event_cmp(&ev[j - 1], &e) > 0; j--)
                ev[j] = ev[j - 1];
            ev[j] = e;
        }
        double mem = 0;
        o->peak_time[r] = x->n_events[r] ? ev[0].t : NAN;
        for (int i = 0; i < x->n_events[r]; i++) {
            mem += ev[i].delta;
            if (mem > o->peak_mem[r]) {
                o->peak_mem[r] = mem;
                o->peak_time[r] = ev[i].t;
            }
        }
    }
}

static void run_shared(sim_ctx_t *x, zb_sim_t *o);

/* Fixed costs: each rank runs until it blocks and is woken when its input is published. */
static void run_fixed(sim_ctx_t *x, zb_sim_t *o)
{
    const zb_schedule_t *s = x->s;
    const int P = s->ranks;
    for (int r = 0; r < P; r++)
        wake(x, r);
    while (x->qlen > 0) {
        int r = x->queue[x->qhead];
        x->qhead = (x->qhead + 1) % P;
        x->qlen--;
        x->queued[r] = false;
        const zb_rank_program_t *prog = &s->rank[r];
        while (x->pos[r] < prog->len) {
            const zb_action_t *a = &prog->actions[x->pos[r]];
            double ready = ready_time(x, r, a);
            if (ready < 0)
                break; /* woken again when the input is produced */
            if (zb_sched_is_copy(a->type)) {
                run_copy(x, r, x->pos[r]++, a, ready, o);
                continue;
            }
            double t0 = zb_later(ready, x->free_t[r]);
            double t1 = t0 + zb_sched_duration(x->c, a->type, a->stage);
            o->start[r][x->pos[r]] = t0;
            o->end[r][x->pos[r]] = t1;
            if (zb_sched_is_compute(a->type))
                o->busy[r] += t1 - t0;
            add_event(x, r, t0, zb_sched_mem_delta(x->c, a->type, a->flags, a->stage),
                      x->pos[r]);
            x->free_t[r] = t1;
            x->pos[r]++;
            publish(x, a, t1);
        }
    }
}

static zb_status_t run(sim_ctx_t *x, zb_sim_t *o, zb_err_t *err)
{
    const zb_schedule_t *s = x->s;
    const int P = s->ranks;
    if (x->left)
        run_shared(x, o);
    else
        run_fixed(x, o);
    memory_peaks(x, o);
    /* Any rank left with work is blocked forever; name up to three of them. */
    char msg[400] = "";
    size_t n = 0;
    int stuck = 0;
    for (int r = 0; r < P; r++) {
        if (x->pos[r] >= s->rank[r].len)
            continue;
        if (stuck++ < 3 && n < sizeof msg) {
            if (stuck > 1)
                n += (size_t)snprintf(msg + n, sizeof msg - n, "; ");
            if (n < sizeof msg)
                n += (size_t)describe_wait(x, r, msg + n, sizeof msg - n);
        }
    }
    if (stuck)
        return zb_err_set(err, ZB_EDEADLOCK, "simulate: deadlock, %d rank(s) cannot finish: %s",
                          stuck, msg);
    return ZB_OK;
}

/* ---- ranks sharing one device ---- */

/* A fused BW's cost over its B's and W's (costs->share.bw; 0 = 1): both parts scale by it. */
static double bw_scale(const sim_ctx_t *x)
{
    return x->c->share.bw > 0 ? x->c->share.bw : 1.0;
}

/* The part of rank r's running action that runs at one rate, and its phase (0: F and R, 1: B,
 * 2: W): a fused BW is its B part (while more than its W's cost is left), then its W part. */
static double running_part(const sim_ctx_t *x, int r, int *phase)
{
    const zb_action_t *a = &x->s->rank[r].actions[x->pos[r]];
    const double left = x->left[r];
    switch (a->type) {
    case ZB_ACT_B: *phase = 1; return left;
    case ZB_ACT_W: *phase = 2; return left;
    case ZB_ACT_BW: {
        const double tw = x->c->t_w[a->stage] * bw_scale(x);
        *phase = left > tw ? 1 : 2;
        return left > tw ? left - tw : left;
    }
    default: *phase = 0; return left; /* F, R */
    }
}

/* Duration factor of rank r's running part (phase[r]) beside the other busy ranks (costs->share):
 * f[phase][others], times the mean of the mix over the others' phases when the share has one. */
static double share_factor(const sim_ctx_t *x, int r, const int *phase, int busy)
{
    const zb_share_t *sh = &x->c->share;
    const int p = phase[r];
    double f = sh->f[p][busy - 1];
    if (busy > 1 && zb_share_has_mix(sh)) {
        double sum = 0;
        for (int j = 0; j < x->s->ranks; j++)
            if (j != r && x->left[j] >= 0)
                sum += sh->mix[p][phase[j]];
        f *= sum / (busy - 1);
    }
    return f;
}

/* ---- the host link the ranks' copies share (share.link) ---- */

static int link_channel(int rank, const zb_action_t *a) { return 2 * rank + (a->type == ZB_ACT_L); }

/* Copy i of `rank` joins its channel's queue; it starts once the copies before it ended and its
 * input exists (link_start). */
static void link_issue(sim_ctx_t *x, int rank, int i, const zb_action_t *a)
{
    const int q = link_channel(rank, a);
    x->cq[(size_t)q * x->max_len + (size_t)((x->cq_head[q] + x->cq_len[q]) % x->max_len)] = i;
    x->cq_len[q]++;
}

static int link_first(const sim_ctx_t *x, int q)
{
    return x->cq[(size_t)q * x->max_len + (size_t)x->cq_head[q]];
}

/* Start the first copy of every idle channel whose input exists at `now` (O: its F ended; L: its
 * O ended). An L takes its memory back when it starts. */
static void link_start(sim_ctx_t *x, double now, zb_sim_t *o)
{
    for (int q = 0; q < 2 * x->s->ranks; q++) {
        if (x->cq_len[q] == 0 || x->cleft[q] >= 0)
            continue;
        const int r = q / 2, i = link_first(x, q);
        const zb_action_t *a = &x->s->rank[r].actions[i];
        const size_t k = (size_t)a->stage * x->M + a->mb;
        const double in = a->type == ZB_ACT_O ? x->end_f[k] : x->end_o[k];
        if (in < 0 || in > now)
            continue;
        o->start[r][i] = now;
        x->cleft[q] = zb_sched_copy_time(x->c, a->type, a->stage);
        if (a->type == ZB_ACT_L)
            add_event(x, r, now, x->c->m_f[a->stage], i);
    }
}

/* Duration factor of each copy in direction d (0: O, 1: L) while active[e] copies are in
 * flight in direction e: each runs at its own bandwidth, or its share of its direction's link
 * where that is less, and both directions' rates scaled down together where they add up to
 * more than the link carries both ways. */
static double link_factor(const sim_ctx_t *x, int d, const int active[2])
{
    const zb_share_t *sh = &x->c->share;
    double own[2] = {x->c->bw_d2h, x->c->bw_h2d}, rate[2];
    if (!(own[d] > 0))
        return 1; /* no bandwidth: a copy takes its F's time, whatever else runs */
    for (int e = 0; e < 2; e++) {
        rate[e] = own[e] > 0 ? own[e] : 0;
        if (sh->link[e] > 0 && active[e] > 0 && sh->link[e] / active[e] < rate[e])
            rate[e] = sh->link[e] / active[e];
    }
    const double total = active[0] * rate[0] + active[1] * rate[1];
    if (sh->link_both > 0 && active[0] > 0 && active[1] > 0 && total > sh->link_both)
        rate[d] *= sh->link_both / total;
    return own[d] / rate[d];
}

/* A compute action's factor of phase p while copies are in flight (share.copy_slow). */
static double copy_slow(const sim_ctx_t *x, int p)
{
    const double f = x->c->share.copy_slow[p];
    return f > 0 ? f : 1;
}

static void link_count(const sim_ctx_t *x, int active[2])
{
    active[0] = active[1] = 0;
    for (int q = 0; x->cq && q < 2 * x->s->ranks; q++)
        active[q % 2] += x->cleft[q] >= 0;
}

/* The earliest end of a copy in flight, from `now`. */
static double link_next(const sim_ctx_t *x, double now, const int active[2])
{
    double next = INFINITY;
    for (int q = 0; x->cq && q < 2 * x->s->ranks; q++)
        if (x->cleft[q] >= 0)
            next = fmin(next, now + x->cleft[q] * link_factor(x, q % 2, active));
    return next;
}

/* Run the copies in flight from `now` to `next`: those that end by then end (an O gives its
 * memory back), the others go on. */
static void link_advance(sim_ctx_t *x, double now, double next, const int active[2],
                         zb_sim_t *o)
{
    for (int q = 0; x->cq && q < 2 * x->s->ranks; q++) {
        if (x->cleft[q] < 0)
            continue;
        const double f = link_factor(x, q % 2, active);
        if (now + x->cleft[q] * f > next * (1 + 1e-12) + 1e-300) {
            x->cleft[q] -= (next - now) / f;
            continue;
        }
        const int r = q / 2, i = link_first(x, q);
        const zb_action_t *a = &x->s->rank[r].actions[i];
        const size_t k = (size_t)a->stage * x->M + a->mb;
        o->end[r][i] = next;
        if (a->type == ZB_ACT_O) {
            x->end_o[k] = next;
            add_event(x, r, next, -x->c->m_f[a->stage], -1);
        } else {
            x->end_l[k] = next;
        }
        x->cq_head[q] = (x->cq_head[q] + 1) % x->max_len;
        x->cq_len[q]--;
        x->cleft[q] = -1;
    }
}

/* Let rank r (computing nothing) go as far as it can at time `now`: copies and zero-time
 * actions run, a compute action starts (x->left[r] set). Returns when it next needs the clock:
 * the time a future input arrives, INFINITY when it waits for another rank or is done or busy.
 * *moved is set when it did anything. */
static double shared_advance(sim_ctx_t *x, int r, double now, zb_sim_t *o, bool *moved)
{
    const zb_rank_program_t *prog = &x->s->rank[r];
    while (x->pos[r] < prog->len) {
        const int i = x->pos[r];
        const zb_action_t *a = &prog->actions[i];
        if (x->cq && zb_sched_is_copy(a->type)) { /* issued now; it starts on its channel */
            link_issue(x, r, x->pos[r]++, a);
            *moved = true;
            continue;
        }
        double ready = ready_time(x, r, a);
        if (ready < 0)
            return INFINITY; /* another rank's action publishes it, at an event */
        if (zb_sched_is_copy(a->type)) { /* issued; it waits for its input on its channel */
            *moved = true;
            run_copy(x, r, x->pos[r]++, a, ready, o);
            continue;
        }
        if (ready > now)
            return ready;
        *moved = true;
        double d = zb_sched_duration(x->c, a->type, a->stage);
        bool timed = zb_sched_is_compute(a->type) && d > 0;
        /* a timed action starts now: its inputs and the rank were there by this event (an
         * earlier one would have started it); a zero-time one when they were */
        double t0 = timed ? now : zb_later(ready, x->free_t[r]);
        o->start[r][i] = t0;
        add_event(x, r, t0, zb_sched_mem_delta(x->c, a->type, a->flags, a->stage), i);
        if (timed) {
            x->left[r] = a->type == ZB_ACT_BW ? d * bw_scale(x) : d;
            return INFINITY;
        }
        o->end[r][i] = t0 + d;
        x->free_t[r] = t0 + d;
        x->pos[r]++;
        publish(x, a, t0 + d);
    }
    return INFINITY;
}

static void run_shared(sim_ctx_t *x, zb_sim_t *o)
{
    const zb_schedule_t *s = x->s;
    const int P = s->ranks;
    double now = 0;
    for (int r = 0; r < P; r++)
        x->left[r] = -1;
    for (;;) {
        double wake_at = INFINITY;
        bool moved = true;
        while (moved) { /* a zero-time action may let another rank go at the same time */
            moved = false;
            wake_at = INFINITY;
            for (int r = 0; r < P; r++)
                if (x->left[r] < 0)
                    wake_at = fmin(wake_at, shared_advance(x, r, now, o, &moved));
        }
        if (x->cq)
            link_start(x, now, o);
        int busy = 0, copying[2];
        for (int r = 0; r < P; r++)
            busy += x->left[r] >= 0;
        link_count(x, copying);
        if (busy == 0 && copying[0] + copying[1] == 0 && !isfinite(wake_at))
            return; /* done, or stuck: the caller names who */
        double next = fmin(wake_at, link_next(x, now, copying));
        double factor[ZB_SHARE_MAX], part[ZB_SHARE_MAX];
        int phase[ZB_SHARE_MAX];
        for (int r = 0; r < P; r++)
            if (x->left[r] >= 0)
                part[r] = running_part(x, r, &phase[r]);
        for (int r = 0; r < P; r++)
            if (x->left[r] >= 0) {
                factor[r] = share_factor(x, r, phase, busy);
                if (copying[0] + copying[1] > 0)
                    factor[r] *= copy_slow(x, phase[r]);
                next = fmin(next, now + part[r] * factor[r]);
            }
        for (int r = 0; r < P; r++) {
            if (x->left[r] < 0)
                continue;
            double end = now + part[r] * factor[r];
            if (end > next * (1 + 1e-12) + 1e-300) {
                x->left[r] -= (next - now) / factor[r];
                continue;
            }
            const int i = x->pos[r];
            const zb_action_t *a = &s->rank[r].actions[i];
            if (part[r] < x->left[r]) { /* a BW's B part ends: its W part runs on */
                x->left[r] = x->c->t_w[a->stage] * bw_scale(x);
                continue;
            }
            o->end[r][i] = next;
            o->busy[r] += next - o->start[r][i];
            x->free_t[r] = next;
            x->left[r] = -1;
            x->pos[r]++;
            publish(x, a, next);
        }
        link_advance(x, now, next, copying, o);
        now = next;
    }
}

static void summarize(const zb_schedule_t *s, zb_sim_t *o)
{
    double first = INFINITY, last = -INFINITY;
    for (int r = 0; r < s->ranks; r++) {
        const zb_rank_program_t *p = &s->rank[r];
        if (isnan(o->peak_time[r]))
            o->peak_time[r] = 0;
        if (p->len == 0)
            continue;
        double first_f = NAN;
        for (int i = 0; i < p->len && isnan(first_f); i++)
            if (p->actions[i].type == ZB_ACT_F)
                first_f = o->start[r][i];
        if (isnan(first_f))
            first_f = o->start[r][0];
        double rank_end = -INFINITY; /* a copy may end after the rank's last action */
        for (int i = 0; i < p->len; i++)
            rank_end = zb_later(rank_end, o->end[r][i]);
        o->span[r] = rank_end - first_f;
        first = fmin(first, o->start[r][0]);
        last = fmax(last, rank_end);
        o->span_max = fmax(o->span_max, o->span[r]);
        o->busy_max = fmax(o->busy_max, o->busy[r]);
    }
    o->makespan = last > first ? last - first : 0;
    o->bubble_rate = o->span_max > 0 ? (o->span_max - o->busy_max) / o->span_max : 0;
}

zb_status_t zb_simulate(const zb_schedule_t *s, const zb_costs_t *costs, zb_sim_t *out,
                        zb_err_t *err)
{
    if (!out)
        return zb_err_set(err, ZB_EINVAL, "simulate: NULL output");
    memset(out, 0, sizeof *out);
    if (!s || !costs)
        return zb_err_set(err, ZB_EINVAL, "simulate: NULL %s", s ? "cost model" : "schedule");
    zb_status_t st = zb_costs_check(costs, err);
    if (st != ZB_OK)
        return st;
    if (costs->stages != s->stages)
        return zb_err_set(err, ZB_EINVAL, "simulate: cost model has %d stages, schedule has %d",
                          costs->stages, s->stages);
    st = zb_sched_check_actions(s, "simulate", err);
    if (st != ZB_OK)
        return st;
    if (costs->share.n > 0 && costs->share.n != s->ranks)
        return zb_err_set(err, ZB_EINVAL,
                          "simulate: the cost model's device is shared by %d ranks, the schedule "
                          "has %d",
                          costs->share.n, s->ranks);

    sim_ctx_t x = {.s = s, .c = costs, .S = s->stages, .M = s->microbatches,
                   .lowered = zb_schedule_has_comms(s)};
    const size_t n = (size_t)x.S * x.M;
    const int P = s->ranks;
    x.end_f = malloc(n * sizeof(double));
    x.end_b = malloc(n * sizeof(double));
    if (x.lowered) { /* arrival times: only a lowered schedule has RECV's to time */
        x.arr_f = malloc(n * sizeof(double));
        x.arr_b = malloc(n * sizeof(double));
    }
    x.pos = calloc((size_t)P, sizeof *x.pos);
    x.free_t = calloc((size_t)P, sizeof *x.free_t);
    x.queue = calloc((size_t)P, sizeof *x.queue);
    x.queued = calloc((size_t)P, sizeof *x.queued);
    x.owner = malloc((size_t)x.S * sizeof *x.owner);
    for (int r = 0; r < P; r++)
        x.max_len = s->rank[r].len > x.max_len ? s->rank[r].len : x.max_len;
    x.events = malloc((size_t)P * (size_t)(x.max_len ? x.max_len : 1) * sizeof *x.events);
    x.n_events = calloc((size_t)P, sizeof *x.n_events);
    const bool shared = costs->share.n > 0;
    if (shared)
        x.left = malloc((size_t)P * sizeof *x.left);
    const bool copies = zb_schedule_has_offload(s);
    const bool link = shared && copies && (costs->share.link[0] > 0 || costs->share.link[1] > 0);
    if (link) {
        x.cq = malloc((size_t)2 * P * (size_t)(x.max_len ? x.max_len : 1) * sizeof *x.cq);
        x.cq_head = calloc((size_t)2 * P, sizeof *x.cq_head);
        x.cq_len = calloc((size_t)2 * P, sizeof *x.cq_len);
        x.cleft = malloc((size_t)2 * P * sizeof *x.cleft);
        for (int q = 0; x.cleft && q < 2 * P; q++)
            x.cleft[q] = -1;
    }
    if (copies) {
        x.end_o = malloc(n * sizeof(double));
        x.end_l = malloc(n * sizeof(double));
        x.reloaded = calloc(n, sizeof *x.reloaded);
        x.d2h_free = calloc((size_t)P, sizeof *x.d2h_free);
        x.h2d_free = calloc((size_t)P, sizeof *x.h2d_free);
    }
    if (!x.end_f || !x.end_b || (x.lowered && (!x.arr_f || !x.arr_b)) || !x.pos || !x.free_t ||
        !x.queue || !x.queued || !x.owner || !x.events || !x.n_events || (shared && !x.left) ||
        (copies && (!x.end_o || !x.end_l || !x.reloaded || !x.d2h_free || !x.h2d_free)) ||
        (link && (!x.cq || !x.cq_head || !x.cq_len || !x.cleft)) ||
        alloc_result(out, s) != ZB_OK) {
        st = zb_err_set(err, ZB_ENOMEM, "simulate: out of memory");
        goto done;
    }
    for (int i = 0; i < x.S; i++)
        x.owner[i] = zb_stage_rank(s, i);
    for (size_t i = 0; i < n; i++)
        x.end_f[i] = x.end_b[i] = -1;
    for (size_t i = 0; x.lowered && i < n; i++)
        x.arr_f[i] = x.arr_b[i] = -1;
    for (size_t i = 0; copies && i < n; i++)
        x.end_o[i] = x.end_l[i] = -1;
    for (int r = 0; copies && r < P; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            if (a->type == ZB_ACT_L)
                x.reloaded[(size_t)a->stage * x.M + a->mb] = true;
        }
    st = run(&x, out, err);
    if (st == ZB_OK)
        summarize(s, out);
done:
    free(x.end_f);
    free(x.end_b);
    free(x.arr_f);
    free(x.arr_b);
    free(x.pos);
    free(x.free_t);
    free(x.queue);
    free(x.queued);
    free(x.owner);
    free(x.events);
    free(x.n_events);
    free(x.end_o);
    free(x.end_l);
    free(x.reloaded);
    free(x.d2h_free);
    free(x.h2d_free);
    free(x.left);
    free(x.cq);
    free(x.cq_head);
    free(x.cq_len);
    free(x.cleft);
    if (st != ZB_OK)
        zb_sim_free(out);
    return st;
}
