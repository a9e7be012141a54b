/* check_net: doctor's checks of the network a job needs: the master port (free, who holds it, the ephemeral
 * range), the master address (resolves, routes, loopback with several nodes), NCCL's and gloo's socket interfaces,
 * the NCCL/torch variables. Each a pure function of the facts passed in (doctor.c gathers them); it opens no
 * socket itself. */
#ifndef DDP_CHECK_NET_H
#define DDP_CHECK_NET_H

#include <stdbool.h>
#include <stddef.h>

#include "doctor/check.h"
#include "host/port.h"
#include "spec/spec.h"

/* ---- master port (check "master-port") ---- */
struct ddp_check_port {
    struct ddp_port_spec spec; /* master_port as resolved */
    int node_rank;
    const char *master_addr;
    const char *tcp, *tcp6;               /* text of /proc/net/tcp and /proc/net/tcp6, NULL when unreadable */
    const struct ddp_port_holder *holder; /* who listens on the explicit port, NULL when unknown */
    const char *lock_holder;              /* another ddplaunch job reserved the explicit port (who), or NULL */
    int probe_rc;                         /* ddp_port_probe() of the explicit port: 0, -EADDRINUSE, ... */
    const char *ephemeral;                /* text of /proc/sys/net/ipv4/ip_local_port_range, or NULL */
    const struct ddp_strv *held_locks;    /* auto: port locks held now (ddp_port_locks_held), NULL = unknown */
    const char *lock_dir;                 /* their namespace */
    const char *job;                      /* auto: derived from this scheduler job id ("slurm job 12"), or NULL */
    int job_port;                         /* then: the port it gives first */
};
void ddp_check_port(struct ddp_check_report *r, const struct ddp_check_port *p);

/* ---- master address, route, socket interfaces (checks "master-addr", "nccl-ifname", "gloo-ifname") ---- */
struct ddp_check_addr {
    const char *addr; /* master_addr */
    int nnodes;
    int gai_rc;            /* getaddrinfo() result, 0 = resolved */
    const char *gai_error; /* gai_strerror() text when gai_rc != 0 */
    const char *resolved;  /* first address, numeric */
    bool loopback;         /* it is a loopback address */
    int route_errno;       /* connect() errno of the UDP route probe, 0 = routed */
    const char *src_ip;    /* our address on that route */
    const char *ifname;    /* interface holding src_ip, or NULL */
};
void ddp_check_addr(struct ddp_check_report *r, const struct ddp_check_addr *a);

/* Whether NCCL would use interface ifname under NCCL_SOCKET_IFNAME = spec: a comma list of prefixes; a leading
 * '^' excludes the listed ones instead; a leading '=' (after any '^') makes the names exact. Pure. */
bool ddp_check_ifname_match(const char *spec, const char *ifname);
/* NCCL_SOCKET_IFNAME (value, or NULL when unset) against the interfaces up here; route_if is the interface that
 * reaches master_addr (or NULL). gloo = the GLOO_SOCKET_IFNAME check (comma list of exact names). */
void ddp_check_ifname(struct ddp_check_report *r, const char *var, const char *value, bool gloo,
                      const char *const *ifnames, size_t nifs, const char *route_if);

/* ---- NCCL/torch variables (check "nccl-env"): ddp_nccl_validate() on [nccl] and envp ---- */
void ddp_check_nccl_env(struct ddp_check_report *r, const struct ddp_kvlist *nccl, char *const *envp);

#endif
