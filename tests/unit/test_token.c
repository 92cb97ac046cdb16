/*
 * test_token.c - HS256 tokens (common/token.c).
 *
 * Pinned here: a token issued verifies with its user, times and key id, also on a ring
 * where its key is the next one; it is expired from now == exp on; a ring without its
 * key says UNKNOWN_KEY, a key with the same id but other bytes BAD_SIGNATURE; every
 * character of header, payload and signature changed is refused; tokens with alg "none"
 * or HS512 (even under the right key) are refused; 8 KiB or more is refused unread;
 * claims missing or of the wrong type are refused. The signing key is checked from
 * outside: tokens the test signs itself with HKDF-SHA-256(key, info "spur token v1"),
 * derived with OpenSSL's EVP_PKEY HKDF interface rather than token.c's EVP_KDF one, verify.
 */
#include "check_run.h"
#include "token.h"

#include <check.h>
#include <jwt.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1700000000u

static struct clusterkey key_of(unsigned seed)
{
    uint8_t b[48];
    for (int i = 0; i < 48; i++)
        b[i] = (uint8_t)(seed * 5 + i);
    struct clusterkey k;
    char err[256];
    ck_assert_int_eq(clusterkey_from_bytes(&k, b, sizeof(b), "test", err, sizeof(err)), 0);
    return k;
}

static void ring(struct keyring *kr, const struct clusterkey *a, const struct clusterkey *b)
{
    memset(kr, 0, sizeof(*kr));
    ck_assert_int_eq(keyring_add(kr, a), 0);
    if (b != NULL)
        ck_assert_int_eq(keyring_add(kr, b), 0);
}

/* The signing key of k, by another OpenSSL interface than token.c's. */
static void signing_key(const struct clusterkey *k, uint8_t out[32])
{
    EVP_PKEY_CTX *pc = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    ck_assert_ptr_nonnull(pc);
    size_t outlen = 32;
    ck_assert_int_eq(EVP_PKEY_derive_init(pc), 1);
    ck_assert_int_eq(EVP_PKEY_CTX_set_hkdf_md(pc, EVP_sha256()), 1);
    ck_assert_int_eq(EVP_PKEY_CTX_set1_hkdf_key(pc, k->bytes, (int)k->len), 1);
    ck_assert_int_eq(EVP_PKEY_CTX_add1_hkdf_info(pc, (const unsigned char *)"spur token v1", 13),
                     1);
    ck_assert_int_eq(EVP_PKEY_derive(pc, out, &outlen), 1);
    ck_assert_uint_eq(outlen, 32);
    EVP_PKEY_CTX_free(pc);
}

/* A token the test signs: alg, kid and claims as JSON; key NULL for alg none. */
static char *make(jwt_alg_t alg, const struct clusterkey *k, const char *kid, const char *claims)
{
    jwt_t *j = NULL;
    ck_assert_int_eq(jwt_new(&j), 0);
    uint8_t sk[32];
    if (alg != JWT_ALG_NONE) {
        signing_key(k, sk);
        ck_assert_int_eq(jwt_set_alg(j, alg, sk, sizeof(sk)), 0);
    }
    if (kid != NULL)
        ck_assert_int_eq(jwt_add_header(j, "kid", kid), 0);
    ck_assert_int_eq(jwt_add_grants_json(j, claims), 0);
    char *t = jwt_encode_str(j);
    ck_assert_ptr_nonnull(t);
    jwt_free(j);
    return t;
}

