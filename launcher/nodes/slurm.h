/* slurm: what a Slurm job tells this launcher through its environment (pure: envp is passed in): inside an
 * srun step the node count, this node's rank, the master host and the GPUs; in a batch step only the GPUs.
 * It talks to no Slurm daemon, probes no port and sets nothing; launch.c decides how these fill the spec. */
#ifndef DDP_SLURM_H
#define DDP_SLURM_H

#include <stdbool.h>

#include "base/util.h"
#include "spec/spec.h"

/* What Slurm says about this launch. Zero-initialised = not under Slurm. Strings owned; ddp_slurm_free(). */
struct ddp_slurm {
    bool active;         /* inside a Slurm job (SLURM_JOB_ID set) and [slurm] enabled allows it */
    bool is_step;        /* inside an srun step (SLURM_STEP_ID set); false in the batch/salloc shell */
    int nnodes;          /* nodes of the step (1 in a batch step: only this node is used) */
    int node_rank;       /* this node's index in the step (SLURM_NODEID, step-relative); 0 in a batch step */
    int ntasks_per_node; /* tasks per node of the step: always 1 when detection succeeds in a step */
    int job_nnodes;      /* nodes of the whole allocation (SLURM_JOB_NUM_NODES / SLURM_NNODES) */
    char *master_addr;   /* first host of the step's node list (SLURM_STEP_NODELIST); NULL in a batch step */
    char *job_id;        /* SLURM_JOB_ID */
    char *step_id;       /* SLURM_STEP_ID, or NULL in a batch step */
    unsigned long long job_id_num, step_id_num; /* the same as numbers (0 when not numeric / batch step) */
    char *nodename;                             /* SLURMD_NODENAME, or NULL */
    struct ddp_strv hosts;                      /* the step's hosts in node-rank order (batch: the job's hosts) */
    char *gpus;         /* global GPU indices Slurm gave this node, "0,1" (SLURM_STEP_GPUS in a step, else
                           SLURM_JOB_GPUS); NULL when Slurm gave no GPUs */
    char *cuda_visible; /* CUDA_VISIBLE_DEVICES as found, or NULL */
    bool gpus_local;    /* CUDA_VISIBLE_DEVICES numbers the GPUs 0..n-1 while gpus are other global indices:
                           the devices cgroup hides the rest (ConstrainDevices=yes), so CUDA index i is the
                           i-th of gpus in ascending order */
    long long mem_kib;  /* the job's memory on this node in KiB: SLURM_MEM_PER_NODE, or SLURM_MEM_PER_CPU x this
                           node's CPUs (SLURM_CPUS_ON_NODE, else SLURM_JOB_CPUS_PER_NODE's first); 0: not said */
    char *warning;      /* one line launch.c logs as a warning, or NULL (e.g. a multi-node job whose
                           batch step runs ddplaunch without srun) */
};

/* Read Slurm's variables from envp. enabled: DDP_NO -> out->active = false, nothing read; DDP_AUTO -> active
 * when SLURM_JOB_ID is set; DDP_YES -> as AUTO but outside a Slurm job it is an error.
 * In an srun step, ddplaunch wants ONE task per node (it starts the workers itself): a step with more tasks
 * than nodes is an error that says how to call srun. Returns 0 (out filled; caller frees it with
 * ddp_slurm_free() also when inactive), or -EINVAL with err ("Slurm ...": which variable, what was
 * expected); on error out holds nothing to free. */
int ddp_slurm_detect(char *const *envp, enum ddp_tristate enabled, struct ddp_slurm *out, struct ddp_err *err);

/* Put what Slurm says into spec, at the environment's precedence (above defaults, the site config and the job
 * spec; below DDPLAUNCH_* variables and the command line, which win): in an srun step job.nnodes, job.node_rank
 * and job.master_addr. Nothing in a batch step or when !s->active. The master port stays as the spec says:
 * with master_port = auto, launch.c passes s->job_id_num / s->step_id_num to ddp_port_reserve() (port.h), which
 * derives the same candidate on every node. 0, or a negative errno with err. */
int ddp_slurm_apply(const struct ddp_slurm *s, struct ddp_spec *spec, struct ddp_err *err);

/* The master port of this job step with master_port = auto:LO-HI (LO = HI = 0: port.c's default range), the
 * same on every node: ddp_port_job_port() (port.h) of the numeric job and step ids, which is the port node 0
 * reserves with ddp_port_reserve(job_key, job_step_key, max_candidates = 1). Returns the port, or -EINVAL
 * when !s->active. */
int ddp_slurm_port(const struct ddp_slurm *s, int lo, int hi);

void ddp_slurm_free(struct ddp_slurm *s);

#endif
