/*
 * token.c - HS256 JSON Web Tokens with libjwt; contract in token.h.
 *
 * Verification reads the token twice, and trusts only the second reading:
 *   1. jwt_decode() without a key parses the header unverified; its "kid" picks which key
 *      of the ring to try, and nothing else read there is believed.
 *   2. jwt_decode() with that key's signing key verifies the signature (libjwt refuses a
 *      token whose "alg" is "none" when a key is given), then jwt_get_alg() must say HS256:
 *      a token signed with HS384/HS512 under the same key is not one we issue.
 * The claims come from the verified object, through jansson (libjwt's own JSON library),
 * so their types are checked rather than guessed: libjwt 1.10's jwt_get_grant_int()
 * reads a string claim as 0 without an error.
 *
 * Each key's signing key is HKDF-SHA-256(cluster key, no salt, info "spur token v1"), 32
 * bytes, derived per call and wiped after; tokens are issued and checked once per
 * connection, not per frame.
 */
#include "token.h"

#include <errno.h>
#include <jansson.h>
#include <jwt.h>
#include <limits.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_INFO         "spur token v1"
#define TOKEN_SIGN_KEY_LEN 32

const char *token_rc_name(enum token_rc rc)
{
    switch (rc) {
    case TOKEN_OK:
        return "ok";
    case TOKEN_MALFORMED:
        return "malformed";
    case TOKEN_UNKNOWN_KEY:
        return "unknown_key";
    case TOKEN_BAD_SIGNATURE:
        return "bad_signature";
    case TOKEN_EXPIRED:
        return "expired";
    case TOKEN_TOO_LONG:
        return "too_long";
    case TOKEN_INTERNAL:
        return "internal";
    }
    return "unknown";
}

static int signing_key(const struct clusterkey *k, uint8_t out[TOKEN_SIGN_KEY_LEN])
{
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *kctx = kdf != NULL ? EVP_KDF_CTX_new(kdf) : NULL;
    EVP_KDF_free(kdf);
    if (kctx == NULL)
        return -1;
    char digest[] = "SHA256";
    char info[] = TOKEN_INFO;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)k->bytes, k->len),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, sizeof(info) - 1),
        OSSL_PARAM_construct_end()};
    int rc = EVP_KDF_derive(kctx, out, TOKEN_SIGN_KEY_LEN, params) == 1 ? 0 : -1;
    EVP_KDF_CTX_free(kctx);
    return rc;
}

/* A user name as a claim: 1..63 printable ASCII bytes. */
static bool good_user(const char *u)
{
    size_t n = strlen(u);
    if (n == 0 || n >= sizeof(((struct token_claims *)0)->user))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)u[i] <= 0x20 || (unsigned char)u[i] > 0x7e)
            return false;
    return true;
}

enum token_rc token_issue(const struct keyring *kr, const char *user, uint64_t now_s,
                          uint32_t lifespan_s, char **out)
{
    *out = NULL;
    if (kr == NULL || kr->n == 0)
        return TOKEN_UNKNOWN_KEY;
    if (user == NULL || !good_user(user) || lifespan_s == 0 ||
        now_s > (uint64_t)LONG_MAX - lifespan_s)
        return TOKEN_MALFORMED;
    const struct clusterkey *k = &kr->keys[0];
    uint8_t sk[TOKEN_SIGN_KEY_LEN];
    if (signing_key(k, sk) != 0)
        return TOKEN_INTERNAL;
    jwt_t *j = NULL;
    enum token_rc rc = TOKEN_INTERNAL;
    if (jwt_new(&j) == 0 && jwt_set_alg(j, JWT_ALG_HS256, sk, sizeof(sk)) == 0 &&
        jwt_add_header(j, "kid", k->id_hex) == 0 && jwt_add_grant(j, "sun", user) == 0 &&
        jwt_add_grant_int(j, "iat", (long)now_s) == 0 &&
        jwt_add_grant_int(j, "exp", (long)(now_s + lifespan_s)) == 0) {
        *out = jwt_encode_str(j); /* malloc'd by libjwt */
        if (*out != NULL)
            rc = TOKEN_OK;
    }
    jwt_free(j); /* libjwt wipes and frees its copy of the key */
    OPENSSL_cleanse(sk, sizeof(sk));
    return rc;
}