START_TEST(test_issue_verify)
{
    struct clusterkey a = key_of(1), b = key_of(2);
    struct keyring kr;
    ring(&kr, &a, NULL);
    char *t = NULL;
    ck_assert_int_eq(token_issue(&kr, "alice", NOW, 3600, &t), TOKEN_OK);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(strlen(t) > 0 && strchr(t, '.') != NULL, 1);
    struct token_claims c;
    ck_assert_int_eq(token_verify(&kr, t, NOW, &c), TOKEN_OK);
    ck_assert_str_eq(c.user, "alice");
    ck_assert_uint_eq(c.issued_s, NOW);
    ck_assert_uint_eq(c.expires_s, NOW + 3600);
    ck_assert_str_eq(c.key_id, a.id_hex);

    /* Header kid and alg as issued, read back through libjwt. */
    jwt_t *j = NULL;
    ck_assert_int_eq(jwt_decode(&j, t, NULL, 0), 0);
    ck_assert_str_eq(jwt_get_header(j, "kid"), a.id_hex);
    ck_assert_str_eq(jwt_get_header(j, "alg"), "HS256");
    jwt_free(j);

    /* Rotation: a ring that has a as its next key still takes the token. */
    struct keyring rot;
    ring(&rot, &b, &a);
    ck_assert_int_eq(token_verify(&rot, t, NOW, &c), TOKEN_OK);
    free(t);
    /* And issues with its current key. */
    ck_assert_int_eq(token_issue(&rot, "bob", NOW, 60, &t), TOKEN_OK);
    ck_assert_int_eq(token_verify(&rot, t, NOW, &c), TOKEN_OK);
    ck_assert_str_eq(c.key_id, b.id_hex);
    ck_assert_int_eq(token_verify(&kr, t, NOW, &c), TOKEN_UNKNOWN_KEY);
    free(t);

    /* The test's own signing key makes tokens that verify: the derivation is pinned. */
    char claims[128];
    snprintf(claims, sizeof(claims), "{\"sun\":\"carol\",\"iat\":%u,\"exp\":%u}", NOW, NOW + 10);
    t = make(JWT_ALG_HS256, &a, a.id_hex, claims);
    ck_assert_int_eq(token_verify(&kr, t, NOW, &c), TOKEN_OK);
    ck_assert_str_eq(c.user, "carol");
    free(t);
}
END_TEST

START_TEST(test_expiry)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    char *t = NULL;
    ck_assert_int_eq(token_issue(&kr, "alice", NOW, 100, &t), TOKEN_OK);
    struct token_claims c;
    ck_assert_int_eq(token_verify(&kr, t, NOW + 99, &c), TOKEN_OK);
    ck_assert_int_eq(token_verify(&kr, t, NOW + 100, &c), TOKEN_EXPIRED);
    ck_assert_str_eq(c.user, "alice"); /* for the log line */
    ck_assert_int_eq(token_verify(&kr, t, NOW + 100000, &c), TOKEN_EXPIRED);
    free(t);
}
END_TEST

START_TEST(test_wrong_key)
{
    struct clusterkey a = key_of(1), b = key_of(2);
    struct keyring ka, kb;
    ring(&ka, &a, NULL);
    ring(&kb, &b, NULL);
    char *t = NULL;
    ck_assert_int_eq(token_issue(&ka, "alice", NOW, 100, &t), TOKEN_OK);
    struct token_claims c;
    ck_assert_int_eq(token_verify(&kb, t, NOW, &c), TOKEN_UNKNOWN_KEY);
    ck_assert_str_eq(c.user, "");

    /* A key claiming a's id with other bytes: the signature tells. */
    struct clusterkey fake = b;
    memcpy(fake.id, a.id, sizeof(a.id));
    memcpy(fake.id_hex, a.id_hex, sizeof(a.id_hex));
    struct keyring kf;
    ring(&kf, &fake, NULL);
    ck_assert_int_eq(token_verify(&kf, t, NOW, &c), TOKEN_BAD_SIGNATURE);
    free(t);

    /* A kid that names no key, or none at all, or not a key id. */
    char claims[128];
    snprintf(claims, sizeof(claims), "{\"sun\":\"x\",\"iat\":%u,\"exp\":%u}", NOW, NOW + 10);
    t = make(JWT_ALG_HS256, &a, "0000000000000000", claims);
    ck_assert_int_eq(token_verify(&ka, t, NOW, &c), TOKEN_UNKNOWN_KEY);
    free(t);
    t = make(JWT_ALG_HS256, &a, NULL, claims);
    ck_assert_int_eq(token_verify(&ka, t, NOW, &c), TOKEN_UNKNOWN_KEY);
    free(t);
    char longer[40];
    snprintf(longer, sizeof(longer), "%s00", a.id_hex);
    t = make(JWT_ALG_HS256, &a, longer, claims);
    ck_assert_int_eq(token_verify(&ka, t, NOW, &c), TOKEN_UNKNOWN_KEY);
    free(t);
}
END_TEST

