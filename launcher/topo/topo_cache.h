/* topo_cache: the live machine's topology kept between launches of one boot: hwloc's XML export of what
 * discovery found and NVML's facts that do not change while the machine runs (UUIDs, names, NVLinks), in one file
 * of this user's private runtime directory, under a key of what would change them: boot id, the CPUs and memory
 * nodes this process may use and its cpuset, the CPUs and NUMA nodes online, the PCI devices present, the NVIDIA
 * driver version, hwloc's and ddplaunch's versions and every HWLOC_* variable. A key that differs is a miss.
 * It holds no live state (memory in use, utilisation, processes, leases) and decides nothing: topo.c reads and
 * writes it. */
#ifndef DDP_TOPO_CACHE_H
#define DDP_TOPO_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* The key as it is now (a few small reads of /proc and /sys), or NULL when the cache must not be used:
 * no boot id, or DDPLAUNCH_TOPOLOGY_CACHE is "off" or "0" in envp. Caller owns; free(). */
char *ddp_topo_cache_key(char *const *envp);

/* The file's bytes for key, nvml (one line, ddp_nvml_static_json()) and xml[0..xml_len). Pure. Caller owns;
 * free(). *len: its length. */
char *ddp_topo_cache_format(const char *key, const char *nvml, const char *xml, size_t xml_len, size_t *len);
/* The reverse, in place: 0 with *nvml and *xml pointing into buf (NUL-terminated: buf is changed; *xml_len its
 * length), -ESTALE when buf is a cache file of another key or of another format (an older ddplaunch's),
 * -EBADMSG when it is not a cache file. */
int ddp_topo_cache_parse(char *buf, size_t len, const char *key, const char **nvml, const char **xml, size_t *xml_len);

/* The cache file's content for key from this user's private directory ($XDG_RUNTIME_DIR/ddplaunch, else
 * /tmp/ddplaunch-cache-UID; created 0700 and owner-checked, no symlinks followed; the file must be a regular
 * file of this user that no one else may write). 0 with *buf (caller frees; *nvml and *xml point into it),
 * or a negative errno: -ENOENT none, -ESTALE another key or format, others (the cache is then not used). */
int ddp_topo_cache_read(char *const *envp, const char *key, char **buf, const char **nvml, const char **xml,
                        size_t *xml_len);
/* Replace the cache file (a new file renamed over the old one, mode 0600). 0 or a negative errno; a failure
 * only means the next launch discovers again. */
int ddp_topo_cache_write(char *const *envp, const char *key, const char *nvml, const char *xml, size_t xml_len);
/* After a miss: the discovery lock of this user's cache directory (flock on it), so that of many launches that
 * miss at once (a thousand agents starting on one host after a boot) one discovers and the others read what it
 * wrote. Taken at once or not at all: returns the fd to close when the cache is written, or -1 when there is no
 * lock (no directory, or another launch holds it: ddp_topo_cache_wait). */
int ddp_topo_cache_lock(char *const *envp);
/* Wait up to wait_ms for the launch that holds the discovery lock, without taking it: until it renames the cache
 * into place (inotify wakes every waiter once, at that moment) or lets go of the lock. The many launches that
 * wait wake together and read the cache side by side, where taking the lock in turn would have them read it one
 * at a time (and polling it would wake a thousand of them hundreds of times a second). 0, or -ETIMEDOUT
 * (discover anyway), or a negative errno (no directory). */
int ddp_topo_cache_wait(char *const *envp, int wait_ms);

#endif
