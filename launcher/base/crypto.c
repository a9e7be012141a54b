/* crypto: thin wrappers over libsodium. See crypto.h. */
#include "base/crypto.h"

#include <errno.h>
#include <string.h>

#include <sodium.h>
#include <stdlib.h>

#include "base/util.h"

static void init(void)
{
    static bool ready;
    if (ready)
        return;
    if (sodium_init() < 0) { /* 0 = initialised now, 1 = already was */
        ddp_error("crypto: libsodium cannot initialise (no random source?)");
        abort();
    }
    ready = true;
}

void ddp_crypto_hmac(const void *key, size_t keylen, const void *const *parts, const size_t *lens, size_t n,
                     uint8_t mac[DDP_CRYPTO_MAC_LEN])
{
    crypto_auth_hmacsha256_state st;
    init();
    crypto_auth_hmacsha256_init(&st, key, keylen);
    for (size_t i = 0; i < n; i++)
        crypto_auth_hmacsha256_update(&st, parts[i], lens[i]);
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_memzero(&st, sizeof st);
}

void ddp_crypto_random(void *buf, size_t n)
{
    init();
    randombytes_buf(buf, n);
}

bool ddp_crypto_equal(const void *a, const void *b, size_t n)
{
    init();
    return sodium_memcmp(a, b, n) == 0;
}

void ddp_crypto_hex(const void *bytes, size_t n, char *out)
{
    sodium_bin2hex(out, 2 * n + 1, bytes, n);
}

void ddp_crypto_digest_hex(const void *const *parts, const size_t *lens, size_t n, char out[65])
{
    crypto_generichash_state st;
    uint8_t d[32];
    init();
    crypto_generichash_init(&st, NULL, 0, sizeof d);
    for (size_t i = 0; i < n; i++)
        crypto_generichash_update(&st, parts[i], lens[i]);
    crypto_generichash_final(&st, d, sizeof d);
    ddp_crypto_hex(d, sizeof d, out);
}

void ddp_crypto_wipe(void *p, size_t n)
{
    sodium_memzero(p, n);
}

int ddp_crypto_pwhash(const char *password, const uint8_t salt[DDP_CRYPTO_SALT_LEN], uint8_t out[32])
{
    init();
    _Static_assert(DDP_CRYPTO_SALT_LEN == crypto_pwhash_SALTBYTES, "salt length");
    return crypto_pwhash(out, 32, password, strlen(password), salt, crypto_pwhash_OPSLIMIT_INTERACTIVE,
                         crypto_pwhash_MEMLIMIT_INTERACTIVE, crypto_pwhash_ALG_ARGON2ID13) == 0
               ? 0
               : -ENOMEM;
}
