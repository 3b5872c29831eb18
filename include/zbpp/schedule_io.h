/* zbpp — schedule formats: PyTorch pipelining CSV (read/write), JSON summary, Chrome/Perfetto
 * trace, SVG Gantt chart, ASCII grid.
 *
 * Writers print to a caller-given FILE* and never close it; a write error (ferror) is reported as
 * ZB_EIO. Readers parse a memory buffer. The trace, SVG and ASCII writers take a zb_sim_t so the
 * same code draws a simulated timeline and a measured one (the runtime fills a zb_sim_t with
 * measured start/end times). See docs/formats.md for the exact formats. */
#ifndef ZBPP_SCHEDULE_IO_H
#define ZBPP_SCHEDULE_IO_H

#include <stdio.h>

#include "zbpp/error.h"
#include "zbpp/schedule.h"

/* Limits of the CSV reader: bigger inputs are rejected with ZB_EFORMAT, never allocated. */
#define ZB_CSV_MAX_BYTES (64u << 20) /* whole input */
#define ZB_CSV_MAX_RANKS 4096        /* rows */
#define ZB_CSV_MAX_INDEX 1000000     /* largest stage or microbatch index */

/* Write `s` as a torch.distributed.pipelining CSV: one row per rank, cells `<stage><type><mb>`
 * with types F, I (our B), W, B (our BW), SEND_F, RECV_F, SEND_B, RECV_B, comma-separated, rows
 * ended by "\n". Writes exactly the actions the schedule holds (compute-only or lowered). */
zb_status_t zb_csv_write(const zb_schedule_t *s, FILE *out, zb_err_t *err);

/* Parse a PyTorch pipelining CSV from data[0..len). Infers P = rows, S = max stage + 1,
 * v = S / P, M = max microbatch + 1 and the placement (loop if every action sits on rank
 * stage mod P, else V if v == 2 and every action fits it). Accepts "\r\n" line ends, spaces
 * around a cell, empty cells (idle slots, skipped), trailing blank lines, and the legacy `BW`
 * type. Anything else (unknown type, bad or huge number, junk, a blank or all-empty row before
 * the last row, no placement fits, S % P != 0, input over the limits) gives ZB_EFORMAT with a
 * message
 * "line L, cell K: <what>" (or a whole-file message). The schedule is named "csv"; it is only
 * parsed, not validated (call zb_validate). *out is owned by the caller; NULL on failure.
 * PyTorch's runtime-lowered dumps are read too: FSDP actions `<stage>UNSHARD`, `<stage>RESHARD`,
 * `<stage>REDUCE_GRAD` (a microbatch after them is allowed) are dropped, and a DualPipeV
 * composite cell `(0F7;7B3)OVERLAP_F_B` becomes its compute actions in the order written (here
 * F(0, 7) then BW(7, 3)); see zb_csv_read_info for the counts. */
zb_status_t zb_csv_read(const char *data, size_t len, zb_schedule_t **out, zb_err_t *err);

/* What zb_csv_read_info saw besides plain actions. */
typedef struct {
    int ignored_fsdp; /* UNSHARD / RESHARD / REDUCE_GRAD cells read and dropped */
    int composite;    /* (..;..)OVERLAP_F_B cells split into their actions */
} zb_csv_info_t;

/* zb_csv_read, also filling *info (may be NULL; zeroed first, complete on success) so a caller
 * can tell the user what was dropped ("ignored 12 UNSHARD/RESHARD/REDUCE_GRAD actions"). */
zb_status_t zb_csv_read_info(const char *data, size_t len, zb_schedule_t **out,
                             zb_csv_info_t *info, zb_err_t *err);

/* Write a JSON object summarising a simulated schedule: schedule, ranks, chunks, placement,
 * microbatches, stages, actions, lowered, makespan, span, spans[], busy[], busy_max,
 * bubble_rate, peak_memory[], peak_memory_max, peak_memory_time[], mem_limit (null = none) and
 * the costs used (per stage arrays). `sim` must come from zb_simulate(s, costs, ...).
 * Non-finite numbers are written as null. */
zb_status_t zb_json_write_summary(const zb_schedule_t *s, const zb_costs_t *costs,
                                  const zb_sim_t *sim, FILE *out, zb_err_t *err);

/* Write the timeline of `sim` as Chrome/Perfetto trace JSON ("traceEvents"): one complete event
 * (ph "X") per compute action on pid 0, tid = rank, named like "F s3 mb7", with args stage/mb/
 * type and a "cname" colour per type; SEND/RECV as thread-scoped instant events (ph "i").
 * ts/dur are microseconds: time_scale is the number of microseconds per unit of sim time
 * (1e6 for a timeline in seconds; the CLI uses 1000: one cost unit shows as 1 ms). Needs
 * sim->schedule. ZB_EINVAL for a non-positive or non-finite time_scale. */
zb_status_t zb_trace_write(const zb_sim_t *sim, double time_scale, FILE *out, zb_err_t *err);

/* An interval outside the schedule's actions (e.g. a training step's optimizer), in sim time. */
typedef struct {
    int rank;
    const char *name; /* shown as is (JSON-escaped) */
    double start, end;
} zb_trace_span_t;

/* zb_trace_write plus `n` extra intervals as complete events on a second process ("step
 * phases", pid 1, tid = rank), so they never overlap the actions' rows. ZB_EINVAL for a span
 * with a rank out of range or a non-finite or negative-length interval. */
zb_status_t zb_trace_write_spans(const zb_sim_t *sim, double time_scale,
                                 const zb_trace_span_t *spans, int n, FILE *out, zb_err_t *err);

/* Write an SVG Gantt chart of `sim`: one row per rank, a time axis, one rectangle per compute
 * action coloured by type (F, B, W, BW distinct), microbatch labels where they fit, a legend and
 * a title "<title> — makespan X, bubble Y%". title may be NULL (the schedule name is used). */
zb_status_t zb_svg_write(const zb_sim_t *sim, const char *title, FILE *out, zb_err_t *err);

/* Write an ASCII grid of `sim` for a terminal: one line per rank, time quantised to the shortest
 * compute action, each action drawn over its duration as its letter and microbatch (F, B, W; a
 * fused BW also as B; lowercase for a rank's second chunk), idle as '.'. If the grid would be
 * wider than max_width characters (0 = 200) it drops the spaces between actions, then the
 * microbatch numbers, then scales time down so it fits. Ends with a legend line. */
zb_status_t zb_ascii_write(const zb_sim_t *sim, int max_width, FILE *out, zb_err_t *err);

#endif
