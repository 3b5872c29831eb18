/* The registry of schedule families and the preamble every generator shares. */
#include "schedule/generators.h"
#include "schedule/gen_v.h" /* V family, interleaved-zb, auto, optimal */

#include <string.h>
#include <strings.h>

/* Display order. One line per family; see generators.h for how to add one. */
static const zb_generator_info_t registry[] = {
    {"gpipe", "all forwards, then all fused backwards (peak M activations)", zb_gen_gpipe, false},
    {"1f1b", "one-forward-one-backward, fused backward (peak P activations)", zb_gen_1f1b, false},
    {"interleaved-1f1b", "Megatron interleaved 1F1B, v chunks per rank (loop placement)",
     zb_gen_interleaved, false},
    {"looped-bfs", "PyTorch's looped BFS: v chunks per rank, all forwards chunk by chunk, then the "
                   "backwards (peak v*M chunk activations)",
     zb_gen_looped_bfs, false},
    {"zb-h1", "zero bubble H1: split B/W, 1F1B memory, bubble (P-1)(F+B-W)", zb_gen_zbh1, false},
    {"zb-h2", "zero bubble H2: split B/W, 2P-1 activations, bubble (P-1)(F+B-2W)", zb_gen_zbh2,
     false},
    {"interleaved-zb", "interleaved 1F1B with B/W split: same memory, W's fill the bubbles",
     zb_gen_interleaved_zb, false},
    {"zb-v", "ZB-V: V placement, 2 chunks, peak 2P chunk activations (1F1B's), ~zero bubble",
     zb_gen_zbv, true},
    {"v-half", "V-Half: V placement, about half of 1F1B's memory and bubble", zb_gen_vhalf, false},
    {"v-min", "V-Min: V placement, about 1/3 of 1F1B's memory, less bubble than 1F1B", zb_gen_vmin,
     false},
    {"dualpipev", "DeepSeek DualPipeV: V placement, M >= 2P, W's deferred in the cool-down",
     zb_gen_dualpipev, false},
    {"auto", "best schedule under --mem-limit (greedy search + families + local moves)",
     zb_gen_auto, true},
    {"optimal", "exact MILP (GLPK) for small P, M; warm-started from auto", zb_gen_optimal,
     true},
};

const zb_generator_info_t *zb_generators(size_t *count)
{
    if (count)
        *count = sizeof registry / sizeof registry[0];
    return registry;
}

/* PyTorch's schedule class names (torch.distributed.pipelining) for the families zbpp has. */
static const struct {
    const char *alias, *family;
} aliases[] = {
    {"GPipe", "gpipe"},
    {"1F1B", "1f1b"},
    {"Interleaved1F1B", "interleaved-1f1b"},
    {"InterleavedZeroBubble", "interleaved-zb"},
    {"ZBVZeroBubble", "zb-v"},
    {"DualPipeV", "dualpipev"},
    {"LoopedBFS", "looped-bfs"},
};

const zb_generator_info_t *zb_generator_find(const char *name)
{
    if (!name)
        return NULL;
    /* PyTorch spells them with a "Schedule" prefix (ScheduleGPipe); accept both */
    const char *bare = strncasecmp(name, "Schedule", 8) == 0 && name[8] ? name + 8 : name;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcasecmp(aliases[i].alias, bare) == 0) {
            name = aliases[i].family;
            break;
        }
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (strcasecmp(registry[i].name, name) == 0)
            return &registry[i];
    return NULL;
}

