/* doctor: gathers live facts and runs the checks (doctor.h). */
#include "doctor/doctor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/exit.h"
#include "doctor/check_etcd.h"
#include "doctor/check_gpu.h"
#include "host/lease.h"
#include "host/port.h"
#include "host/rundir.h"
#include "topo/fitness.h"
#include "topo/nvml.h"
#include "topo/place.h"
#include "topo/topo.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* ---- state directories ---- */

void ddp_doctor_check_state_dirs(struct ddp_check_report *r, char *const *envp, uid_t uid)
{
    const char *lock = ddp_rundir_lock_dir(envp);
    char *priv = ddp_rundir_private_path(envp, uid);
    struct ddp_err err = {0};
    int fd = -1, rc;

    rc = ddp_rundir_open_shared(lock, &fd, &err);
    if (rc < 0) {
        /* leases and port reservations are kernel locks: only the job names shown beside them are lost */
        ddp_check_add(r, DDP_CHECK_WARN, "state-dir",
                      "fix its owner/mode (root or you, 1777), or point DDPLAUNCH_LOCK_DIR elsewhere",
                      "%s: leases still work, but their job names are not shown to others", err.msg);
        goto priv;
    }
    if (faccessat(fd, ".", W_OK, AT_EACCESS) != 0) {
        ddp_check_add(r, DDP_CHECK_WARN, "state-dir", "make it writable for every user (mode 1777)",
                      "lock directory %s is not writable by this user (%s): leases still work, but their job "
                      "names are not shown to others",
                      lock, strerror(errno));
        rc = -1;
    }
    close(fd);
priv:
    /* a real trial: make a run directory as a launch would, and remove it */
    {
        char *run = NULL;
        int lk = -1;
        if (ddp_rundir_run_create(envp, uid, &run, &lk, &err) < 0) {
            ddp_check_add(r, DDP_CHECK_FAIL, "state-dir", "fix it (mode 0700, owned by you) or set XDG_RUNTIME_DIR",
                          "%s", err.msg);
            rc = -1;
        } else {
            ddp_rundir_run_remove(run, lk);
            free(run);
        }
    }
    if (rc == 0)
        ddp_check_add(r, DDP_CHECK_OK, "state-dir", NULL,
                      "lock directory %s (shared, sticky) and private run directories in %s (0700) usable", lock, priv);
    free(priv);
}

/* GPUs as the topology knows them, with NVML's view (topo.h, nvml.h). */
struct gpu_facts {
    struct ddp_check_gpu *gpus;
    size_t ngpus;
    size_t n_nvidia;
    bool from_xml;
    const struct ddp_nvml *nvml;
};

static void gpu_facts_read(const struct ddp_topo *topo, struct gpu_facts *gf)
{
    memset(gf, 0, sizeof *gf);
    gf->from_xml = ddp_topo_from_xml(topo);
    gf->nvml = ddp_topo_nvml(topo);
    gf->gpus = ddp_xcalloc(ddp_topo_ngpus(topo) + 1, sizeof *gf->gpus);
    for (size_t i = 0; i < ddp_topo_ngpus(topo); i++) {
        struct ddp_topo_gpu_facts f;
        struct ddp_check_gpu *d = &gf->gpus[gf->ngpus++];

        ddp_topo_gpu_facts(topo, i, &f);
        snprintf(d->busid, sizeof d->busid, "%s", f.busid);
        d->vendor = f.vendor;
        d->numa = f.numa_node;
        d->package = f.numa_node >= 0 ? f.package : -1;
        d->mem_used = f.mem_used;
        d->mem_total = f.mem_total;
        d->util = -1;
        gf->n_nvidia += d->vendor == 0x10de;
    }
}

/* Utilisation and users of the picked NVIDIA GPUs, from NVML through the topology; process names from /proc. */
static void gpu_usage(const struct ddp_topo *topo, struct gpu_facts *gf, const int *picked, size_t npicked)
{
    for (size_t i = 0; i < npicked; i++) {
        struct ddp_check_gpu *g = &gf->gpus[picked[i]];
        struct ddp_topo_gpu_facts f;
        struct ddp_buf b = {0};

        if (g->vendor != 0x10de || ddp_topo_gpu_facts(topo, (size_t)picked[i], &f) < 0 || !f.nvml)
            continue;
        g->util = f.nvml->util;
        g->health = f.nvml->health;
        g->lost = f.nvml->lost;
        g->have_health = true;
        for (int k = 0; k < f.nvml->nprocs; k++) {
            const struct ddp_nvml_proc *pr = &f.nvml->procs[k];
            char who[160];

            /* NVML's pid as nvml.h resolved it: translated into this namespace, else the host's, not looked up */
            if (pr->other_ns)
                ddp_nvml_proc_describe(pr, who, sizeof who);
            else if (pr->mem_used >= 0)
                snprintf(who, sizeof who, "pid %u (%s, %.1f GiB)", pr->pid, pr->comm[0] ? pr->comm : "not visible here",
                         (double)pr->mem_used / GIB);
            else
                snprintf(who, sizeof who, "pid %u (%s)", pr->pid, pr->comm[0] ? pr->comm : "not visible here");
            ddp_buf_printf(&b, "%s%s", b.len ? ", " : "", who);
        }
        if (b.data)
            snprintf(g->users, sizeof g->users, "%s", b.data);
        ddp_buf_free(&b);
    }
}

