/* zbpp — the schedule IR: per-rank ordered lists of actions.
 *
 * P ranks, S = v·P stages (v = chunks per rank), M microbatches. Generators produce a schedule,
 * the comm pass lowers it (inserts SEND/RECV), the validator and simulator read it, and the
 * runtime executes exactly it. This module depends on libc only. */
#ifndef ZBPP_SCHEDULE_H
#define ZBPP_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbpp/error.h"

typedef enum {
    ZB_ACT_F,      /* forward */
    ZB_ACT_B,      /* backward w.r.t. the input (critical path) */
    ZB_ACT_W,      /* backward w.r.t. the weights (may be deferred) */
    ZB_ACT_BW,     /* fused full backward: B then W */
    ZB_ACT_SEND_F, /* send forward activation of (stage, mb) to stage+1 */
    ZB_ACT_RECV_F, /* receive forward activation for (stage, mb) from stage-1 */
    ZB_ACT_SEND_B, /* send input gradient of (stage, mb) to stage-1 */
    ZB_ACT_RECV_B, /* receive output gradient for (stage, mb) from stage+1 */
    ZB_ACT_R,      /* recompute: rebuild what a non-saving F of (stage, mb) dropped, before its B */
    ZB_ACT_O,      /* offload: copy the stash of (stage, mb) to host memory (device->host channel) */
    ZB_ACT_L,      /* reload: copy it back before its B (host->device channel) */
    ZB_ACT_COUNT
} zb_action_type_t;

/* Action flags. ZB_ACT_NOSAVE on an F: the forward keeps only its input (M_keep of memory) and
 * the schedule holds an R of the same (stage, mb) between this F and its B, which recomputes the
 * forward and keeps the rest (M_F - M_keep). An F has the flag exactly when its R exists: readers
 * set it with zb_schedule_mark_recompute, the validator checks it. */
enum { ZB_ACT_NOSAVE = 1 };

/* One action. For SEND_F/SEND_B `stage` is the sending stage; for RECV_F/RECV_B it is the
 * receiving stage (so RECV_F(s, m) pairs with SEND_F(s-1, m), RECV_B(s, m) with SEND_B(s+1, m)).
 * `flags` comes last so that {type, stage, mb} initialisers keep meaning what they say. */
typedef struct {
    uint8_t type; /* zb_action_type_t */
    int32_t stage;
    int32_t mb;
    uint8_t flags; /* ZB_ACT_NOSAVE (F only) */
} zb_action_t;

typedef enum {
    ZB_PLACE_LOOP, /* stage s on rank s mod P */
    ZB_PLACE_V     /* v = 2: stage s < P on rank s, else on rank 2P-1-s */
} zb_placement_t;

typedef struct {
    zb_action_t *actions;
    int len, cap;
} zb_rank_program_t;

typedef struct {
    char name[48];          /* family that produced it ("zb-h1", "csv", ...) */
    int ranks;              /* P */
    int chunks;             /* v */
    int stages;             /* S = v·P */
    int microbatches;       /* M */
    zb_placement_t placement;
    zb_rank_program_t *rank; /* [ranks] */
} zb_schedule_t;

/* Allocate an empty schedule. Returns NULL on bad sizes (ranks, chunks, microbatches < 1, V
 * placement with chunks != 2) or out of memory. Free with zb_schedule_free. */
zb_schedule_t *zb_schedule_new(const char *name, int ranks, int chunks, zb_placement_t placement,
                               int microbatches);
void zb_schedule_free(zb_schedule_t *s);
/* Deep copy; NULL on out of memory. */
zb_schedule_t *zb_schedule_clone(const zb_schedule_t *s);
/* Append an action to a rank's program. ZB_ENOMEM or ZB_EINVAL (rank out of range). */
zb_status_t zb_schedule_push(zb_schedule_t *s, int rank, zb_action_t a);
/* Make room for at least n actions on every rank (a generator that knows its sizes avoids the
 * regrowth of push). ZB_ENOMEM or ZB_EINVAL (NULL, n < 0). */
