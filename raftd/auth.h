/*
 * auth.h - who asks on the client API: the identities api.c puts on requests, the checks
 * of the credentials users send (tokens, MUNGE), scontrol token's answer, and the one
 * thread that talks to munged.
 *
 * Guarantees:
 *   - An identity (struct auth_id) is computed once per connection from what the kernel
 *     (SO_PEERCRED), a verified token or a verified MUNGE credential said, never from what
 *     the client claims. The user name comes from the passwd database: a token or MUNGE
 *     user this host does not know is refused; a local-socket uid without a passwd entry
 *     is named by its number ("1234"), since the kernel vouches for it anyway.
 *   - operator = uid 0, or the user is in controller.admin_users, or the user is a member
 *     of controller.admin_group (its primary gid, or getgrouplist()). Nothing is cached:
 *     each connection asks the passwd and group databases afresh, so a change there
 *     counts from the next connection.
 *   - Failures say why in words for the log (why) and in a reason for the metrics
 *     (enum auth_fail); the client is never told more than "not authenticated" (api.c).
 *   - munge_decode() blocks while it asks munged, so it runs on one thread of its own
 *     (struct auth_munge) fed by a bounded queue; answers come back on the event loop
 *     through a pipe, and the loop never waits for munged. A full queue is refused at
 *     once (AUTH_FAIL_BUSY). A MUNGE credential is accepted only when munge_decode()
 *     accepts it (so a replayed or expired one is refused, libmunge says so) and its
 *     payload is exactly "spur:<cluster_name>".
 *
 * Ownership: struct auth_policy borrows every string and the keyring; they must outlive
 * every user of the policy (the configuration and the keyring outlive the replica).
 * auth_set_caller() allocates with malloc/strdup, so protobuf-c's free_unpacked() frees
 * what it put on the request. struct auth_munge owns its thread, its pipe, its MUNGE
 * context and its queued jobs; auth_munge_free() joins the thread and calls back every
 * job that has not been answered, with a NULL result.
 */
#ifndef SPUR_AUTH_H
#define SPUR_AUTH_H

#include "clusterkey.h"
#include "spur.pb-c.h"

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum auth_method { AUTH_SOCKET = 0, AUTH_TOKEN, AUTH_MUNGE, AUTH_MEMBER, AUTH_NMETHODS };
/* "socket", "token", "munge", "member" (the metrics label). */
const char *auth_method_name(enum auth_method m);

/* Why a connection was not authenticated (the metrics label in parentheses). */
enum auth_fail {
    AUTH_FAIL_MISSING = 0,  /* a request without a credential ("missing") */
    AUTH_FAIL_EXPIRED,      /* a token or MUNGE credential past its life ("expired") */
    AUTH_FAIL_INVALID,      /* malformed, unknown key, bad signature ("invalid") */
    AUTH_FAIL_REPLAYED,     /* a MUNGE credential used before ("replayed") */
    AUTH_FAIL_UNKNOWN_USER, /* verified, but no such user on this host ("unknown_user") */
    AUTH_FAIL_DISABLED,     /* MUNGE with auth.munge off, a token with no key ("disabled") */
    AUTH_FAIL_MUNGE,        /* munged unreachable or refusing, other than the above ("munge") */
    AUTH_FAIL_BUSY,         /* the MUNGE queue is full ("busy") */
    AUTH_FAIL_MEMBER,       /* a cluster member's handshake or frame MAC failed ("member") */
    AUTH_NFAILS
};
const char *auth_fail_name(enum auth_fail f);

struct auth_policy {
    const char *cluster_name;
    const char *const *admin_users; /* controller.admin_users */
    size_t nadmin_users;
    const char *admin_group;  /* "" or NULL: none */
    const char *munge;        /* auth.munge: "auto", "on" or "off" */
    const char *munge_socket; /* "" or NULL: libmunge's default */
    uint32_t token_lifespan_s;
    uint32_t max_token_lifespan_s;
    const struct keyring *kr; /* NULL: no tokens, no members */
};

#define AUTH_USER_MAX   64
#define AUTH_METHOD_MAX 24

struct auth_id {
    char user[AUTH_USER_MAX];
    uint32_t uid, gid;
    bool is_operator;
    char method[AUTH_METHOD_MAX]; /* "socket", "token", "munge", or the member's role */
    uint64_t until_s;             /* a token's "exp": the identity holds until then; 0: for good */
};

