/* check_etcd: doctor's checks of how the nodes of a job meet: which node the mode can lose (check "rendezvous"),
 * and with etcd-v3 the cluster's members (check "etcd": each reachable, its version; quorum; the answer to a
 * read of the job's prefix, which fails when etcd wants a user). The checks are pure functions of the facts
 * (ddp_check_etcd_facts gathers them, with one request per member on a loop of its own); nothing is written. */
#ifndef DDP_CHECK_ETCD_H
#define DDP_CHECK_ETCD_H

#include <stdbool.h>

#include "doctor/check.h"

#define DDP_CHECK_ETCD_MAX 16

struct ddp_check_etcd_member {
    char endpoint[128];
    char version[32]; /* "" when it did not answer */
    char error[300];  /* why not, one line */
    bool leader_known;
};

struct ddp_check_etcd {
    const char *backend; /* rdzv_backend ("static" when unset) */
    int nnodes;
    int n; /* members listed in rdzv_endpoint (at most DDP_CHECK_ETCD_MAX) */
    struct ddp_check_etcd_member m[DDP_CHECK_ETCD_MAX];
    bool read_ok; /* a linearizable read of the prefix succeeded: quorum, and the right to read */
    char read_error[300];
};

/* Gather the facts: each member's status (/v3/maintenance/status), and one read through all of them. */
void ddp_check_etcd_facts(const char *endpoints, const char *conf, struct ddp_check_etcd *f);
/* The checks "rendezvous" and (etcd-v3) "etcd". */
void ddp_check_rdzv(struct ddp_check_report *r, const struct ddp_check_etcd *f);

#endif