zb_status_t zb_generate(const char *name, zb_gen_params_t *p, zb_schedule_t **out,
                        zb_err_t *err)
{
    if (!out || !p)
        return zb_err_set(err, ZB_EINVAL, "generate: NULL argument");
    *out = NULL;
    const zb_generator_info_t *g = zb_generator_find(name);
    if (!g) {
        char known[256] = "";
        size_t n = sizeof registry / sizeof registry[0];
        for (size_t i = 0; i < n; i++) {
            strncat(known, registry[i].name, sizeof known - strlen(known) - 1);
            if (i + 1 < n)
                strncat(known, ", ", sizeof known - strlen(known) - 1);
        }
        return zb_err_set(err, ZB_EINVAL, "unknown schedule family '%s' (known: %s)",
                          name ? name : "(null)", known);
    }
    p->note[0] = '\0';
    const bool is_auto = g->fn == zb_gen_auto;
    if (p->recompute != ZB_RECOMPUTE_NONE && p->recompute != ZB_RECOMPUTE_ALL &&
        p->recompute != ZB_RECOMPUTE_AUTO)
        return zb_err_set(err, ZB_EINVAL, "%s: unknown recompute mode %d", g->name,
                          (int)p->recompute);
    if (p->recompute == ZB_RECOMPUTE_AUTO && !is_auto)
        return zb_err_set(err, ZB_EINVAL,
                          "%s: recompute 'auto' needs the auto family (-s auto); use 'all' "
                          "to recompute every microbatch of %s",
                          g->name, g->name);
    zb_status_t st;
    if (is_auto || p->recompute == ZB_RECOMPUTE_NONE) {
        st = g->fn(p, out, err); /* auto honours p->recompute itself */
    } else {
        /* ALL on a fixed family: its schedule, then an R before every backward */
        zb_gen_params_t q = *p;
        q.recompute = ZB_RECOMPUTE_NONE;
        zb_schedule_t *plain = NULL;
        st = g->fn(&q, &plain, err);
        memcpy(p->note, q.note, sizeof p->note);
        if (st == ZB_OK)
            st = zb_add_recompute(plain, NULL, out, err);
        zb_schedule_free(plain);
    }
    if (st != ZB_OK) {
        zb_schedule_free(*out);
        *out = NULL;
    }
    return st;
}

zb_status_t zb_gen_begin(const char *family, zb_gen_params_t *p, int default_chunks,
                         int min_chunks, int max_chunks, zb_placement_t placement,
                         zb_schedule_t **out, zb_err_t *err)
{
    *out = NULL;
    if (p->ranks < 1 || p->ranks > ZB_GEN_MAX_RANKS)
        return zb_err_set(err, ZB_EINVAL, "%s: ranks (P) = %d, need 1..%d", family, p->ranks,
                          ZB_GEN_MAX_RANKS);
    if (p->microbatches < 1 || p->microbatches > ZB_GEN_MAX_MICROBATCHES)
        return zb_err_set(err, ZB_EINVAL, "%s: microbatches (M) = %d, need 1..%d", family,
                          p->microbatches, ZB_GEN_MAX_MICROBATCHES);
    int v = p->chunks == 0 ? default_chunks : p->chunks;
    if (v < min_chunks || v > max_chunks) {
        if (min_chunks == max_chunks)
            return zb_err_set(err, ZB_EINVAL, "%s: chunks per rank (v) = %d, this family uses %d",
                              family, v, min_chunks);
        return zb_err_set(err, ZB_EINVAL, "%s: chunks per rank (v) = %d, need %d..%d", family, v,
                          min_chunks, max_chunks);
    }
    long long actions = 3LL * p->ranks * v * p->microbatches;
    if (actions > ZB_GEN_MAX_ACTIONS)
        return zb_err_set(err, ZB_EINVAL, "%s: P=%d v=%d M=%d gives %lld actions, limit %lld",
                          family, p->ranks, v, p->microbatches, actions, ZB_GEN_MAX_ACTIONS);
    if (p->costs && p->costs->stages != v * p->ranks)
        return zb_err_set(err, ZB_EINVAL, "%s: cost model has %d stages, schedule has v*P = %d",
                          family, p->costs->stages, v * p->ranks);
    *out = zb_schedule_new(family, p->ranks, v, placement, p->microbatches);
    if (!*out)
        return zb_err_set(err, ZB_ENOMEM, "%s: out of memory", family);
    return ZB_OK;
}

zb_status_t zb_gen_push(zb_schedule_t *s, int rank, zb_action_type_t type, int stage, int mb,
                        zb_err_t *err)
{
    zb_action_t a = {.type = (uint8_t)type, .stage = stage, .mb = mb};
    zb_status_t st = zb_schedule_push(s, rank, a);
    if (st != ZB_OK)
        return zb_err_set(err, st, "%s: cannot append %s(stage %d, mb %d) to rank %d", s->name,
                          zb_action_type_name(type), stage, mb, rank);
    return ZB_OK;
}
