/* lifecycle: see lifecycle.h. */
#include "run/lifecycle.h"

bool ddp_wstate_step(enum ddp_lifecycle_state *state, unsigned *open, enum ddp_lifecycle_event ev, unsigned stream)
{
    enum ddp_lifecycle_state s = *state;
    switch (ev) {
    case DDP_WE_SPAWNED:
        if (s == DDP_WS_NEW) {
            *state = DDP_WS_RUNNING;
            *open = DDP_RS_ALL;
        }
        return false;
    case DDP_WE_NOT_STARTED:
        if (s != DDP_WS_NEW)
            return false;
        *state = DDP_WS_DONE;
        *open = 0;
        return true;
    case DDP_WE_PROGRAM_ENDED:
        if (s == DDP_WS_RUNNING)
            *state = DDP_WS_ENDING;
        return false;
    case DDP_WE_EXITED:
        if (s != DDP_WS_RUNNING && s != DDP_WS_ENDING)
            return false;
        *state = *open ? DDP_WS_EXITED : DDP_WS_DONE;
        return *state == DDP_WS_DONE;
    case DDP_WE_EOF:
        if (s == DDP_WS_NEW || s == DDP_WS_DONE)
            return false;
        *open &= ~stream;
        if (s != DDP_WS_EXITED || *open)
            return false;
        *state = DDP_WS_DONE;
        return true;
    case DDP_WE_GIVE_UP:
        if (s != DDP_WS_EXITED)
            return false;
        *open = 0;
        *state = DDP_WS_DONE;
        return true;
    case DDP_WE__COUNT:
        break;
    }
    return false;
}

const char *ddp_wstate_name(enum ddp_lifecycle_state s)
{
    static const char *const names[] = {"new", "running", "ending", "exited", "done"};
    return (unsigned)s <= DDP_WS_DONE ? names[s] : "unknown";
}

const char *ddp_wevent_name(enum ddp_lifecycle_event e)
{
    static const char *const names[] = {"spawned", "not-started", "program-ended", "exited", "eof", "give-up"};
    return (unsigned)e < DDP_WE__COUNT ? names[e] : "unknown";
}