/* The CUDA driver API version from libcuda.so.1 (12040 = 12.4): 0 with *version, or -ENOENT (library not
 * found) / -EIO (no version) with err. */
static int cuda_driver_version(int *version, struct ddp_err *err)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*get)(int *), rc = 0;

    if (!h)
        return ddp_errf(err, -ENOENT, "%s", dlerror());
    *(void **)&get = dlsym(h, "cuDriverGetVersion");
    if (!get || get(version) != 0)
        rc = ddp_errf(err, -EIO, "cuDriverGetVersion failed");
    dlclose(h);
    return rc;
}

static char *read_file(const char *path, size_t max, size_t *len_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t len = 0, cap = 4096;
    char *buf;

    if (fd < 0)
        return NULL;
    buf = ddp_xmalloc(cap + 1);
    for (;;) {
        ssize_t k;

        if (len == cap) {
            if (cap >= max)
                break;
            cap *= 2;
            buf = ddp_xrealloc(buf, cap + 1);
        }
        k = read(fd, buf + len, cap - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    buf[len] = '\0';
    if (len_out)
        *len_out = len;
    return buf;
}

/* The value of "Key:\t..." in /proc/self/status text, as a new string, or NULL. */
static char *status_field(const char *text, const char *key)
{
    size_t kl = strlen(key);

    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, key, kl) == 0 && l[kl] == ':') {
            const char *v = l + kl + 1;

            v += strspn(v, " \t");
            return ddp_xstrndup(v, strcspn(v, "\n"));
        }
    return NULL;
}

