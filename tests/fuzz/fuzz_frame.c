/* libFuzzer harness for launcher/frame: the input is a byte stream as a hostile peer would send it on the control
 * port. It is split into frames as coord.c splits it; every body is opened plain and with a session key (MAC
 * check) and parsed as a handshake and as an authenticated message. Nothing may crash, read out of bounds or
 * leak; a parsed message must satisfy the invariants the caller relies on. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nodes/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct ddp_frame_msg *m)
{
    if (m->kind == DDP_FRAME_START &&
        (m->nproc < 1 || m->rank_base < 0 || m->rank_base + m->nproc > m->world_size || m->group_rank < 0 ||
         m->group_rank >= m->group_world_size || m->master_port < 1 || m->master_port > 65535))
        abort();
    if (m->kind == DDP_FRAME_JOIN && (m->node < -1 || m->nproc < 1 || !ddp_frame_host_ok(m->host)))
        abort();
    if (!m->text)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t key[32] = {1, 2, 3};
    char text[DDP_FRAME_MAX_BODY + 1];
    size_t off = 0;
    uint64_t seq = 0;
    while (off < size) {
        size_t blen = 0;
        ssize_t used = ddp_frame_split(data + off, size - off, &blen);
        if (used <= 0) {
            if (used < 0 && used != -EMSGSIZE)
                abort();
            break;
        }
        const uint8_t *body = data + off + 4;
        struct ddp_frame_msg m;
        if (ddp_frame_open(NULL, 'S', 0, body, blen, text, sizeof text) == 0) {
            if (strlen(text) != blen)
                abort();
            if (ddp_frame_parse(text, true, &m) == 0)
                check(&m);
            if (ddp_frame_parse(text, false, &m) == 0)
                check(&m);
        }
        if (ddp_frame_open(key, 'C', seq++, body, blen, text, sizeof text) == 0 &&
            ddp_frame_parse(text, false, &m) == 0)
            check(&m);
        off += (size_t)used;
    }
    /* and a round trip: what seal makes, split and open give back */
    if (size < DDP_FRAME_MAX_BODY) {
        char *t = malloc(size + 1);
        size_t n = 0;
        for (size_t i = 0; i < size; i++)
            if (data[i] >= 0x20 && data[i] != 0x7f)
                t[n++] = (char)data[i];
        t[n] = '\0';
        uint8_t out[4 + DDP_FRAME_MAX_BODY];
        size_t len = ddp_frame_seal(key, 'S', 9, t, out, sizeof out);
        size_t blen = 0;
        if (len == 0 || ddp_frame_split(out, len, &blen) != (ssize_t)len ||
            ddp_frame_open(key, 'S', 9, out + 4, blen, text, sizeof text) != 0 || strcmp(text, t) != 0)
            abort();
        free(t);
    }
    return 0;
}
