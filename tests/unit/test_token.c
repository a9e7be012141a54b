/* Unit tests for launcher/token: the job secret given, read from a private secret file, or derived from the
 * per-user token file (created 0600 on first use); files others can read, of another owner or symlinks refused;
 * the warning for a spec file holding the secret that others can read. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodes/token.h"

static char dir[64];

static void mkdir_tmp(void)
{
    snprintf(dir, sizeof dir, "/tmp/ddp-token-test.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

Test(token, secret_from_job_or_token_file)
{
    mkdir_tmp();
    char path[300], link_path[300];
    snprintf(path, sizeof path, "%s/token", dir);
    snprintf(link_path, sizeof link_path, "%s/link", dir);
    struct ddp_err err = {0};
    char *a = NULL, *b = NULL, *c = NULL;
    cr_assert_eq(ddp_token_secret("a-job-secret-long-enough", path, "7", &a, &err), 0);
    cr_expect_str_eq(a, "a-job-secret-long-enough");
    free(a);
    cr_expect_eq(ddp_token_secret("short", path, "7", &a, &err), -EINVAL);
    cr_expect_eq(ddp_token_secret(NULL, NULL, NULL, &a, &err), -EINVAL);
    cr_expect(strstr(err.msg, "secret_file"), "%s", err.msg);
    /* First use creates the token (0600); the same job id gives the same secret, another job another one. */
    cr_assert_eq(ddp_token_secret(NULL, path, "7", &a, &err), 0, "%s", err.msg);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600);
    cr_assert_eq(ddp_token_secret(NULL, path, "7", &b, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_token_secret(NULL, path, "8", &c, &err), 0, "%s", err.msg);
    cr_expect_str_eq(a, b);
    cr_expect_str_neq(a, c);
    cr_expect_eq(strlen(a), 64);
    free(a);
    free(b);
    free(c);
    /* A token others can read, or a symlink, is refused. */
    chmod(path, 0644);
    cr_expect_eq(ddp_token_secret(NULL, path, "7", &a, &err), -EPERM);
    cr_expect(strstr(err.msg, "mode 644"), "%s", err.msg);
    chmod(path, 0600);
    cr_assert_eq(symlink(path, link_path), 0);
    cr_expect_lt(ddp_token_secret(NULL, link_path, "7", &a, &err), 0);
    unlink(link_path);
    unlink(path);
    rmdir(dir);
}

Test(token, job_secret_sources)
{
    mkdir_tmp();
    char sf[300], spec_path[300], tok[300];
    snprintf(sf, sizeof sf, "%s/secret", dir);
    snprintf(spec_path, sizeof spec_path, "%s/job.ini", dir);
    snprintf(tok, sizeof tok, "%s/token", dir);
    struct ddp_err err = {0};
    struct ddp_spec spec;
    char *s = NULL;
    char tokenv[400];
    snprintf(tokenv, sizeof tokenv, "DDPLAUNCH_TOKEN_FILE=%s", tok);
    char *envp[] = {tokenv, NULL};

    /* secret_file: private, stretched (Argon2id, salt from the job id): the same on every node of one job */
    write_file(sf, "file-secret-0123456789\n", 0600);
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_spec_set(&spec, "job", "secret_file", sf, DDP_ORIGIN_CLI, "--set", &err), 0);
    cr_assert_eq(ddp_token_job_secret(&spec, envp, "none", &s, &err), 0, "%s", err.msg);
    cr_expect_eq(strlen(s), 64);
    cr_expect_null(strstr(s, "file-secret"));
    char *s2 = NULL;
    cr_assert_eq(ddp_token_job_secret(&spec, envp, "none", &s2, &err), 0, "%s", err.msg);
    cr_expect_str_eq(s, s2, "the same secret and job id give the same key");
    free(s2);
    cr_assert_eq(ddp_token_job_secret(&spec, envp, "other-job", &s2, &err), 0, "%s", err.msg);
    cr_expect_str_neq(s, s2, "another job id gives another key");
    free(s2);
    free(s);
    /* a weak one (16 dictionary letters) is refused, with a generator offered */
    write_file(sf, "correcthorsebatt\n", 0600);
    cr_expect_eq(ddp_token_job_secret(&spec, envp, "none", &s, &err), -EINVAL);
    cr_expect(strstr(err.msg, "too easy to guess") && strstr(err.msg, "openssl rand -hex 32"), "%s", err.msg);
    write_file(sf, "file-secret-0123456789\n", 0600);
    chmod(sf, 0640);
    cr_expect_eq(ddp_token_job_secret(&spec, envp, "none", &s, &err), -EPERM);
    cr_expect(strstr(err.msg, "secret_file") && strstr(err.msg, "mode 640"), "%s", err.msg);
    ddp_spec_free(&spec);

    /* nothing given: derived from the token file, per job id */
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_token_job_secret(&spec, envp, "job-a", &s, &err), 0, "%s", err.msg);
    cr_expect_eq(strlen(s), 64);
    free(s);
    ddp_spec_free(&spec);

    /* [job] secret in a spec file others can read: used, with a warning (stderr; not checked here) */
    write_file(spec_path, "[job]\nprogram = true\nsecret = spec-secret-0123456789\n", 0644);
    ddp_spec_init(&spec);
    cr_assert_eq(ddp_spec_load_file(&spec, spec_path, DDP_ORIGIN_SPEC, &err), 0, "%s", err.msg);
    cr_assert_eq(ddp_token_job_secret(&spec, envp, "none", &s, &err), 0, "%s", err.msg);
    cr_expect_eq(strlen(s), 64);
    cr_expect_null(strstr(s, "spec-secret"));
    free(s);
    ddp_spec_free(&spec);
    unlink(sf);
    unlink(spec_path);
    unlink(tok);
    rmdir(dir);
}

Test(token, strength_of_chosen_secrets)
{
    cr_expect_lt(ddp_token_strength_bits("correcthorsebatt"), DDP_TOKEN_WEAK_BITS);
    cr_expect_lt(ddp_token_strength_bits("passwordpassword"), DDP_TOKEN_WEAK_BITS);
    cr_expect_lt(ddp_token_strength_bits("Password1234!!!!"), DDP_TOKEN_WEAK_BITS);
    cr_expect_lt(ddp_token_strength_bits("0123456789abcdef"), DDP_TOKEN_WEAK_BITS);
    cr_expect_lt(ddp_token_strength_bits("aaaaaaaaaaaaaaaa"), DDP_TOKEN_WEAK_BITS);
    double fair = ddp_token_strength_bits("spec-file-secret-0123456789");
    cr_expect(fair >= DDP_TOKEN_WEAK_BITS && fair < DDP_TOKEN_FAIR_BITS, "%f", fair);
    cr_expect_geq(ddp_token_strength_bits("aZ3$kL9!mQ2@xV7#"), DDP_TOKEN_FAIR_BITS);
    cr_expect_geq(ddp_token_strength_bits("ead41e64e665f46c11d715da585c3d9e57768c1d28bf0ff77e6f971b0d730a94"), 200);
}