START_TEST(test_every_character_changed)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    char *t = NULL;
    ck_assert_int_eq(token_issue(&kr, "alice", NOW, 100, &t), TOKEN_OK);
    size_t n = strlen(t);
    const char *dot1 = strchr(t, '.'), *dot2 = strrchr(t, '.');
    ck_assert_ptr_ne(dot1, dot2);
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    int refused[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '.')
            continue;
        int part = t + i < dot1 ? 0 : t + i < dot2 ? 1 : 2;
        /* Two replacements per position: a neighbour in the alphabet and a far one. */
        for (int k = 0; k < 2; k++) {
            char *m = strdup(t);
            const char *at = strchr(b64, t[i]);
            ck_assert_ptr_nonnull(at);
            size_t pos = (size_t)(at - b64);
            m[i] = b64[(pos + (k == 0 ? 1 : 32)) % 64];
            struct token_claims c;
            enum token_rc rc = token_verify(&kr, m, NOW, &c);
            /*
             * The last character of a 32-byte signature carries two bits that decode to
             * nothing; changing only those is the same signature. Every other change
             * must be refused.
             */
            bool padding_only = part == 2 && i == n - 1 && k == 0 && (pos & 3) != 3;
            if (!padding_only)
                ck_assert_msg(rc != TOKEN_OK, "part %d char %zu changed to %c: accepted", part, i,
                              m[i]);
            if (rc != TOKEN_OK)
                refused[part]++;
            free(m);
        }
    }
    ck_assert_int_gt(refused[0], 0);
    ck_assert_int_gt(refused[1], 0);
    ck_assert_int_gt(refused[2], 0);
    /* And structure: a part dropped, a part added, the signature removed. */
    char buf[1024];
    snprintf(buf, sizeof(buf), "%.*s", (int)(dot2 - t), t);
    struct token_claims c;
    ck_assert_int_ne(token_verify(&kr, buf, NOW, &c), TOKEN_OK);
    snprintf(buf, sizeof(buf), "%.*s.", (int)(dot2 - t), t);
    ck_assert_int_ne(token_verify(&kr, buf, NOW, &c), TOKEN_OK);
    snprintf(buf, sizeof(buf), "%s.extra", t);
    ck_assert_int_ne(token_verify(&kr, buf, NOW, &c), TOKEN_OK);
    free(t);
}
END_TEST

START_TEST(test_other_algorithms_refused)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    char claims[128];
    snprintf(claims, sizeof(claims), "{\"sun\":\"root\",\"iat\":%u,\"exp\":%u}", NOW, NOW + 10);
    struct token_claims c;
    /* Unsigned, naming our key: never believed. */
    char *t = make(JWT_ALG_NONE, &a, a.id_hex, claims);
    ck_assert_ptr_nonnull(strstr(t, "."));
    ck_assert_int_eq(token_verify(&kr, t, NOW, &c), TOKEN_BAD_SIGNATURE);
    ck_assert_str_eq(c.user, "");
    free(t);
    /* HS512 and HS384 under the right signing key: not what we issue. */
    t = make(JWT_ALG_HS512, &a, a.id_hex, claims);
    ck_assert_int_eq(token_verify(&kr, t, NOW, &c), TOKEN_BAD_SIGNATURE);
    free(t);
    t = make(JWT_ALG_HS384, &a, a.id_hex, claims);
    ck_assert_int_eq(token_verify(&kr, t, NOW, &c), TOKEN_BAD_SIGNATURE);
    free(t);
}
END_TEST

START_TEST(test_too_long_and_garbage)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    struct token_claims c;
    static char big[TOKEN_MAX_LEN + 10];
    memset(big, 'A', sizeof(big) - 1);
    big[TOKEN_MAX_LEN] = '\0';
    ck_assert_int_eq(token_verify(&kr, big, NOW, &c), TOKEN_TOO_LONG);
    big[TOKEN_MAX_LEN] = 'A';
    ck_assert_int_eq(token_verify(&kr, big, NOW, &c), TOKEN_TOO_LONG);
    big[TOKEN_MAX_LEN - 1] = '\0';
    ck_assert_int_eq(token_verify(&kr, big, NOW, &c), TOKEN_MALFORMED);
    static const char *const junk[] = {
        "", ".", "..", "a.b.c", "eyJ.eyJ.", "not a token", "eyJhbGciOiJIUzI1NiJ9", NULL};
    for (size_t i = 0; junk[i] != NULL; i++)
        ck_assert_int_eq(token_verify(&kr, junk[i], NOW, &c), TOKEN_MALFORMED);
    ck_assert_int_eq(token_verify(&kr, NULL, NOW, &c), TOKEN_MALFORMED);
}
END_TEST

