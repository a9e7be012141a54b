/* doctor: `ddplaunch doctor`: gathers the live facts the checks (check.h) judge: the topology, its GPUs and
 * NVML's view of them (topo.h, nvml.h), the GPU leases (lease.h), the master port (port.h), libcuda, libnccl,
 * /dev, /proc, addresses and interfaces, limits; runs every check and prints the report.
 * It starts no worker and changes nothing, except creating the runtime directories a job would create anyway. */
#ifndef DDP_DOCTOR_H
#define DDP_DOCTOR_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "doctor/check.h"
#include "doctor/check_host.h"
#include "doctor/check_net.h"
#include "run/plan.h"

/* ---- state directories (check "state-dir") ----
 * Creates/verifies the shared lock directory (ddp_rundir_lock_dir(envp)) and the private runtime directory as a
 * job would, and checks both are writable. Effects: may create those two directories. */
void ddp_doctor_check_state_dirs(struct ddp_check_report *r, char *const *envp, uid_t uid);

/* ---- the command ---- */

/* What doctor checks of the job: the parts of the plan context (run/plan.h) it reads, which the driver fills as
 * for `ddplaunch plan`, but with master_port NOT reserved: job->spec's master_port is read. */
struct ddp_doctor_config {
    const struct ddp_plan_job *job;   /* spec, base_env (NULL: environ), topology (may be NULL) */
    const struct ddp_plan_gpus *gpus; /* the GPUs it may take: the placement leaves other jobs' out */
    const char *master_addr;
    const char *port_job; /* master_port = auto derived from a scheduler's job id, or NULL */
    int port_job_first;   /* then: the port that job id gives first */
    int nnodes;
    int node_rank;
    int nproc;
    const char *python;     /* the interpreter of script and module jobs, or NULL: python3 */
    const char *python_why; /* why that one, or NULL */
};

/* Run every check for dc and print the report to out, as text or one JSON document. Returns the exit status:
 * 0 all ok, 1 some warn, 2 some fail. */
int ddp_doctor_run(const struct ddp_doctor_config *dc, bool json, FILE *out);
/* The same, filling r instead of printing (tests). Caller frees r with ddp_check_report_free(). */
void ddp_doctor_collect(const struct ddp_doctor_config *dc, struct ddp_check_report *r);

#endif
