/* Unit tests for launcher/frame: splitting a stream into frames, sealed frames that open only with the right key,
 * direction and sequence number, and the parser refusing everything that is not exactly a message. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nodes/frame.h"

Test(frame, split_waits_for_whole_frames_and_refuses_oversized)
{
    uint8_t buf[16] = {0, 0, 0, 3, 'a', 'b', 'c', 0, 0};
    size_t blen = 99;
    cr_expect_eq(ddp_frame_split(buf, 3, &blen), 0);
    cr_expect_eq(ddp_frame_split(buf, 6, &blen), 0);
    cr_expect_eq(ddp_frame_split(buf, 7, &blen), 7);
    cr_expect_eq(blen, 3);
    uint8_t big[4] = {0, 0, 0x10, 0x01}; /* 4097 */
    cr_expect_eq(ddp_frame_split(big, 4, &blen), -EMSGSIZE);
    uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
    cr_expect_eq(ddp_frame_split(huge, 4, &blen), -EMSGSIZE);
}

Test(frame, sealed_frames_open_only_as_sent)
{
    uint8_t key[32], other[32], out[4 + DDP_FRAME_MAX_BODY];
    memset(key, 7, sizeof key);
    memset(other, 8, sizeof other);
    char text[DDP_FRAME_MAX_BODY + 1];
    size_t n = ddp_frame_seal(key, 'S', 5, "START 0 6 3 29500 2 0 0", out, sizeof out);
    cr_assert_gt(n, 4);
    size_t blen;
    cr_assert_eq(ddp_frame_split(out, n, &blen), (ssize_t)n);
    cr_expect_eq(ddp_frame_open(key, 'S', 5, out + 4, blen, text, sizeof text), 0);
    cr_expect_str_eq(text, "START 0 6 3 29500 2 0 0");
    cr_expect_eq(ddp_frame_open(key, 'S', 6, out + 4, blen, text, sizeof text), -EBADMSG, "replayed later");
    cr_expect_eq(ddp_frame_open(key, 'C', 5, out + 4, blen, text, sizeof text), -EBADMSG, "reflected");
    cr_expect_eq(ddp_frame_open(other, 'S', 5, out + 4, blen, text, sizeof text), -EBADMSG, "another key");
    out[n - 1] ^= 1;
    cr_expect_eq(ddp_frame_open(key, 'S', 5, out + 4, blen, text, sizeof text), -EBADMSG, "changed");
    cr_expect_eq(ddp_frame_open(key, 'S', 5, out + 4, 3, text, sizeof text), -EBADMSG, "shorter than a tag");
    /* plain frames: control bytes are refused */
    n = ddp_frame_seal(NULL, 'S', 0, "DDPC2 HELLO x", out, sizeof out);
    cr_expect_eq(n, 4 + 13);
    const uint8_t nul[] = {'a', 0, 'b'};
    cr_expect_eq(ddp_frame_open(NULL, 'S', 0, nul, 3, text, sizeof text), -EBADMSG);
    const uint8_t nl[] = {'a', '\n'};
    cr_expect_eq(ddp_frame_open(NULL, 'S', 0, nl, 2, text, sizeof text), -EBADMSG);
    char big[DDP_FRAME_MAX_BODY + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_expect_eq(ddp_frame_seal(NULL, 'S', 0, big, out, sizeof out), 0, "too long to send");
}

Test(frame, parse_messages)
{
    struct ddp_frame_msg m;
    const char *h = "0123456789abcdef0123456789abcdef",
               *mac = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    char t[300];
    snprintf(t, sizeof t, "DDPC2 JOIN -1 4 node-b.example %s %s", h, mac);
    cr_assert_eq(ddp_frame_parse(t, true, &m), 0);
    cr_expect_eq(m.kind, DDP_FRAME_JOIN);
    cr_expect_eq(m.node, -1);
    cr_expect_eq(m.nproc, 4);
    cr_expect_str_eq(m.host, "node-b.example");
    cr_expect_str_eq(m.nonce, h);
    cr_assert_eq(ddp_frame_parse("START 2 12 3 29511 4 8 2", false, &m), 0);
    cr_expect_eq(m.kind, DDP_FRAME_START);
    cr_expect_eq(m.world_size, 12);
    cr_expect_eq(m.rank_base, 8);
    cr_expect_eq(m.group_rank, 2);
    cr_assert_eq(ddp_frame_parse("STOP 3 node 2 lost: silent", false, &m), 0);
    cr_expect_str_eq(m.text, "node 2 lost: silent");
    cr_assert_eq(ddp_frame_parse("STOP 3", false, &m), 0);
    cr_expect_str_eq(m.text, "");
    cr_assert_eq(ddp_frame_parse("REPORT 1 124 timeout", false, &m), 0);
    cr_expect_eq(m.status, 124);
    const char *bad[] = {
        "",
        "PING ",
        "PING x",
        "START 0 6 3 29500 2 0",
        "START 0 6 3 29500 2 0 0 9",
        "START 0 6 3 70000 2 0 0",
        "START 0 6 3 29500 2 5 0" /* ranks 5-6 of 6 */,
        "START 0 6 3 29500 2 0 3" /* group rank 3 of 3 */,
        "START 99999999999 6 3 29500 2 0 0",
        "START 00 6 3 29500 2 0 0",
        "START -0 6 3 29500 2 0 0",
        "EXIT 256",
        "EXIT -1",
        "EXIT 0 x",
        "REPORT 1",
        "HELLO",
        "DDPC1 HELLO 0123456789abcdef0123456789abcdef",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool hs = strncmp(bad[i], "DDPC", 4) == 0;
        cr_expect_eq(ddp_frame_parse(bad[i], hs, &m), -EBADMSG, "accepted '%s'", bad[i]);
    }
    snprintf(t, sizeof t, "DDPC2 JOIN 1 0 h %s %s", h, mac);
    cr_expect_eq(ddp_frame_parse(t, true, &m), -EBADMSG, "no workers");
    snprintf(t, sizeof t, "DDPC2 JOIN 1 1 h %s %s", h, "0011");
    cr_expect_eq(ddp_frame_parse(t, true, &m), -EBADMSG, "short mac");
    snprintf(t, sizeof t, "DDPC2 JOIN 1 1 h %.31sG %s", h, mac);
    cr_expect_eq(ddp_frame_parse(t, true, &m), -EBADMSG, "not hex");
    snprintf(t, sizeof t, "DDPC2 WELCOME 0 %s", mac);
    cr_expect_eq(ddp_frame_parse(t, true, &m), -EBADMSG, "nobody is welcomed as node 0");
    cr_expect_eq(ddp_frame_parse("PING", true, &m), -EBADMSG, "not a handshake message");
    cr_expect_eq(ddp_frame_parse("DDPC2 DENIED no", false, &m), -EBADMSG, "a handshake message after it");
    cr_expect(ddp_frame_host_ok("a.b-c_d"));
    cr_expect_not(ddp_frame_host_ok("a b"));
    cr_expect_not(ddp_frame_host_ok(""));
}

Test(frame, handshake_macs_bind_the_job)
{
    char a[65], b[65];
    uint8_t k1[32], k2[32];
    const char *sn = "0123456789abcdef0123456789abcdef", *cn = "fedcba9876543210fedcba9876543210";
    ddp_frame_handshake_mac("secret-of-the-job", "join", "job-1", sn, cn, "1\n2\nh", a);
    ddp_frame_handshake_mac("secret-of-the-job", "join", "job-2", sn, cn, "1\n2\nh", b);
    cr_expect_str_neq(a, b);
    ddp_frame_handshake_mac("secret-of-the-job", "welcome", "job-1", sn, cn, "1\n2\nh", b);
    cr_expect_str_neq(a, b);
    ddp_frame_session_key("secret-of-the-job", "job-1", sn, cn, k1);
    ddp_frame_session_key("secret-of-the-job", "job-1", cn, sn, k2);
    cr_expect_neq(memcmp(k1, k2, 32), 0);
}

/* issue 31: a node's flight-recorder summary for node 0 */
Test(frame, fr_carries_a_ranks_recorder_summary_and_nothing_else)
{
    struct ddp_frame_msg m;
    cr_assert_eq(ddp_frame_parse("FR 2 5 15000 {\"v\":1,\"g\":[]}", false, &m), 0);
    cr_expect_eq(m.kind, DDP_FRAME_FR);
    cr_expect_eq(m.attempt, 2);
    cr_expect_eq(m.rank, 5);
    cr_expect_eq(m.still_ms, 15000);
    cr_expect_str_eq(m.text, "{\"v\":1,\"g\":[]}");
    const char *bad[] = {
        "FR 2 5 15000",          /* no JSON */
        "FR 2 5 15000 ",         /* trailing space */
        "FR 2 5 15000 [1]",      /* not an object */
        "FR -1 5 15000 {}",      /* no such attempt */
        "FR 2 -5 15000 {}",      /* no such rank */
        "FR 2 5 -1 {}",          /* negative time */
        "FR 2 5 99999999999 {}", /* out of range */
        "FR 2 x 1 {}",           "FR 02 5 1 {}", "FR 2 5 {}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(ddp_frame_parse(bad[i], false, &m), -EBADMSG, "accepted '%s'", bad[i]);
    /* over DDP_FRAME_FR_MAX: refused, even though the frame itself would fit */
    static char big[DDP_FRAME_FR_MAX + 64];
    int n = snprintf(big, sizeof big, "FR 1 0 0 {\"x\":\"");
    memset(big + n, 'a', DDP_FRAME_FR_MAX);
    snprintf(big + n + DDP_FRAME_FR_MAX - 16, 16, "\"}");
    cr_expect_eq(ddp_frame_parse(big, false, &m), 0, "at the cap");
    memset(big + n, 'a', DDP_FRAME_FR_MAX);
    snprintf(big + n + DDP_FRAME_FR_MAX, 16, "\"}");
    cr_expect_eq(ddp_frame_parse(big, false, &m), -EBADMSG, "over the cap");
    /* a handshake-time FR is not a handshake message */
    cr_expect_eq(ddp_frame_parse("FR 1 0 0 {}", true, &m), -EBADMSG);
}

/* An FR is believed only sealed with the session key: a peer without the secret cannot inject one (and before
 * the handshake it is no message at all, see above). */
Test(frame, fr_opens_only_with_the_session_key)
{
    uint8_t key[32], other[32], out[4 + DDP_FRAME_MAX_BODY];
    char text[DDP_FRAME_MAX_BODY + 1];
    size_t blen;
    memset(key, 7, sizeof key);
    memset(other, 8, sizeof other);
    const char *fr = "FR 0 1 100 {\"v\":1}";
    size_t n = ddp_frame_seal(key, 'C', 3, fr, out, sizeof out);
    cr_assert_gt(n, 0);
    cr_assert_eq(ddp_frame_split(out, n, &blen), (ssize_t)n);
    cr_expect_eq(ddp_frame_open(other, 'C', 3, out + 4, blen, text, sizeof text), -EBADMSG, "another key");
    cr_assert_eq(ddp_frame_open(key, 'C', 3, out + 4, blen, text, sizeof text), 0);
    cr_expect_str_eq(text, fr);
    n = ddp_frame_seal(NULL, 'C', 0, fr, out, sizeof out); /* plain, as an unauthenticated peer would send it */
    cr_assert_eq(ddp_frame_split(out, n, &blen), (ssize_t)n);
    cr_expect_eq(ddp_frame_open(key, 'C', 0, out + 4, blen, text, sizeof text), -EBADMSG, "unsealed");
}
