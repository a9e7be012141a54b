/* suspect: see suspect.h. */
#include "watch/suspect.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void ddp_suspect_init(struct ddp_suspect *s, const struct ddp_suspect_cfg *cfg, size_t n, long long now)
{
    memset(s, 0, sizeof(*s));
    s->cfg = *cfg;
    if (s->cfg.factor < 1)
        s->cfg.factor = 1;
    s->start_ms = s->last_ms = now;
    s->n = n;
    s->caused = ddp_xcalloc(n ? n : 1, sizeof(*s->caused));
    s->named = ddp_xcalloc(n ? n : 1, sizeof(*s->named));
}

void ddp_suspect_free(struct ddp_suspect *s)
{
    free(s->caused);
    free(s->named);
    memset(s, 0, sizeof(*s));
}

void ddp_suspect_progress(struct ddp_suspect *s, long long now)
{
    if (now <= s->last_ms)
        return;
    if (now - s->last_ms > s->longest_gap_ms)
        s->longest_gap_ms = now - s->last_ms;
    s->last_ms = now;
}

long long ddp_suspect_limit(const struct ddp_suspect *s)
{
    long long learned = s->longest_gap_ms * s->cfg.factor;
    return learned > s->cfg.floor_ms ? learned : s->cfg.floor_ms;
}

long long ddp_suspect_stalled(const struct ddp_suspect *s, long long now)
{
    long long quiet = now - s->last_ms;
    if (now - s->start_ms < s->cfg.setup_ms || quiet < ddp_suspect_limit(s))
        return 0;
    return quiet;
}

size_t ddp_suspect_round(struct ddp_suspect *s, const enum ddp_suspect_place *place)
{
    size_t nin = 0, nout = 0, found = (size_t)-1;
    for (size_t i = 0; i < s->n; i++) {
        nin += place[i] == DDP_SUSPECT_INSIDE;
        nout += place[i] == DDP_SUSPECT_OUTSIDE;
    }
    if (nin + nout < 2)
        return found;
    s->rounds++;
    if (nin == 0 || nout == 0)
        return found;
    s->waited++;
    for (size_t i = 0; i < s->n; i++)
        if (place[i] == DDP_SUSPECT_OUTSIDE)
            s->caused[i]++;
    if (s->waited < DDP_SUSPECT_MIN_WAITED)
        return found;
    for (size_t i = 0; i < s->n; i++) {
        if (s->named[i] || s->caused[i] * 10 < s->waited * 6 || s->caused[i] * 100 < s->rounds * 15)
            continue;
        s->named[i] = true;
        return i;
    }
    return found;
}

double ddp_suspect_share(const struct ddp_suspect *s, size_t i)
{
    return s->waited && i < s->n ? (double)s->caused[i] / s->waited : 0;
}

double ddp_suspect_waited(const struct ddp_suspect *s, size_t i)
{
    return s->rounds && i < s->n ? (double)s->caused[i] / s->rounds : 0;
}

long long ddp_suspect_confirm_ms(long long floor_ms, long long sample_interval_ms)
{
    long long ms = 2 * sample_interval_ms > floor_ms / 2 ? 2 * sample_interval_ms : floor_ms / 2;
    return ms < 30000 ? ms : 30000;
}

const char *ddp_suspect_state_name(enum ddp_suspect_state st)
{
    return st == DDP_SUSPECT_STUCK ? "stuck" : st == DDP_SUSPECT_BUSY ? "busy" : "weak";
}