/* Whether this user is an operator under p (see above). Reads the group database. */
bool auth_is_operator(const struct auth_policy *p, const char *user, uid_t uid, gid_t gid);

/*
 * The identity of uid/gid proved by method (socket, munge): the name from getpwuid_r().
 * No passwd entry: for AUTH_SOCKET the number is the name; otherwise -1 with why.
 */
int auth_id_from_uid(const struct auth_policy *p, uid_t uid, gid_t gid, enum auth_method m,
                     struct auth_id *out, char *why, size_t whylen);
/* The identity of a user known by name (a token's "sun"): uid/gid from getpwnam_r(). */
int auth_id_from_name(const struct auth_policy *p, const char *name, enum auth_method m,
                      struct auth_id *out, char *why, size_t whylen);
/* A cluster member of this role: {"spur:<role>", 0, 0, operator, "<role>"}. */
void auth_id_member(const char *role, struct auth_id *out);

/* Verify a token at now_s (wall clock). Returns 0 with *out, or -1 with *fail and why. */
int auth_check_token(const struct auth_policy *p, const char *token, uint64_t now_s,
                     struct auth_id *out, enum auth_fail *fail, char *why, size_t whylen);
/* Whether a MUNGE credential's payload is exactly "spur:<cluster_name>". Pure. */
bool auth_munge_payload_ok(const char *cluster_name, const void *payload, size_t len);

/*
 * Put id on req: req->caller replaced (the old one freed) by a malloc'd Caller, and
 * req->user replaced by id's user. Returns 0, or -1 when out of memory (req unchanged
 * or with its old caller freed and NULL: the caller must not dispatch it then).
 */
int auth_set_caller(Spur__Api__Request *req, const struct auth_id *id);
/* A request forwarded by a member keeps its caller: req->user becomes its user. */
int auth_keep_caller(Spur__Api__Request *req);
/* No identity (a Ping on an unauthenticated connection): caller NULL, user "". */
void auth_clear_caller(Spur__Api__Request *req);
/* Drop req->credential (it is not forwarded). */
void auth_drop_credential(Spur__Api__Request *req);

/*
 * scontrol token for caller (NULL: an unauthenticated connection) at now_s: the code of
 * the answer; CODE_OK with *token (malloc'd, the caller's), user and *expires_s, else msg.
 *   lifespan 0 -> auth.token_lifespan_s; over auth.max_token_lifespan_s -> INVALID naming
 *   the limit; username "" -> the caller; another user -> operators only (DENIED); the
 *   user must exist here (NOT_FOUND); no caller -> UNAUTHENTICATED.
 */
Spur__Api__Code auth_token_answer(const struct auth_policy *p, const Spur__Api__Caller *caller,
                                  const Spur__Api__TokenRequest *tr, uint64_t now_s, char **token,
                                  char *user, size_t userlen, uint64_t *expires_s, char *msg,
                                  size_t msglen);

/* ---- the MUNGE thread ---------------------------------------------------------------- */

struct auth_munge;

struct auth_munge_result {
    bool ok;
    struct auth_id id;   /* ok */
    enum auth_fail fail; /* !ok */
    char why[256];       /* !ok: for the log */
};
/* On the loop thread. res NULL: the module is being freed and the job was never decoded. */
typedef void (*auth_munge_cb)(void *arg, const struct auth_munge_result *res);

#define AUTH_MUNGE_QUEUE 256

/*
 * Start the thread (queue_max 0: AUTH_MUNGE_QUEUE) on base. p is borrowed. Returns NULL
 * with why when the MUNGE context, the pipe or the thread cannot be made.
 */
struct auth_munge *auth_munge_new(struct event_base *base, const struct auth_policy *p,
                                  unsigned queue_max, char *why, size_t whylen);
/* Queue a credential (copied). Returns 0, or -1 when the queue is full or out of memory. */
int auth_munge_submit(struct auth_munge *m, const char *cred, auth_munge_cb cb, void *arg);
/* Stop and join the thread; every job not answered yet gets cb(arg, NULL). */
void auth_munge_free(struct auth_munge *m);

#endif
