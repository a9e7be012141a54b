/* frame: the control channel's wire format. See frame.h. */
#include "nodes/frame.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/crypto.h"

ssize_t ddp_frame_split(const uint8_t *buf, size_t len, size_t *body_len)
{
    if (len < 4)
        return 0;
    size_t n = (size_t)buf[0] << 24 | (size_t)buf[1] << 16 | (size_t)buf[2] << 8 | buf[3];
    if (n > DDP_FRAME_MAX_BODY)
        return -EMSGSIZE;
    if (len - 4 < n)
        return 0;
    *body_len = n;
    return (ssize_t)(4 + n);
}

static void seq_bytes(uint64_t seq, uint8_t out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(seq >> (56 - 8 * i));
}

static void tag(const uint8_t *key, char dir, uint64_t seq, const void *text, size_t tlen,
                uint8_t mac[DDP_CRYPTO_MAC_LEN])
{
    uint8_t d = (uint8_t)dir, s[8];
    seq_bytes(seq, s);
    const void *parts[3] = {&d, s, text};
    size_t lens[3] = {1, 8, tlen};
    ddp_crypto_hmac(key, 32, parts, lens, 3, mac);
}

size_t ddp_frame_seal(const uint8_t *key, char dir, uint64_t seq, const char *text, uint8_t *out, size_t cap)
{
    size_t tlen = strlen(text), body = tlen + (key ? DDP_FRAME_TAG : 0);
    if (body > DDP_FRAME_MAX_BODY || 4 + body > cap)
        return 0;
    out[0] = (uint8_t)(body >> 24);
    out[1] = (uint8_t)(body >> 16);
    out[2] = (uint8_t)(body >> 8);
    out[3] = (uint8_t)body;
    if (key) {
        uint8_t mac[DDP_CRYPTO_MAC_LEN];
        tag(key, dir, seq, text, tlen, mac);
        memcpy(out + 4, mac, DDP_FRAME_TAG);
    }
    memcpy(out + 4 + (key ? DDP_FRAME_TAG : 0), text, tlen);
    return 4 + body;
}

int ddp_frame_open(const uint8_t *key, char dir, uint64_t seq, const uint8_t *body, size_t len, char *text, size_t cap)
{
    if (key) {
        uint8_t mac[DDP_CRYPTO_MAC_LEN];
        if (len < DDP_FRAME_TAG)
            return -EBADMSG;
        tag(key, dir, seq, body + DDP_FRAME_TAG, len - DDP_FRAME_TAG, mac);
        if (!ddp_crypto_equal(mac, body, DDP_FRAME_TAG))
            return -EBADMSG;
        body += DDP_FRAME_TAG;
        len -= DDP_FRAME_TAG;
    }
    if (len + 1 > cap)
        return -EBADMSG;
    for (size_t i = 0; i < len; i++)
        if (body[i] < 0x20 || body[i] == 0x7f) /* NUL, newlines, escapes: never in a message */
            return -EBADMSG;
    memcpy(text, body, len);
    text[len] = '\0';
    return 0;
}

/* ---- parsing: words separated by one space ---- */

struct words {
    const char *p;
};

/* The next word into w (cap bytes); false at the end or when it does not fit. */
static bool word(struct words *s, char *w, size_t cap)
{
    const char *e = strchr(s->p, ' ');
    size_t n = e ? (size_t)(e - s->p) : strlen(s->p);
    if (n == 0 || n >= cap || (e && e[1] == '\0')) /* empty, too long, or a trailing space */
        return false;
    memcpy(w, s->p, n);
    w[n] = '\0';
    s->p += n + (e ? 1 : 0);
    return true;
}

static bool int_word(struct words *s, int *out)
{
    char w[16];
    if (!word(s, w, sizeof w))
        return false;
    const char *p = w;
    bool neg = *p == '-';
    if (neg)
        p++;
    if (!*p || (p[0] == '0' && p[1]))
        return false;
    long long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
        if (v > INT_MAX)
            return false;
    }
    if (neg && v == 0)
        return false;
    *out = (int)(neg ? -v : v);
    return true;
}

static bool hex_word(struct words *s, char *out, size_t digits)
{
    char w[72];
    if (!word(s, w, sizeof w) || strlen(w) != digits)
        return false;
    for (size_t i = 0; i < digits; i++)
        if (!((w[i] >= '0' && w[i] <= '9') || (w[i] >= 'a' && w[i] <= 'f')))
            return false;
    memcpy(out, w, digits + 1);
    return true;
}

static bool at_end(const struct words *s)
{
    return *s->p == '\0';
}

/* A word with what follows: "STOP 3 why" or "STOP 3". */
static bool rest(struct words *s, const char **text)
{
    *text = s->p;
    return true;
}

bool ddp_frame_host_ok(const char *host)
{
    size_t n = strlen(host);
    if (n == 0 || n > DDP_FRAME_HOST_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)host[i] <= 0x20 || (unsigned char)host[i] >= 0x7f)
            return false;
    return true;
}

