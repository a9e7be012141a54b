/* Unit tests for class: which classes are timeouts, their stable names and hints, which class explains an
 * attempt when several were seen, and hints made specific with facts. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "records/class.h"

Test(class, timeouts_and_names)
{
    cr_expect(ddp_class_is_timeout(DDP_CLASS_NCCL_TIMEOUT));
    cr_expect(ddp_class_is_timeout(DDP_CLASS_HANG));
    cr_expect(ddp_class_is_timeout(DDP_CLASS_INIT_TIMEOUT));
    cr_expect(ddp_class_is_timeout(DDP_CLASS_WALL_TIMEOUT));
    cr_expect(ddp_class_is_timeout(DDP_CLASS_RENDEZVOUS_TIMEOUT));
    cr_expect_not(ddp_class_is_timeout(DDP_CLASS_NCCL_ERROR));
    cr_expect_not(ddp_class_is_timeout(DDP_CLASS_CUDA_OOM));
    cr_expect_not(ddp_class_is_timeout(DDP_CLASS_EXIT));
    cr_expect_str_eq(ddp_class_name(DDP_CLASS_NCCL_TIMEOUT), "collective-timeout");
    cr_expect_str_eq(ddp_class_name(DDP_CLASS_PORT_IN_USE), "port-in-use");
    cr_expect_str_eq(ddp_class_name(DDP_CLASS_CUDA_OOM), "cuda-oom");
    cr_expect_str_eq(ddp_class_name((enum ddp_class)999), "unknown");
    /* Every class but NONE has a name and a hint, and names are unique. */
    for (int a = 1; a < DDP_CLASS__COUNT; a++) {
        cr_expect(strlen(ddp_class_hint((enum ddp_class)a)) > 10, "class %d has no hint", a);
        for (int b = a + 1; b < DDP_CLASS__COUNT; b++)
            cr_expect_str_neq(ddp_class_name((enum ddp_class)a), ddp_class_name((enum ddp_class)b));
    }
}

Test(class, merge_prefers_root_cause)
{
    cr_expect_eq(ddp_class_merge(DDP_CLASS_NCCL_ERROR, DDP_CLASS_NCCL_TIMEOUT), DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_NCCL_TIMEOUT, DDP_CLASS_NCCL_ERROR), DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_NCCL_TIMEOUT, DDP_CLASS_CUDA_OOM), DDP_CLASS_CUDA_OOM);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_RENDEZVOUS_TIMEOUT, DDP_CLASS_PORT_IN_USE), DDP_CLASS_PORT_IN_USE);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_ABORT, DDP_CLASS_NCCL_TIMEOUT), DDP_CLASS_NCCL_TIMEOUT);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_NONE, DDP_CLASS_EXIT), DDP_CLASS_EXIT);
    cr_expect_eq(ddp_class_merge(DDP_CLASS_EXIT, DDP_CLASS_NONE), DDP_CLASS_EXIT);
}

Test(class, hint_names_the_numa_split)
{
    int idx[] = {0, 1, 4, 5};
    int numa[] = {0, 0, 1, 1};
    struct ddp_class_facts f = {.ngpus = 4, .gpu_index = idx, .gpu_numa = numa, .stalled_rank = -1};
    char buf[512];
    const char *h = ddp_class_hint_facts(DDP_CLASS_NCCL_TIMEOUT, &f, buf, sizeof(buf));
    cr_expect(strstr(h, "GPUs 0 and 4 are on different NUMA nodes (0 and 1)") != NULL, "%s", h);
    cr_expect(strstr(h, "set [gpus] policy = same-numa") != NULL, "%s", h);
    cr_expect(strstr(h, "preset = debug") != NULL, "%s", h);

    f.nccl_debug = "INFO";
    f.stalled_rank = 2;
    h = ddp_class_hint_facts(DDP_CLASS_NCCL_TIMEOUT, &f, buf, sizeof(buf));
    cr_expect(strncmp(h, "rank 2 stopped first; ", 22) == 0, "%s", h);
    cr_expect(strstr(h, "preset = debug") == NULL, "%s", h);

    int same[] = {1, 1, 1, 1};
    f.gpu_numa = same;
    h = ddp_class_hint_facts(DDP_CLASS_NCCL_TIMEOUT, &f, buf, sizeof(buf));
    cr_expect(strstr(h, "NUMA nodes (") == NULL, "%s", h);
    cr_expect(strstr(h, "collective timed out") != NULL, "%s", h);

    struct ddp_class_facts p = {.port = 29500, .stalled_rank = -1};
    h = ddp_class_hint_facts(DDP_CLASS_PORT_IN_USE, &p, buf, sizeof(buf));
    cr_expect(strstr(h, "port 29500 is already in use") != NULL, "%s", h);

    /* Truncation is safe. */
    char tiny[8];
    h = ddp_class_hint_facts(DDP_CLASS_PORT_IN_USE, &p, tiny, sizeof(tiny));
    cr_expect_eq(strlen(h), 7);
}

