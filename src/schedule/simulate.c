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
 * applied when an action starts. */
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
    int *pos;       /* [ranks] next action index */
    double *free_t; /* [ranks] time the rank becomes free */
    int *queue;     /* ring of ranks to advance */
    bool *queued;
    int qhead, qlen;
} sim_ctx_t;

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
            t = tb < 0 ? -1 : fmax(t, tb);
        }
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

static zb_status_t run(sim_ctx_t *x, zb_sim_t *o, zb_err_t *err)
{
    const zb_schedule_t *s = x->s;
    const int P = s->ranks;
    double *mem = calloc((size_t)P, sizeof *mem);
    if (!mem)
        return zb_err_set(err, ZB_ENOMEM, "simulate: out of memory");
    for (int r = 0; r < P; r++) {
        wake(x, r);
        o->peak_time[r] = NAN; /* set below */
    }
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
            double t0 = fmax(ready, x->free_t[r]);
            double t1 = t0 + zb_sched_duration(x->c, a->type, a->stage);
            o->start[r][x->pos[r]] = t0;
            o->end[r][x->pos[r]] = t1;
            if (zb_action_is_compute(a->type))
                o->busy[r] += t1 - t0;
            if (isnan(o->peak_time[r]))
                o->peak_time[r] = t0; /* running sum starts at 0 */
            mem[r] += zb_sched_mem_delta(x->c, a->type, a->flags, a->stage);
            if (mem[r] > o->peak_mem[r]) {
                o->peak_mem[r] = mem[r];
                o->peak_time[r] = t0;
            }
            x->free_t[r] = t1;
            x->pos[r]++;
            publish(x, a, t1);
        }
    }
    free(mem);
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
        double rank_end = o->end[r][p->len - 1];
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
    if (!x.end_f || !x.end_b || (x.lowered && (!x.arr_f || !x.arr_b)) || !x.pos || !x.free_t ||
        !x.queue || !x.queued || !x.owner || alloc_result(out, s) != ZB_OK) {
        st = zb_err_set(err, ZB_ENOMEM, "simulate: out of memory");
        goto done;
    }
    for (int i = 0; i < x.S; i++)
        x.owner[i] = zb_stage_rank(s, i);
    for (size_t i = 0; i < n; i++)
        x.end_f[i] = x.end_b[i] = -1;
    for (size_t i = 0; x.lowered && i < n; i++)
        x.arr_f[i] = x.arr_b[i] = -1;
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
    if (st != ZB_OK)
        zb_sim_free(out);
    return st;
}
