/* check_net: doctor's network checks (check_net.h): master port, master address and route, socket interfaces,
 * NCCL/torch variables. Pure functions of the facts passed in. */
#include "doctor/check_net.h"

#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "doctor/check.h"
#include "spec/nccl.h"

/* ---- master port ---- */

/* The header and the LISTEN (0A) lines of a /proc/net/tcp text: a busy host has thousands of connections, and
 * the auto range asks about hundreds of ports. Caller frees. */
static char *listen_lines(const char *text)
{
    struct ddp_buf b = {0};
    bool header = true;

    for (const char *l = text; l && *l;) {
        size_t len = strcspn(l, "\n");
        char st[4] = "";

        if (header || (sscanf(l, "%*s %*s %*s %3s", st) == 1 && strcmp(st, "0A") == 0)) {
            ddp_buf_add(&b, l, len);
            ddp_buf_puts(&b, "\n");
        }
        header = false;
        l += len + (l[len] == '\n');
    }
    ddp_buf_puts(&b, "");
    return b.data;
}

static int listeners_on(const char *tcp, const char *tcp6, int port, struct ddp_port_listener *first)
{
    int n = 0;
    struct ddp_port_listener ls[1];

    if (tcp) {
        int k = ddp_port_parse_listeners(tcp, false, port, ls, 1);

        if (k > 0 && first && n == 0)
            *first = ls[0];
        n += k > 0 ? k : 0;
    }
    if (tcp6) {
        int k = ddp_port_parse_listeners(tcp6, true, port, ls, 1);

        if (k > 0 && first && n == 0)
            *first = ls[0];
        n += k > 0 ? k : 0;
    }
    return n;
}

