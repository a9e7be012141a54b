/* scheduler: node ranks from the schedulers and launchers that already know them (besides Slurm, slurm.h), read
 * from the variables they really set: Kubernetes indexed Jobs (JOB_COMPLETION_INDEX) and JobSet (JOBSET_NAME,
 * REPLICATED_JOB_NAME, JOB_INDEX: the leader's stable DNS name), SkyPilot (SKYPILOT_NODE_RANK,
 * SKYPILOT_NUM_NODES, SKYPILOT_NODE_IPS, SKYPILOT_NUM_GPUS_PER_NODE), OpenMPI (`mpirun -N 1`:
 * OMPI_COMM_WORLD_RANK/SIZE/LOCAL_SIZE), PMIx (PMIX_RANK) and Flux (`flux run -N2`: FLUX_TASK_RANK,
 * FLUX_JOB_SIZE, FLUX_JOB_NNODES). Kubeflow's PET_* variables are command-line equivalents (cli.c).
 * Pure: the environment is an argument; it opens nothing and decides nothing about ports or secrets. */
#ifndef DDP_SCHEDULER_H
#define DDP_SCHEDULER_H

#include "base/util.h"
#include "spec/spec.h"

struct ddp_scheduler {
    const char *name;  /* "skypilot", "flux", "openmpi", "pmix", "jobset", "kubernetes"; NULL = none found */
    const char *vars;  /* the variables it read, for messages and plan ("SKYPILOT_NODE_RANK, ...") */
    int node_rank;     /* >= 0 */
    int nnodes;        /* 0 = it does not say (give --nnodes) */
    char *master_addr; /* node 0's address, or NULL (give --master-addr); owned */
    int gpus_per_node; /* 0 = it does not say */
};

/* Look for a source in envp, in the order above (SkyPilot first). 0 with out->name NULL when there is none,
 * 1 when one was found, or -EINVAL with err when its variables are malformed or describe more than one
 * ddplaunch per node (mpirun without -N 1, flux run with more tasks than nodes). Free with ddp_scheduler_free(). */
int ddp_scheduler_detect(char *const *envp, struct ddp_scheduler *out, struct ddp_err *err);

/* Put what the source says into spec at the environment's precedence (DDPLAUNCH_* variables and the command
 * line win): job.node_rank, job.nnodes and job.master_addr where it knows them. 0, or -EINVAL with err (a node
 * rank not below nnodes). */
int ddp_scheduler_apply(const struct ddp_scheduler *s, struct ddp_spec *spec, struct ddp_err *err);

void ddp_scheduler_free(struct ddp_scheduler *s);

#endif
