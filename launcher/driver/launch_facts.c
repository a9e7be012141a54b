/* launch_facts: what resolve reads from the world (launch.h's struct ddp_launch_facts): the host's name and CPUs,
 * a random id, the GPU leases held, and which python runs a script. It reads; resolve (launch.c) decides. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/launch.h"
#include "host/rundir.h"

/* facts.env_python: BINDIR = the running binary's directory (/proc/self/exe); "BINDIR/python3" when it is
 * executable and BINDIR/../pyvenv.cfg is a file or BINDIR/../conda-meta a directory (not resolved: a venv's
 * python3 is a symlink whose own path selects the venv). Caller frees; NULL otherwise. */
static char *env_python_probe(void)
{
    char exe[PATH_MAX];
    struct stat st;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash || slash == exe)
        return NULL;
    *slash = '\0'; /* exe = BINDIR */
    char *py = ddp_xasprintf("%s/python3", exe);
    char *cfg = ddp_xasprintf("%s/../pyvenv.cfg", exe);
    char *conda = ddp_xasprintf("%s/../conda-meta", exe);
    bool env = (stat(cfg, &st) == 0 && S_ISREG(st.st_mode)) || (stat(conda, &st) == 0 && S_ISDIR(st.st_mode));
    free(cfg);
    free(conda);
    if (!env || access(py, X_OK) != 0) {
        free(py);
        return NULL;
    }
    return py;
}

/* facts.torchrun_python: the #! line of the torchrun on PATH, when it names a python (found on PATH when it is
 * a bare name, as /usr/bin/env would). */
static char *torchrun_python_probe(char *const *envp)
{
    char *torchrun = ddp_launch_find_on_path("torchrun", envp), line[4096] = "";
    if (!torchrun)
        return NULL;
    FILE *f = fopen(torchrun, "re");
    free(torchrun);
    if (!f)
        return NULL;
    bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char *py = got ? ddp_plan_shebang_python(line) : NULL;
    if (py && !strchr(py, '/')) {
        char *abs = ddp_launch_find_on_path(py, envp);
        free(py);
        py = abs;
    }
    return py;
}

void ddp_launch_facts_gather(struct ddp_launch_facts *f, const struct ddp_launch *l, char *const *envp)
{
    bool leases = l->cmd == DDP_CMD_TOPO || l->cmd == DDP_CMD_DOCTOR || ddp_launch_wants_gpus(l);
    memset(f, 0, sizeof *f);
    f->envp = envp;
    snprintf(f->hostname, sizeof f->hostname, "localhost");
    gethostname(f->hostname, sizeof f->hostname - 1);
    f->online_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned char raw[6] = {0};
    FILE *u = fopen("/dev/urandom", "re");
    if (!u || fread(raw, 1, sizeof raw, u) != sizeof raw) {
        long long t = ddp_now_ns() ^ getpid();
        memcpy(raw, &t, sizeof raw);
    }
    if (u)
        fclose(u);
    snprintf(f->random_id, sizeof f->random_id, "%02x%02x%02x%02x%02x%02x", raw[0], raw[1], raw[2], raw[3], raw[4],
             raw[5]);
    struct ddp_lease_info *info = NULL;
    if (leases && ddp_lease_list(ddp_rundir_lock_dir(envp), &info, &f->nleases) < 0) {
        info = NULL;
        f->nleases = 0;
    }
    f->leases = info;
    /* which python runs a script or module (and doctor's import torch): a program or command has its own */
    const struct ddp_spec *s = &l->spec;
    if (l->cmd == DDP_CMD_DOCTOR || (!s->command.n && (s->script || s->module))) {
        f->env_python = env_python_probe();
        f->torchrun_python = torchrun_python_probe(envp);
        f->path_python = ddp_launch_find_on_path("python3", envp);
    }
    f->self = getpid();
    f->console_tty[0] = isatty(STDOUT_FILENO) == 1;
    f->console_tty[1] = isatty(STDERR_FILENO) == 1;
}

void ddp_launch_facts_free(struct ddp_launch_facts *f)
{
    free((void *)f->leases);
    free(f->env_python);
    free(f->torchrun_python);
    free(f->path_python);
    memset(f, 0, sizeof *f);
}
