/* frame: the control channel's wire format, as pure functions over bytes: splitting a stream into frames,
 * sealing and opening MACed frames, the handshake's MACs and session key, and parsing every message into a
 * struct. It does no I/O and keeps no state, so hostile input can be fed to it directly (tests/fuzz/fuzz_frame.c).
 *
 * A frame is a 4-byte big-endian length and a body of at most DDP_FRAME_MAX_BODY bytes. Handshake bodies are
 * plain text:
 *   server -> node: "DDPC2 HELLO <snonce>"
 *   node -> server: "DDPC2 JOIN <rank|-1> <nproc> <host> <cnonce> <mac>"
 *                   mac = HMAC(secret, "join\n" job "\n" snonce "\n" cnonce "\n" rank "\n" nproc "\n" host)
 *   server -> node: "DDPC2 WELCOME <node> <mac>", mac = HMAC(secret, "welcome\n" job "\n" snonce "\n" cnonce
 *                   "\n" node), or "DDPC2 DENIED <why>"
 * (job is the job's identity, a digest of its rendezvous id and command: agents of another job never join.)
 * Then every body is a DDP_FRAME_TAG-byte MAC (HMAC(session key, direction 'S'|'C', 8-byte sequence number,
 * text), truncated) and the text:
 *   server -> node: "PING", "START attempt world group_world port nproc rank_base group_rank", "STOP attempt why",
 *                   "EXIT status"
 *   node -> server: "PONG", "REPORT attempt status why",
 *                   "FR attempt rank still_ms json": one of its ranks' flight-recorder summary (watch/fr_remote.h's
 *                   JSON, at most DDP_FRAME_FR_MAX bytes), still_ms how long its status has not moved
 *   either way: "PING" (after a silence; answered "PONG" at once: coord_live.c) */
#ifndef DDP_FRAME_H
#define DDP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DDP_FRAME_MAX_BODY 4096
#define DDP_FRAME_TAG 16
#define DDP_FRAME_NONCE_HEX 32
#define DDP_FRAME_HOST_MAX 64
#define DDP_FRAME_FR_MAX 3072 /* an FR message's JSON */

enum ddp_frame_kind {
    DDP_FRAME_HELLO,
    DDP_FRAME_JOIN,
    DDP_FRAME_WELCOME,
    DDP_FRAME_DENIED, /* handshake */
    DDP_FRAME_PING,
    DDP_FRAME_PONG,
    DDP_FRAME_START,
    DDP_FRAME_STOP,
    DDP_FRAME_EXIT,
    DDP_FRAME_REPORT,
    DDP_FRAME_FR,
};

struct ddp_frame_msg {
    enum ddp_frame_kind kind;
    int node;  /* JOIN: the rank asked for (-1 = any); WELCOME: the rank given */
    int nproc; /* JOIN, START */
    int attempt, world_size, group_world_size, master_port, rank_base, group_rank, status;
    int rank, still_ms;                  /* FR */
    char nonce[DDP_FRAME_NONCE_HEX + 1]; /* HELLO: snonce; JOIN: cnonce */
    char mac[65];                        /* JOIN, WELCOME */
    char host[DDP_FRAME_HOST_MAX + 1];   /* JOIN */
    const char *text; /* DENIED, STOP, REPORT: the reason; FR: the JSON (points into the input; "" if none) */
};

/* The first frame in buf[0..len): >0 = the bytes it takes (its body is buf[4 .. 4 + *body_len)), 0 = not
 * complete yet, -EMSGSIZE = its length is over DDP_FRAME_MAX_BODY (the peer is broken or hostile). */
ssize_t ddp_frame_split(const uint8_t *buf, size_t len, size_t *body_len);

/* Build one frame carrying text into out (cap bytes): plain when key is NULL, else MACed with key (32 bytes),
 * direction dir ('S' server, 'C' node) and sequence number seq. Returns its length, or 0 when text does not fit. */
size_t ddp_frame_seal(const uint8_t *key, char dir, uint64_t seq, const char *text, uint8_t *out, size_t cap);

/* A frame body as text into text (cap >= DDP_FRAME_MAX_BODY + 1): with key, its MAC is checked first (dir and seq
 * as the sender used them). 0, or -EBADMSG (short, bad MAC, NUL or control bytes other than in a reason). */
int ddp_frame_open(const uint8_t *key, char dir, uint64_t seq, const uint8_t *body, size_t len, char *text, size_t cap);

/* Parse one message's text. handshake selects the handshake messages (HELLO/JOIN/WELCOME/DENIED) or the others.
 * 0 and *m, or -EBADMSG for anything not exactly one of the messages above (numbers out of int range, hex of the
 * wrong length, a host name with spaces or over DDP_FRAME_HOST_MAX, trailing bytes). */
int ddp_frame_parse(const char *text, bool handshake, struct ddp_frame_msg *m);

/* The handshake MAC as 64 hex digits: what is "join" or "welcome"; tail is the rest ("rank\nnproc\nhost" for
 * join, "node" for welcome). */
void ddp_frame_handshake_mac(const char *secret, const char *what, const char *job, const char *snonce,
                             const char *cnonce, const char *tail, char out[65]);
/* The session key both sides derive once the handshake succeeded. */
void ddp_frame_session_key(const char *secret, const char *job, const char *snonce, const char *cnonce,
                           uint8_t key[32]);
/* A host name as it may travel in JOIN: printable, no spaces, 1..DDP_FRAME_HOST_MAX characters. */
bool ddp_frame_host_ok(const char *host);

#endif
