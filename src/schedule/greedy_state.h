/* Internal: the greedy list scheduler's state (greedy_build.c decides, greedy_state.c keeps the
 * state and the set of ranks due now). */
#ifndef ZBPP_GREEDY_STATE_H
#define ZBPP_GREEDY_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schedule/auto_greedy.h"
#include "schedule/auto_trees.h"

#define EPS 1e-9

/* A microbatch on a rank, for the banker's check. */
typedef struct {
    double contrib; /* memory it holds there (all deltas applied) */
    double fbsum;   /* sum of its F and B deltas applied there */
    double pendw;   /* memory its pending W's there will free */
    bool active;    /* entered the rank, last B there not done */
} mb_state_t;

typedef struct {
    int P, v, S, M;
    zb_placement_t pl;
    const zb_costs_t *c;
    const zb_greedy_opts_t *o;
    int *stage_rank;    /* [S] */
    int *stages;        /* [P*v] stages of rank r at r*v + k, ascending */
    double *end_f;      /* [M*S] at m*S + st (see at()), NAN until done */
    double *end_b;      /* [M*S] */
    int *next_f;        /* [S] next microbatch to run F at stage s (microbatch order) */
    int *next_b;        /* [S] */
    double *clock;      /* [P] */
    double *due;        /* [P] clock of a rank with actions left, INFINITY once it is done (the
                           key of T and of the heap below; a frozen rank's is not kept up) */
    double *mem;        /* [P] running memory */
    double *cap;        /* [P] memory cap: opts' mem_cap, tighter where the costs limit a rank */
    double *need;       /* [P] footprint of one microbatch on the rank (F's and B's) */
    mb_state_t *mbs;    /* [M*P] at m*P + r: what a microbatch holds on a rank (one record: read
                           together; a microbatch's ranks side by side, as in at()) */
    int *fifo_head, *fifo_tail; /* [P] microbatches that left / entered the rank: the active
                                   ones are a FIFO (they enter and leave in microbatch order) */
    double *wfree;      /* [P] memory pending W's of inactive microbatches will free */
    int *wq;            /* [2*P*(v*M)] pending W's per rank, FIFO of (stage, mb) pairs */
    int *wq_head, *wq_tail;
    int *fb_pos;        /* [P] position in opts->fb_order (fixed-order mode) */
    int *left;          /* [P] compute actions still to place */
    int *fb_left;       /* [P] F and B actions still to place */
    /* A rank that could not act keeps that answer (and the times it reported) until something
     * it depends on changes: its own state or clock, or a neighbour's (the ranks holding the
     * stages next to its own). Saves re-trying every waiting rank after each placement. */
    bool *stale;        /* [P] must be re-tried */
    double *w_next, *w_guess; /* [P] what its last failed try reported */
    bool *frozen;       /* [P] and whether that wait is frozen (see try_act) */
    /* The ranks due now (due <= the smallest due + EPS, "T") without a walk over all ranks:
     * T as a bit set over the ranks (walked in rank order), every other rank with actions left
     * in a heap by due. A
     * rank leaves T when it places an action (into the heap) and comes back from the heap when
     * the smallest due reaches it: O(log P) per action. */
    zb_heap_t later;
    uint64_t *tbits;    /* [tw] bit r set: rank r is in T */
    int tw, nt;         /* words of tbits, ranks in T */
    zb_iheap_t tdue;    /* T's ranks by due, for T's smallest due without a walk over T */
    /* Ranks of T whose wait is frozen (try_act) and lasts past the last idle move sit apart,
     * in a heap by the time their wait ends (w_next), so a step does not walk over them: they
     * would be skipped (fresh) and add only w_next to the next event. They all have the clock
     * of the last idle move (fclock; read through clock_of). A rank comes back into T when
     * `to` reaches its w_next, when an action is placed next to it, or when every rank of T
     * must be tried (forced passes). Back-comers wait in `back` until the step is over. */
    zb_iheap_t fz;
    bool *in_fz;        /* [P] */
    double fclock;
    int *back;          /* [P] */
    int nback;
    /* The banker's check without a walk over the FIFO (only with a finite cap and no fixed
     * order): per rank the values, for each active microbatch k, need - fbsum[k] - (contrib of
     * the active microbatches older than k). With several chunks a max tree over microbatch
     * positions (the others hold -INFINITY), updated on each F/B/W of an active microbatch (a
     * suffix add). With one chunk an active microbatch changes only when it leaves (its one
     * B), always the oldest, which adds its contrib to all the others: a max queue. */
    bool bank;
    zb_maxtree_t *ft;   /* [P] v > 1 */
    zb_maxq_t *mq;      /* [P] v == 1 */
    double *ctot;       /* [P] contrib summed over the rank's active microbatches */
    double *fbtot;      /* [P] fbsum summed over them */
    zb_schedule_t *s;
} greedy_t;

/* Index of the lowest set bit of a non-zero word. */
static inline int lowest_bit(uint64_t x) { return __builtin_ctzll(x); }

/* The smaller of two times (never NaN here): fmin without the NaN rules, so it inlines. */
static inline double tmin2(double a, double b) { return b < a ? b : a; }

/* Clock of rank r as the other ranks see it (a frozen rank's moves are not written). */
static inline double clock_of(const greedy_t *g, int r)
{
    return g->in_fz[r] ? g->fclock : g->clock[r];
}

/* Index of (stage, microbatch) in end_f/end_b: a microbatch's stages side by side, since it
 * meets them one after another (with the stage's microbatches side by side instead, every rank
 * read and wrote its own distant row: a cache and TLB miss per action with many ranks). */
static inline size_t at(const greedy_t *g, int st, int m) { return (size_t)m * g->S + st; }

/* Allocate and zero the state for P ranks, v chunks, M microbatches (sizes checked by the
 * caller). False on out of memory; zb_gs_free is safe either way. */
bool zb_gs_init(greedy_t *g, const char *name, int P, int v, zb_placement_t pl, int M,
                const zb_costs_t *c, const zb_greedy_opts_t *o);
void zb_gs_free(greedy_t *g);

/* The ranks due now (T), see greedy_t. */
/* Refresh T for the current smallest due and return it (INFINITY when every rank is done). */
double zb_gs_refresh(greedy_t *g);
/* Rank r of T placed an action: it leaves T, into the heap unless it is done. */
void zb_gs_leave(greedy_t *g, int r);
/* Put the ranks that came back from the frozen ones into T. */
void zb_gs_flush_back(greedy_t *g);
/* Every frozen rank back into T (a pass that must try them all). */
void zb_gs_unfreeze_all(greedy_t *g);
/* Rank r's state or clock changed: r and the ranks next to its stages must be re-tried. */
void zb_gs_touch(greedy_t *g, int r);
/* No rank of T could act: their clocks move to `to` (see greedy_state.c). */
void zb_gs_idle_move(greedy_t *g, double to);

#endif
