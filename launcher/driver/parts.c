/* parts: the launch's context cut into each consumer's configuration (parts.h). */
#include "driver/parts.h"

struct ddp_records_config ddp_parts_records(const struct ddp_plan_ctx *ctx)
{
    return (struct ddp_records_config){.job = &ctx->job,
                                       .gpu_held = ctx->gpus.held,
                                       .master_addr = ctx->master_addr,
                                       .master_port = ctx->master_port,
                                       .nnodes = ctx->nnodes,
                                       .node_rank = ctx->node_rank,
                                       .nproc = ctx->nproc};
}

struct ddp_doctor_config ddp_parts_doctor(const struct ddp_plan_ctx *ctx)
{
    return (struct ddp_doctor_config){.job = &ctx->job,
                                      .gpus = &ctx->gpus,
                                      .master_addr = ctx->master_addr,
                                      .port_job = ctx->port_job,
                                      .port_job_first = ctx->port_job_first,
                                      .nnodes = ctx->nnodes,
                                      .node_rank = ctx->node_rank,
                                      .nproc = ctx->nproc,
                                      .python = ctx->python,
                                      .python_why = ctx->python_why};
}

struct ddp_roster_config ddp_parts_roster(const struct ddp_plan_ctx *ctx)
{
    return (struct ddp_roster_config){.job = &ctx->job,
                                      .coord = &ctx->coord,
                                      .master_addr = ctx->master_addr,
                                      .master_port = ctx->master_port,
                                      .nnodes = ctx->nnodes,
                                      .nproc = ctx->nproc};
}