int ddp_frame_parse(const char *text, bool handshake, struct ddp_frame_msg *m)
{
    struct words s = {text};
    char verb[16];
    memset(m, 0, sizeof *m);
    m->text = "";
    if (handshake) {
        char magic[8];
        if (!word(&s, magic, sizeof magic) || strcmp(magic, "DDPC2") != 0 || !word(&s, verb, sizeof verb))
            return -EBADMSG;
        if (strcmp(verb, "HELLO") == 0) {
            m->kind = DDP_FRAME_HELLO;
            return hex_word(&s, m->nonce, DDP_FRAME_NONCE_HEX) && at_end(&s) ? 0 : -EBADMSG;
        }
        if (strcmp(verb, "JOIN") == 0) {
            m->kind = DDP_FRAME_JOIN;
            return int_word(&s, &m->node) && m->node >= -1 && int_word(&s, &m->nproc) && m->nproc >= 1 &&
                           word(&s, m->host, sizeof m->host) && ddp_frame_host_ok(m->host) &&
                           hex_word(&s, m->nonce, DDP_FRAME_NONCE_HEX) && hex_word(&s, m->mac, 64) && at_end(&s)
                       ? 0
                       : -EBADMSG;
        }
        if (strcmp(verb, "WELCOME") == 0) {
            m->kind = DDP_FRAME_WELCOME;
            return int_word(&s, &m->node) && m->node >= 1 && hex_word(&s, m->mac, 64) && at_end(&s) ? 0 : -EBADMSG;
        }
        if (strcmp(verb, "DENIED") == 0) {
            m->kind = DDP_FRAME_DENIED;
            return rest(&s, &m->text) ? 0 : -EBADMSG;
        }
        return -EBADMSG;
    }
    if (!word(&s, verb, sizeof verb))
        return -EBADMSG;
    if (strcmp(verb, "PING") == 0 || strcmp(verb, "PONG") == 0) {
        m->kind = verb[1] == 'I' ? DDP_FRAME_PING : DDP_FRAME_PONG;
        return at_end(&s) ? 0 : -EBADMSG;
    }
    if (strcmp(verb, "START") == 0) {
        m->kind = DDP_FRAME_START;
        return int_word(&s, &m->attempt) && m->attempt >= 0 && int_word(&s, &m->world_size) && m->world_size >= 1 &&
                       int_word(&s, &m->group_world_size) && m->group_world_size >= 1 &&
                       int_word(&s, &m->master_port) && m->master_port >= 1 && m->master_port <= 65535 &&
                       int_word(&s, &m->nproc) && m->nproc >= 1 && int_word(&s, &m->rank_base) && m->rank_base >= 0 &&
                       m->rank_base <= m->world_size - m->nproc && int_word(&s, &m->group_rank) && m->group_rank >= 0 &&
                       m->group_rank < m->group_world_size && at_end(&s)
                   ? 0
                   : -EBADMSG;
    }
    if (strcmp(verb, "STOP") == 0) {
        m->kind = DDP_FRAME_STOP;
        return int_word(&s, &m->attempt) && rest(&s, &m->text) ? 0 : -EBADMSG;
    }
    if (strcmp(verb, "EXIT") == 0) {
        m->kind = DDP_FRAME_EXIT;
        return int_word(&s, &m->status) && m->status >= 0 && m->status <= 255 && at_end(&s) ? 0 : -EBADMSG;
    }
    if (strcmp(verb, "REPORT") == 0) {
        m->kind = DDP_FRAME_REPORT;
        return int_word(&s, &m->attempt) && int_word(&s, &m->status) && rest(&s, &m->text) ? 0 : -EBADMSG;
    }
    if (strcmp(verb, "FR") == 0) { /* the JSON is the rest: one object, checked by its reader (fr_remote.h) */
        m->kind = DDP_FRAME_FR;
        return int_word(&s, &m->attempt) && m->attempt >= 0 && int_word(&s, &m->rank) && m->rank >= 0 &&
                       int_word(&s, &m->still_ms) && m->still_ms >= 0 && rest(&s, &m->text) && m->text[0] == '{' &&
                       strlen(m->text) <= DDP_FRAME_FR_MAX
                   ? 0
                   : -EBADMSG;
    }
    return -EBADMSG;
}

void ddp_frame_handshake_mac(const char *secret, const char *what, const char *job, const char *snonce,
                             const char *cnonce, const char *tail, char out[65])
{
    const void *parts[9] = {what, "\n", job, "\n", snonce, "\n", cnonce, "\n", tail};
    size_t lens[9] = {strlen(what), 1, strlen(job), 1, strlen(snonce), 1, strlen(cnonce), 1, strlen(tail)};
    uint8_t mac[DDP_CRYPTO_MAC_LEN];
    ddp_crypto_hmac(secret, strlen(secret), parts, lens, 9, mac);
    ddp_crypto_hex(mac, sizeof mac, out);
}

void ddp_frame_session_key(const char *secret, const char *job, const char *snonce, const char *cnonce, uint8_t key[32])
{
    const void *parts[6] = {"session\n", job, "\n", snonce, "\n", cnonce};
    size_t lens[6] = {8, strlen(job), 1, strlen(snonce), 1, strlen(cnonce)};
    ddp_crypto_hmac(secret, strlen(secret), parts, lens, 6, key);
}