static void glob_push(const char *pattern, struct ddp_strv *out)
{
    glob_t g;

    if (glob(pattern, 0, NULL, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; i++) {
            bool dup = false;

            for (size_t k = 0; k < out->n && !dup; k++)
                dup = strcmp(out->v[k], g.gl_pathv[i]) == 0;
            if (!dup)
                ddp_strv_push(out, g.gl_pathv[i]);
        }
    globfree(&g);
}

/* Python library directories to search, in the order the interpreter most likely uses them. */
static void python_dirs(const struct ddp_doctor_config *dc, char *const *envp, struct ddp_strv *dirs)
{
    const char *py = dc->python, *venv = ddp_env_get(envp, "VIRTUAL_ENV"), *conda = ddp_env_get(envp, "CONDA_PREFIX");
    const char *home = ddp_env_get(envp, "HOME"), *path = ddp_env_get(envp, "PATH");
    char buf[PATH_MAX + 64], found[PATH_MAX];

    /* the interpreter's prefix: PREFIX/bin/python3 -> PREFIX/lib/python3.X/site-packages (a venv's bin/python3
     * is a symlink to the base interpreter: the venv's own prefix is what counts, so no realpath) */
    if (py && !strchr(py, '/'))
        for (const char *s = path; s && *s;) {
            size_t n = strcspn(s, ":");

            snprintf(found, sizeof found, "%.*s/%s", (int)n, s, py);
            if (n && found[0] == '/' && access(found, X_OK) == 0) {
                py = found;
                break;
            }
            s += n + (s[n] == ':');
        }
    if (py && py[0] == '/') {
        char *prefix = ddp_xstrdup(py), *s = strrchr(prefix, '/');

        if (s)
            *s = '\0';
        s = strrchr(prefix, '/');
        if (s && strcmp(s, "/bin") == 0) {
            *s = '\0';
            snprintf(buf, sizeof buf, "%s/lib/python3*/site-packages", *prefix ? prefix : "");
            glob_push(buf, dirs);
            if (strcmp(prefix, "/usr") == 0)
                glob_push("/usr/lib/python3/dist-packages", dirs);
        }
        free(prefix);
    }
    if (venv && *venv) {
        snprintf(buf, sizeof buf, "%s/lib/python3*/site-packages", venv);
        glob_push(buf, dirs);
    }
    if (conda && *conda) {
        snprintf(buf, sizeof buf, "%s/lib/python3*/site-packages", conda);
        glob_push(buf, dirs);
    }
    if (home && *home) {
        snprintf(buf, sizeof buf, "%s/.local/lib/python3*/site-packages", home);
        glob_push(buf, dirs);
    }
    glob_push("/usr/local/lib/python3*/dist-packages", dirs);
    glob_push("/usr/local/lib/python3*/site-packages", dirs);
    glob_push("/usr/lib/python3/dist-packages", dirs);
    glob_push("/usr/lib/python3*/dist-packages", dirs);
    glob_push("/usr/lib/python3*/site-packages", dirs);
    glob_push("/opt/conda/lib/python3*/site-packages", dirs);
}

static void nccl_lib_facts(const struct ddp_doctor_config *dc, char *const *envp, struct ddp_strv *system,
                           struct ddp_strv *bundled, char **torch_dir, int *torch_cuda)
{
    struct ddp_strv dirs = {0};
    size_t len = 0;
    char *cache = read_file("/etc/ld.so.cache", 16u << 20, &len);
    const char *llp = ddp_env_get(envp, "LD_LIBRARY_PATH");
    char buf[PATH_MAX + 64];

    if (cache)
        ddp_check_ldcache_find(cache, len, "libnccl.so", system);
    free(cache);
    for (const char *s = llp; s && *s;) {
        size_t n = strcspn(s, ":");

        if (n) {
            snprintf(buf, sizeof buf, "%.*s/libnccl.so*", (int)n, s);
            glob_push(buf, system);
        }
        s += n + (s[n] == ':');
    }
    glob_push("/usr/local/cuda/lib64/libnccl.so*", system);
    python_dirs(dc, envp, &dirs);
    *torch_dir = NULL;
    *torch_cuda = -1;
    for (size_t i = 0; i < dirs.n; i++) {
        struct stat st;

        snprintf(buf, sizeof buf, "%s/nvidia/nccl/lib/libnccl.so*", dirs.v[i]);
        glob_push(buf, bundled);
        snprintf(buf, sizeof buf, "%s/torch/__init__.py", dirs.v[i]);
        if (!*torch_dir && stat(buf, &st) == 0) {
            struct ddp_strv cuda = {0};

            *torch_dir = ddp_xasprintf("%s/torch", dirs.v[i]);
            snprintf(buf, sizeof buf, "%s/torch/lib/libtorch_cuda*.so", dirs.v[i]);
            glob_push(buf, &cuda);
            snprintf(buf, sizeof buf, "%s/torch/lib/libtorch_hip*.so", dirs.v[i]);
            glob_push(buf, &cuda);
            *torch_cuda = cuda.n > 0;
            ddp_strv_clear(&cuda);
        }
    }
    ddp_strv_clear(&dirs);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void dev_nodes(struct ddp_strv *devs)
{
    DIR *d = opendir("/dev");
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "nvidia", 6) == 0)
            ddp_strv_push(devs, e->d_name);
    closedir(d);
    if (devs->n > 1)
        qsort(devs->v, devs->n, sizeof *devs->v, cmp_str);
}

/* Resolve master_addr and find the interface that routes to it (a UDP connect() sends nothing). */
static void addr_facts(const char *addr, struct ddp_check_addr *a, char *resolved, char *src, char *ifn, char *gai_err,
                       size_t len)
{
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_ADDRCONFIG}, *res = NULL;
    int rc;

    a->addr = addr;
    if (!addr || !*addr)
        return;
    rc = getaddrinfo(addr, "9", &hints, &res);
    if (rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_ADDRFAMILY) { /* AI_ADDRCONFIG hides lo-only hosts */
        hints.ai_flags = 0;
        rc = getaddrinfo(addr, "9", &hints, &res);
    }
    a->gai_rc = rc;
    if (rc != 0) {
        snprintf(gai_err, len, "%s", rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        a->gai_error = gai_err;
        return;
    }
    getnameinfo(res->ai_addr, res->ai_addrlen, resolved, (socklen_t)len, NULL, 0, NI_NUMERICHOST);
    a->resolved = resolved;
    if (res->ai_family == AF_INET)
        a->loopback = (ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    else if (res->ai_family == AF_INET6)
        a->loopback = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr);
    int s = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (s < 0 || connect(s, res->ai_addr, res->ai_addrlen) < 0) {
        a->route_errno = errno ? errno : EHOSTUNREACH;
    } else {
        struct sockaddr_storage me;
        socklen_t ml = sizeof me;
        struct ifaddrs *ifs = NULL;

        if (getsockname(s, (struct sockaddr *)&me, &ml) == 0) {
            getnameinfo((struct sockaddr *)&me, ml, src, (socklen_t)len, NULL, 0, NI_NUMERICHOST);
            a->src_ip = src;
            if (getifaddrs(&ifs) == 0) {
                for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
                    char h[NI_MAXHOST];

                    if (!i->ifa_addr || i->ifa_addr->sa_family != me.ss_family)
                        continue;
                    if (getnameinfo(i->ifa_addr,
                                    me.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6),
                                    h, sizeof h, NULL, 0, NI_NUMERICHOST) == 0 &&
                        strcmp(h, src) == 0) {
                        snprintf(ifn, len, "%s", i->ifa_name);
                        a->ifname = ifn;
                        break;
                    }
                }
                freeifaddrs(ifs);
            }
        }
    }
    if (s >= 0)
        close(s);
    freeaddrinfo(res);
}