zb_status_t zb_schedule_reserve(zb_schedule_t *s, int n);
/* Same shape (P, v, placement, M) and the same action lists. Names are not compared. */
bool zb_schedule_equal(const zb_schedule_t *a, const zb_schedule_t *b);
/* Rank that holds `stage` under the schedule's placement. */
int zb_stage_rank(const zb_schedule_t *s, int stage);
int zb_stage_rank_of(int ranks, int chunks, zb_placement_t placement, int stage);
/* True if any action is B or W (split backward). */
bool zb_schedule_is_split(const zb_schedule_t *s);
/* True if any SEND/RECV action is present (lowered). */
bool zb_schedule_has_comms(const zb_schedule_t *s);
/* True if any R action is present. */
bool zb_schedule_has_recompute(const zb_schedule_t *s);
/* True if any O or L action is present. */
bool zb_schedule_has_offload(const zb_schedule_t *s);
/* Set ZB_ACT_NOSAVE on every F whose (stage, mb) has an R, clear it on the others: the one place
 * that ties the flag to the R (readers and generators call it). ZB_ENOMEM. */
zb_status_t zb_schedule_mark_recompute(zb_schedule_t *s, zb_err_t *err);
/* "F", "B", "W", "BW", "SEND_F", ..., "R", "O", "L" */
const char *zb_action_type_name(zb_action_type_t t);
bool zb_action_is_compute(zb_action_type_t t);
/* SEND_F, RECV_F, SEND_B, RECV_B. */
bool zb_action_is_comm(zb_action_type_t t);
/* O and L: copies between the rank's device and host memory. They run on the rank's copy
 * channels, never on its compute, and are neither compute nor comm actions. */
bool zb_action_is_copy(zb_action_type_t t);
const char *zb_placement_name(zb_placement_t p);

/* ---- Costs and memory: per stage, for the chunking of the schedule they are used with ---- */

/* Ranks that share one device (optional; n = 0: none, every action takes its cost). Pipeline
 * ranks in SM partitions of one GPU slow each other down (memory bandwidth, L2): an action of
 * phase p (0: F and R, 1: B, 2: W) takes f[p][k] times its cost while k other ranks compute,
 * f[p][n - 1] = 1 when the costs were measured with every other rank busy (as zbpp profile on a
 * GPU measures them). What the others compute matters too (optional mix, all zeros = none):
 * mix[p][q] is the factor of a phase-p action while every other rank runs phase q, over its
 * time beside the profile's own neighbours; with k > 0 others busy a phase-p action takes
 * f[p][k] times the mean of mix[p][q] over the phases q the k others run. A fused BW may run
 * faster or slower than its B and W apart (bw, measured beside the same neighbours). The simulator
 * advances each running action at its current rate from event to event; a fused BW runs its B
 * part, then its W part, each with its own phase's factors (and counts as that phase beside the
 * others). n must be the schedule's P. docs/cuda.md, "Ranks sharing a GPU in the simulator". */
#define ZB_SHARE_MAX 16
typedef struct {
    int n;                     /* ranks sharing the device; 0 = none */
    double f[3][ZB_SHARE_MAX]; /* [phase][other ranks computing] duration factor, > 0 */
    double mix[3][3];          /* [phase][the others' phase] factor, > 0; all 0 = none */
    double bw;                 /* a fused BW's time over its B's and W's timed apart (both
                                * parts scaled by it); 0 = 1 */
    /* The device's host link, per direction (0: device to host, O; 1: host to device, L): the
     * bandwidth (bytes per time unit, as the costs' bw_d2h / bw_h2d) that the n ranks' copies
     * share. A copy runs at the costs' bandwidth alone, and k copies in flight in one direction
     * each at link / k where that is less. 0 = none: each rank's channel is its own. */
    double link[2];
    /* The link's total with copies in flight both ways (bytes per time unit, both directions
     * together): where the two directions' rates above add up to more, each copy's rate is
     * scaled down by the same ratio (a PCIe link carries less both ways than twice one way).
     * 0 = none: the directions are independent. Used with link only. */
    double link_both;
    /* [phase] duration factor of a compute action while any copy is in flight on the link
     * (copy engines' traffic crossing the L2 the SMs work in), over its time without: it
     * multiplies the other factors. 0 = 1. Used with link only. */
    double copy_slow[3];
} zb_share_t;