/* The key whose id_hex is kid, or NULL. */
static const struct clusterkey *find_kid(const struct keyring *kr, const char *kid)
{
    if (kid == NULL || strlen(kid) != 2 * CLUSTERKEY_ID_LEN)
        return NULL;
    for (size_t i = 0; i < kr->n; i++)
        if (strcmp(kr->keys[i].id_hex, kid) == 0)
            return &kr->keys[i];
    return NULL;
}

/* An integer claim of j's verified claims, >= 0. */
static bool get_uint(json_t *claims, const char *name, uint64_t *v)
{
    json_t *x = json_object_get(claims, name);
    if (x == NULL || !json_is_integer(x) || json_integer_value(x) < 0)
        return false;
    *v = (uint64_t)json_integer_value(x);
    return true;
}

static enum token_rc read_claims(jwt_t *j, struct token_claims *claims)
{
    char *text = jwt_get_grants_json(j, NULL); /* malloc'd by libjwt */
    if (text == NULL)
        return TOKEN_MALFORMED;
    json_t *all = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    free(text);
    if (all == NULL)
        return TOKEN_MALFORMED;
    enum token_rc rc = TOKEN_MALFORMED;
    json_t *sun = json_object_get(all, "sun");
    uint64_t iat = 0, exp = 0;
    if (json_is_object(all) && sun != NULL && json_is_string(sun) &&
        good_user(json_string_value(sun)) && get_uint(all, "iat", &iat) &&
        get_uint(all, "exp", &exp) && iat <= exp) {
        snprintf(claims->user, sizeof(claims->user), "%s", json_string_value(sun));
        claims->issued_s = iat;
        claims->expires_s = exp;
        rc = TOKEN_OK;
    }
    json_decref(all);
    return rc;
}

enum token_rc token_verify(const struct keyring *kr, const char *token, uint64_t now_s,
                           struct token_claims *claims)
{
    memset(claims, 0, sizeof(*claims));
    if (token == NULL)
        return TOKEN_MALFORMED;
    size_t n = strnlen(token, TOKEN_MAX_LEN);
    if (n >= TOKEN_MAX_LEN)
        return TOKEN_TOO_LONG;
    if (n == 0)
        return TOKEN_MALFORMED;

    /* 1: the unverified header, only to choose the key. */
    jwt_t *j = NULL;
    if (jwt_decode(&j, token, NULL, 0) != 0 || j == NULL)
        return TOKEN_MALFORMED;
    const struct clusterkey *k = find_kid(kr, jwt_get_header(j, "kid"));
    jwt_free(j);
    j = NULL;
    if (k == NULL)
        return TOKEN_UNKNOWN_KEY;

    /* 2: verified under that key; from here on the token is believed. */
    uint8_t sk[TOKEN_SIGN_KEY_LEN];
    if (signing_key(k, sk) != 0)
        return TOKEN_INTERNAL;
    int drc = jwt_decode(&j, token, sk, sizeof(sk));
    OPENSSL_cleanse(sk, sizeof(sk));
    if (drc != 0 || j == NULL)
        return drc == ENOMEM ? TOKEN_INTERNAL : TOKEN_BAD_SIGNATURE;
    enum token_rc rc = TOKEN_OK;
    const char *kid = jwt_get_header(j, "kid");
    if (jwt_get_alg(j) != JWT_ALG_HS256)
        rc = TOKEN_BAD_SIGNATURE;
    else if (kid == NULL || strcmp(kid, k->id_hex) != 0)
        rc = TOKEN_MALFORMED; /* cannot happen: the same header was just verified */
    else
        rc = read_claims(j, claims);
    jwt_free(j);
    if (rc != TOKEN_OK) {
        memset(claims, 0, sizeof(*claims));
        return rc;
    }
    snprintf(claims->key_id, sizeof(claims->key_id), "%s", k->id_hex);
    if (now_s >= claims->expires_s)
        return TOKEN_EXPIRED;
    return TOKEN_OK;
}
