/* zbpp — profiler: measured costs of the GPT-2 stage API on this machine, turned into the cost
 * models the partitioner and the schedule planner read.
 *
 * zb_profile_measure times F, B and W of every transformer block, of the embedding (alone) and
 * of the head (final LayerNorm + LM head + loss, alone) for one microbatch shape, on one core with
 * single-threaded BLAS (the way a pipeline rank runs), median of a few repetitions after a warm-up
 * round; it also times one activation-sized message between two rank threads. From that:
 *  - zb_profile_block_costs: per-block F+B+W for zb_partition (embedding on the first stage,
 *    head on the last),
 *  - zb_profile_stage_costs: a zb_costs_t per stage (seconds; memory deltas in bytes from
 *    zb_gpt2_stage_mem; comm = the measured message time),
 *  - zb_profile_rank_costs: one stage per rank (sum of the rank's stages), for zb_plan_compare. */
#ifndef ZBPP_PROFILE_H
#define ZBPP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "zbpp/cuda.h"
#include "zbpp/error.h"
#include "zbpp/gpt2.h"
#include "zbpp/schedule.h"

/* ---- partition: S contiguous block ranges ---- */

/* Relative cost of each block and of the extra work of the first (embedding) and last (final
 * LayerNorm + LM head + loss) stage, in any consistent unit. */
typedef struct {
    int layers;
    double *block; /* [layers] F+B+W of block l */
    double embed;  /* added to the stage with block 0 */
    double head;   /* added to the stage with the last block */
} zb_block_costs_t;

/* FLOP model of one microbatch of B sequences of T tokens (forward + backward = 3x forward):
 * block = 24·C² + 4·T·C per token (matmuls + attention), head = 2·C·Vp per token (the LM head's
 * matmul) plus the cross-entropy, embed = C per token. block must hold cfg->layers doubles. */
void zb_block_costs_flops(const zb_gpt2_config_t *cfg, int T, double *block, double *embed,
                          double *head);

/* Split `layers` blocks into `stages` contiguous non-empty ranges minimising the largest stage
 * cost (ties: the earliest split). first[s] = first block of stage s, first[stages] = layers.
 * ZB_EINVAL if stages > layers or stages < 1 ("more stages than blocks"). */
zb_status_t zb_partition(const zb_block_costs_t *c, int stages, int *first, zb_err_t *err);

/* The span of stage s of S given the partition. */
zb_gpt2_span_t zb_partition_span(const int *first, int stages, int s);
/* The stage holding block `layer`, -1 if none. */
int zb_partition_stage_of(const int *first, int stages, int layer);

/* ---- measured costs ---- */

/* Seconds of F, B (input gradient) and W (weight gradient) of one microbatch. */
typedef struct {
    double f, b, w;
} zb_op_time_t;

typedef struct {
    zb_gpt2_config_t cfg;
    int batch, seq;       /* microbatch shape: batch sequences of seq tokens */
    int reps;             /* timed repetitions (the median is kept) */
    int threads;          /* threads that measured at once (samples pooled) */
    int rank_threads;     /* worker threads of each measuring thread (--threads per rank) */
    int layers;
    zb_op_time_t *block;  /* [layers] */
    zb_op_time_t embed;   /* token + position embedding */
    zb_op_time_t head;    /* final LayerNorm, LM head, softmax cross-entropy */
    size_t msg_bytes;     /* one activation message: batch·seq·C floats */
    double comm;          /* seconds from send to receive of such a message between two rank
                             threads (half a ping-pong round trip, median) */
    double copy_d2h, copy_h2d; /* GPU profiles: bytes per second of such a message copied to
                                  page-locked host memory and back, per rank while all
                                  `threads` ranks of the GPU copy at once (median; what an
                                  offload's O and L move); 0 = not measured (CPU) */
    double copy_d2h_alone, copy_h2d_alone; /* the same with one rank copying (0 = not
                                              measured): with copy_d2h, the host link's model */
    double copy_both;     /* bytes per second all `threads` ranks move together while each
                             copies one such message down and one up at once: the link's total
                             both ways (0 = not measured) */
    /* GPU profiles of ranks sharing one GPU (threads > 1): a block's F, B and W timed with k
     * = 0 .. threads-1 of the other ranks busy, over the time with all of them busy (the parts'
     * figures), so f[p][threads - 1] = 1 (zb_share_t, schedule.h); n = 0: not measured.
     * share.copy_slow: the same F, B and W with every rank also copying both ways, over the
     * time without the copies */
    zb_share_t share;
    double wall;          /* seconds the measurement took */
} zb_profile_t;