typedef struct {
    int stages;
    double *t_f, *t_b, *t_w; /* duration of F, B, W at stage s (BW takes t_b + t_w) */
    double *comm;            /* latency of a message between stage s and a stage on another rank
                                (sent from s) */
    double *m_f, *m_b, *m_w; /* memory delta of F, B, W at stage s; m_f + m_b + m_w == 0 */
    double mem_limit;        /* limit on every rank's running memory sum; INFINITY = none */
    /* Recompute (optional: NULL = the default). A non-saving F adds m_keep[s] (default 0) and its
     * R adds m_f[s] - m_keep[s]; R takes t_r[s] (default t_f[s]). */
    double *t_r, *m_keep;
    /* Per-rank limits (optional; set with zb_costs_set_rank_limits): rank r's limit is
     * rank_limit[r] instead of mem_limit. limit_ranks must then equal the schedule's P. */
    int limit_ranks;
    double *rank_limit;
    /* Offload (optional; zeros = the defaults). Each rank has a device->host and a host->device
     * copy channel. An O or L of stage s moves stash_bytes[s] (NULL: m_f[s], i.e. memory units
     * taken as bytes) in copy_latency + bytes / bw_d2h (or bw_h2d); a bandwidth of 0 (no
     * bandwidth given) makes each copy take t_f[s], as long as the forward that made the stash.
     * Bandwidths are bytes per time unit of the cost model. The memory an O frees and an L takes
     * back is m_f[s], everything the F kept. */
    double *stash_bytes;
    double bw_d2h, bw_h2d, copy_latency;
    zb_share_t share; /* ranks slowing each other on one device (above); zeros = none */
} zb_costs_t;

/* Largest time or |memory delta| a cost model accepts: sums over millions of actions then stay
 * far from overflow, so simulations and every writer see finite numbers. */
#define ZB_COST_MAX 1e12

/* Allocate per-stage arrays filled with uniform values. mem_limit starts at INFINITY.
 * ZB_EINVAL for stages < 1, negative, non-finite or > ZB_COST_MAX times, non-finite or
 * > ZB_COST_MAX memory, or memory deltas that do not sum to zero (relative tolerance 1e-9).
 * Free with zb_costs_free. */
zb_status_t zb_costs_init_uniform(zb_costs_t *c, int stages, double f, double b, double w,
                                  double comm, double mf, double mb, double mw, zb_err_t *err);
/* Check an existing cost model (same rules as above, every stage, and its share). */
zb_status_t zb_costs_check(const zb_costs_t *c, zb_err_t *err);
/* A device share: 0 <= n <= ZB_SHARE_MAX, every factor of the first n in (0, 1000], the mix
 * all 0 or all in (0, 1000], bw 0 or in (0, 1000]. */
zb_status_t zb_share_check(const zb_share_t *sh, zb_err_t *err);
/* Whether the share has its mix (any factor of it non-zero). */
bool zb_share_has_mix(const zb_share_t *sh);
zb_status_t zb_costs_clone(zb_costs_t *dst, const zb_costs_t *src, zb_err_t *err);
/* Set every stage's recompute time and kept memory (allocating t_r and m_keep if absent).
 * ZB_EINVAL for a time outside [0, ZB_COST_MAX] or a keep outside [0, |m_f|] of some stage. */
zb_status_t zb_costs_set_recompute(zb_costs_t *c, double t_r, double m_keep, zb_err_t *err);
/* Give each of `ranks` ranks its own memory limit (copied; INFINITY = none), overriding
 * mem_limit; limits == NULL (or ranks == 0) drops them, so mem_limit holds for every rank again.
 * ZB_EINVAL for a NaN limit or ranks < 0; ZB_ENOMEM. */
zb_status_t zb_costs_set_rank_limits(zb_costs_t *c, int ranks, const double *limits,
                                     zb_err_t *err);
/* Memory limit of rank r: rank_limit[r] when per-rank limits are set, else mem_limit. */
double zb_costs_limit(const zb_costs_t *c, int rank);
/* Loosest limit over ranks 0..ranks-1 (mem_limit without per-rank limits). */
double zb_costs_limit_max(const zb_costs_t *c, int ranks);
/* True if some rank has a finite limit. */
bool zb_costs_limited(const zb_costs_t *c);
/* Set the offload costs: every stage's stash bytes (< 0: keep the m_f default), both
 * bandwidths (bytes per time unit, 0 = the t_f default) and the copy latency. ZB_EINVAL for a
 * negative, non-finite or over-ZB_COST_MAX value; ZB_ENOMEM. */
