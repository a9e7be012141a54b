/* Unit tests for launcher/crypto: HMAC-SHA256 against RFC 4231's vectors (whole and in pieces), random bytes,
 * constant-time equality, the digest. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/crypto.h"

static void hmac1(const void *key, size_t keylen, const char *msg, size_t len, char out[65])
{
    const void *parts[1] = {msg};
    size_t lens[1] = {len};
    uint8_t mac[32];
    ddp_crypto_hmac(key, keylen, parts, lens, 1, mac);
    ddp_crypto_hex(mac, 32, out);
}

Test(crypto, hmac_sha256_rfc4231)
{
    uint8_t key[131];
    char h[65];
    memset(key, 0x0b, 20);
    hmac1(key, 20, "Hi There", 8, h);
    cr_expect_str_eq(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    hmac1("Jefe", 4, "what do ya want for nothing?", 28, h);
    cr_expect_str_eq(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(key, 0xaa, 131);
    const char *m = "Test Using Larger Than Block-Size Key - Hash Key First";
    hmac1(key, 131, m, strlen(m), h);
    cr_expect_str_eq(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    /* the same message in three pieces gives the same MAC */
    const void *parts[3] = {"what do ", "ya want ", "for nothing?"};
    size_t lens[3] = {8, 8, 12};
    uint8_t mac[32];
    ddp_crypto_hmac("Jefe", 4, parts, lens, 3, mac);
    ddp_crypto_hex(mac, 32, h);
    cr_expect_str_eq(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

Test(crypto, random_equal_digest)
{
    uint8_t a[32] = {0}, b[32] = {0}, zero[32] = {0};
    ddp_crypto_random(a, sizeof a);
    ddp_crypto_random(b, sizeof b);
    cr_expect_not(ddp_crypto_equal(a, zero, 32), "32 random bytes were all zero");
    cr_expect_not(ddp_crypto_equal(a, b, 32), "two draws were equal");
    memcpy(b, a, 32);
    cr_expect(ddp_crypto_equal(a, b, 32));
    b[31] ^= 1;
    cr_expect_not(ddp_crypto_equal(a, b, 32));
    char d1[65], d2[65];
    const void *p1[2] = {"ab", "c"}, *p2[2] = {"a", "bc"};
    size_t l1[2] = {2, 1}, l2[2] = {1, 2};
    ddp_crypto_digest_hex(p1, l1, 2, d1);
    ddp_crypto_digest_hex(p2, l2, 2, d2);
    cr_expect_eq(strlen(d1), 64);
    cr_expect_str_eq(d1, d2, "the digest is over the bytes, not the pieces");
    ddp_crypto_wipe(a, sizeof a);
    cr_expect(ddp_crypto_equal(a, zero, 32));
}