void ddp_check_port(struct ddp_check_report *r, const struct ddp_check_port *p)
{
    const char *host = p->master_addr && *p->master_addr ? p->master_addr : "localhost";
    char *tcp = NULL, *tcp6 = NULL;

    if (p->node_rank != 0) {
        ddp_check_add(r, DDP_CHECK_SKIP, "master-port", NULL,
                      "node_rank %d: the master port is opened on node 0 (%s); run doctor there", p->node_rank, host);
        return;
    }
    tcp = p->tcp ? listen_lines(p->tcp) : NULL;
    tcp6 = p->tcp6 ? listen_lines(p->tcp6) : NULL;
    if (p->spec.is_auto && p->job && p->job_port > 0) {
        /* the same port on every node, from the job id (port.h): that one port is what counts */
        bool held = p->held_locks && ddp_port_lock_listed(p->held_locks, p->lock_dir, p->job_port);
        if (held || listeners_on(tcp, tcp6, p->job_port, NULL) > 0)
            ddp_check_add(r, DDP_CHECK_WARN, "master-port", "set master_port explicitly if the job fails to start",
                          "auto: %d, derived from the %s (the same on every node), is %s now", p->job_port, p->job,
                          held ? "reserved by another process" : "in use");
        else
            ddp_check_add(r, DDP_CHECK_OK, "master-port", NULL,
                          "auto: %d, derived from the %s (the same on every node), free now", p->job_port, p->job);
        goto out;
    }
    if (p->spec.is_auto) {
        int lo = p->spec.lo, hi = p->spec.hi, nfree = 0, first = 0, nlocked = 0;
        char locked[80] = "";

        if (lo == 0 && hi == 0)
            ddp_port_default_range(p->ephemeral, &lo, &hi);
        for (int port = lo; port <= hi; port++) {
            /* a port whose lock another process holds (a job, or a squatter: see port-locks) is skipped at start */
            if (p->held_locks && ddp_port_lock_listed(p->held_locks, p->lock_dir, port)) {
                nlocked++;
                continue;
            }
            if (listeners_on(tcp, tcp6, port, NULL) == 0 && nfree++ == 0)
                first = port;
        }
        if (nlocked)
            snprintf(locked, sizeof locked, "; %d reserved by other processes", nlocked);
        if (nfree == 0)
            ddp_check_add(r, DDP_CHECK_FAIL, "master-port", "widen it: master_port = auto:LO-HI",
                          "auto: every port in %d-%d is in use or reserved%s", lo, hi, locked);
        else if (ddp_port_range_overlaps_ephemeral(p->ephemeral, lo, hi))
            ddp_check_add(r, DDP_CHECK_WARN, "master-port",
                          "use a range below the kernel's ephemeral ports (/proc/sys/net/ipv4/ip_local_port_range)",
                          "auto: %d of %d ports in %d-%d free (first %d%s), but the range overlaps the ephemeral "
                          "range %.*s: an outgoing connection can take the port before the workers bind it",
                          nfree, hi - lo + 1, lo, hi, first, locked, (int)strcspn(p->ephemeral, "\n"), p->ephemeral);
        else
            ddp_check_add(r, DDP_CHECK_OK, "master-port", NULL,
                          "auto: %d of %d ports in %d-%d free now (first %d%s); reserved host-wide at start", nfree,
                          hi - lo + 1, lo, hi, first, locked);
        goto out;
    }

    int port = p->spec.port;
    struct ddp_port_listener first = {0};
    int nl = listeners_on(tcp, tcp6, port, &first);

    if (nl > 0 || p->probe_rc == -EADDRINUSE) {
        const struct ddp_port_holder *h = p->holder;
        char who[512];

        if (h && h->pid > 0)
            snprintf(who, sizeof who, "pid %d (%s, user %s%s%.80s)", (int)h->pid, h->comm, h->user,
                     h->cmdline[0] ? ": " : "", h->cmdline);
        else if (h && h->user[0])
            snprintf(who, sizeof who, "a process of %s not visible to this user", h->user);
        else if (nl > 0)
            snprintf(who, sizeof who, "a process not visible here (uid %u, listening on %s)", first.uid, first.addr);
        else
            snprintf(who, sizeof who, "a socket that holds it without listening");
        ddp_check_add(r, DDP_CHECK_FAIL, "master-port", "use master_port = auto", "%d is in use by %s", port, who);
    } else if (p->lock_holder) {
        ddp_check_add(r, DDP_CHECK_FAIL, "master-port", "use master_port = auto",
                      "%d is reserved by another process: %s", port, p->lock_holder);
    } else if (p->probe_rc < 0) {
        ddp_check_add(r, DDP_CHECK_FAIL, "master-port",
                      port < 1024 ? "use a port above 1023, or master_port = auto" : "use master_port = auto",
                      "%d cannot be bound: %s", port, strerror(-p->probe_rc));
    } else if (ddp_port_range_overlaps_ephemeral(p->ephemeral, port, port)) {
        ddp_check_add(r, DDP_CHECK_WARN, "master-port", "use master_port = auto",
                      "%d is free now, but in the kernel's ephemeral range %.*s: an outgoing connection can take it "
                      "before the workers bind it",
                      port, (int)strcspn(p->ephemeral, "\n"), p->ephemeral);
    } else {
        ddp_check_add(r, DDP_CHECK_OK, "master-port", NULL, "%d is free", port);
    }
out:
    free(tcp);
    free(tcp6);
}

/* ---- master address and interfaces ---- */

