/* token: the per-job secret that authenticates the agents of a job on several nodes, and the private files it
 * comes from: a secret file named by the user, or the per-user token file from which a secret per job id is
 * derived. It checks ownership and modes and never follows a symlink; it does not decide where files live
 * (main does) and never prints a secret. */
#ifndef DDP_TOKEN_H
#define DDP_TOKEN_H

#include <stddef.h>

#include "base/util.h"
#include "spec/spec.h"

/* Read a private secret file: a regular file (not a symlink) owned by this user, without group/other
 * permissions, holding at least 16 characters (trailing newlines and spaces dropped). 0 and *out (caller frees;
 * wipe before freeing), -ENOENT when missing, or a negative errno with err ("secret file F has mode 644; it must
 * be private (chmod 600 F)"). */
int ddp_token_read(const char *path, char **out, struct ddp_err *err);

/* The job secret: job_secret when given (at least 16 characters), else hex(HMAC-SHA256(token, "ddplaunch job "
 * + job_id)) where token is read from token_path (checked as ddp_token_read checks); when missing it is created
 * (0600, 32 random bytes, atomically, so nodes sharing a home directory agree). 0 and *out (caller frees), or a
 * negative errno with err. */
int ddp_token_secret(const char *job_secret, const char *token_path, const char *job_id, char **out,
                     struct ddp_err *err);

/* A rough estimate of how many bits of guessing a human-chosen secret is worth: each character counts
 * log2 of the alphabet its classes span (lower, upper, digits, other), except that a repeat of the previous
 * character counts nothing, a step in a run (abc, 123) 1 bit, and a letter inside a run of 4 or more letters
 * (a word) 2.5 bits. "correcthorsebatt" is about 40, 64 random hex digits about 250. Pure. */
double ddp_token_strength_bits(const char *secret);
#define DDP_TOKEN_WEAK_BITS 48 /* below: refused */
#define DDP_TOKEN_FAIR_BITS 96 /* below: a warning */

/* The secret of a job on several nodes, from the first of: [job] secret (the environment's
 * DDPLAUNCH_JOB_SECRET, a spec file, or --set), [job] secret_file (ddp_token_read), else derived from the
 * per-user token file ($DDPLAUNCH_TOKEN_FILE, else ~/.config/ddplaunch/token, created when missing) and job_id.
 * Warns when the spec file that holds [job] secret can be read by other users. A secret the user chose
 * ([job] secret or secret_file) is refused when ddp_token_strength_bits() is below DDP_TOKEN_WEAK_BITS, warned
 * about below DDP_TOKEN_FAIR_BITS, and stretched: *out is then the hex of Argon2id(secret, salt from job_id)
 * (ddp_crypto_pwhash), so that whoever receives a handshake (a squatter on the c10d endpoint) pays one Argon2id
 * per guess. 0 and *out (caller wipes and frees), or a negative errno with err. */
int ddp_token_job_secret(const struct ddp_spec *spec, char *const *envp, const char *job_id, char **out,
                         struct ddp_err *err);

#endif