/* Names of the interfaces that are up, each once. */
static void interfaces_up(struct ddp_strv *out)
{
    struct ifaddrs *ifs = NULL;

    if (getifaddrs(&ifs) < 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        bool dup = false;

        if (!(i->ifa_flags & IFF_UP))
            continue;
        for (size_t k = 0; k < out->n && !dup; k++)
            dup = strcmp(out->v[k], i->ifa_name) == 0;
        if (!dup)
            ddp_strv_push(out, i->ifa_name);
    }
    freeifaddrs(ifs);
}

/* A variable as the workers would see it: [nccl] key first, then the environment. */
static const char *nccl_value(const struct ddp_spec *spec, char *const *envp, const char *name)
{
    const struct ddp_kv *kv = spec ? ddp_kvlist_get(&spec->nccl, name) : NULL;

    if (kv)
        return kv->value;
    kv = spec ? ddp_kvlist_get(&spec->env, name) : NULL;
    return kv ? kv->value : ddp_env_get(envp, name);
}

/* The placement the job would make, what the GPU checks read of it, and the facts behind them. */
struct gpu_section {
    struct gpu_facts facts;
    struct ddp_placement pl, better;
    bool placed;
    int *picked, *bidx;
    char *unfit; /* gpus_unfit() */
    struct ddp_err perr;
};

/* The GPUs of a placement, each once (ranks share GPUs with [gpus] share), in rank order. Returns how many. */
static size_t distinct_gpus(const struct ddp_placement *pl, int *out)
{
    size_t n = 0;

    for (size_t i = 0; i < pl->nranks; i++) {
        bool seen = false;

        for (size_t j = 0; j < n; j++)
            seen |= out[j] == pl->ranks[i].gpu;
        if (!seen)
            out[n++] = pl->ranks[i].gpu;
    }
    return n;
}

/* The GPUs of the topology the judge finds unfit but for a holder (fitness.h: lost, faulty; a launch and a
 * restart leave them out):
 * "GPU 1 (0000:00:07.0): why; ...", or NULL. Caller owns; free(). */
static char *gpus_unfit(const struct ddp_topo *topo)
{
    struct ddp_buf b = {0};
    for (size_t i = 0; i < ddp_topo_ngpus(topo); i++) {
        struct ddp_topo_gpu_facts f;
        struct ddp_fitness_verdict v;
        if (ddp_topo_gpu_facts(topo, i, &f) < 0 || !f.nvml)
            continue;
        ddp_fitness_judge(&(struct ddp_fitness_in){.busid = f.busid, .gpu = f.nvml}, &v);
        if (!ddp_fitness_usable(&v) && v.fit != DDP_FIT_HELD) /* holders: gpu-busy's, of the picked GPUs */
            ddp_buf_printf(&b, "%sGPU %zu (%s): %s", b.len ? "; " : "", i, f.busid, v.why);
    }
    return b.data;
}

/* GPUs: the placement this job would make (GPUs other jobs hold left out, dc->gpus->holders), the same-numa
 * alternative, and NVML's view of the picked ones. */