void ddp_check_addr(struct ddp_check_report *r, const struct ddp_check_addr *a)
{
    if (!a->addr || !*a->addr) {
        ddp_check_add(r, DDP_CHECK_SKIP, "master-addr", NULL, "no master_addr set");
        return;
    }
    if (a->gai_rc != 0) {
        ddp_check_add(r, DDP_CHECK_FAIL, "master-addr", "fix master_addr (or DNS, /etc/hosts)",
                      "%s does not resolve: %s", a->addr, a->gai_error ? a->gai_error : "unknown error");
        return;
    }
    if (a->loopback && a->nnodes > 1) {
        ddp_check_add(r, DDP_CHECK_FAIL, "master-addr", "set master_addr to node 0's host name or address",
                      "%s is a loopback address (%s), but nnodes = %d: the other nodes cannot reach it", a->addr,
                      a->resolved ? a->resolved : "?", a->nnodes);
        return;
    }
    if (a->route_errno != 0) {
        char *todo = ddp_xasprintf("check the network: ip route get %s", a->resolved ? a->resolved : a->addr);

        ddp_check_add(r, DDP_CHECK_FAIL, "master-addr", todo, "%s (%s) cannot be reached from here: %s", a->addr,
                      a->resolved ? a->resolved : "?", strerror(a->route_errno));
        free(todo);
        return;
    }
    if (a->resolved && strcmp(a->addr, a->resolved) != 0)
        ddp_check_add(r, DDP_CHECK_OK, "master-addr", NULL, "%s resolves to %s, reached through %s (source %s)",
                      a->addr, a->resolved, a->ifname ? a->ifname : "?", a->src_ip ? a->src_ip : "?");
    else
        ddp_check_add(r, DDP_CHECK_OK, "master-addr", NULL, "%s reached through %s (source %s)", a->addr,
                      a->ifname ? a->ifname : "?", a->src_ip ? a->src_ip : "?");
}

/* One entry of an NCCL interface list, without a ":port" suffix, in buf. */
static const char *next_entry(const char *s, char *buf, size_t len)
{
    size_t n = strcspn(s, ",");
    size_t k = strcspn(s, ":,");

    if (k > n)
        k = n;
    snprintf(buf, len, "%.*s", (int)k, s);
    return s[n] == ',' ? s + n + 1 : s + n;
}

bool ddp_check_ifname_match(const char *spec, const char *ifname)
{
    bool neg = false, exact = false, hit = false;
    char entry[IF_NAMESIZE + 16];

    if (!spec)
        return true;
    if (*spec == '^')
        neg = true, spec++;
    if (*spec == '=')
        exact = true, spec++;
    while (*spec) {
        spec = next_entry(spec, entry, sizeof entry);
        if (!*entry)
            continue;
        if (exact ? strcmp(ifname, entry) == 0 : strncmp(ifname, entry, strlen(entry)) == 0)
            hit = true;
    }
    return hit != neg;
}

