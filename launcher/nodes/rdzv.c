/* rdzv: the rendezvous decisions. See rdzv.h. */
#include "nodes/rdzv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"

int ddp_rdzv_conf_seconds(const char *conf, const char *key, long long *ms, struct ddp_err *err)
{
    if (!conf || !*conf)
        return 0;
    char *copy = ddp_xstrdup(conf), *save = NULL;
    int rc = 0;
    for (char *kv = strtok_r(copy, ",", &save); kv && rc == 0; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv) {
            rc = ddp_errf(err, -EINVAL, "rdzv_conf: '%s' is not key=value", kv);
            break;
        }
        *eq = '\0';
        if (strcmp(kv, key) != 0)
            continue;
        char *end = NULL;
        double secs = strtod(eq + 1, &end);
        if (!eq[1] || *end || secs < 0 || secs > 1e9)
            rc = ddp_errf(err, -EINVAL, "rdzv_conf: %s=%s: expected seconds (e.g. 900)", key, eq + 1);
        else
            *ms = (long long)(secs * 1000);
    }
    free(copy);
    return rc;
}

int ddp_rdzv_decide(const struct ddp_spec *spec, const char *sched_source, struct ddp_rdzv *out, struct ddp_err *err)
{
    memset(out, 0, sizeof *out);
    out->several = spec->nnodes.max > 1;
    out->source = "single node";
    out->lost_after_ms = spec->lost_after_ms > 0 ? spec->lost_after_ms : 15000;
    const char *backend = spec->rdzv_backend && *spec->rdzv_backend ? spec->rdzv_backend : "static";
    bool c10d = strcmp(backend, "c10d") == 0;
    out->etcd = strcmp(backend, "etcd-v3") == 0 || strcmp(backend, "etcd") == 0 || strcmp(backend, "etcd-v2") == 0;
    if (!c10d && !out->etcd && strcmp(backend, "static") != 0)
        return ddp_errf(err, -EINVAL, "rdzv_backend '%s': expected static, c10d or etcd-v3", backend);
    if (out->etcd && strcmp(backend, "etcd-v3") != 0)
        out->note = strcmp(backend, "etcd") == 0
                        ? "rdzv_backend etcd: torchrun's etcd backend speaks etcd's v2 API; ddplaunch meets in the "
                          "same cluster through its v3 API (etcd-v3)"
                        : "rdzv_backend etcd-v2: ddplaunch meets in the same cluster through etcd's v3 API (etcd-v3)";
    if (out->etcd && (!spec->rdzv_endpoint || !*spec->rdzv_endpoint))
        return ddp_errf(err, -EINVAL, "rdzv_backend %s needs rdzv_endpoint HOST:PORT[,HOST:PORT...] of etcd members",
                        backend);
    c10d = c10d || out->etcd;
    long long conf_ms = 0;
    out->last_call_ms = DDP_RDZV_LAST_CALL_MS;
    int rc = ddp_rdzv_conf_seconds(spec->rdzv_conf, "join_timeout", &conf_ms, err);
    if (rc == 0)
        rc = ddp_rdzv_conf_seconds(spec->rdzv_conf, "last_call_timeout", &out->last_call_ms, err);
    if (rc < 0)
        return rc;
    if (!out->several)
        return 0;
    int ni = ddp_spec_key_find("job", "node_rank");
    bool rank_given = spec->origin[ni] > DDP_ORIGIN_DEFAULT;
    if (sched_source && !out->etcd) {
        out->source = sched_source;
    } else if (c10d) {
        out->dynamic = true;
        out->source = out->etcd ? "etcd-v3" : "c10d";
    } else {
        /* no node rank: node 0, torchrun's --node-rank default; a second agent claiming it is refused there */
        out->source = rank_given ? "static" : "static, node rank 0 by default";
    }
    /* node 0 serves (torchrun's 127.0.0.1 default is its own address); any other node must be told where */
    if (!out->dynamic && spec->node_rank > 0 &&
        spec->origin[ddp_spec_key_find("job", "master_addr")] == DDP_ORIGIN_DEFAULT)
        return ddp_errf(err, -EINVAL,
                        "several nodes (nnodes %d, node rank from: %s) and no address for node 0: "
                        "give every node the same --master-addr (node 0's host)",
                        spec->nnodes.max, out->source);
    out->join_timeout_ms = spec->join_timeout_ms > 0 ? spec->join_timeout_ms
                           : conf_ms > 0             ? conf_ms
                           : out->dynamic            ? 600000
                                                     : 900000;
    return 0;
}

void ddp_rdzv_identity(const char *run_id, const char *const *argv, char out[65])
{
    size_t n = 0;
    while (argv && argv[n])
        n++;
    const void **parts = ddp_xcalloc(2 * n + 2, sizeof *parts);
    size_t *lens = ddp_xcalloc(2 * n + 2, sizeof *lens);
    parts[0] = run_id ? run_id : "";
    lens[0] = strlen(parts[0]) + 1; /* with its NUL: "a" + "bc" differs from "ab" + "c" */
    for (size_t i = 0; i < n; i++) {
        parts[1 + i] = argv[i];
        lens[1 + i] = strlen(argv[i]) + 1;
    }
    ddp_crypto_digest_hex(parts, lens, n + 1, out);
    free(parts);
    free(lens);
}
