/* parts: the launch's context (run/plan.h's struct ddp_plan_ctx) cut into what each consumer outside driver/ is
 * given: the configuration of the records, of doctor and of the roster, each the parts of the context it reads
 * (by pointer: they must outlive it) and the few fields of this node's place that it needs (copied). The watch's
 * configuration, which carries the driver's callbacks too, is filled in supervise.c. Pure; keeps nothing. */
#ifndef DDP_PARTS_H
#define DDP_PARTS_H

#include "doctor/doctor.h"
#include "driver/roster.h"
#include "records/records.h"
#include "run/plan.h"

struct ddp_records_config ddp_parts_records(const struct ddp_plan_ctx *ctx);
struct ddp_doctor_config ddp_parts_doctor(const struct ddp_plan_ctx *ctx);
struct ddp_roster_config ddp_parts_roster(const struct ddp_plan_ctx *ctx);

#endif