void ddp_check_ifname(struct ddp_check_report *r, const char *var, const char *value, bool gloo,
                      const char *const *ifnames, size_t nifs, const char *route_if)
{
    const char *check = gloo ? "gloo-ifname" : "nccl-ifname";
    char *all = ddp_check_join(ifnames, nifs);
    struct ddp_buf sel = {0}, missing = {0};
    char entry[IF_NAMESIZE + 16];
    size_t nsel = 0;
    bool route_ok = !route_if;

    if (!value || !*value) {
        ddp_check_add(r, DDP_CHECK_OK, check, NULL, "%s unset: %s", var,
                      gloo ? "gloo uses the interface of this host's name"
                           : "NCCL picks ib* first, then any interface but lo and docker*");
        free(all);
        return;
    }
    if (gloo) {
        for (const char *s = value; *s;) {
            bool found = false;

            s = next_entry(s, entry, sizeof entry);
            for (size_t i = 0; i < nifs && !found; i++)
                found = strcmp(ifnames[i], entry) == 0;
            if (!found)
                ddp_buf_printf(&missing, "%s%s", missing.len ? ", " : "", entry);
            else
                ddp_buf_printf(&sel, "%s%s", nsel++ ? ", " : "", entry);
            route_ok |= found && route_if && strcmp(entry, route_if) == 0;
        }
    } else {
        bool neg = value[0] == '^', exact = value[neg] == '=';

        for (size_t i = 0; i < nifs; i++)
            if (ddp_check_ifname_match(value, ifnames[i])) {
                ddp_buf_printf(&sel, "%s%s", nsel++ ? ", " : "", ifnames[i]);
                route_ok |= route_if && strcmp(ifnames[i], route_if) == 0;
            }
        for (const char *s = value + neg + exact; *s && !neg;) {
            bool found = false;

            s = next_entry(s, entry, sizeof entry);
            for (size_t i = 0; i < nifs && !found && *entry; i++)
                found = exact ? strcmp(ifnames[i], entry) == 0 : strncmp(ifnames[i], entry, strlen(entry)) == 0;
            if (!found && *entry)
                ddp_buf_printf(&missing, "%s%s", missing.len ? ", " : "", entry);
        }
    }
    if (nsel == 0) {
        char *todo = ddp_xasprintf("set %s to one of the interfaces here, or unset it", var);

        ddp_check_add(r, DDP_CHECK_FAIL, check, todo, "%s=%s matches no interface here (%s): %s", var, value, all,
                      gloo ? "gloo fails to start" : "NCCL fails at init (no socket interface found)");
        free(todo);
    } else if (missing.len) {
        ddp_check_add(r, DDP_CHECK_WARN, check, "remove the names that do not exist",
                      "%s=%s: %s match%s no interface here (interfaces: %s); selected: %s", var, value, missing.data,
                      strchr(missing.data, ',') ? "" : "es", all, sel.data);
    } else if (!route_ok) {
        char *todo = ddp_xasprintf("add %s to %s", route_if, var);

        ddp_check_add(r, DDP_CHECK_WARN, check, todo, "%s=%s selects %s, but master_addr is reached through %s", var,
                      value, sel.data, route_if);
        free(todo);
    } else {
        ddp_check_add(r, DDP_CHECK_OK, check, NULL, "%s=%s selects %s", var, value, sel.data);
    }
    ddp_buf_free(&sel);
    ddp_buf_free(&missing);
    free(all);
}

/* ---- NCCL / torch variables ---- */

static bool nccl_var(const char *e)
{
    return strncmp(e, "NCCL_", 5) == 0 || strncmp(e, "TORCH_NCCL_", 11) == 0 || strncmp(e, "TORCH_FR_", 9) == 0 ||
           strncmp(e, "TORCH_DISTRIBUTED_DEBUG=", 24) == 0 || strncmp(e, "TORCH_CPP_LOG_LEVEL=", 20) == 0;
}

void ddp_check_nccl_env(struct ddp_check_report *r, const struct ddp_kvlist *nccl, char *const *envp)
{
    struct ddp_strv warnings = {0};
    struct ddp_err err = {0};
    size_t nvars = nccl ? nccl->n : 0;
    int rc = ddp_nccl_validate(nccl, envp, &warnings, &err);

    for (char *const *e = envp; e && *e; e++)
        if (nccl_var(*e)) {
            size_t len = strcspn(*e, "=");
            char name[128];

            snprintf(name, sizeof name, "%.*s", (int)len, *e);
            nvars += !(nccl && ddp_kvlist_get(nccl, name));
        }
    if (rc < 0)
        ddp_check_add(r, DDP_CHECK_FAIL, "nccl-env", "fix or remove it (nothing would start)", "%s", err.msg);
    for (size_t i = 0; i < warnings.n; i++)
        ddp_check_add(r, DDP_CHECK_WARN, "nccl-env", NULL, "%s", warnings.v[i]);
    if (rc == 0 && warnings.n == 0 && nvars == 0)
        ddp_check_add(r, DDP_CHECK_OK, "nccl-env", NULL, "no NCCL/torch variable set");
    else if (rc == 0 && warnings.n == 0)
        ddp_check_add(r, DDP_CHECK_OK, "nccl-env", NULL, "%zu NCCL/torch variable%s valid", nvars,
                      nvars == 1 ? "" : "s");
    ddp_strv_clear(&warnings);
}
