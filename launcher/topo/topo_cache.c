/* topo_cache: the topology cache's key and file (topo_cache.h). */
#include "topo/topo_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "host/rundir.h"

#define CACHE_FILE "topology"
#define CACHE_MAX (64u << 20)
#define MAGIC "DDPTOPO 2" /* 2: no caches but L3 (topo.c) */

/* Up to cap - 1 bytes of a small kernel file, NUL-terminated; "" when it cannot be read. Returns the length. */
static size_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t len = fd < 0 ? 0 : ddp_read_full(fd, buf, cap - 1);
    if (fd >= 0)
        close(fd);
    buf[len > 0 ? len : 0] = '\0';
    return len > 0 ? (size_t)len : 0;
}

/* The lines of /proc/self/status that say which CPUs and memory nodes this process may use. */
static void allowed_lines(struct ddp_buf *key)
{
    char status[8192];
    read_small("/proc/self/status", status, sizeof status);
    for (char *line = status; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0 || strncmp(line, "Mems_allowed_list:", 18) == 0)
            ddp_buf_printf(key, "%.*s\n", (int)n, line);
        line = nl ? nl + 1 : NULL;
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The PCI devices present (names only: no config space is read), sorted. */
static void pci_devices(struct ddp_buf *key)
{
    DIR *d = opendir("/sys/bus/pci/devices");
    struct ddp_strv names = {0};
    struct dirent *e;
    if (!d) {
        ddp_buf_printf(key, "pci: none\n");
        return;
    }
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            ddp_strv_push(&names, e->d_name);
    closedir(d);
    qsort(names.v, names.n, sizeof *names.v, cmp_str);
    ddp_buf_printf(key, "pci:");
    for (size_t i = 0; i < names.n; i++)
        ddp_buf_printf(key, " %s", names.v[i]);
    ddp_buf_printf(key, "\n");
    ddp_strv_clear(&names);
}

char *ddp_topo_cache_key(char *const *envp)
{
    const char *off = ddp_env_get(envp, "DDPLAUNCH_TOPOLOGY_CACHE");
    if (off && (strcmp(off, "off") == 0 || strcmp(off, "0") == 0))
        return NULL;
    static const char *const files[] = {"/proc/sys/kernel/random/boot_id", "/proc/self/cpuset",
                                        "/sys/devices/system/cpu/online", "/sys/devices/system/node/online",
                                        "/proc/driver/nvidia/version"};
    struct ddp_buf key = {0};
    char buf[1024];
    unsigned api = hwloc_get_api_version();
    ddp_buf_printf(&key, "ddplaunch %s, hwloc %u.%u.%u\n", DDP_VERSION, api >> 16, (api >> 8) & 0xff, api & 0xff);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t n = read_small(files[i], buf, sizeof buf);
        if (i == 0 && n == 0) { /* no boot id: nothing says when the machine changed */
            ddp_buf_free(&key);
            return NULL;
        }
        ddp_buf_printf(&key, "%s: %s%s", files[i], buf, n && buf[n - 1] == '\n' ? "" : "\n");
    }
    allowed_lines(&key);
    pci_devices(&key);
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], "HWLOC_", 6) == 0)
            ddp_buf_printf(&key, "%s\n", envp[i]);
    return key.data;
}

char *ddp_topo_cache_format(const char *key, const char *nvml, const char *xml, size_t xml_len, size_t *len)
{
    struct ddp_buf b = {0};
    ddp_buf_printf(&b, MAGIC " %zu %zu %zu\n", strlen(key), strlen(nvml), xml_len);
    ddp_buf_add(&b, key, strlen(key) + 1);
    ddp_buf_add(&b, nvml, strlen(nvml) + 1);
    ddp_buf_add(&b, xml, xml_len);
    *len = b.len;
    return b.data;
}

/* Layout: the line "DDPTOPO 2 KEYLEN NVMLLEN XMLLEN", then the key, the NVML line and the XML, each ending with
 * a NUL (the XML's NUL counts in XMLLEN, as hwloc's export gives it). */
int ddp_topo_cache_parse(char *buf, size_t len, const char *key, const char **nvml, const char **xml, size_t *xml_len)
{
    size_t klen, nlen, xlen;
    int used = 0;
    char *nl = memchr(buf, '\n', len < 100 ? len : 100);
    if (!nl)
        return -EBADMSG;
    *nl = '\0';
    if (sscanf(buf, MAGIC " %zu %zu %zu%n", &klen, &nlen, &xlen, &used) != 3 || buf[used] != '\0')
        /* another format's file (an older ddplaunch): a miss like another key's, which one launch rediscovers
         * while those beside it wait for its file, not a discovery by each of a thousand agents at once */
        return strncmp(buf, "DDPTOPO ", 8) == 0 && strncmp(buf, MAGIC " ", sizeof MAGIC) != 0 ? -ESTALE : -EBADMSG;
    size_t head = (size_t)(nl + 1 - buf);
    if (klen > len || nlen > len || xlen > len || xlen == 0 || head + klen + 1 + nlen + 1 + xlen != len)
        return -EBADMSG;
    char *k = nl + 1, *n = k + klen + 1, *x = n + nlen + 1;
    if (k[klen] != '\0' || n[nlen] != '\0' || x[xlen - 1] != '\0')
        return -EBADMSG;
    if (strlen(k) != strlen(key) || strcmp(k, key) != 0)
        return -ESTALE;
    if (strlen(n) != nlen || strlen(x) != xlen - 1)
        return -EBADMSG;
    *nvml = n;
    *xml = x;
    *xml_len = xlen;
    return 0;
}