/* issue 43 item 12: man/ddplaunch.1's FAILURE CLASSES names every class the program has, and only those; its
 * sentence on timeouts names exactly the timeout classes. (The man page named nccl-timeout, a name the program
 * never printed.) */
static char *man_failure_classes(void)
{
    const char *src = getenv("DDP_SRCDIR");
    char path[4096], line[1024];
    snprintf(path, sizeof path, "%s/man/ddplaunch.1", src ? src : ".");
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s (run with DDP_SRCDIR set)", path);
    static char text[16384];
    size_t n = 0;
    bool in = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, ".SH", 3) == 0)
            in = strstr(line, "FAILURE CLASSES") != NULL;
        else if (in && n + strlen(line) < sizeof text)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s", line);
    }
    fclose(f);
    /* roff's "\-" is a '-' */
    char *w = text;
    for (const char *r = text; *r; r++)
        if (!(r[0] == '\\' && r[1] == '-'))
            *w++ = *r;
    *w = '\0';
    return text;
}

/* The class names on the section's ".B"/".BR"/".BI" tag lines (after .TP), as one " a b c " string. */
static void man_tags(const char *text, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size, " ");
    bool tag = false;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (tag && len > 3 && p[0] == '.' && p[1] == 'B') {
            for (const char *q = strchr(p, ' '); q && q < p + len;) {
                while (q < p + len && strchr(" \",", *q))
                    q++;
                const char *e = q;
                while (e < p + len && !strchr(" \",", *e))
                    e++;
                if (e > q && n + (size_t)(e - q) + 2 < size)
                    n += (size_t)snprintf(out + n, size - n, "%.*s ", (int)(e - q), q);
                q = e;
            }
        }
        tag = strncmp(p, ".TP", 3) == 0;
        p += len + (nl != NULL);
    }
}

Test(class, man_page_names_every_class_and_no_other)
{
    const char *text = man_failure_classes();
    char tags[4096], want[80];
    man_tags(text, tags, sizeof tags);
    for (int c = 1; c < DDP_CLASS__COUNT; c++) {
        const char *name = ddp_class_name((enum ddp_class)c);
        snprintf(want, sizeof want, " %s%s ", name, c == DDP_CLASS_EXIT ? "-" : ""); /* ".BI exit\- N" */
        cr_expect(strstr(tags, want), "the man page's FAILURE CLASSES does not name '%s' (it names:%s)", name, tags);
    }
    for (const char *p = tags; *p;) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (!len)
            break;
        bool known = len == 1 && *p == 'N'; /* exit-N's N */
        for (int c = 1; c < DDP_CLASS__COUNT && !known; c++) {
            const char *name = ddp_class_name((enum ddp_class)c);
            known = (strlen(name) == len && strncmp(p, name, len) == 0) ||
                    (c == DDP_CLASS_EXIT && len == 5 && strncmp(p, "exit-", 5) == 0);
        }
        cr_expect(known, "the man page names a class the program does not have: '%.*s'", (int)len, p);
        p += len;
    }
    /* "X, Y, ... are timeouts": exactly the timeout classes */
    const char *t = strstr(text, " are timeouts");
    cr_assert_not_null(t, "no sentence on which classes are timeouts");
    const char *start = t;
    while (start > text && start[-1] != '\n')
        start--;
    for (int c = 1; c < DDP_CLASS__COUNT; c++) {
        const char *name = ddp_class_name((enum ddp_class)c);
        const char *hit = strstr(start, name);
        bool listed = hit && hit < t;
        cr_expect_eq(listed, ddp_class_is_timeout((enum ddp_class)c), "'%s' %s in the man page's timeouts sentence",
                     name, listed ? "wrongly" : "missing");
    }
}