static void check_gpus(const struct ddp_doctor_config *dc, struct gpu_section *s, struct ddp_check_report *r)
{
    struct ddp_check_gpus g = {.nproc = dc->nproc};

    if (dc->job->topo) {
        struct ddp_place_req req;

        gpu_facts_read(dc->job->topo, &s->facts);
        ddp_plan_place_req(dc->job, dc->gpus, dc->nproc, &req);
        g.have_topo = true;
        g.all = s->facts.gpus;
        g.nall = s->facts.ngpus;
        g.want_gpus = req.want_gpus;
        g.share = req.share;
        g.nusable = req.want_gpus ? ddp_place_count_usable(dc->job->topo, &req) : 0;
        s->unfit = req.want_gpus ? gpus_unfit(dc->job->topo) : NULL;
        g.unfit = s->unfit;
        if (dc->nproc > 0 && ddp_place_ranks(dc->job->topo, &req, &s->pl, &s->perr) == 0) {
            s->placed = true;
            g.reason = s->pl.reason;
            g.nvlink = s->pl.reason && (strstr(s->pl.reason, ", NVLink (NV") || strstr(s->pl.reason, ", XGMI links"));
            if (req.want_gpus) {
                static const struct ddp_strv none;
                struct ddp_place_req alt = req;
                struct ddp_err e2 = {0};

                s->picked = ddp_xcalloc(s->pl.nranks + 1, sizeof *s->picked);
                g.npicked = distinct_gpus(&s->pl, s->picked);
                g.picked = s->picked;
                alt.select = &none;
                alt.policy = DDP_POLICY_SAME_NUMA;
                if (ddp_place_ranks(dc->job->topo, &alt, &s->better, &e2) == 0) {
                    s->bidx = ddp_xcalloc(s->better.nranks + 1, sizeof *s->bidx);
                    g.nbetter = distinct_gpus(&s->better, s->bidx);
                    g.better = s->bidx;
                }
            }
        } else if (req.want_gpus) {
            g.error = s->perr.msg[0] ? s->perr.msg : "placement failed";
        }
        /* an XML topology has NVML facts only when paired with NVML (DDPLAUNCH_TOPOLOGY_NVML, the tests) */
        g.nvml = g.npicked && s->facts.n_nvidia && s->facts.nvml->found;
        if (g.nvml)
            gpu_usage(dc->job->topo, &s->facts, s->picked, g.npicked);
        g.nvml_status = s->facts.nvml->status;
    }
    ddp_check_gpus(r, &g);
    ddp_check_numa(r, &g);
    ddp_check_gpu_busy(r, &g);
    ddp_check_gpu_health(r, &g);
}

static void gpu_section_free(struct gpu_section *s)
{
    ddp_place_free(&s->pl);
    ddp_place_free(&s->better);
    free(s->picked);
    free(s->unfit);
    free(s->bidx);
    free(s->facts.gpus);
}

/* Driver, device nodes, libnccl. */
static void check_libraries(const struct ddp_doctor_config *dc, char *const *envp, const struct gpu_facts *gf,
                            struct ddp_check_report *r)
{
    struct ddp_strv devs = {0}, sys = {0}, bun = {0};
    struct ddp_err cuda_err = {0};
    char *torch_dir = NULL;
    int torch_cuda = -1;
    bool nvml = gf->nvml && gf->nvml->found;
    struct ddp_check_driver d = {.n_nvidia = gf->n_nvidia,
                                 .nvml_found = nvml,
                                 .nvml_status = gf->nvml ? gf->nvml->status : "",
                                 .driver = nvml && gf->nvml->driver[0] ? gf->nvml->driver : NULL,
                                 .cuda_version = -1};

    if (gf->n_nvidia && !gf->from_xml) {
        if (cuda_driver_version(&d.cuda_version, &cuda_err) < 0)
            d.cuda_version = -1;
        d.cuda_error = cuda_err.msg;
        dev_nodes(&devs);
    }
    d.xml = gf->from_xml && gf->n_nvidia; /* describes another machine: its driver is not ours to check */
    d.devs = (const char *const *)devs.v;
    d.ndevs = devs.n;
    ddp_check_driver(r, &d);
    ddp_check_devices(r, &d);
    nccl_lib_facts(dc, envp, &sys, &bun, &torch_dir, &torch_cuda);
    struct ddp_check_nccl_lib l = {.xml = d.xml,
                                   .n_nvidia = d.n_nvidia,
                                   .system = (const char *const *)sys.v,
                                   .nsystem = sys.n,
                                   .bundled = (const char *const *)bun.v,
                                   .nbundled = bun.n,
                                   .torch_dir = torch_dir,
                                   .torch_cuda = torch_cuda};
    ddp_check_nccl_lib(r, &l);
    free(torch_dir);
    ddp_strv_clear(&devs);
    ddp_strv_clear(&sys);
    ddp_strv_clear(&bun);
}

