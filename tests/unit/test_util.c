/* Unit tests for util's pure helpers that guard what others can make us print: the warning rate limit and
 * the control-character filter. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/util.h"

Test(util, ratelimit_burst_then_count_of_dropped)
{
    struct ddp_ratelimit rl = {0};
    unsigned dropped = 99;
    for (int i = 0; i < 3; i++) {
        cr_expect(ddp_ratelimit_allow(&rl, 1000 + i, 3, 60000, &dropped));
        cr_expect_eq(dropped, 0);
    }
    for (int i = 0; i < 1000; i++)
        cr_expect_not(ddp_ratelimit_allow(&rl, 2000 + i, 3, 60000, &dropped));
    cr_expect_not(ddp_ratelimit_allow(&rl, 60999, 3, 60000, &dropped));
    /* a new interval: one more shown, saying how many were left out */
    cr_expect(ddp_ratelimit_allow(&rl, 61000, 3, 60000, &dropped));
    cr_expect_eq(dropped, 1001);
    cr_expect(ddp_ratelimit_allow(&rl, 61001, 3, 60000, &dropped));
    cr_expect_eq(dropped, 0);
}

Test(util, printable_replaces_control_characters_keeps_utf8)
{
    char s[] = "a\033]0;t\a\033[2Jb\x7f\r\n\xc2\x9b"
               "1m caf\xc3\xa9 \xe2\x80\x93";
    ddp_printable(s);
    cr_expect_str_eq(s, "a?]0;t??[2Jb?????1m caf\xc3\xa9 \xe2\x80\x93");
    cr_expect_null(ddp_printable(NULL));
}

/* issue 23 item 15: colours only on a terminal, and not with NO_COLOR set and not empty (no-color.org) */
Test(util, colour_wanted_on_a_terminal_without_no_color)
{
    char *none[] = {"TERM=xterm", NULL};
    char *set[] = {"NO_COLOR=1", NULL};
    char *empty[] = {"NO_COLOR=", NULL};
    cr_expect(ddp_log_colour_wanted(true, none));
    cr_expect_not(ddp_log_colour_wanted(false, none));
    cr_expect_not(ddp_log_colour_wanted(true, set));
    cr_expect(ddp_log_colour_wanted(true, empty));
    ddp_log_colour = false;
    cr_expect_str_eq(ddp_colour(DDP_COLOUR_RED), "");
    ddp_log_colour = true;
    cr_expect_str_eq(ddp_colour(DDP_COLOUR_RED), "\033[1;31m");
    ddp_log_colour = false;
}

Test(util, printable_replaces_raw_c1_invalid_utf8_and_bidi_controls)
{
    /* raw 0x9b (CSI to an 8-bit terminal), a lone continuation byte, an overlong '/', U+202E (RLO), U+2066
     * (LRI), U+200F (RLM); kept: U+2013, U+1F600 */
    char s[] = "a\x9b"
               "31mb\x80"
               "c\xc0\xaf"
               "d\xe2\x80\xae"
               "gpj.exe\xe2\x81\xa6"
               "x\xe2\x80\x8f"
               "y \xe2\x80\x93 \xf0\x9f\x98\x80";
    ddp_printable(s);
    cr_expect_str_eq(s, "a?31mb?c??d???gpj.exe???x???y \xe2\x80\x93 \xf0\x9f\x98\x80");
}

/* issue 39 item 1: one copy of others' text that never cuts a character in two and is always printable */
Test(util, text_copy_cuts_on_a_character_boundary_and_is_printable)
{
    char buf[8];
    /* "ab\033c" then U+00E9 U+00E9 (2 bytes each): 7 bytes fit, the second U+00E9 would be cut at byte 7 */
    cr_expect_str_eq(ddp_text_copy(buf, sizeof buf, "ab\033c\xc3\xa9\xc3\xa9"), "ab?c\xc3\xa9");
    cr_expect_str_eq(ddp_text_copy(buf, sizeof buf, "\xf0\x9f\x98\x80\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
    cr_expect_str_eq(ddp_text_copy(buf, sizeof buf, NULL), "");
    /* a comm the kernel cut at 15 bytes, mid-character: the stray lead byte is shown as '?' */
    cr_expect_str_eq(ddp_text_copy(buf, sizeof buf, "x\xe2\x80"), "x??");
    cr_expect_eq(ddp_utf8_cut("a\xe2\x80\x93"
                              "b",
                              3),
                 1);
    cr_expect_eq(ddp_utf8_cut("a\xe2\x80\x93"
                              "b",
                              4),
                 4);
    cr_expect_eq(ddp_utf8_cut("a\xff"
                              "b",
                              2),
                 2);
}

Test(util, path_normalize_one_spelling)
{
    const char *cases[][2] = {
        {"/x/locks", "/x/locks"},
        {"/x/locks/", "/x/locks"},
        {"/x//locks", "/x/locks"},
        {"/x/./locks", "/x/locks"},
        {"//x///./locks//.", "/x/locks"},
        {"/x/y/../locks", "/x/locks"},
        {"/..", "/"},
        {"/", "/"},
        {"a/./b/", "a/b"},
        {"../a/../../b", "../../b"},
        {"a/..", "."},
        {"", "."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *n = ddp_path_normalize(cases[i][0]);
        cr_expect_str_eq(n, cases[i][1], "'%s'", cases[i][0]);
        free(n);
    }
}

/* issue 39 item 1: JSON written by hand (plan --json, ps --json) stays valid UTF-8 whatever the text's bytes */
Test(util, json_str_keeps_utf8_and_replaces_bad_bytes)
{
    struct ddp_buf b = {0};
    ddp_buf_json_str(&b, "caf\xc3\xa9 py\xe2\x80"
                         "\x01\xff");
    cr_expect_str_eq(b.data, "\"caf\xc3\xa9 py\\ufffd\\ufffd\\u0001\\ufffd\"");
    ddp_buf_free(&b);
}
