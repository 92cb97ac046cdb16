/*
 * token.h - tokens for automation (scontrol token, SPUR_JWT): JSON Web Tokens signed with
 * HS256 by libjwt, the library Slurm's auth/jwt uses, never a hand-written one.
 *
 * A token's claims are those of Slurm's tokens: "sun" (the user name), "iat" and "exp"
 * (Unix seconds); its header carries "kid", the id of the cluster key (clusterkey.h) that
 * signed it. The signing key is not the cluster key itself but
 * HKDF-SHA-256(cluster key, info = "spur token v1"), so a token never exposes a key the
 * channels use.
 *
 * Guarantees:
 *   - token_issue() signs with the keyring's current key.
 *   - token_verify() accepts a token only when its kid names a key of the ring, its
 *     signature verifies under it (libjwt checks the algorithm is HS256), it has "sun",
 *     "iat" and "exp", and now < exp; the error says which failed. Tokens of 8 KiB or more
 *     are refused unread.
 *   - No clock is read: now is the caller's.
 */
#ifndef SPUR_TOKEN_H
#define SPUR_TOKEN_H

#include "clusterkey.h"

#include <stddef.h>
#include <stdint.h>

#define TOKEN_MAX_LEN 8192

enum token_rc {
    TOKEN_OK = 0,
    TOKEN_MALFORMED = -1, /* not a JWT, or claims missing or of the wrong type */
    TOKEN_UNKNOWN_KEY = -2,
    TOKEN_BAD_SIGNATURE = -3,
    TOKEN_EXPIRED = -4,
    TOKEN_TOO_LONG = -5,
    TOKEN_INTERNAL = -6,
};
const char *token_rc_name(enum token_rc rc);

/*
 * A token for user, valid from now for lifespan_s seconds; *out malloc'd (free()).
 * TOKEN_MALFORMED for a user name that is empty, over 63 bytes or holds anything but
 * printable ASCII without spaces, or a lifespan of 0.
 */
enum token_rc token_issue(const struct keyring *kr, const char *user, uint64_t now_s,
                          uint32_t lifespan_s, char **out);

struct token_claims {
    char user[64];
    uint64_t issued_s, expires_s;
    char key_id[2 * CLUSTERKEY_ID_LEN + 1];
};
/*
 * Check token (a C string). TOKEN_OK fills claims; so does TOKEN_EXPIRED (the signature
 * verified, so the user is worth a log line); any other rc leaves claims zeroed.
 */
enum token_rc token_verify(const struct keyring *kr, const char *token, uint64_t now_s,
                           struct token_claims *claims);

#endif