zb_status_t zb_costs_set_offload(zb_costs_t *c, double stash_bytes, double bw_d2h, double bw_h2d,
                                 double copy_latency, zb_err_t *err);
/* Copy src's offload costs into dst (same stages, or src one stage per rank and dst `chunks`
 * chunks per rank under placement pl: each chunk gets 1/chunks of its rank's stash bytes).
 * ZB_ENOMEM. */
zb_status_t zb_costs_copy_offload(zb_costs_t *dst, const zb_costs_t *src, int chunks,
                                  zb_placement_t pl, zb_err_t *err);
/* Duration of an O (type ZB_ACT_O) or L (ZB_ACT_L) of stage s, defaults applied. */
double zb_costs_t_copy(const zb_costs_t *c, int type, int s);
/* Recompute time and kept memory of stage s, defaults applied. */
double zb_costs_t_r(const zb_costs_t *c, int s);
double zb_costs_m_keep(const zb_costs_t *c, int s);
void zb_costs_free(zb_costs_t *c);

/* ---- Recompute modes ---- */

typedef enum {
    ZB_RECOMPUTE_NONE, /* every F keeps its activations */
    ZB_RECOMPUTE_ALL,  /* every F is non-saving, an R before each backward */
    ZB_RECOMPUTE_AUTO  /* recompute what a memory limit requires, where it costs least */
} zb_recompute_t;

/* "none", "all", "auto". */
const char *zb_recompute_name(zb_recompute_t r);
/* Parse one of the names above; ZB_EINVAL with a message listing them. */
zb_status_t zb_recompute_parse(const char *s, zb_recompute_t *out, zb_err_t *err);

/* ---- Offload modes ---- */

typedef enum {
    ZB_OFFLOAD_NONE, /* every stash stays on the device */
    ZB_OFFLOAD_ALL,  /* every stash goes to host memory after its F and comes back for its B */
    ZB_OFFLOAD_AUTO  /* per (stage, mb): keep, offload or recompute, to fit the memory limit
                        at the least cost in time */
} zb_offload_t;

/* "none", "all", "auto". */
const char *zb_offload_name(zb_offload_t o);
/* Parse one of the names above; ZB_EINVAL with a message naming --offload. */
zb_status_t zb_offload_parse(const char *s, zb_offload_t *out, zb_err_t *err);

/* ---- Generators ---- */

typedef struct {
    int ranks;                /* P */
    int microbatches;         /* M */
    int chunks;               /* v; 0 = the family's default */
    const zb_costs_t *costs;  /* may be NULL for handcrafted families; needed by auto/optimal.
                                 Its `stages` must equal v·P of the schedule asked for. */
    bool any_placement;       /* auto: also try other chunkings */
    double time_limit;        /* optimal: solver seconds (0 = default) */
    int verbose;              /* generators may report what they tried via `note` */
    char note[256];           /* out: a short remark (e.g. "auto chose zb-v"); may stay empty */
    zb_recompute_t recompute; /* NONE (default); ALL: zb_add_recompute on the family's schedule
                                 (auto searches with it); AUTO: auto family only (ZB_EINVAL
                                 otherwise). The recompute costs are costs->t_r and m_keep. */
} zb_gen_params_t;

/* Largest P*M the exact solver (family "optimal") accepts; `schedule` and `plan` share it. */
#define ZB_OPTIMAL_MAX_PM 64

typedef zb_status_t (*zb_generator_fn)(zb_gen_params_t *p, zb_schedule_t **out, zb_err_t *err);

typedef struct {
    const char *name;    /* "1f1b" */
    const char *summary; /* one line for --help */
    zb_generator_fn fn;
    bool reads_costs;    /* the schedule depends on p->costs (zb-v, auto, optimal); the others
                            only check its stage count */
} zb_generator_info_t;

/* The registry of schedule families, in display order. */
const zb_generator_info_t *zb_generators(size_t *count);
/* Find a family by name, case-insensitive; PyTorch's schedule class names are aliases (GPipe,
 * 1F1B, Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV, LoopedBFS, with or
 * without the "Schedule" prefix). NULL when unknown. */
