/* Looped BFS (Lamy-Poirier, "Breadth-First Pipeline Parallelism"; PyTorch's ScheduleLoopedBFS):
 * v chunks per rank under loop placement (stage c·P + r on rank r), fused backward. Breadth
 * first: each rank runs the forwards of all M microbatches on its first local stage, then on its
 * next one, and so on; then the backwards, last local stage first. PyTorch runs a stage's
 * backwards from the last microbatch down; here they go in microbatch order, because zbpp
 * accumulates weight gradients in microbatch order (DESIGN: determinism), which makes every
 * family train to the same bits. The bubble is the same either way: on the last stage every
 * backward is ready once the forwards are done, and each stage below follows one step behind.
 *
 * Every forward precedes every backward on a rank, forwards go up the stages and backwards down,
 * so no order of waits can form a cycle. Peak activations v·M chunks on every rank (GPipe's
 * memory); in exchange, with M >= P a rank never waits between its forward chunks. */
#include "schedule/generators.h"

zb_status_t zb_gen_looped_bfs(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err)
{
    zb_schedule_t *s;
    zb_status_t st = zb_gen_begin("looped-bfs", p, 2, 1, 64, ZB_PLACE_LOOP, &s, err);
    if (st != ZB_OK)
        return st;
    const int P = p->ranks, M = p->microbatches, v = s->chunks;
    for (int r = 0; r < P && st == ZB_OK; r++) {
        for (int c = 0; c < v && st == ZB_OK; c++)
            for (int m = 0; m < M && st == ZB_OK; m++)
                st = zb_gen_push(s, r, ZB_ACT_F, c * P + r, m, err);
        for (int c = v - 1; c >= 0 && st == ZB_OK; c--)
            for (int m = 0; m < M && st == ZB_OK; m++)
                st = zb_gen_push(s, r, ZB_ACT_BW, c * P + r, m, err);
    }
    if (st != ZB_OK) {
        zb_schedule_free(s);
        return st;
    }
    *out = s;
    return ZB_OK;
}