/* master_port: listeners from /proc/net, the holder and a bind test of an explicit port on node 0. */
static void check_port(const struct ddp_doctor_config *dc, const char *lock_dir, struct ddp_check_report *r)
{
    char *tcp = read_file("/proc/net/tcp", 8u << 20, NULL), *tcp6 = read_file("/proc/net/tcp6", 8u << 20, NULL);
    char *eph = ddp_port_ephemeral_range();
    struct ddp_port_holder holder;
    char lock_holder[256];
    struct ddp_check_port p = {.spec = dc->job->spec->master_port,
                               .node_rank = dc->node_rank,
                               .master_addr = dc->master_addr,
                               .tcp = tcp,
                               .tcp6 = tcp6,
                               .ephemeral = eph,
                               .job = dc->port_job,
                               .job_port = dc->port_job_first};

    if (!p.spec.is_auto && dc->node_rank == 0) {
        if (ddp_port_holder(p.spec.port, &holder) == 0)
            p.holder = &holder;
        if (ddp_port_lock_holder(lock_dir, p.spec.port, lock_holder, sizeof lock_holder) == 0)
            p.lock_holder = lock_holder;
        p.probe_rc = ddp_port_probe(p.spec.port);
    }
    struct ddp_strv held = {0};
    if (p.spec.is_auto && dc->node_rank == 0 && ddp_port_locks_held(lock_dir, &held) == 0)
        p.held_locks = &held, p.lock_dir = lock_dir;
    ddp_check_port(r, &p);
    ddp_strv_clear(&held);
    char foreign[512];
    int nforeign = ddp_port_foreign_holders(lock_dir, foreign, sizeof foreign);
    if (nforeign > 0)
        ddp_check_add(r, DDP_CHECK_WARN, "port-locks", "ask its user, or root, to end it (CONTAINMENT in ddplaunch(1))",
                      "%d port reservation%s held by processes that are no ddplaunch job (auto ports skip them): %s%s",
                      nforeign, nforeign == 1 ? "" : "s", foreign, nforeign > 3 ? "; ..." : "");
    free(tcp);
    free(tcp6);
    free(eph);
}

/* NCCL's RAS port (NCCL 2.24+ listens on localhost:28028 in every rank by default): the user's NCCL_RAS_ADDR, RAS
 * off, or each job's own port reserved at launch from DDP_PORT_RAS_RANGE. */
static void check_ras(const struct ddp_spec *spec, char *const *envp, const char *lock_dir, struct ddp_check_report *r)
{
    const char *set = nccl_value(spec, envp, "NCCL_RAS_ADDR"), *on = nccl_value(spec, envp, "NCCL_RAS_ENABLE");
    struct ddp_port_spec range;
    struct ddp_strv held = {0};
    int busy = 0;
    if (on && strcmp(on, "0") == 0) {
        ddp_check_add(r, DDP_CHECK_OK, "nccl-ras", NULL, "NCCL's RAS is off (NCCL_RAS_ENABLE=0): no port given");
        return;
    }
    if (set && *set) {
        ddp_check_add(r, DDP_CHECK_OK, "nccl-ras", NULL,
                      "NCCL_RAS_ADDR=%s is yours: ddplaunch keeps it (two jobs with the same one on a host share "
                      "NCCL's RAS port)",
                      set);
        return;
    }
    ddp_port_spec_parse(DDP_PORT_RAS_RANGE, &range, NULL);
    if (ddp_port_locks_held(lock_dir, &held) == 0)
        for (int p = range.lo; p <= range.hi; p++)
            busy += ddp_port_lock_listed(&held, lock_dir, p);
    ddp_strv_clear(&held);
    ddp_check_add(
        r, DDP_CHECK_OK, "nccl-ras", NULL,
        "each job with GPUs gets its own NCCL_RAS_ADDR port, localhost:%d-%d reserved as MASTER_PORT is (%d of them "
        "held now), instead of NCCL's default 28028 that every job would share",
        range.lo, range.hi, busy);
}

/* master_addr, its route and the socket interface variables. */
static void check_network(const struct ddp_doctor_config *dc, char *const *envp, struct ddp_check_report *r)
{
    const struct ddp_spec *spec = dc->job->spec;
    char resolved[NI_MAXHOST] = "", src[NI_MAXHOST] = "", ifn[NI_MAXHOST] = "", gai[NI_MAXHOST] = "";
    struct ddp_check_addr a = {.nnodes = dc->nnodes};
    struct ddp_strv ifs = {0};
    const char *addr = dc->master_addr ? dc->master_addr : spec->master_addr;

    addr_facts(addr, &a, resolved, src, ifn, gai, sizeof resolved);
    ddp_check_addr(r, &a);
    interfaces_up(&ifs);
    ddp_check_ifname(r, "NCCL_SOCKET_IFNAME", nccl_value(spec, envp, "NCCL_SOCKET_IFNAME"), false,
                     (const char *const *)ifs.v, ifs.n, dc->nnodes > 1 && !a.loopback ? a.ifname : NULL);
    ddp_check_ifname(r, "GLOO_SOCKET_IFNAME", nccl_value(spec, envp, "GLOO_SOCKET_IFNAME"), true,
                     (const char *const *)ifs.v, ifs.n, dc->nnodes > 1 && !a.loopback ? a.ifname : NULL);
    ddp_strv_clear(&ifs);
}

