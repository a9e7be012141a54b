/* etcd: a client of etcd's v3 API through its JSON gateway over HTTP/1.1 (etcd 3.4: /v3/kv/range, put, txn,
 * deleterange, /v3/lease/grant, keepalive, revoke, /v3/watch), on the caller's libuv loop with libcurl's multi
 * interface (curl_multi_socket_action; libuv polls the sockets and runs curl's timer). One call is one POST of a
 * JSON body (jansson) to one member; a member that cannot be reached, or answers 5xx, is skipped for the next one,
 * so that losing one member of the cluster is invisible. A watch is a long-lived POST whose answer is a stream of
 * JSON objects, one a line. It knows nothing of keys' meaning or of rendezvous (rdzv_etcd.h's). */
#ifndef DDP_ETCD_H
#define DDP_ETCD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "base/util.h"

struct ddp_etcd;
struct ddp_etcd_req;

struct ddp_etcd_config {
    const char *endpoints; /* "HOST:PORT[,HOST:PORT...]" (an http:// or https:// prefix is accepted) */
    bool https;            /* rdzv_conf protocol=https */
    const char *cacert;    /* rdzv_conf cacert=, cert=, key=: files given to curl; NULL = none */
    const char *cert;
    const char *key;
};

/* One answer: reply is the JSON object the member sent (borrowed: valid during the callback), or NULL and
 * error, one line ("127.0.0.1:2379: Connection refused; ..."). A watch calls it once per object of its stream,
 * then once with NULL when the stream ends. */
typedef void (*ddp_etcd_cb)(void *data, json_t *reply, const char *error);

/* A client of the cluster at cfg->endpoints on loop. 0 and *out (ddp_etcd_close), or -EINVAL with err for an
 * endpoint list it cannot read. */
int ddp_etcd_new(uv_loop_t *loop, const struct ddp_etcd_config *cfg, struct ddp_etcd **out, struct ddp_err *err);

/* POST body (stolen) to path ("/v3/kv/put") on the current member, then each other one in turn when it cannot
 * be reached; every member has timeout_ms. cb runs once, later, on the loop (never from within this call).
 * The request, to cancel (or ignore). */
struct ddp_etcd_req *ddp_etcd_post(struct ddp_etcd *e, const char *path, json_t *body, long timeout_ms, ddp_etcd_cb cb,
                                   void *data);
/* A watch (body: {"create_request": ...}, stolen) on the current member: cb per object, then NULL at its end. */
struct ddp_etcd_req *ddp_etcd_watch(struct ddp_etcd *e, json_t *body, ddp_etcd_cb cb, void *data);
/* No callback of r after this; r is freed. */
void ddp_etcd_cancel(struct ddp_etcd_req *r);

/* The member in use ("127.0.0.1:2379"), and the local address of this host's last connection to the cluster
 * ("" before one): an address of this host that reaches the cluster's network. */
const char *ddp_etcd_member(const struct ddp_etcd *e);
const char *ddp_etcd_local_ip(const struct ddp_etcd *e);
int ddp_etcd_members(const struct ddp_etcd *e);
/* Use member i (0 .. ddp_etcd_members - 1) for the next request (doctor asks each in turn). */
void ddp_etcd_use(struct ddp_etcd *e, int i);

/* Cancel every request (no callbacks after this) and free e once its handles closed. NULL: no-op. */
void ddp_etcd_close(struct ddp_etcd *e);

/* Base64 of n bytes (caller frees), and back: the bytes (NUL-terminated; caller frees) and *n, or NULL. */
char *ddp_etcd_b64(const void *p, size_t n);
char *ddp_etcd_unb64(const char *s, size_t *n);
/* A 64-bit number the gateway sent as a string (or a number); 0 when absent. */
long long ddp_etcd_int(const json_t *obj, const char *key);

#endif
