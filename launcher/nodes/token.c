/* token: the job secret and its private files. See token.h. */
#include "nodes/token.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crypto.h"

int ddp_token_read(const char *path, char **out, struct ddp_err *err)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return ddp_errf(err, -ENOENT, "%s: no such file", path);
        if (e == ELOOP)
            return ddp_errf(err, -ELOOP, "%s is a symbolic link; give the file itself", path);
        return ddp_errf(err, -e, "%s: %s", path, strerror(e));
    }
    struct stat st;
    int rc = 0;
    char buf[4096];
    if (fstat(fd, &st) < 0)
        rc = ddp_errf(err, -errno, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = ddp_errf(err, -EPERM, "%s is not a regular file", path);
    else if (st.st_uid != geteuid())
        rc = ddp_errf(err, -EPERM, "%s belongs to uid %u, not to this user (%u)", path, (unsigned)st.st_uid,
                      (unsigned)geteuid());
    else if (st.st_mode & 077)
        rc = ddp_errf(err, -EPERM, "%s has mode %03o; it must be private (chmod 600 %s)", path,
                      (unsigned)(st.st_mode & 0777), path);
    if (rc == 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n < 0) {
            rc = ddp_errf(err, -errno, "%s: %s", path, strerror(errno));
        } else {
            while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
                n--;
            buf[n] = '\0';
            if (n < 16 || strlen(buf) != (size_t)n)
                rc = ddp_errf(err, -EINVAL, "%s must hold a secret of at least 16 characters (one line)", path);
            else
                *out = ddp_xstrdup(buf);
        }
    }
    ddp_crypto_wipe(buf, sizeof buf);
    close(fd);
    return rc;
}

static int create_token(const char *path, struct ddp_err *err)
{
    char *tmp = ddp_xasprintf("%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        int rc = ddp_errf(err, -e, "cannot create token file %s: %s", tmp, strerror(e));
        free(tmp);
        return rc;
    }
    uint8_t raw[32];
    char text[66];
    ddp_crypto_random(raw, sizeof raw);
    ddp_crypto_hex(raw, sizeof raw, text);
    strcat(text, "\n");
    ssize_t w = write(fd, text, strlen(text));
    int rc = 0;
    if (w != (ssize_t)strlen(text) || fsync(fd) < 0)
        rc = ddp_errf(err, -EIO, "cannot write token file %s", tmp);
    close(fd);
    ddp_crypto_wipe(text, sizeof text);
    /* link() is atomic and fails when another node (sharing this home directory) was first: use theirs. */
    if (rc == 0 && link(tmp, path) < 0 && errno != EEXIST)
        rc = ddp_errf(err, -errno, "cannot create token file %s: %s", path, strerror(errno));
    unlink(tmp);
    free(tmp);
    return rc;
}

int ddp_token_secret(const char *job_secret, const char *token_path, const char *job_id, char **out,
                     struct ddp_err *err)
{
    if (job_secret && *job_secret) {
        if (strlen(job_secret) < 16)
            return ddp_errf(err, -EINVAL, "[job] secret must have at least 16 characters");
        *out = ddp_xstrdup(job_secret);
        return 0;
    }
    if (!token_path || !job_id || !*job_id)
        return ddp_errf(err, -EINVAL,
                        "several nodes need a shared secret: set [job] secret_file (the same "
                        "on every node), or run under Slurm with a token file");
    char *token = NULL;
    struct ddp_err e2 = {0};
    int rc = ddp_token_read(token_path, &token, &e2);
    if (rc == -ENOENT) {
        rc = create_token(token_path, err);
        if (rc < 0)
            return rc;
        rc = ddp_token_read(token_path, &token, &e2);
    }
    if (rc < 0)
        return ddp_errf(err, rc, "token file %s", e2.msg);
    char *msg = ddp_xasprintf("ddplaunch job %s", job_id);
    uint8_t mac[DDP_CRYPTO_MAC_LEN];
    const void *parts[1] = {msg};
    size_t lens[1] = {strlen(msg)};
    ddp_crypto_hmac(token, strlen(token), parts, lens, 1, mac);
    ddp_crypto_wipe(token, strlen(token));
    free(token);
    free(msg);
    *out = ddp_xmalloc(65);
    ddp_crypto_hex(mac, sizeof mac, *out);
    return 0;
}

static int char_class(unsigned char c)
{
    return c >= 'a' && c <= 'z' ? 1 : c >= 'A' && c <= 'Z' ? 2 : c >= '0' && c <= '9' ? 4 : 8;
}

static bool is_letter(unsigned char c)
{
    return char_class(c) <= 2;
}