/* CPUs and memory nodes allowed against the placement's bindings. */
static void check_cpus(const struct ddp_doctor_config *dc, const struct gpu_section *s, struct ddp_check_report *r)
{
    char *status = read_file("/proc/self/status", 1u << 20, NULL);
    char *cpus = dc->job->topo ? ddp_topo_allowed_cpus(dc->job->topo) : NULL;
    char *mems = NULL;
    const char **rc = NULL, **rm = NULL;

    if (!cpus && status)
        cpus = status_field(status, "Cpus_allowed_list");
    if (status && !s->facts.from_xml)
        mems = status_field(status, "Mems_allowed_list");
    if (s->placed) {
        rc = ddp_xcalloc(s->pl.nranks + 1, sizeof *rc);
        rm = ddp_xcalloc(s->pl.nranks + 1, sizeof *rm);
        for (size_t i = 0; i < s->pl.nranks; i++)
            rc[i] = s->pl.ranks[i].cpus, rm[i] = s->pl.ranks[i].mems;
    }
    struct ddp_check_cpus c = {.cpus_allowed = cpus,
                               .mems_allowed = mems,
                               .nproc = dc->nproc,
                               .bind = dc->job->spec->numa_bind,
                               .rank_cpus = rc,
                               .rank_mems = rm,
                               .nranks = s->placed ? s->pl.nranks : 0};
    ddp_check_cpus(r, &c);
    free(rc);
    free(rm);
    free(cpus);
    free(mems);
    free(status);
}

/* The probe's Python. `python -c` puts the current directory first on sys.path, and the caller's directory may be
 * a shared one (mode 1777) where another user left a torch.py: the first statement takes it off again (every ''
 * entry, and every entry naming that directory), before anything is imported. Nothing runs from it earlier: the
 * interpreter adds it after site (and sitecustomize) ran, and imports readline only for a terminal on stdin
 * (the probe's is /dev/null). PYTHONSAFEPATH=1 (-P's variable, Python 3.11 on; older ones ignore it) keeps the
 * directory off from the start where it can. Not -I: it would also drop PYTHONPATH and the user's site-packages
 * (pip install --user), where the workers do find torch. */
static const char probe_py[] = "import sys\n"
                               "sys.path[:] = [p for p in sys.path if p]\n"
                               "import os\n"
                               "try:\n"
                               "    here = os.path.realpath(os.getcwd())\n"
                               "except OSError:\n"
                               "    here = None\n"
                               "sys.path[:] = [p for p in sys.path if here is None or os.path.realpath(p) != here]\n"
                               "import torch\n"
                               "print('torch', torch.__version__)\n";

/* Whether python imports torch, run as the workers would (envp) but with nothing from the current directory
 * (probe_py): 1 with its version in out, 0 with the last line it printed in out, within 60 s (an import on a
 * loaded machine takes seconds). */
static int import_torch(const char *python, char *const *envp, char *out, size_t len)
{
    char *argv[] = {(char *)python, "-c", (char *)probe_py, NULL};
    char buf[65536];
    size_t n = 0;
    int fds[2];
    struct ddp_strv env = {0};
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, "PYTHONSAFEPATH=", 15) != 0)
            ddp_strv_push(&env, *e);
    ddp_strv_push(&env, "PYTHONSAFEPATH=1");
    snprintf(out, len, "it could not be started");
    if (pipe2(fds, O_CLOEXEC) < 0) {
        ddp_strv_clear(&env);
        return 0;
    }
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = fork();
    if (pid == 0) {
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        execvpe(python, argv, env.v);
        _exit(127);
    }
    ddp_strv_clear(&env);
    close(fds[1]);
    if (devnull >= 0)
        close(devnull);
    long long deadline = ddp_now_ns() + 60LL * 1000000000LL;
    while (pid > 0 && n < sizeof buf - 1) {
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        long long left_ms = (deadline - ddp_now_ns()) / 1000000;
        if (left_ms <= 0 || poll(&pfd, 1, (int)left_ms) <= 0)
            break;
        ssize_t k = read(fds[0], buf + n, sizeof buf - 1 - n);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fds[0]);
    buf[n] = '\0';
    int ws = 0;
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
    }
    char *line = strstr(buf, "torch ");
    while (line && line != buf && line[-1] != '\n')
        line = strstr(line + 1, "torch ");
    if (line && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
        snprintf(out, len, "%.*s", (int)strcspn(line + 6, "\n"), line + 6);
        return 1;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    const char *last = strrchr(buf, '\n');
    if (n > 0)
        snprintf(out, len, "%s", last ? last + 1 : buf);
    return 0;
}

