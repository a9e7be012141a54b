/* test_parts: each consumer's configuration carries the parts of the launch's context it reads, by pointer, and
 * this node's place in the job as the context says it. */
#include <criterion/criterion.h>

#include "driver/parts.h"

static const char *const held[] = {"pid 7 (alice, python3, 2 GiB)", NULL};

static struct ddp_plan_ctx ctx_of(struct ddp_spec *spec)
{
    return (struct ddp_plan_ctx){.job = {.spec = spec, .hostname = "node-a", .run_id = "rid"},
                                 .gpus = {.held = held, .lease_dir = "/run/locks"},
                                 .coord = {.secret = "s3cret", .port = 29600, .node = 1},
                                 .master_addr = "10.0.0.1",
                                 .master_port = 29500,
                                 .port_job = "slurm job 12",
                                 .port_job_first = 29512,
                                 .nnodes = 4,
                                 .node_rank = 2,
                                 .nproc = 8,
                                 .python = "/usr/bin/python3",
                                 .python_why = "python3 from PATH"};
}

Test(parts, records_get_the_job_part_and_this_nodes_place)
{
    struct ddp_spec spec = {0};
    struct ddp_plan_ctx ctx = ctx_of(&spec);
    struct ddp_records_config c = ddp_parts_records(&ctx);
    cr_expect_eq(c.job, &ctx.job, "the job part itself, not a copy");
    cr_expect_eq(c.job->spec, &spec);
    cr_expect_eq(c.gpu_held, held);
    cr_expect_str_eq(c.master_addr, "10.0.0.1");
    cr_expect_eq(c.master_port, 29500);
    cr_expect_eq(c.nnodes, 4);
    cr_expect_eq(c.node_rank, 2);
    cr_expect_eq(c.nproc, 8);
}

Test(parts, doctor_gets_the_job_and_gpu_parts_and_the_port_job)
{
    struct ddp_spec spec = {0};
    struct ddp_plan_ctx ctx = ctx_of(&spec);
    struct ddp_doctor_config c = ddp_parts_doctor(&ctx);
    cr_expect_eq(c.job, &ctx.job);
    cr_expect_eq(c.gpus, &ctx.gpus);
    cr_expect_str_eq(c.gpus->lease_dir, "/run/locks");
    cr_expect_str_eq(c.port_job, "slurm job 12");
    cr_expect_eq(c.port_job_first, 29512);
    cr_expect_eq(c.nnodes, 4);
    cr_expect_eq(c.node_rank, 2);
    cr_expect_eq(c.nproc, 8);
    cr_expect_str_eq(c.python, "/usr/bin/python3");
    cr_expect_str_eq(c.python_why, "python3 from PATH");
}

Test(parts, roster_gets_the_job_and_coordination_parts)
{
    struct ddp_spec spec = {0};
    struct ddp_plan_ctx ctx = ctx_of(&spec);
    struct ddp_roster_config c = ddp_parts_roster(&ctx);
    cr_expect_eq(c.job, &ctx.job);
    cr_expect_eq(c.coord, &ctx.coord);
    cr_expect_str_eq(c.coord->secret, "s3cret");
    cr_expect_eq(c.coord->port, 29600);
    cr_expect_str_eq(c.master_addr, "10.0.0.1");
    cr_expect_eq(c.master_port, 29500);
    cr_expect_eq(c.nnodes, 4);
    cr_expect_eq(c.nproc, 8);
}
