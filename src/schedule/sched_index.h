/* Internal helpers shared by the validator, the simulator and the comm pass. */
#ifndef ZBPP_SCHEDULE_INDEX_H
#define ZBPP_SCHEDULE_INDEX_H

#include "zbpp/schedule.h"

/* Structural check of every action: known type, stage and mb in range, on the rank that holds its
 * stage, and SEND/RECV pointing at an existing neighbour stage. ZB_ESCHEDULE with a message
 * "<who>: rank R action I: ..." naming the first offending action. */
zb_status_t zb_sched_check_actions(const zb_schedule_t *s, const char *who, zb_err_t *err);

#endif
