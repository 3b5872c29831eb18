/* zbpp — a stage's message buffers sized by the microbatches in flight, not by M.
 *
 * Each buffer of a stage (activations in x_in, output gradient dx_out, and the stage's own
 * x_out / dx_in when the neighbour stage is on another rank) holds a microbatch from the action
 * that writes it to the last action that reads it, in the rank's program order:
 *   x_in   RECV_F(s,m), or F(s-1,m) on this rank   ->  the last F or R of (s,m)
 *   dx_out RECV_B(s,m), or B/BW(s+1,m) on this rank ->  B/BW(s,m)
 *   x_out  F(s,m)                                   ->  SEND_F(s,m)
 *   dx_in  B/BW(s,m)                                ->  SEND_B(s,m)
 * (a send may reuse its buffer as soon as it returns, a receive writes at its action: the
 * transport contract). Walking the program once gives every microbatch a slot, the lowest one
 * free when its interval starts, freed after its last reader: the buffer holds as many slots as
 * intervals ever overlap. With the comm pass's placement (RECV just before its reader, SEND
 * just after its writer) that is one slot; x_in and a same-rank dx_out keep one per microbatch
 * (one_per_microbatch). The forward-only validation program is the training program's F,
 * SEND_F and RECV_F in the same order, so its intervals lie inside the training ones and the
 * same slots serve it. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/msg_buffers.h"

static bool is_b(const zb_action_t *a)
{
    return a->type == ZB_ACT_B || a->type == ZB_ACT_BW;
}

/* Does action a write the buffer (kind of stage s)? */
static bool starts(const zb_action_t *a, int s, pl_buf_kind_t kind, bool neighbour_here)
{
    switch (kind) {
    case PL_BUF_X_IN:
        return neighbour_here ? a->type == ZB_ACT_F && a->stage == s - 1
                              : a->type == ZB_ACT_RECV_F && a->stage == s;
    case PL_BUF_DX_OUT:
        return neighbour_here ? is_b(a) && a->stage == s + 1
                              : a->type == ZB_ACT_RECV_B && a->stage == s;
    case PL_BUF_X_OUT: return a->type == ZB_ACT_F && a->stage == s;
    case PL_BUF_DX_IN: return is_b(a) && a->stage == s;
    }
    return false;
}

/* Does action a read it? */
static bool reads(const zb_action_t *a, int s, pl_buf_kind_t kind)
{
    if (a->stage != s)
        return false;
    switch (kind) {
    case PL_BUF_X_IN: return a->type == ZB_ACT_F || a->type == ZB_ACT_R;
    case PL_BUF_DX_OUT: return is_b(a);
    case PL_BUF_X_OUT: return a->type == ZB_ACT_SEND_F;
    case PL_BUF_DX_IN: return a->type == ZB_ACT_SEND_B;
    }
    return false;
}

/* x_in keeps a slot per microbatch: it also holds a non-saving F's input until its R, which the
 * planner counts with the messages, not the activations (so its size does not depend on the
 * schedule); so does a gradient handed over by a stage on the same rank (V placement). */
static bool one_per_microbatch(pl_buf_kind_t kind, bool neighbour_here)
{
    return kind == PL_BUF_X_IN || (kind == PL_BUF_DX_OUT && neighbour_here);
}

/* Walk the program: each interval takes a free slot, the lowest (spread false) or the one freed
 * longest ago among the first `have` (spread true); the slots ever in use at once. */
static int walk(const zb_rank_program_t *prog, int stage, pl_buf_kind_t kind, bool neighbour_here,
                int M, bool spread, int have, int *slot)
{
    int *last = malloc((size_t)M * sizeof *last);
    int *mine = slot ? slot : malloc((size_t)M * sizeof *mine);
    int *freed = malloc(((size_t)M + 1) * sizeof *freed); /* when, -1 - k before any use */
    bool *busy = calloc((size_t)M + 1, sizeof *busy);
    int n = 0;
    if (!last || !mine || !busy || !freed) {
        n = -1;
        goto out;
    }
    for (int k = 0; k <= M; k++)
        freed[k] = -1 - (M + 1) + k; /* never used: slot 0 first */
    for (int m = 0; m < M; m++)
        last[m] = -1, mine[m] = -1;
    for (int i = 0; i < prog->len; i++) {
        const zb_action_t *a = &prog->actions[i];
        if (a->mb >= 0 && a->mb < M && reads(a, stage, kind))
            last[a->mb] = i;
    }
    for (int i = 0; i < prog->len; i++) {
        const zb_action_t *a = &prog->actions[i];
        int m = a->mb;
        if (m < 0 || m >= M)
            continue;
        if (starts(a, stage, kind, neighbour_here) && mine[m] < 0 && last[m] > i) {
            int k = 0;
            while (busy[k])
                k++;
            for (int j = k + 1; spread && j < have; j++)
                if (!busy[j] && freed[j] < freed[k])
                    k = j;
            busy[k] = true;
            mine[m] = k;
            if (k + 1 > n)
                n = k + 1;
        }
        if (i == last[m] && mine[m] >= 0) {
            busy[mine[m]] = false; /* the slot stays the microbatch's for lookups */
            freed[mine[m]] = i;
        }
    }
out:
    free(last);
    free(busy);
    free(freed);
    if (mine != slot)
        free(mine);
    return n;
}

int pl_msgbuf_plan(const zb_rank_program_t *prog, int stage, pl_buf_kind_t kind,
                   bool neighbour_here, int M, int *slot)
{
    if (one_per_microbatch(kind, neighbour_here)) {
        for (int m = 0; slot && m < M; m++)
            slot[m] = m;
        return M;
    }
    return walk(prog, stage, kind, neighbour_here, M, false, 0, slot);
}

int pl_msgbuf_plan_spread(const zb_rank_program_t *prog, int stage, pl_buf_kind_t kind,
                          bool neighbour_here, int M, int least, int *slot)
{
    int n = walk(prog, stage, kind, neighbour_here, M, false, 0, slot);
    int have = least < M ? least : M;
    if (n < 0 || n >= have) /* the program already needs as many: the lowest free slot serves */
        return n;
    return walk(prog, stage, kind, neighbour_here, M, true, have, slot) < 0 ? -1 : have;
}

zb_status_t pl_msgbuf_init(pl_msgbuf_t *b, const zb_rank_program_t *prog, int stage,
                           pl_buf_kind_t kind, bool neighbour_here, int M, size_t NC)
{
    memset(b, 0, sizeof *b);
    if (!(b->slot = malloc((size_t)M * sizeof *b->slot)))
        return ZB_ENOMEM;
    b->n = pl_msgbuf_plan(prog, stage, kind, neighbour_here, M, b->slot);
    if (b->n < 0)
        return ZB_ENOMEM;
    if (b->n > 0 && !(b->mem = malloc((size_t)b->n * NC * sizeof(float))))
        return ZB_ENOMEM;
    b->held = true;
    b->M = M;
    return ZB_OK;
}

void pl_msgbuf_free(pl_msgbuf_t *b)
{
    free(b->mem);
    free(b->slot);
    memset(b, 0, sizeof *b);
}

float *pl_msgbuf_at(const pl_msgbuf_t *b, int mb, size_t NC)
{
    if (!b || !b->held || !b->mem || mb < 0 || mb >= b->M || b->slot[mb] < 0)
        return NULL;
    return b->mem + (size_t)b->slot[mb] * NC;
}