#define ZB_PROFILE_MAX_THREADS 64

/* Measure. params: the model to time (NULL = random weights, seed 1, of one block of shape *cfg
 * timed as each block: the memory of one block whatever the depth; the parameters are never
 * changed). B, T: microbatch shape (T <= cfg->max_seq). reps >= 1 timed
 * rounds (after one untimed warm-up round). threads (1..ZB_PROFILE_MAX_THREADS): that many
 * threads measure at the same time and their samples are pooled (the median of threads x reps),
 * so with threads = P the cores are as busy as when P ranks train. With pin, thread i is pinned
 * to core i and the ping-pong threads to cores 0 and 1 when the machine has enough cores. Free
 * with zb_profile_free. ZB_EINVAL for bad sizes, ZB_ENOMEM. */
zb_status_t zb_profile_measure(const zb_gpt2_params_t *params, const zb_gpt2_config_t *cfg, int B,
                               int T, int reps, int threads, bool pin, zb_profile_t *out,
                               zb_err_t *err);
/* The same, each of the `threads` measuring threads with a worker group of rank_threads threads
 * (1..ZB_WORKERS_MAX; zbpp/workers.h), laid out as the pipeline lays out its ranks: measuring
 * thread i and its group on cores i·rank_threads .. (i+1)·rank_threads-1 when pin and there are
 * enough cores. zb_profile_measure is this with rank_threads = 1. */
zb_status_t zb_profile_measure_ranks(const zb_gpt2_params_t *params, const zb_gpt2_config_t *cfg,
                                     int B, int T, int reps, int threads, int rank_threads,
                                     bool pin, zb_profile_t *out, zb_err_t *err);
void zb_profile_free(zb_profile_t *p);

/* The partitioner's input: bc->block must hold p->layers doubles; block[l] = F+B+W of block l,
 * embed / head likewise, in seconds. */
void zb_profile_block_costs(const zb_profile_t *p, zb_block_costs_t *bc);

/* Per-stage cost model for the partition first[0..stages]: t_f/t_b/t_w sum the stage's blocks
 * (+ embedding on stage 0, + head on the last), comm = p->comm for every stage, m_f = bytes held
 * after F, m_b = the change at B, m_w = -(bytes held after B) (zb_gpt2_stage_mem), mem_limit =
 * INFINITY. Free with zb_costs_free. */
zb_status_t zb_profile_stage_costs(const zb_profile_t *p, const int *first, int stages,
                                   zb_costs_t *out, zb_err_t *err);

/* Profile -> partition -> per-stage costs, the chain that zbpp profile and the pipeline trainer
 * both plan from: the blocks partitioned into `stages` balancing their measured F+B+W
 * (zb_profile_block_costs, zb_partition) into first[0..stages], and that partition's cost model
 * (zb_profile_stage_costs) in *out (free with zb_costs_free). */
zb_status_t zb_profile_partition(const zb_profile_t *p, int stages, int *first, zb_costs_t *out,
                                 zb_err_t *err);

/* One stage per rank: rank r's figures are the sums over the stages it holds (chunks per rank,
 * placement pl) of the per-stage model `stage` (stage->stages == ranks·chunks); comm is the
 * largest of its stages'. Free with zb_costs_free. */
zb_status_t zb_profile_rank_costs(const zb_costs_t *stage, int ranks, int chunks,
                                  zb_placement_t pl, zb_costs_t *out, zb_err_t *err);

/* zb_profile_measure on the GPU: F, B and W of the embedding, every block and the head for a
 * microbatch of B x T, each timed as `batch` microbatches back to back between device
 * synchronisations (so launch and sync latency are amortised), median of `reps` rounds after a
 * warm-up round. comm = one activation message (B·T·C floats) device -> host -> device, as a
 * pipeline moves it today. params: NULL = a random model of shape *cfg (seed 1). threads and
 * rank_threads of the result are 1. Free with zb_profile_free. */
zb_status_t zb_cuda_profile_measure(const zb_gpt2_params_t *params, const zb_gpt2_config_t *cfg,
                                    int B, int T, int reps, const zb_cuda_train_opts_t *opts,
                                    zb_profile_t *out, zb_err_t *err);

#endif