START_TEST(test_claims)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    struct token_claims c;
    static const char *const bad[] = {
        "{\"iat\":1700000000,\"exp\":1700000100}",                       /* no sun */
        "{\"sun\":\"\",\"iat\":1700000000,\"exp\":1700000100}",          /* empty sun */
        "{\"sun\":7,\"iat\":1700000000,\"exp\":1700000100}",             /* sun a number */
        "{\"sun\":\"a b\",\"iat\":1700000000,\"exp\":1700000100}",       /* not a user name */
        "{\"sun\":\"alice\",\"exp\":1700000100}",                        /* no iat */
        "{\"sun\":\"alice\",\"iat\":1700000000}",                        /* no exp */
        "{\"sun\":\"alice\",\"iat\":1700000000,\"exp\":\"1700000100\"}", /* exp a string */
        "{\"sun\":\"alice\",\"iat\":1700000000,\"exp\":1700000100.5}",   /* exp a real */
        "{\"sun\":\"alice\",\"iat\":-1,\"exp\":1700000100}",             /* negative */
        "{\"sun\":\"alice\",\"iat\":1700000200,\"exp\":1700000100}",     /* iat after exp */
        "{\"sun\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
        "\"iat\":1700000000,\"exp\":1700000100}", /* 64 bytes */
        NULL};
    for (size_t i = 0; bad[i] != NULL; i++) {
        char *t = make(JWT_ALG_HS256, &a, a.id_hex, bad[i]);
        enum token_rc rc = token_verify(&kr, t, NOW, &c);
        ck_assert_msg(rc == TOKEN_MALFORMED, "%s: %s", bad[i], token_rc_name(rc));
        free(t);
    }
    char *t = make(JWT_ALG_HS256, &a, a.id_hex,
                   "{\"sun\":\"alice\",\"iat\":1700000000,\"exp\":1700000100,\"x\":[1]}");
    ck_assert_int_eq(token_verify(&kr, t, NOW, &c), TOKEN_OK); /* other claims ignored */
    free(t);
}
END_TEST

START_TEST(test_issue_arguments)
{
    struct clusterkey a = key_of(1);
    struct keyring kr, none;
    ring(&kr, &a, NULL);
    memset(&none, 0, sizeof(none));
    char *t = (char *)1;
    ck_assert_int_eq(token_issue(&none, "alice", NOW, 10, &t), TOKEN_UNKNOWN_KEY);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(token_issue(&kr, "", NOW, 10, &t), TOKEN_MALFORMED);
    ck_assert_int_eq(token_issue(&kr, "a b", NOW, 10, &t), TOKEN_MALFORMED);
    ck_assert_int_eq(token_issue(&kr, NULL, NOW, 10, &t), TOKEN_MALFORMED);
    ck_assert_int_eq(token_issue(&kr, "alice", NOW, 0, &t), TOKEN_MALFORMED);
    ck_assert_int_eq(token_issue(&kr, "alice", UINT64_MAX - 5, 10, &t), TOKEN_MALFORMED);
    char user[64];
    memset(user, 'u', 63);
    user[63] = '\0';
    ck_assert_int_eq(token_issue(&kr, user, NOW, 10, &t), TOKEN_OK);
    struct token_claims c;
    ck_assert_int_eq(token_verify(&kr, t, NOW, &c), TOKEN_OK);
    ck_assert_str_eq(c.user, user);
    free(t);
    ck_assert_str_eq(token_rc_name(TOKEN_EXPIRED), "expired");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("token");
    check_case(s, "token",
               (const TTest *[]){test_issue_verify, test_expiry, test_wrong_key,
                                 test_every_character_changed, test_other_algorithms_refused,
                                 test_too_long_and_garbage, test_claims, test_issue_arguments,
                                 NULL});
    return check_run(s);
}
