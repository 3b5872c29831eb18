/* zbpp — the ranks of a pipeline run that this process executes, behind one call: with threads
 * every rank of every replica (a thread each, over a thread world), with a transport (MPI) the
 * process's one rank. The driver's loop, the validation and the report are written once over it. */
#include <stdlib.h>

#include "pipeline/pipeline_local.h"

zb_status_t pl_local_open(pl_local_t *L, pl_t *pl, int mailbox_capacity, zb_err_t *err)
{
    *L = (pl_local_t){.pl = pl, .net = pl->opts->transport};
    int world = pl->P * pl->N;
    L->first = L->net ? L->net->rank : 0;
    L->n = L->net ? 1 : world;
    L->args = calloc((size_t)L->n, sizeof *L->args);
    if (!L->args)
        return zb_err_set(err, ZB_ENOMEM, "out of memory for the local ranks");
    for (int i = 0; i < L->n; i++)
        L->args[i] = &pl->ranks[L->first + i];
    if (L->net)
        return ZB_OK;
    return zb_thread_world_new(world, mailbox_capacity, pl->opts->timeout, &L->world, err);
}

void pl_local_close(pl_local_t *L)
{
    zb_thread_world_free(L->world);
    free(L->args);
    L->world = NULL;
    L->args = NULL;
}

pl_rank_t *pl_local_rank(const pl_local_t *L, int i) { return L->args[i]; }

pl_rank_t *pl_local_reporter(const pl_local_t *L) { return L->args[0]; }

zb_status_t pl_local_run(pl_local_t *L, zb_rank_fn fn, const pl_step_in_t *in, zb_err_t *err)
{
    /* written before the rank threads start (or in this thread): every rank reads it */
    for (int i = 0; i < L->n; i++)
        pl_local_rank(L, i)->in = in;
    if (L->net)
        return fn(L->net, L->args[0], err);
    return zb_thread_world_run(L->world, fn, L->args, L->pl->opts->pin, NULL, err);
}
