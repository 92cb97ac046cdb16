/*
 * fuzz_token.c - token_verify() on arbitrary bytes.
 *
 * The input, cut at its first NUL, is the token; it is checked against the key of the seed
 * corpus (tests/fuzz/corpus/token), at a fixed "now" before the seeds' expiry. A token
 * that verifies (only a seed, or a seed with a change libjwt's base64 decoding ignores)
 * must carry a user name, times in order and the key's id, and must verify again the same
 * way; a refusal must leave the claims zeroed (an expired token keeps them, for the log).
 */
#define FUZZ_NAME "fuzz_token"
#include "fuzz_check.h"

#include "token.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_KEY "spur-fuzz-key-0123456789abcdef!!"
#define FUZZ_NOW 1700000000u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 1);
    CHECK(t != NULL);
    memcpy(t, data, size);
    t[size] = '\0';

    struct keyring kr;
    struct clusterkey k;
    char err[256];
    memset(&kr, 0, sizeof(kr));
    CHECK(clusterkey_from_bytes(&k, FUZZ_KEY, 32, "fuzz", err, sizeof(err)) == 0);
    CHECK(keyring_add(&kr, &k) == 0);

    struct token_claims c, again;
    enum token_rc rc = token_verify(&kr, t, FUZZ_NOW, &c);
    CHECK(strcmp(token_rc_name(rc), "unknown") != 0);
    if (strlen(t) >= TOKEN_MAX_LEN)
        CHECK(rc == TOKEN_TOO_LONG);
    if (rc == TOKEN_OK || rc == TOKEN_EXPIRED) {
        CHECK(c.user[0] != '\0');
        CHECK(c.issued_s <= c.expires_s);
        CHECK(strcmp(c.key_id, k.id_hex) == 0);
        CHECK(rc == TOKEN_EXPIRED ? FUZZ_NOW >= c.expires_s : FUZZ_NOW < c.expires_s);
        CHECK(token_verify(&kr, t, FUZZ_NOW, &again) == rc);
        CHECK(memcmp(&c, &again, sizeof(c)) == 0);
    } else {
        static const struct token_claims zero;
        CHECK(memcmp(&c, &zero, sizeof(c)) == 0);
    }
    keyring_wipe(&kr);
    free(t);
    return 0;
}
