/* Internal: the context the phases of `optimal` share (optimal_glpk.c runs them; the bounds
 * and the model are built in their own files). */
#ifndef ZBPP_OPTIMAL_GLPK_H
#define ZBPP_OPTIMAL_GLPK_H

#include <glpk.h>
#include <stdbool.h>
#include <stddef.h>

#include "schedule/generators.h"
#include "zbpp/schedule.h"

typedef struct {
    int type, stage, mb, rank;
    double dur, mem;
} act_t;

static inline int act_index(int S, int M, int type, int stage, int mb)
{
    return (type * S + stage) * M + mb; /* type 0 F, 1 B, 2 W */
}

/* Is a known to precede b (same rank)? Chain of one microbatch, or FIFO per (type, stage). */
static inline bool implied_before(const act_t *a, const act_t *b)
{
    if (a->type == b->type && a->stage == b->stage)
        return a->mb < b->mb;
    if (a->mb != b->mb)
        return false;
    /* same microbatch, same rank */
    if (a->type == 0 && b->type == 0)
        return a->stage < b->stage;
    if (a->type == 0)
        return true; /* every F of the mb on this rank precedes its B's and W's */
    if (a->type == 1 && b->type == 1)
        return a->stage > b->stage;
    if (a->type == 1 && b->type == 2)
        return a->stage == b->stage || a->stage > b->stage;
    return false;
}

/* Everything the phases share. Arrays indexed by action are over n = 3·S·M (act_index). */
typedef struct {
    zb_gen_params_t *p;
    const zb_costs_t *c;
    zb_schedule_t *warm; /* auto's schedule: incumbent and shape */
    int P, S, M, n;
    act_t *acts;
    int *rank_cnt;   /* [P] actions per rank */
    int **rank_acts; /* [P][rank_cnt] action indices per rank */
    zb_sim_t wsim;   /* the warm start simulated */
    bool have_wsim;
    double *wend;    /* [n] warm start end times */
    int *wpos;       /* [n] warm start position on its rank */
    bool warm_ok;    /* the warm start keeps the orders the model fixes */
    double *head, *tail; /* [n] earliest end; least time still needed after the end */
    double c_lb;     /* lower bound on C from heads, tails and per-rank work */
    double H;        /* big-M: everything in series, or ub when known */
    double ub;       /* auto's makespan when its schedule is a point of the model, else INF */
    glp_prob *lp;
    int ncol;
    int npairs;
    int *pair_a, *pair_b; /* [npairs] the pair of each order binary */
    int *pair_col;        /* [n*n] column of y_ab at a*n+b, 0 = none */
    int *ia, *ja;         /* constraint matrix triplets, 1-based */
    double *ar;
    size_t nz, nz_cap;
    double *x;            /* [ncol+1] warm start vector */
} opt_t;

static inline zb_status_t zb_opt_oom(zb_err_t *err)
{
    return zb_err_set(err, ZB_ENOMEM, "optimal: out of memory");
}

/* Phase 3: heads, tails, the lower bound c_lb and the big-M (optimal_bounds_glpk.c). */
zb_status_t zb_opt_bounds(opt_t *o, zb_err_t *err);
/* The B and W (microbatches *kb, *kw, or -1) that must end before F(s, m) can fit in memory
 * (one stage per rank, B and W only free memory; optimal_bounds_glpk.c). */
void zb_opt_mem_arcs(const opt_t *o, int s, int m, int *kb, int *kw);
/* Phase 4: the whole model, loaded into GLPK (optimal_model_glpk.c). */
zb_status_t zb_opt_build_model(opt_t *o, zb_err_t *err);
/* Phase 5: auto's schedule as a point of the model (handed to GLPK when warm_ok). */
zb_status_t zb_opt_warm_vector(opt_t *o, zb_err_t *err);

#endif
