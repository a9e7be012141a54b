/* scheduler: what the scheduler or launcher that started this agent says, as one neutral struct the driver reads
 * (launch.c, and through it host/, topo/ and run/): node rank, node count, node 0's address, a job key for ports
 * and run ids, the GPUs it gave. Each source is one row of scheduler.c's table, read from the variables it
 * really sets: Slurm (slurm.c: srun steps, batch steps, its GPUs), IBM LSF (LSB_JOBID, LSB_MCPU_HOSTS or
 * LSB_HOSTS, LSB_DJOB_NUMPROC: this host's place in the host list), PBS Pro and Torque (PBS_JOBID, PBS_NODEFILE,
 * PBS_NODENUM), Kubernetes indexed Jobs (JOB_COMPLETION_INDEX) and JobSet (JOBSET_NAME,
 * REPLICATED_JOB_NAME, JOB_INDEX: the leader's stable DNS name), SkyPilot (SKYPILOT_NODE_RANK,
 * SKYPILOT_NUM_NODES, SKYPILOT_NODE_IPS, SKYPILOT_NUM_GPUS_PER_NODE), OpenMPI (`mpirun -N 1`:
 * OMPI_COMM_WORLD_RANK/SIZE/LOCAL_SIZE), PMIx (PMIX_RANK) and Flux (`flux run -N2`: FLUX_TASK_RANK,
 * FLUX_JOB_SIZE, FLUX_JOB_NNODES). Kubeflow's PET_* variables are command-line equivalents (cli.c).
 * Pure: the environment is an argument; it opens nothing but PBS's node file, and decides nothing about ports or
 * secrets (ddp_scheduler_port is port.h's pure derivation from the job key). */
#ifndef DDP_SCHEDULER_H
#define DDP_SCHEDULER_H

#include <stdbool.h>

#include "base/util.h"
#include "spec/spec.h"

struct ddp_scheduler {
    const char *name;     /* "slurm", "lsf", "pbs", "skypilot", "flux", "openmpi", "pmix", "jobset", "kubernetes";
                             NULL = none found */
    const char *vars;     /* the variables it read, for messages and plan ("SKYPILOT_NODE_RANK, ...") */
    bool sets_nodes;      /* it says this node's rank (and what it knows of nnodes and master_addr): apply sets them */
    bool rendezvous;      /* several nodes meet as it says (rdzv.h's source), not by a c10d rendezvous */
    int node_rank;        /* >= 0; -1: this host is not in its host list (not_listed says so) */
    int nnodes;           /* 0 = it does not say (give --nnodes) */
    char *master_addr;    /* node 0's address, or NULL (give --master-addr); owned */
    int gpus_per_node;    /* 0 = it does not say */
    const char *where[3]; /* where nnodes, node_rank and master_addr came from (plan's origin), or NULL: vars */
    char *job_id;         /* the job's id as the scheduler writes it ("123", "4567.pbs01"), or NULL; owned */
    unsigned long long key_job, key_step; /* nonzero key_job: node 0's master port is derived from these, the
                                             same on every node (ddp_scheduler_port) */
    char *gpus;                           /* the GPUs it gave this node (global indices "0,1"), or NULL; owned */
    bool allocates_gpus; /* it hands out GPUs itself: no host-wide GPU leases by default ([gpus] lease = auto) */
    bool gpus_local;     /* CUDA_VISIBLE_DEVICES numbers its GPUs 0..n-1 (a devices cgroup hides the rest) */
    long long mem_kib;   /* the job's memory on this node (KiB), or 0 when it does not say */
    bool step_signals;   /* its step daemon signals every process of the step itself (Slurm inside an srun step) */
    char *warning;       /* one line for the launcher to warn with, or NULL; owned */
    char *not_listed;    /* node_rank -1: the line apply refuses with, unless the rank is given; owned */
};

/* What decides which sources are asked. */
struct ddp_scheduler_opts {
    enum ddp_tristate slurm; /* [slurm] enabled: no = Slurm is not read; yes = outside a Slurm job is an error */
    bool dynamic_rdzv;       /* a c10d rendezvous: other sources than Slurm give no node ranks (their job ids and
                                GPUs still count); Slurm's step stays the rendezvous, as before */
    const char *hostname;    /* this host's name (LSF and PBS give a host list, not a rank); NULL = unknown */
};

/* The one seam between schedulers and the launcher: the first source in envp, in the order Slurm, LSF,
 * PBS/Torque, SkyPilot, Flux, OpenMPI, PMIx, JobSet, Kubernetes. 0 with out->name NULL when there is none, 1
 * when one was found, or -EINVAL with err when its variables are malformed or describe more than one ddplaunch
 * per node (mpirun without -N 1, flux run with more tasks than nodes, srun with more tasks than nodes). Pure but
 * for PBS, whose node list is a file (PBS_NODEFILE). Free with ddp_scheduler_free() either way. */
int ddp_scheduler_detect(char *const *envp, const struct ddp_scheduler_opts *o, struct ddp_scheduler *out,
                         struct ddp_err *err);

/* Put what the source says into spec at the environment's precedence (DDPLAUNCH_* variables and the command
 * line win): job.node_rank, job.nnodes and job.master_addr where it knows them. 0, or -EINVAL with err (a node
 * rank not below nnodes). */
int ddp_scheduler_apply(const struct ddp_scheduler *s, struct ddp_spec *spec, struct ddp_err *err);

/* Node 0's master port with master_port = auto:LO-HI (LO = HI = 0: port.c's default range), derived from the job
 * key the same on every node (port.h's ddp_port_job_port); -EINVAL when the source gives no key. */
int ddp_scheduler_port(const struct ddp_scheduler *s, int lo, int hi);

void ddp_scheduler_free(struct ddp_scheduler *s);

#endif
