/* crypto: the few cryptographic primitives the control channel and the token file need, from libsodium
 * (HMAC-SHA256, a random source, constant-time comparison, hashing, wiping). It holds no state and knows
 * nothing of sockets, files or jobs; it never implements a primitive itself. */
#ifndef DDP_CRYPTO_H
#define DDP_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DDP_CRYPTO_MAC_LEN 32

/* HMAC-SHA256 (RFC 2104/4231) of the concatenation of n pieces, so callers need not concatenate. Any key
 * length (longer than 64 bytes is hashed first, as RFC 2104 says). Never fails. */
void ddp_crypto_hmac(const void *key, size_t keylen, const void *const *parts, const size_t *lens, size_t n,
                     uint8_t mac[DDP_CRYPTO_MAC_LEN]);
/* n bytes from the operating system's random source (libsodium's randombytes). Never fails (aborts when
 * libsodium cannot initialise, which leaves no safe way on). */
void ddp_crypto_random(void *buf, size_t n);
/* Constant-time equality of n bytes. */
bool ddp_crypto_equal(const void *a, const void *b, size_t n);
/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void ddp_crypto_hex(const void *bytes, size_t n, char *out);
/* BLAKE2b-256 of the n pieces, as 64 hex digits and a NUL in out (a digest to bind, not a MAC). */
void ddp_crypto_digest_hex(const void *const *parts, const size_t *lens, size_t n, char out[65]);
/* Argon2id (libsodium's crypto_pwhash, OPSLIMIT/MEMLIMIT_INTERACTIVE: 64 MiB, about 0.1-0.5 s) of the password
 * with a 16-byte salt into out (32 bytes): what turns a human-chosen secret into a key, so that each guess
 * costs an attacker as much. 0, or -ENOMEM when the memory cannot be had. */
#define DDP_CRYPTO_SALT_LEN 16
int ddp_crypto_pwhash(const char *password, const uint8_t salt[DDP_CRYPTO_SALT_LEN], uint8_t out[32]);
/* Overwrite n bytes with zeros in a way the compiler keeps. */
void ddp_crypto_wipe(void *p, size_t n);

#endif
