/* topo_print: `ddplaunch topo`: the GPU link matrix, NUMA nodes, GPUs and the picks placement would make, as
 * text (nvidia-smi topo -m style) or one JSON document. It decides nothing: placement is place.h. */
#ifndef DDP_TOPO_PRINT_H
#define DDP_TOPO_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "spec/spec.h"
#include "topo/topo.h"

/* `ddplaunch topo`: print the link matrix, NUMA nodes and picks, as text or one JSON document. The picks
 * read CUDA_VISIBLE_DEVICES from envp and keep to sched_gpus (the GPUs a scheduler gave this node, global
 * indices "0,1"; NULL: no such list); spec may be NULL (defaults);
 * holders (per topology GPU, may be NULL) name the GPUs other jobs hold. Exit status 0, or 1 when writing
 * failed. */
int ddp_topo_print(const struct ddp_topo *topo, const struct ddp_spec *spec, char *const *envp, const char *sched_gpus,
                   const char *const *holders, bool json, FILE *out);

#endif