const zb_generator_info_t *zb_generator_find(const char *name);
/* Generate a compute-only schedule of family `name`. ZB_EINVAL for an unknown name or (P, M, v)
 * the family does not support, with a message saying which. *out owned by the caller. */
zb_status_t zb_generate(const char *name, zb_gen_params_t *p, zb_schedule_t **out,
                        zb_err_t *err);

/* ---- Passes ---- */

/* Lower a compute-only schedule: after each F whose next stage is on another rank a SEND_F, before
 * each F whose previous stage is on another rank a RECV_F (likewise SEND_B/RECV_B around B/BW).
 * Never between two stages on the same rank. *out owned by the caller. */
zb_status_t zb_insert_comms(const zb_schedule_t *in, zb_schedule_t **out, zb_err_t *err);
/* Drop every SEND/RECV action. */
zb_status_t zb_strip_comms(const zb_schedule_t *in, zb_schedule_t **out, zb_err_t *err);
/* Recompute: a copy of `in` (compute-only or lowered, without R) in which every (stage, mb) with
 * which[stage * M + mb] set has a non-saving F and an R placed immediately before its B/BW
 * (before the RECV_B that feeds it, when lowered, so the recompute overlaps the wait for the
 * gradient). which == NULL ("all") chooses every pair whose rank runs something between its F
 * and its backward (where they are adjacent recompute would save nothing and cost an F).
 * ZB_EINVAL if `in` already has R actions. */
zb_status_t zb_add_recompute(const zb_schedule_t *in, const bool *which, zb_schedule_t **out,
                             zb_err_t *err);
/* Per (stage, mb): drop every R whose F can keep its activations after all within
 * c->mem_limit (the F becomes saving), latest first on each rank. Dropping work never delays
 * anything in the simulator (a rank runs its list in order, start = max(free, ready)), so the
 * makespan cannot grow. `work` bounds the scanned actions; *dropped (may be NULL) counts the
 * R's removed. ZB_ENOMEM. */
zb_status_t zb_recompute_prune(zb_schedule_t *s, const zb_costs_t *c, long long work,
                               int *dropped, zb_err_t *err);

/* Offload: a copy of `in` (compute-only or lowered, without O/L) in which every (stage, mb) with
 * which[stage * M + mb] set gets an O right after its F and an L before its B/BW. which == NULL
 * ("all") chooses every pair that is not recomputed and whose rank runs something between its F
 * and its backward. Each L goes as late as its B allows without waiting, by the timeline of `in`
 * simulated under `c` (the compute does not move while no B waits): latest B first, each L
 * ending before its B starts and before the next L on the channel; an L that cannot be in time
 * goes right after its O. Recomputed pairs (non-saving F) are never offloaded. ZB_EINVAL if `in`
 * already has O/L actions or `c` does not fit it; what zb_simulate returns. */
zb_status_t zb_add_offload(const zb_schedule_t *in, const bool *which, const zb_costs_t *c,
                           zb_schedule_t **out, zb_err_t *err);
/* The planner's offload step on a schedule without O/L or R: NONE copies it; ALL is
 * zb_add_offload(in, NULL); AUTO starts from `in` and, while some rank's simulated peak is over
 * its limit in `c`, turns one (stage, mb) alive at that peak from kept to offloaded or
 * recomputed, or from offloaded to recomputed, whichever lowers the rank's peak at the least
 * makespan (a pair moves at most twice, so it ends). ZB_EMEMLIMIT when the limit cannot be met
 * that way; *note (may be NULL, 96 bytes) says what AUTO chose. */
zb_status_t zb_plan_offload(const zb_schedule_t *in, zb_offload_t mode, const zb_costs_t *c,
                            zb_schedule_t **out, char *note, zb_err_t *err);

/* Generate `family` as zb_generate does and plan offload into it with `mode` under p->costs
 * (zb_plan_offload); p->note gets auto's choice. A fixed family is generated as it is; auto is
 * searched both without the memory limit and under it with the stashes taken as free between F
 * and backward, the faster fitting result kept (offload_generate.c says why). The result has
 * p->chunks chunks (p->any_placement is ignored). ZB_EINVAL with p->recompute other than none. */
