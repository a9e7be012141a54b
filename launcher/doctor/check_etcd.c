/* check_etcd: see check_etcd.h. */
#include "doctor/check_etcd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "nodes/etcd.h"
#include "nodes/rdzv_etcd.h"

struct probe {
    struct ddp_check_etcd_member *m; /* NULL: the read through every member */
    struct ddp_check_etcd *f;
};

static void on_status(void *data, json_t *reply, const char *error)
{
    struct probe *p = data;
    if (!reply) {
        snprintf(p->m->error, sizeof p->m->error, "%s", error ? error : "no answer");
        return;
    }
    const char *v = json_string_value(json_object_get(reply, "version"));
    snprintf(p->m->version, sizeof p->m->version, "%s", v ? v : "?");
    p->m->leader_known = ddp_etcd_int(reply, "leader") != 0;
}

static void on_read(void *data, json_t *reply, const char *error)
{
    struct probe *p = data;
    p->f->read_ok = reply != NULL;
    if (!reply)
        snprintf(p->f->read_error, sizeof p->f->read_error, "%s", error ? error : "no answer");
}

/* One client per member (no failover: each is asked on its own), one for the read; run until all answered. */
void ddp_check_etcd_facts(const char *endpoints, const char *conf, struct ddp_check_etcd *f)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct ddp_err err = {0};
    struct ddp_etcd_config cfg = {0};
    char *owned = NULL, *copy = ddp_xstrdup(endpoints ? endpoints : ""), *save = NULL;
    struct ddp_etcd *clients[DDP_CHECK_ETCD_MAX + 1] = {0};
    struct probe probes[DDP_CHECK_ETCD_MAX + 1];
    ddp_rdzv_etcd_tls(conf, &cfg, &owned, &err);
    for (char *m = strtok_r(copy, ",", &save); m && f->n < DDP_CHECK_ETCD_MAX; m = strtok_r(NULL, ",", &save)) {
        struct ddp_check_etcd_member *mem = &f->m[f->n];
        snprintf(mem->endpoint, sizeof mem->endpoint, "%s", m);
        cfg.endpoints = m;
        if (ddp_etcd_new(&loop, &cfg, &clients[f->n], &err) < 0) {
            snprintf(mem->error, sizeof mem->error, "%.299s", err.msg);
            f->n++;
            continue;
        }
        probes[f->n + 1] = (struct probe){mem, f};
        ddp_etcd_post(clients[f->n], "/v3/maintenance/status", json_object(), 3000, on_status, &probes[f->n + 1]);
        f->n++;
    }
    cfg.endpoints = endpoints;
    struct probe readp = {NULL, f};
    if (ddp_etcd_new(&loop, &cfg, &clients[DDP_CHECK_ETCD_MAX], &err) == 0) {
        char *kb = ddp_etcd_b64("/ddplaunch/", 11), *eb = ddp_etcd_b64("/ddplaunch0", 11);
        ddp_etcd_post(clients[DDP_CHECK_ETCD_MAX], "/v3/kv/range",
                      json_pack("{s:s,s:s,s:b}", "key", kb, "range_end", eb, "count_only", 1), 3000, on_read, &readp);
        free(kb);
        free(eb);
    }
    uv_run(&loop, UV_RUN_DEFAULT); /* every request answers within its timeout; then the clients' timers idle */
    for (int i = 0; i <= DDP_CHECK_ETCD_MAX; i++)
        ddp_etcd_close(clients[i]);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(copy);
    free(owned);
}

/* etcd 3.4's answers to a request without a user where authentication is on, or with one it refuses. */
static bool wants_user(const char *error)
{
    static const char *const words[] = {"user name is empty", "permission denied", "invalid auth token",
                                        "authentication failed"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(error, words[i]))
            return true;
    return false;
}

static bool is_etcd(const char *backend)
{
    return strcmp(backend, "etcd-v3") == 0 || strcmp(backend, "etcd") == 0 || strcmp(backend, "etcd-v2") == 0;
}

void ddp_check_rdzv(struct ddp_check_report *r, const struct ddp_check_etcd *f)
{
    if (f->nnodes <= 1)
        return; /* one node: no rendezvous */
    if (!is_etcd(f->backend)) {
        ddp_check_add(r, DDP_CHECK_OK, "rendezvous", "--rdzv-backend etcd-v3 with an etcd cluster survives any node",
                      "%s: any node but node 0 can be lost; node 0 serves the rendezvous and decides restarts",
                      f->backend);
        return;
    }
    ddp_check_add(r, DDP_CHECK_OK, "rendezvous", NULL, "etcd-v3: any node can be lost, node 0 included, and %s",
                  f->n >= 3 ? "one etcd member" : "no etcd member (fewer than 3 listed)");
    int up = 0;
    for (int i = 0; i < f->n; i++) {
        const struct ddp_check_etcd_member *m = &f->m[i];
        if (m->version[0]) {
            up++;
            ddp_check_add(r, DDP_CHECK_OK, "etcd", NULL, "member %s: etcd %s%s", m->endpoint, m->version,
                          m->leader_known ? "" : ", no leader");
        } else {
            ddp_check_add(r, DDP_CHECK_WARN, "etcd", "start it, or drop it from --rdzv-endpoint", "%s", m->error);
        }
    }
    if (f->read_ok)
        ddp_check_add(r, DDP_CHECK_OK, "etcd", NULL,
                      "quorum: a read of /ddplaunch/ succeeded (%d of %d members answer)", up, f->n);
    else if (up > 0 && wants_user(f->read_error))
        ddp_check_add(r, DDP_CHECK_FAIL, "etcd",
                      "ddplaunch does not log in to etcd: give the job a cluster without authentication (a job "
                      "would wait up to join_timeout, then exit)",
                      "auth: the members answer but refuse a read of /ddplaunch/ without a user: %s", f->read_error);
    else
        ddp_check_add(r, DDP_CHECK_FAIL, "etcd", "a job would wait for quorum up to join_timeout, then exit",
                      "no read of /ddplaunch/ through %d member%s: %s", f->n, f->n == 1 ? "" : "s", f->read_error);
}