/* This user's private cache directory, opened. 0 and *dfd, or a negative errno. */
static int cache_dir(char *const *envp, int *dfd)
{
    struct ddp_err err = {0};
    char *priv = ddp_rundir_private_path(envp, geteuid());
    char *path =
        strcmp(priv, "/tmp") == 0 ? ddp_xasprintf("/tmp/ddplaunch-cache-%u", (unsigned)geteuid()) : ddp_xstrdup(priv);
    int rc = ddp_rundir_make_private(path, dfd, &err);
    if (rc < 0)
        ddp_debug("topology cache: %s", err.msg);
    free(priv);
    free(path);
    return rc;
}

int ddp_topo_cache_read(char *const *envp, const char *key, char **buf, const char **nvml, const char **xml,
                        size_t *xml_len)
{
    int dfd, rc;
    struct stat st;
    *buf = NULL;
    if ((rc = cache_dir(envp, &dfd)) < 0)
        return rc;
    int fd = openat(dfd, CACHE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    close(dfd);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) ||
        st.st_nlink != 1 || st.st_size <= 0 || (size_t)st.st_size > CACHE_MAX) {
        close(fd);
        return -EPERM;
    }
    size_t len = (size_t)st.st_size;
    char *b = ddp_xmalloc(len + 1);
    ssize_t got = ddp_read_full(fd, b, len);
    close(fd);
    b[got > 0 ? got : 0] = '\0';
    rc = got == (ssize_t)len ? ddp_topo_cache_parse(b, len, key, nvml, xml, xml_len) : -EIO;
    if (rc < 0) {
        free(b);
        return rc;
    }
    *buf = b;
    return 0;
}

int ddp_topo_cache_write(char *const *envp, const char *key, const char *nvml, const char *xml, size_t xml_len)
{
    int dfd, rc;
    if ((rc = cache_dir(envp, &dfd)) < 0)
        return rc;
    char tmp[64];
    snprintf(tmp, sizeof tmp, CACHE_FILE ".%d.tmp", (int)getpid());
    unlinkat(dfd, tmp, 0);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        close(dfd);
        return rc;
    }
    size_t len;
    char *data = ddp_topo_cache_format(key, nvml, xml, xml_len, &len);
    rc = ddp_write_full(fd, data, len);
    free(data);
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(dfd, tmp, dfd, CACHE_FILE) < 0)
        rc = -errno;
    if (rc < 0)
        unlinkat(dfd, tmp, 0);
    close(dfd);
    return rc;
}

int ddp_topo_cache_lock(char *const *envp)
{
    int dfd;
    if (cache_dir(envp, &dfd) < 0)
        return -1;
    if (flock(dfd, LOCK_EX | LOCK_NB) == 0)
        return dfd;
    close(dfd);
    return -1;
}

/* Whether the inotify descriptor in reported the cache file renamed into place (and drains it). */
static bool cache_renamed(int in)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool seen = false;
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            seen |= ev->len > 0 && strcmp(ev->name, CACHE_FILE) == 0;
            p += sizeof *ev + ev->len;
        }
    return seen;
}

int ddp_topo_cache_wait(char *const *envp, int wait_ms)
{
    int dfd, rc;
    if ((rc = cache_dir(envp, &dfd)) < 0)
        return rc;
    /* woken once, when the discovering launch renames the cache into place; a shared lock granted says it let go
     * (without writing, or before the watch began); a launch without inotify polls */
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", dfd);
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (in >= 0 && inotify_add_watch(in, self, IN_MOVED_TO) < 0) {
        close(in);
        in = -1;
    }
    long long deadline = ddp_now_ms() + wait_ms;
    for (;;) {
        if (flock(dfd, LOCK_SH | LOCK_NB) == 0) {
            rc = 0;
            break;
        }
        if (errno != EWOULDBLOCK) {
            rc = -errno;
            break;
        }
        long long left = deadline - ddp_now_ms();
        if (left <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        if (in < 0) {
            usleep(2000);
            continue;
        }
        struct pollfd p = {.fd = in, .events = POLLIN};
        if (poll(&p, 1, left < 50 ? (int)left : 50) > 0 && cache_renamed(in)) {
            rc = 0;
            break;
        }
    }
    if (in >= 0)
        close(in);
    close(dfd);
    return rc;
}