zb_status_t zb_generate_offload(const char *family, zb_gen_params_t *p, zb_offload_t mode,
                                zb_schedule_t **out, zb_err_t *err);
/* Test hook: simulated actions each offload descent of auto's own starts may spend (default
 * 2e7), so that a test can make auto run out of it on a small size. Not for users. */
#define ZB_TEST_DESCENT_WORK_ENV "ZBPP_TEST_DESCENT_WORK"

/* ---- Validation ---- */

/* Checks: every (stage, mb) has exactly one F and one B (or one BW), plus one W when split; each
 * action on the rank that holds its stage; W after B on its stage; at most one R per (stage, mb),
 * after its F and before its B/BW in program order, and ZB_ACT_NOSAVE on exactly the F's that
 * have one; at most one O and one L per (stage, mb), both or neither, O after its F, L after its
 * O and before its B/BW, never with an R of the same pair; dependencies F(s-1)->F(s),
 * F(s)->B(s), B(s+1)->B(s) satisfiable; memory (when costs != NULL and costs->mem_limit finite)
 * within the limit on every rank (with O/L: the simulator's timed peak, see zb_simulate); and on the lowered program (comms inserted if absent) no
 * deadlock, with sends buffered and receives blocking. On failure returns ZB_ESCHEDULE,
 * ZB_EMEMLIMIT or ZB_EDEADLOCK with a message naming the action, or for a deadlock the cycle of
 * ranks and the actions they wait on. */
zb_status_t zb_validate(const zb_schedule_t *s, const zb_costs_t *costs, zb_err_t *err);

/* ---- Simulation ---- */

typedef struct {
    int ranks;
    int *len;             /* [ranks] actions per rank (of the simulated program) */
    double **start;       /* [ranks][len] */
    double **end;         /* [ranks][len] */
    double makespan;      /* last end - first start, over all ranks */
    double *span;         /* [ranks] end of last action - start of first F */
    double *busy;         /* [ranks] compute time */
    double span_max;      /* T = max span */
    double busy_max;      /* largest per-rank compute time */
    double bubble_rate;   /* (T - busy_max) / T */
    double *peak_mem;     /* [ranks] peak running memory sum */
    double *peak_time;    /* [ranks] time at which the peak is first reached */
    const zb_schedule_t *schedule; /* the simulated schedule (borrowed, not owned) */
} zb_sim_t;

/* Event-driven simulation with the given costs. A compute-only schedule is simulated with comm
 * latency on every cross-rank dependency; a lowered one with SEND/RECV taking no time and a
 * message arriving `comm` after its send. O/L run on the rank's two copy channels, not its
 * compute: an O frees the stash when it ends, an L takes it back when it starts, a B/BW waits for
 * its L (docs/offload.md); peak_mem is then the peak of each rank's memory timeline. Fails with ZB_EDEADLOCK if the program cannot finish.
 * `s` must stay alive while *out is used. Free with zb_sim_free. */
zb_status_t zb_simulate(const zb_schedule_t *s, const zb_costs_t *costs, zb_sim_t *out,
                        zb_err_t *err);
void zb_sim_free(zb_sim_t *sim);

/* The pipeline trainer's bubble, one definition for its measured and predicted timelines:
 * 1 - sum over ranks of busy / (ranks x span_max), the share of the P ranks' time within the
 * longest span that no compute action used. Equals bubble_rate when every rank does the same
 * work; counts the lighter ranks' waiting when stages are unbalanced. 0 for an empty timeline. */
double zb_sim_span_idle(const zb_sim_t *sim);
/* Rank r's actions of type t in the timeline of schedule s (the one simulated, or the one a
 * run's measured timeline was filled for): their total time (end - start), and how many into
 * *count (may be NULL). 0 when the rank has none or the shapes do not match. */
double zb_sim_type_time(const zb_sim_t *sim, const zb_schedule_t *s, int r, zb_action_type_t t,
                        int *count);
/* The ranks that finish last: last[r] = 1 when rank r's last action ends within tol x the
 * makespan of the latest end (0 <= tol < 1), else 0. Returns how many, 0 for an empty timeline. */
int zb_sim_last_ranks(const zb_sim_t *sim, double tol, unsigned char *last);

#endif
