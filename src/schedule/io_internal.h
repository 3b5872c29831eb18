/* Helpers shared by the schedule writers (io_*.c). Not part of the public API. */
#ifndef ZBPP_IO_INTERNAL_H
#define ZBPP_IO_INTERNAL_H

#include <stdio.h>

#include "zbpp/error.h"
#include "zbpp/schedule.h"

/* Check that a zb_sim_t is complete and matches its schedule (same ranks, same action counts,
 * start <= end). `what` prefixes the message ("trace"). */
zb_status_t zb_io_check_sim(const zb_sim_t *sim, const char *what, zb_err_t *err);

/* Write s as a JSON string literal (quotes included, control characters escaped). */
void zb_io_json_string(FILE *out, const char *s);

/* Write s with the five XML special characters escaped. */
void zb_io_xml_text(FILE *out, const char *s);

/* Index of a stage's chunk on its rank (0 for the first chunk, 1 for the second, ...). */
int zb_io_local_chunk(const zb_schedule_t *s, int stage);

#endif