/* Check "python" (a script or module job): the workers' interpreter imports torch; when it does not, the first
 * python3 or python on PATH (then /usr/bin/python3) that does. Seconds: torch's import. */
static void check_python(const struct ddp_doctor_config *dc, char *const *envp, struct ddp_check_report *r)
{
    const struct ddp_spec *s = dc->job->spec;
    /* a script or module job: without one (doctor alone) or with a program there is no python to ask */
    struct ddp_check_python p = {.runs_python = !s->command.n && (s->script || s->module),
                                 .python = dc->python ? dc->python : "python3",
                                 .why = dc->python_why ? dc->python_why : "python3 from PATH"};
    char got[512], other_got[512], *other = NULL, mine[PATH_MAX] = "";
    if (p.runs_python) {
        if (import_torch(p.python, envp, got, sizeof got))
            p.torch = got;
        else
            p.error = got;
    }
    if (p.runs_python && !p.torch) {
        if (!realpath(p.python, mine))
            snprintf(mine, sizeof mine, "%s", p.python);
        const char *path = ddp_env_get(envp, "PATH");
        char *dirs = ddp_xasprintf("%s:/usr/bin", path ? path : "/usr/local/bin:/usr/bin");
        for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d && !other; d = strtok_r(NULL, ":", &save))
            for (int k = 0; k < 2 && !other; k++) {
                char *cand = ddp_xasprintf("%s/%s", d, k ? "python" : "python3"), real[PATH_MAX];
                if (d[0] == '/' && access(cand, X_OK) == 0 && (!realpath(cand, real) || strcmp(real, mine) != 0) &&
                    import_torch(cand, envp, other_got, sizeof other_got))
                    other = cand;
                else
                    free(cand);
            }
        free(dirs);
        p.other = other;
        p.other_torch = other ? other_got : NULL;
    }
    ddp_check_python(r, &p);
    free(other);
}

void ddp_doctor_collect(const struct ddp_doctor_config *dc, struct ddp_check_report *r)
{
    extern char **environ;
    char *const *envp = dc->job->base_env ? dc->job->base_env : environ;
    const char *lock_dir = ddp_rundir_lock_dir(envp);
    struct gpu_section gs = {0};
    struct ddp_lease_info *leases = NULL;
    size_t nleases = 0;
    int lease_rc = ddp_lease_list(lock_dir, &leases, &nleases);
    struct rlimit rl = {0};

    check_gpus(dc, &gs, r);
    ddp_check_leases(r, leases, nleases, getpid(), lease_rc);
    check_libraries(dc, envp, &gs.facts, r);
    check_python(dc, envp, r);
    ddp_check_nccl_env(r, &dc->job->spec->nccl, envp);
    check_port(dc, lock_dir, r);
    check_ras(dc->job->spec, envp, lock_dir, r);
    check_network(dc, envp, r);
    check_cpus(dc, &gs, r);
    getrlimit(RLIMIT_NOFILE, &rl);
    ddp_check_nofile(r, (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, dc->nproc);
    ddp_doctor_check_state_dirs(r, envp, getuid());
    struct ddp_check_etcd ef = {
        .backend = dc->job->spec->rdzv_backend && *dc->job->spec->rdzv_backend ? dc->job->spec->rdzv_backend : "static",
        .nnodes = dc->nnodes};
    if (ef.nnodes > 1 && strstr(ef.backend, "etcd") == ef.backend)
        ddp_check_etcd_facts(dc->job->spec->rdzv_endpoint, dc->job->spec->rdzv_conf, &ef);
    ddp_check_rdzv(r, &ef);
    gpu_section_free(&gs);
    free(leases);
}

int ddp_doctor_run(const struct ddp_doctor_config *dc, bool json, FILE *out)
{
    struct ddp_check_report r = {0};
    int status;

    ddp_doctor_collect(dc, &r);
    ddp_check_print(&r, json, out);
    status = ddp_check_exit_status(&r);
    ddp_check_report_free(&r);
    if (fflush(out) != 0 || ferror(out))
        return DDP_EXIT_DOCTOR_FAIL;
    return status;
}
