/* The schedule IR: allocation, copying, comparison and small queries. */
#include "zbpp/schedule.h"

#include <stdlib.h>
#include <string.h>

zb_schedule_t *zb_schedule_new(const char *name, int ranks, int chunks, zb_placement_t placement,
                               int microbatches)
{
    if (ranks < 1 || chunks < 1 || microbatches < 1)
        return NULL;
    if (placement != ZB_PLACE_LOOP && placement != ZB_PLACE_V)
        return NULL;
    if (placement == ZB_PLACE_V && chunks != 2)
        return NULL;
    /* Keep S = v·P and per-rank action counts comfortably inside int. */
    if ((long long)ranks * chunks > (1LL << 24) || microbatches > (1 << 24))
        return NULL;
    zb_schedule_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->rank = calloc((size_t)ranks, sizeof *s->rank);
    if (!s->rank) {
        free(s);
        return NULL;
    }
    if (name) {
        strncpy(s->name, name, sizeof s->name - 1);
        s->name[sizeof s->name - 1] = '\0';
    }
    s->ranks = ranks;
    s->chunks = chunks;
    s->stages = ranks * chunks;
    s->microbatches = microbatches;
    s->placement = placement;
    return s;
}

void zb_schedule_free(zb_schedule_t *s)
{
    if (!s)
        return;
    if (s->rank)
        for (int r = 0; r < s->ranks; r++)
            free(s->rank[r].actions);
    free(s->rank);
    free(s);
}

zb_schedule_t *zb_schedule_clone(const zb_schedule_t *s)
{
    if (!s)
        return NULL;
    zb_schedule_t *c = zb_schedule_new(s->name, s->ranks, s->chunks, s->placement,
                                       s->microbatches);
    if (!c)
        return NULL;
    for (int r = 0; r < s->ranks; r++) {
        const zb_rank_program_t *src = &s->rank[r];
        if (src->len == 0)
            continue;
        c->rank[r].actions = malloc((size_t)src->len * sizeof *src->actions);
        if (!c->rank[r].actions) {
            zb_schedule_free(c);
            return NULL;
        }
        memcpy(c->rank[r].actions, src->actions, (size_t)src->len * sizeof *src->actions);
        c->rank[r].len = c->rank[r].cap = src->len;
    }
    return c;
}

zb_status_t zb_schedule_push(zb_schedule_t *s, int rank, zb_action_t a)
{
    if (!s || rank < 0 || rank >= s->ranks)
        return ZB_EINVAL;
    zb_rank_program_t *p = &s->rank[rank];
    if (p->len == p->cap) {
        if (p->cap > (1 << 29))
            return ZB_ENOMEM;
        int cap = p->cap ? p->cap * 2 : 16;
        zb_action_t *na = realloc(p->actions, (size_t)cap * sizeof *na);
        if (!na)
            return ZB_ENOMEM;
        p->actions = na;
        p->cap = cap;
    }
    p->actions[p->len++] = a;
    return ZB_OK;
}

zb_status_t zb_schedule_reserve(zb_schedule_t *s, int n)
{
    if (!s || n < 0)
        return ZB_EINVAL;
    for (int r = 0; r < s->ranks; r++) {
        zb_rank_program_t *p = &s->rank[r];
        if (p->cap >= n)
            continue;
        zb_action_t *na = realloc(p->actions, (size_t)n * sizeof *na);
        if (!na)
            return ZB_ENOMEM;
        p->actions = na;
        p->cap = n;
    }
    return ZB_OK;
}

bool zb_schedule_equal(const zb_schedule_t *a, const zb_schedule_t *b)
{
    if (!a || !b)
        return a == b;
    if (a->ranks != b->ranks || a->chunks != b->chunks || a->placement != b->placement ||
        a->microbatches != b->microbatches || a->stages != b->stages)
        return false;
    for (int r = 0; r < a->ranks; r++) {
        const zb_rank_program_t *pa = &a->rank[r], *pb = &b->rank[r];
        if (pa->len != pb->len)
            return false;
        /* Compare field by field: struct padding bytes are not guaranteed equal. */
        for (int i = 0; i < pa->len; i++) {
            const zb_action_t *x = &pa->actions[i], *y = &pb->actions[i];
            if (x->type != y->type || x->stage != y->stage || x->mb != y->mb ||
                x->flags != y->flags)
                return false;
        }
    }
    return true;
}

