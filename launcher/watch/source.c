/* source: see source.h. Finding a source's state by its struct ddp_watch_source, and the table's order check;
 * apart from watch.c, which calls the sources, so that a source reading another's state calls down to here. */
#include "watch/source.h"

#include <errno.h>

void *ddp_watch_state(const struct ddp_watch_env *env, const struct ddp_watch_source *src)
{
    for (size_t i = 0; i < env->nsources; i++)
        if (env->sources[i] == src)
            return env->self[i];
    return NULL;
}

/* The row of src in tab, or n */
static size_t row(const struct ddp_watch_source *const *tab, size_t n, const struct ddp_watch_source *src)
{
    size_t i = 0;
    while (i < n && tab[i] != src)
        i++;
    return i;
}

int ddp_watch_order_check(const struct ddp_watch_source *const *tab, size_t n, struct ddp_err *err)
{
    for (size_t i = 0; i < n; i++)
        for (const struct ddp_watch_source *const *b = tab[i]->before; b && *b; b++) {
            size_t j = row(tab, n, *b);
            if (j >= n)
                return ddp_errf(err, -EINVAL, "watch.c: source '%s' precedes '%s', which is no row of the table",
                                tab[i]->name, (*b)->name);
            if (j < i)
                return ddp_errf(err, -EINVAL, "watch.c: source '%s' (row %zu) must come before '%s' (row %zu)",
                                tab[i]->name, i, (*b)->name, j);
        }
    return 0;
}
