/* libFuzzer harness for launcher/cli: any command line and PET_ / DDPLAUNCH_ environment must parse or be
 * rejected with a one-line message, and an accepted one must apply onto a spec (defaults < env < flags)
 * without a crash, leak or undefined behaviour.
 * Input: environment entries, a 0x01 byte, then argv words; entries and words are separated by NUL or
 * newline bytes. Built and run by tests/fuzz/run.sh (sources: fuzz_cli.srcs). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/cli.h"
#include "spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void split(const char *p, size_t n, struct ddp_strv *out)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || p[i] == '\0' || p[i] == '\n') {
            if (i > start || i < n)
                ddp_strv_push_own(out, ddp_xstrndup(p + start, i - start));
            start = i + 1;
        }
}

static void check_err(int rc, const struct ddp_err *err)
{
    if (rc < 0 && (err->msg[0] == '\0' || err->code != rc || strchr(err->msg, '\n'))) {
        fprintf(stderr, "fuzz_cli: error %d without a one-line message: '%s'\n", rc, err->msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    const char *text = (const char *)data;
    const char *sep = memchr(text, 0x01, size);
    struct ddp_strv env = {0}, args = {0};
    if (sep)
        split(text, (size_t)(sep - text), &env);
    ddp_strv_push(&args, "ddplaunch");
    if (sep)
        split(sep + 1, size - (size_t)(sep - text) - 1, &args);
    else
        split(text, size, &args);
    char *empty[] = {NULL};
    char **envp = env.v ? env.v : empty;

    struct ddp_cli cli;
    struct ddp_err err = {0};
    int rc = ddp_cli_parse((int)args.n, args.v, &cli, &err);
    check_err(rc, &err);
    if (rc == 0) {
        if (cli.spec_path && cli.target)
            abort(); /* a job spec and a script exclude each other */
        struct ddp_spec spec;
        ddp_spec_init(&spec);
        rc = ddp_cli_apply_pet(&spec, envp, &err);
        if (rc == 0)
            rc = ddp_spec_apply_env(&spec, envp, &err);
        if (rc == 0)
            rc = ddp_cli_apply(&cli, &spec, envp, &err);
        check_err(rc, &err);
        if (rc == 0) {
            rc = ddp_spec_validate(&spec, &err);
            check_err(rc, &err);
            for (size_t i = 0; i < ddp_spec_nkeys; i++)
                free(ddp_spec_format(&spec, i));
        }
        ddp_spec_free(&spec);
    }
    ddp_cli_free(&cli);
    ddp_strv_clear(&env);
    ddp_strv_clear(&args);
    return 0;
}