int zb_stage_rank_of(int ranks, int chunks, zb_placement_t placement, int stage)
{
    if (ranks < 1 || stage < 0 || stage >= ranks * chunks)
        return -1;
    if (placement == ZB_PLACE_V)
        return stage < ranks ? stage : 2 * ranks - 1 - stage;
    return stage % ranks;
}

int zb_stage_rank(const zb_schedule_t *s, int stage)
{
    return zb_stage_rank_of(s->ranks, s->chunks, s->placement, stage);
}

bool zb_schedule_is_split(const zb_schedule_t *s)
{
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            int t = s->rank[r].actions[i].type;
            if (t == ZB_ACT_B || t == ZB_ACT_W)
                return true;
        }
    return false;
}

bool zb_schedule_has_comms(const zb_schedule_t *s)
{
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++)
            if (zb_action_is_comm(s->rank[r].actions[i].type))
                return true;
    return false;
}

const char *zb_action_type_name(zb_action_type_t t)
{
    static const char *const names[ZB_ACT_COUNT] = {
        [ZB_ACT_F] = "F",           [ZB_ACT_B] = "B",           [ZB_ACT_W] = "W",
        [ZB_ACT_BW] = "BW",         [ZB_ACT_SEND_F] = "SEND_F", [ZB_ACT_RECV_F] = "RECV_F",
        [ZB_ACT_SEND_B] = "SEND_B", [ZB_ACT_RECV_B] = "RECV_B", [ZB_ACT_R] = "R",
        [ZB_ACT_O] = "O",           [ZB_ACT_L] = "L",
    };
    if ((int)t < 0 || t >= ZB_ACT_COUNT)
        return "?";
    return names[t];
}

bool zb_action_is_compute(zb_action_type_t t)
{
    return t == ZB_ACT_F || t == ZB_ACT_B || t == ZB_ACT_W || t == ZB_ACT_BW || t == ZB_ACT_R;
}

bool zb_action_is_comm(zb_action_type_t t)
{
    return t == ZB_ACT_SEND_F || t == ZB_ACT_RECV_F || t == ZB_ACT_SEND_B || t == ZB_ACT_RECV_B;
}

bool zb_action_is_copy(zb_action_type_t t) { return t == ZB_ACT_O || t == ZB_ACT_L; }

bool zb_schedule_has_offload(const zb_schedule_t *s)
{
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++)
            if (zb_action_is_copy(s->rank[r].actions[i].type))
                return true;
    return false;
}

bool zb_schedule_has_recompute(const zb_schedule_t *s)
{
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++)
            if (s->rank[r].actions[i].type == ZB_ACT_R)
                return true;
    return false;
}

zb_status_t zb_schedule_mark_recompute(zb_schedule_t *s, zb_err_t *err)
{
    size_t n = (size_t)s->stages * (size_t)s->microbatches;
    unsigned char *has_r = calloc(n ? n : 1, 1);
    if (!has_r)
        return zb_err_set(err, ZB_ENOMEM, "schedule: out of memory");
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            const zb_action_t *a = &s->rank[r].actions[i];
            if (a->type == ZB_ACT_R && a->stage >= 0 && a->stage < s->stages && a->mb >= 0 &&
                a->mb < s->microbatches)
                has_r[(size_t)a->stage * (size_t)s->microbatches + (size_t)a->mb] = 1;
        }
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->rank[r].len; i++) {
            zb_action_t *a = &s->rank[r].actions[i];
            if (a->type != ZB_ACT_F)
                continue;
            bool in = a->stage >= 0 && a->stage < s->stages && a->mb >= 0 &&
                      a->mb < s->microbatches &&
                      has_r[(size_t)a->stage * (size_t)s->microbatches + (size_t)a->mb];
            a->flags = (uint8_t)(in ? a->flags | ZB_ACT_NOSAVE : a->flags & ~ZB_ACT_NOSAVE);
        }
    free(has_r);
    return ZB_OK;
}

const char *zb_placement_name(zb_placement_t p)
{
    switch (p) {
    case ZB_PLACE_LOOP: return "loop";
    case ZB_PLACE_V: return "v";
    }
    return "?";
}