double ddp_token_strength_bits(const char *secret)
{
    const unsigned char *s = (const unsigned char *)secret;
    int classes = 0;
    bool hex = true;
    for (const unsigned char *p = s; *p; p++) {
        classes |= char_class(*p);
        hex = hex && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F'));
    }
    double alphabet = (classes & 1 ? 26 : 0) + (classes & 2 ? 26 : 0) + (classes & 4 ? 10 : 0) + (classes & 8 ? 33 : 0);
    if (hex && strlen(secret) >= 32)
        alphabet = 16; /* a hex dump: its own alphabet, no words */
    double per = alphabet > 1 ? log2(alphabet) : 0, bits = 0;
    for (size_t i = 0; s[i]; i++) {
        size_t a = i, b = i;
        while (!hex && a > 0 && is_letter(s[a - 1]))
            a--;
        while (!hex && s[b] && is_letter(s[b]))
            b++;
        if (i > 0 && s[i] == s[i - 1])
            continue;
        if (i > 0 && (s[i] == s[i - 1] + 1 || s[i] + 1 == s[i - 1]) && char_class(s[i]) == char_class(s[i - 1]))
            bits += 1;
        else if (!hex && is_letter(s[i]) && b - a >= 4)
            bits += 2.5 < per ? 2.5 : per;
        else
            bits += per;
    }
    return bits;
}

/* A secret the user chose: refused when weak, warned about when fair, then stretched (token.h). */
static int stretch_chosen(char **secret, const char *where, const char *job_id, struct ddp_err *err)
{
    double bits = ddp_token_strength_bits(*secret);
    static const char gen[] = "make one with: openssl rand -hex 32 >FILE; chmod 600 FILE; and set [job] "
                              "secret_file = FILE (the same file on every node)";
    if (bits < DDP_TOKEN_WEAK_BITS) {
        ddp_crypto_wipe(*secret, strlen(*secret));
        free(*secret);
        *secret = NULL;
        return ddp_errf(err, -EINVAL,
                        "%s is too easy to guess (about %.0f bits: words, repeats or runs; at least %d wanted): %s",
                        where, bits, DDP_TOKEN_WEAK_BITS, gen);
    }
    if (bits < DDP_TOKEN_FAIR_BITS)
        ddp_warn("%s is weak (about %.0f bits; %d or more wanted): %s", where, bits, DDP_TOKEN_FAIR_BITS, gen);
    uint8_t salt[DDP_CRYPTO_SALT_LEN], full[65], key[32];
    const void *parts[2] = {"ddplaunch secret salt\n", job_id ? job_id : ""};
    size_t lens[2] = {strlen(parts[0]), strlen(parts[1])};
    ddp_crypto_digest_hex(parts, lens, 2, (char *)full);
    memcpy(salt, full, sizeof salt);
    int rc = ddp_crypto_pwhash(*secret, salt, key);
    ddp_crypto_wipe(*secret, strlen(*secret));
    free(*secret);
    *secret = NULL;
    if (rc < 0)
        return ddp_errf(err, rc, "%s: cannot stretch it (Argon2id needs 64 MiB): %s", where, strerror(-rc));
    *secret = ddp_xmalloc(65);
    ddp_crypto_hex(key, sizeof key, *secret);
    ddp_crypto_wipe(key, sizeof key);
    return 0;
}

int ddp_token_job_secret(const struct ddp_spec *spec, char *const *envp, const char *job_id, char **out,
                         struct ddp_err *err)
{
    int si = ddp_spec_key_find("job", "secret");
    if (spec->secret && *spec->secret) {
        const char *file = spec->set_file[si];
        struct stat st;
        if (file && stat(file, &st) == 0 && (st.st_mode & 044))
            ddp_warn("%s:%d: [job] secret is in a file other users can read (mode %03o): move it to a private "
                     "secret_file (chmod 600), or pass it as DDPLAUNCH_JOB_SECRET",
                     file, spec->set_line[si], (unsigned)(st.st_mode & 0777));
        int rc = ddp_token_secret(spec->secret, NULL, job_id, out, err);
        return rc < 0 ? rc : stretch_chosen(out, "[job] secret", job_id, err);
    }
    if (spec->secret_file && *spec->secret_file) {
        char *s = NULL;
        struct ddp_err e2 = {0};
        int rc = ddp_token_read(spec->secret_file, &s, &e2);
        if (rc < 0)
            return ddp_errf(err, rc, "secret_file %s", e2.msg);
        *out = s;
        return stretch_chosen(out, "the secret in secret_file", job_id, err);
    }
    const char *tf = ddp_env_get(envp, "DDPLAUNCH_TOKEN_FILE");
    const char *home = ddp_env_get(envp, "HOME");
    char *path;
    if (tf && *tf) {
        path = ddp_xstrdup(tf);
    } else {
        char *d = ddp_xasprintf("%s/.config", home ? home : "");
        mkdir(d, 0700);
        free(d);
        d = ddp_xasprintf("%s/.config/ddplaunch", home ? home : "");
        mkdir(d, 0700);
        free(d);
        path = ddp_xasprintf("%s/.config/ddplaunch/token", home ? home : "");
    }
    int rc = ddp_token_secret(NULL, path, job_id, out, err);
    free(path);
    return rc;
}
