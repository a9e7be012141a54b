/* libFuzzer harness for launcher/spec: any bytes, loaded as a job spec or given as one key's value, must
 * be accepted or rejected with a message (never crash, leak or hit undefined behaviour), and every value
 * that is accepted must format into a string that parses back to the same formatted value.
 * The first input byte picks the mode; the rest is the payload.
 * Built and run by tests/fuzz/run.sh (sources: fuzz_spec.srcs). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, size_t key, const char *a, const char *b)
{
    fprintf(stderr, "fuzz_spec: %s: %s.%s: '%s' vs '%s'\n", what, ddp_spec_keys[key].section, ddp_spec_keys[key].name,
            a ? a : "(null)", b ? b : "(null)");
    abort();
}

/* Every key's formatted value must be accepted by ddp_spec_set and format back to itself. */
static void check_roundtrip(const struct ddp_spec *spec)
{
    for (size_t i = 0; i < ddp_spec_nkeys; i++) {
        char *f1 = ddp_spec_format(spec, i);
        if (!f1)
            die("format returned NULL", i, NULL, NULL);
        struct ddp_spec again;
        struct ddp_err err = {0};
        ddp_spec_init(&again);
        if (ddp_spec_set(&again, ddp_spec_keys[i].section, ddp_spec_keys[i].name, f1, DDP_ORIGIN_CLI, "--set", &err) <
            0)
            die("formatted value does not parse", i, f1, err.msg);
        char *f2 = ddp_spec_format(&again, i);
        if (strcmp(f1, f2) != 0)
            die("format/parse/format differs", i, f1, f2);
        free(f1);
        free(f2);
        ddp_spec_free(&again);
    }
}

/* A rejected input has a message, on one line unless the input itself held a line break (a value given
 * with --set may; the message quotes it). */
static void check_err(int rc, const struct ddp_err *err, bool multiline_input)
{
    if (rc < 0 && (err->msg[0] == '\0' || err->code != rc || (!multiline_input && strchr(err->msg, '\n')))) {
        fprintf(stderr, "fuzz_spec: error %d without a one-line message: '%s'\n", rc, err->msg);
        abort();
    }
}

/* A rejected file: every error of it at once (issue 54), one per line, each "fuzz.ini:LINE: ...", in line order
 * (a line about the whole file, as "fuzz.ini: N more errors after line L", is "fuzz.ini: ..."). */
static void check_file_err(int rc, const struct ddp_err *err)
{
    check_err(rc, err, true);
    long last = 0;
    for (const char *p = rc < 0 ? err->msg : ""; *p;) {
        bool summary = strncmp(p, "fuzz.ini: ", 10) == 0; /* of the file: "empty job spec", "N more errors" */
        long line = summary ? 0 : strncmp(p, "fuzz.ini:", 9) == 0 ? strtol(p + 9, NULL, 10) : -1;
        if (line < 0 || (!summary && (line == 0 || line < last))) {
            fprintf(stderr, "fuzz_spec: error lines not 'fuzz.ini:LINE:' in line order: '%s'\n", err->msg);
            abort();
        }
        last = line > 0 ? line : last;
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : p + strlen(p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    unsigned mode = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    struct ddp_spec spec;
    struct ddp_err err = {0};
    int rc;
    bool nl = memchr(text, '\n', len) != NULL || memchr(text, '\r', len) != NULL;

    ddp_spec_init(&spec);
    if (mode < 0xc0) {
        /* The payload is a job spec file; mode 0x60-0xbf loads it as the site config first. */
        enum ddp_origin o = mode < 0x60 ? DDP_ORIGIN_SPEC : DDP_ORIGIN_SITE;
        rc = ddp_spec_load_string(&spec, "fuzz.ini", text, len, o, &err);
        check_file_err(rc, &err);
        if (rc == 0) {
            rc = ddp_spec_validate(&spec, &err);
            check_err(rc, &err, false);
            check_roundtrip(&spec);
        }
    } else {
        /* The payload is one value for key (mode % nkeys), also tried as an argv string. */
        size_t k = mode % ddp_spec_nkeys;
        char *value = ddp_xstrndup(text, len);
        rc = ddp_spec_set(&spec, ddp_spec_keys[k].section, ddp_spec_keys[k].name, value, DDP_ORIGIN_CLI, "--set", &err);
        check_err(rc, &err, nl);
        if (rc == 0)
            check_roundtrip(&spec);
        struct ddp_strv argv = {0};
        rc = ddp_spec_split_argv(value, &argv, &err);
        check_err(rc, &err, nl);
        if (rc < 0 && argv.n != 0)
            abort();
        for (int r = 0; r < 4; r++) {
            int s = ddp_spec_std_for_rank(value, r);
            (void)s;
        }
        ddp_strv_clear(&argv);
        free(value);
    }
    ddp_spec_free(&spec);
    return 0;
}
