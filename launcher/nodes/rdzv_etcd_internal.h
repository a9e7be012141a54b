/* rdzv_etcd_internal: what rdzv_etcd.c (effects: requests, timers, events) and rdzv_etcd_plan.c (pure: signed
 * values, the view of the job's keys, the decision-maker's next decision) share. Everything else uses
 * rdzv_etcd.h. */
#ifndef DDP_RDZV_ETCD_INTERNAL_H
#define DDP_RDZV_ETCD_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define DDP_RE_MAX_NODES 4096
#define DDP_RE_NO_REPORT (-1000)

enum ddp_re_state { DDP_RE_NONE, DDP_RE_START, DDP_RE_STOP, DDP_RE_EXIT };

struct ddp_re_member {
    bool up;
    int nproc, port;
    long long lease;
    char addr[64], host[64];
};

/* The decision key: attempt A started on nodes[] (by group rank; their rank blocks follow in order), or stopped,
 * or the job exits with status. */
struct ddp_re_decision {
    enum ddp_re_state state;
    int attempt, status;
    char master[64];
    int port;
    int n;
    int *node, *nproc; /* n entries each */
    char reason[200];
    long long mod_rev; /* 0: absent */
};

/* The job's keys as one range read them. */
struct ddp_re_view {
    int max;                       /* node ranks 0..max-1 */
    struct ddp_re_member *members; /* max entries */
    struct ddp_re_decision d;
    int *report;            /* max entries: status of node k's report for d.attempt, or DDP_RE_NO_REPORT */
    long long decider;      /* the elected one's lease (lowest create_revision under elect/), 0 none */
    long long revision;     /* the store's revision of this read */
    long long decision_rev; /* the decision key's mod_revision, signed or not (0: absent): what a write compares */
    int forged;             /* values refused in this read */
    long long forged_rev;   /* the mod_revision of the first of them */
    char forged_key[200];
};

struct ddp_re_params {
    int min_nodes, max_nodes, max_restarts;
    bool last_call_over; /* JOINING: MIN are in and the last call passed */
    bool join_over;      /* JOINING: join_timeout passed */
};

/* value = "<hmac hex> <payload>" with HMAC(secret, job NUL key NUL payload). Caller frees. */
char *ddp_re_sign(const char *secret, const char *job, const char *key, const char *payload);
/* The payload of a signed value, or NULL when its MAC is not the job's. Points into value. */
const char *ddp_re_verify(const char *secret, const char *job, const char *key, const char *value);

/* A payload's "name=value" (values end at a space; "reason=" takes the rest of the line) into buf. */
bool ddp_re_field(const char *payload, const char *name, char *buf, size_t size);
int ddp_re_field_int(const char *payload, const char *name, int dflt);

void ddp_re_view_init(struct ddp_re_view *v, int max);
void ddp_re_view_free(struct ddp_re_view *v);
/* Fill v from a range's answer over the prefix (kvs of base64 keys and values). A decision key whose value is
 * not signed reads as fallback (the last signed one; state NONE: none). */
void ddp_re_view_read(struct ddp_re_view *v, const char *prefix, const char *secret, const char *job, json_t *answer,
                      const struct ddp_re_decision *fallback);
/* to := a copy of from (to's own arrays freed first). */
void ddp_re_decision_copy(struct ddp_re_decision *to, const struct ddp_re_decision *from);
void ddp_re_decision_free(struct ddp_re_decision *d);
int ddp_re_decision_parse(const char *payload, struct ddp_re_decision *d);
/* Text of a decision's payload. Caller frees. */
char *ddp_re_decision_text(const struct ddp_re_decision *d);

/* The decision-maker: what to write next, given the view (pure). True and *next (ddp_re_decision_free), or false:
 * nothing to change. */
bool ddp_re_decide(const struct ddp_re_view *v, const struct ddp_re_params *p, struct ddp_re_decision *next);

#endif
