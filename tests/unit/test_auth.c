/*
 * test_auth.c - who asks (raftd/auth.c): identities, operators, the caller put on a
 * request, token checks, scontrol token's answer, and the MUNGE thread.
 *
 * Pinned here: a local-socket uid without a passwd entry is named by its number while a
 * MUNGE one is refused; operator is root, controller.admin_users, or a member of
 * controller.admin_group by primary gid or by the group's member list (getgrouplist);
 * auth_set_caller() replaces a forged caller and user with malloc'd ones that
 * free_unpacked() frees (ASan sees the rest); a token verifies into its user's identity,
 * an expired one, a forged one or one for a user this host does not know are refused
 * with their reasons; scontrol token's rules (default and maximum lifespan, another user
 * for operators only, the user must exist, no caller -> UNAUTHENTICATED); the MUNGE
 * thread answers on the loop, refuses past its queue, and cancels at free what it never
 * decoded. When munged runs (MUNGE_SOCKET or libmunge's default socket), a real
 * credential goes through the thread too.
 */
#include "auth.h"
#include "check_run.h"
#include "clusterkey.h"
#include "test_loop.h"
#include "token.h"
#include "wire.h"

#include <check.h>
#include <grp.h>
#include <munge.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void make_key(struct keyring *kr, uint8_t fill)
{
    memset(kr, 0, sizeof(*kr));
    uint8_t bytes[32];
    memset(bytes, fill, sizeof(bytes));
    struct clusterkey k;
    char err[256];
    ck_assert_msg(clusterkey_from_bytes(&k, bytes, sizeof(bytes), "test", err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert_int_eq(keyring_add(kr, &k), 0);
}

static struct auth_policy policy(const struct keyring *kr)
{
    return (struct auth_policy){.cluster_name = "spur",
                                .munge = "auto",
                                .token_lifespan_s = 1800,
                                .max_token_lifespan_s = 7200,
                                .kr = kr};
}

/* A uid that no passwd entry has (none of these is taken on a test host). */
static uid_t unknown_uid(void)
{
    for (uid_t u = 3999999; u < 4000100; u++)
        if (getpwuid(u) == NULL)
            return u;
    ck_abort_msg("no free uid");
    return 0;
}

START_TEST(test_names)
{
    ck_assert_str_eq(auth_method_name(AUTH_SOCKET), "socket");
    ck_assert_str_eq(auth_method_name(AUTH_MEMBER), "member");
    ck_assert_str_eq(auth_fail_name(AUTH_FAIL_EXPIRED), "expired");
    ck_assert_str_eq(auth_fail_name(AUTH_FAIL_MEMBER), "member");
    ck_assert_str_eq(auth_fail_name(AUTH_NFAILS), "?");
}
END_TEST

START_TEST(test_munge_payload)
{
    ck_assert(auth_munge_payload_ok("spur", "spur:spur", 9));
    ck_assert(!auth_munge_payload_ok("spur", "spur:spur\n", 10));
    ck_assert(!auth_munge_payload_ok("spur", "spur:spu", 8));
    ck_assert(!auth_munge_payload_ok("spur", "spur:other", 10));
    ck_assert(!auth_munge_payload_ok("spur", "xpur:spur", 9));
    ck_assert(!auth_munge_payload_ok("spur", NULL, 0));
    ck_assert(!auth_munge_payload_ok("spur", "", 0));
}
END_TEST

START_TEST(test_identity_of_uid)
{
    struct auth_policy p = policy(NULL);
    struct auth_id id;
    char why[256];
    /* This process: its name from the passwd database. */
    struct passwd *pw = getpwuid(getuid());
    ck_assert_ptr_nonnull(pw);
    ck_assert_int_eq(auth_id_from_uid(&p, getuid(), getgid(), AUTH_SOCKET, &id, why, sizeof(why)),
                     0);
    ck_assert_str_eq(id.user, pw->pw_name);
    ck_assert_uint_eq(id.uid, getuid());
    ck_assert_uint_eq(id.gid, getgid());
    ck_assert_str_eq(id.method, "socket");
    ck_assert(id.is_operator == (getuid() == 0));
    /* No passwd entry: the socket names it by number, MUNGE refuses it. */
    uid_t u = unknown_uid();
    char num[32];
    snprintf(num, sizeof(num), "%u", (unsigned)u);
    ck_assert_int_eq(auth_id_from_uid(&p, u, 4242, AUTH_SOCKET, &id, why, sizeof(why)), 0);
    ck_assert_str_eq(id.user, num);
    ck_assert(!id.is_operator);
    ck_assert_int_eq(auth_id_from_uid(&p, u, 4242, AUTH_MUNGE, &id, why, sizeof(why)), -1);
    ck_assert_ptr_nonnull(strstr(why, "has no passwd entry"));
    /* By name: uid and gid from the entry; an unknown name is refused. */
    ck_assert_int_eq(auth_id_from_name(&p, "nobody", AUTH_TOKEN, &id, why, sizeof(why)), 0);
    struct passwd *nb = getpwnam("nobody");
    ck_assert_uint_eq(id.uid, nb->pw_uid);
    ck_assert_uint_eq(id.gid, nb->pw_gid);
    ck_assert_str_eq(id.method, "token");
    ck_assert(!id.is_operator);
    ck_assert_int_eq(auth_id_from_name(&p, "no-such-user-spur", AUTH_TOKEN, &id, why, sizeof(why)),
                     -1);
    ck_assert_str_eq(why, "user no-such-user-spur does not exist on this host");
    /* A member. */
    auth_id_member("agent", &id);
    ck_assert_str_eq(id.user, "spur:agent");
    ck_assert_str_eq(id.method, "agent");
    ck_assert_uint_eq(id.uid, 0);
    ck_assert(id.is_operator);
}
END_TEST

/* A user other than root, with its uid, gid and the name of its primary group. */
struct someone {
    char name[64];
    uid_t uid;
    gid_t gid;
    char group[64];
};

static void someone(struct someone *s)
{
    /* The test's own identity when it is not root; else nobody. */
    struct passwd *pw = getuid() != 0 ? getpwuid(getuid()) : getpwnam("nobody");
    ck_assert_ptr_nonnull(pw);
    snprintf(s->name, sizeof(s->name), "%s", pw->pw_name);
    s->uid = pw->pw_uid;
    s->gid = pw->pw_gid;
    struct group *gr = getgrgid(s->gid);
    ck_assert_ptr_nonnull(gr);
    snprintf(s->group, sizeof(s->group), "%s", gr->gr_name);
}

START_TEST(test_operator)
{
    struct someone u;
    someone(&u);
    struct auth_policy p = policy(NULL);
    ck_assert(auth_is_operator(&p, "root", 0, 0));
    ck_assert(!auth_is_operator(&p, u.name, u.uid, u.gid));
    /* admin_users by name. */
    const char *admins[] = {"alice", u.name};
    p.admin_users = admins;
    p.nadmin_users = 2;
    ck_assert(auth_is_operator(&p, u.name, u.uid, u.gid));
    p.nadmin_users = 1;
    ck_assert(!auth_is_operator(&p, u.name, u.uid, u.gid));
    /* admin_group by the primary gid. */
    p.admin_group = u.group;
    ck_assert(auth_is_operator(&p, u.name, u.uid, u.gid));
    p.admin_group = "no-such-group-spur";
    ck_assert(!auth_is_operator(&p, u.name, u.uid, u.gid));
    p.admin_group = "";
    ck_assert(!auth_is_operator(&p, u.name, u.uid, u.gid));
    /* admin_group by the group's member list: any supplementary membership this host has. */
    setgrent();
    struct group *gr;
    bool tried = false;
    char gname[64], uname[64];
    while (!tried && (gr = getgrent()) != NULL) {
        for (char **m = gr->gr_mem; m && *m && !tried; m++) {
            struct passwd *pw = getpwnam(*m);
            if (pw == NULL || pw->pw_uid == 0 || pw->pw_gid == gr->gr_gid)
                continue;
            snprintf(gname, sizeof(gname), "%s", gr->gr_name);
            snprintf(uname, sizeof(uname), "%s", pw->pw_name);
            uid_t uid = pw->pw_uid;
            gid_t gid = pw->pw_gid;
            p.admin_group = gname;
            ck_assert_msg(auth_is_operator(&p, uname, uid, gid), "%s in %s", uname, gname);
            tried = true;
        }
    }
    endgrent();
    /* ...and someone not in it is not. */
    if (tried)
        ck_assert(!auth_is_operator(&p, "no-such-user-spur", 4000001, 4000001));
}
END_TEST

START_TEST(test_set_caller_replaces)
{
    /* A request as a client might forge it: a caller of its own and another user. */
    Spur__Api__Caller forged = SPUR__API__CALLER__INIT;
    forged.user = (char *)"root";
    forged.uid = 0;
    forged.operator_ = 1;
    forged.method = (char *)"socket";
    Spur__Api__Credential cred = SPUR__API__CREDENTIAL__INIT;
    cred.kind_case = SPUR__API__CREDENTIAL__KIND_TOKEN;
    cred.token = (char *)"abc";
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request in = SPUR__API__REQUEST__INIT;
    in.user = (char *)"root";
    in.caller = &forged;
    in.credential = &cred;
    in.op_case = SPUR__API__REQUEST__OP_PING;
    in.ping = &ping;
    uint8_t buf[512];
    size_t n = spur__api__request__pack(&in, buf);
    Spur__Api__Request *req = spur__api__request__unpack(NULL, n, buf);
    ck_assert_ptr_nonnull(req);
    struct auth_id id = {.user = "mallory", .uid = 4321, .gid = 99, .method = "token"};
    ck_assert_int_eq(auth_set_caller(req, &id), 0);
    auth_drop_credential(req);
    ck_assert_ptr_null(req->credential);
    ck_assert_str_eq(req->caller->user, "mallory");
    ck_assert_uint_eq(req->caller->uid, 4321);
    ck_assert_uint_eq(req->caller->gid, 99);
    ck_assert(!req->caller->operator_);
    ck_assert_str_eq(req->caller->method, "token");
    ck_assert_str_eq(req->user, "mallory");
    /* Packed again and read back: what a forwarded request carries. */
    n = spur__api__request__pack(req, buf);
    Spur__Api__Request *again = spur__api__request__unpack(NULL, n, buf);
    ck_assert_ptr_nonnull(again);
    ck_assert_str_eq(again->caller->user, "mallory");
    ck_assert_ptr_null(again->credential);
    /* A member's forwarded caller is kept; user follows it. */
    ck_assert_int_eq(auth_keep_caller(again), 0);
    ck_assert_str_eq(again->user, "mallory");
    /* No identity: caller NULL, user "". Twice is harmless. */
    auth_clear_caller(again);
    auth_clear_caller(again);
    ck_assert_ptr_null(again->caller);
    ck_assert_str_eq(again->user, "");
    spur__api__request__free_unpacked(again, NULL);
    /* On a request whose user was never set (the empty default is not freed). */
    Spur__Api__Request blank = SPUR__API__REQUEST__INIT;
    blank.op_case = SPUR__API__REQUEST__OP_PING;
    blank.ping = &ping;
    n = spur__api__request__pack(&blank, buf);
    Spur__Api__Request *b = spur__api__request__unpack(NULL, n, buf);
    ck_assert_int_eq(auth_set_caller(b, &id), 0);
    ck_assert_int_eq(auth_set_caller(b, &id), 0); /* replaces its own */
    spur__api__request__free_unpacked(b, NULL);
    spur__api__request__free_unpacked(req, NULL);
}
END_TEST

START_TEST(test_check_token)
{
    struct keyring kr, other;
    make_key(&kr, 1);
    make_key(&other, 2);
    struct auth_policy p = policy(&kr);
    uint64_t now = (uint64_t)time(NULL);
    char *tok = NULL;
    ck_assert_int_eq(token_issue(&kr, "nobody", now, 60, &tok), TOKEN_OK);
    struct auth_id id;
    enum auth_fail f;
    char why[256];
    ck_assert_int_eq(auth_check_token(&p, tok, now, &id, &f, why, sizeof(why)), 0);
    ck_assert_str_eq(id.user, "nobody");
    ck_assert_uint_eq(id.uid, getpwnam("nobody")->pw_uid);
    ck_assert_str_eq(id.method, "token");
    ck_assert_uint_eq(id.until_s, now + 60); /* the connection's proof ends with the token */
    /* At and after its expiry. */
    ck_assert_int_eq(auth_check_token(&p, tok, now + 60, &id, &f, why, sizeof(why)), -1);
    ck_assert_int_eq(f, AUTH_FAIL_EXPIRED);
    ck_assert_str_eq(why, "expired");
    /* Signed under another cluster's key. */
    struct auth_policy po = policy(&other);
    ck_assert_int_eq(auth_check_token(&po, tok, now, &id, &f, why, sizeof(why)), -1);
    ck_assert_int_eq(f, AUTH_FAIL_INVALID);
    /* No key loaded. */
    struct auth_policy pn = policy(NULL);
    ck_assert_int_eq(auth_check_token(&pn, tok, now, &id, &f, why, sizeof(why)), -1);
    ck_assert_int_eq(f, AUTH_FAIL_DISABLED);
    free(tok);
    /* Garbage. */
    ck_assert_int_eq(auth_check_token(&p, "not.a.token", now, &id, &f, why, sizeof(why)), -1);
    ck_assert_int_eq(f, AUTH_FAIL_INVALID);
    /* A valid token for a user this host does not know. */
    ck_assert_int_eq(token_issue(&kr, "no-such-user-spur", now, 60, &tok), TOKEN_OK);
    ck_assert_int_eq(auth_check_token(&p, tok, now, &id, &f, why, sizeof(why)), -1);
    ck_assert_int_eq(f, AUTH_FAIL_UNKNOWN_USER);
    free(tok);
    keyring_wipe(&kr);
    keyring_wipe(&other);
}
END_TEST

START_TEST(test_token_answer)
{
    struct keyring kr;
    make_key(&kr, 3);
    struct auth_policy p = policy(&kr);
    uint64_t now = (uint64_t)time(NULL);
    Spur__Api__Caller user = SPUR__API__CALLER__INIT;
    user.user = (char *)"nobody";
    user.uid = getpwnam("nobody")->pw_uid;
    user.method = (char *)"token";
    Spur__Api__Caller op = SPUR__API__CALLER__INIT;
    op.user = (char *)"root";
    op.operator_ = 1;
    op.method = (char *)"socket";
    Spur__Api__TokenRequest tr = SPUR__API__TOKEN_REQUEST__INIT;
    char *tok = NULL;
    char name[64], msg[256];
    uint64_t exp = 0;

    /* The caller's own, default lifespan. */
    ck_assert_int_eq(
        auth_token_answer(&p, &user, &tr, now, &tok, name, sizeof(name), &exp, msg, sizeof(msg)),
        SPUR__API__CODE__CODE_OK);
    ck_assert_str_eq(name, "nobody");
    ck_assert_uint_eq(exp, now + 1800);
    struct token_claims cl;
    ck_assert_int_eq(token_verify(&kr, tok, now, &cl), TOKEN_OK);
    ck_assert_str_eq(cl.user, "nobody");
    ck_assert_uint_eq(cl.expires_s, now + 1800);
    free(tok);
    /* Over the maximum: INVALID naming the limit; at it: granted. */
    tr.lifespan_s = 7201;
    ck_assert_int_eq(
        auth_token_answer(&p, &user, &tr, now, &tok, name, sizeof(name), &exp, msg, sizeof(msg)),
        SPUR__API__CODE__CODE_INVALID);
    ck_assert_str_eq(msg,
                     "lifespan 7201 s is over the limit of 7200 s (auth.max_token_lifespan_s)");
    ck_assert_ptr_null(tok);
    tr.lifespan_s = 7200;
    ck_assert_int_eq(
        auth_token_answer(&p, &user, &tr, now, &tok, name, sizeof(name), &exp, msg, sizeof(msg)),
        SPUR__API__CODE__CODE_OK);
    ck_assert_uint_eq(exp, now + 7200);
    free(tok);
    /* Another user: operators only. */
    tr.lifespan_s = 0;
    tr.username = (char *)"root";
    ck_assert_int_eq(
        auth_token_answer(&p, &user, &tr, now, &tok, name, sizeof(name), &exp, msg, sizeof(msg)),
        SPUR__API__CODE__CODE_DENIED);
    ck_assert_str_eq(msg, "Access/permission denied");
    tr.username = (char *)"nobody";
    ck_assert_int_eq(
        auth_token_answer(&p, &op, &tr, now, &tok, name, sizeof(name), &exp, msg, sizeof(msg)),
        SPUR__API__CODE__CODE_OK);
    ck_assert_str_eq(name, "nobody");
    free(tok);
    /* A user this host does not know. */
    tr.username = (char *)"no-such-user-spur";
    ck_assert_int_eq(
        auth_token_answer(&p, &op, &tr, now, &tok, name, sizeof(name), &exp, msg, sizeof(msg)),
        SPUR__API__CODE__CODE_NOT_FOUND);
    /* No caller: an unauthenticated connection. */
    ck_assert_int_eq(
        auth_token_answer(&p, NULL, &tr, now, &tok, name, sizeof(name), &exp, msg, sizeof(msg)),
        SPUR__API__CODE__CODE_UNAUTHENTICATED);
    ck_assert_str_eq(msg, "not authenticated");
    keyring_wipe(&kr);
}
END_TEST

/* ---- the MUNGE thread ------------------------------------------------------------------ */

struct answers {
    unsigned n, cancelled;
    struct auth_munge_result last;
};

static void on_answer(void *arg, const struct auth_munge_result *res)
{
    struct answers *a = arg;
    a->n++;
    if (res == NULL)
        a->cancelled++;
    else
        a->last = *res;
}

/* A Unix socket the test listens on and never answers: munge_decode() waits on it. */
static int fake_munged(char *path, size_t len)
{
    snprintf(path, len, "/tmp/spur-test-munge-%d.sock", (int)getpid());
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&un, sizeof(un)), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    return fd;
}

START_TEST(test_munge_thread_no_munged)
{
    /* munged is not at this path: the thread answers with the failure, on the loop. */
    struct test_loop l;
    test_loop_init(&l);
    struct auth_policy p = policy(NULL);
    p.munge_socket = "/nonexistent/spur-test/munge.socket";
    char why[256];
    struct auth_munge *m = auth_munge_new(l.base, &p, 0, why, sizeof(why));
    ck_assert_msg(m != NULL, "%s", why);
    struct answers a = {0};
    ck_assert_int_eq(auth_munge_submit(m, "MUNGE:garbage:", on_answer, &a), 0);
    ck_assert(test_loop_until(&l, &a.n, 1, 10000));
    ck_assert_uint_eq(a.cancelled, 0);
    ck_assert(!a.last.ok);
    ck_assert_msg(a.last.fail == AUTH_FAIL_MUNGE || a.last.fail == AUTH_FAIL_INVALID, "fail %d %s",
                  a.last.fail, a.last.why);
    ck_assert_str_ne(a.last.why, "");
    auth_munge_free(m);
    ck_assert_uint_eq(a.n, 1);
    test_loop_free(&l);
}
END_TEST

START_TEST(test_munge_thread_queue_full_and_cancel)
{
    struct test_loop l;
    test_loop_init(&l);
    char path[108];
    int lfd = fake_munged(path, sizeof(path));
    struct auth_policy p = policy(NULL);
    p.munge_socket = path;
    char why[256];
    struct auth_munge *m = auth_munge_new(l.base, &p, 1, why, sizeof(why));
    ck_assert_msg(m != NULL, "%s", why);
    struct answers a = {0};
    ck_assert_int_eq(auth_munge_submit(m, "MUNGE:one:", on_answer, &a), 0);
    /* The thread took it: it is connected to the fake munged, waiting for an answer. */
    int cfd = -1;
    for (int i = 0; i < 300 && cfd < 0; i++) {
        cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
        if (cfd < 0)
            usleep(10000);
    }
    ck_assert_int_ge(cfd, 0);
    /* One more fits the queue (1); the next is refused at once. */
    ck_assert_int_eq(auth_munge_submit(m, "MUNGE:two:", on_answer, &a), 0);
    ck_assert_int_eq(auth_munge_submit(m, "MUNGE:three:", on_answer, &a), -1);
    test_loop_run(&l, 50);
    ck_assert_uint_eq(a.n, 0); /* nothing answered while munged is silent */
    /* munged goes away: the first fails; free cancels whatever the thread did not take. */
    close(cfd);
    close(lfd);
    unlink(path);
    ck_assert(test_loop_until(&l, &a.n, 1, 10000));
    ck_assert(!a.last.ok);
    auth_munge_free(m);
    ck_assert_uint_eq(a.n, 2); /* every job answered exactly once, decoded or cancelled */
    test_loop_free(&l);
}
END_TEST

/* The socket munged listens on, or NULL when none runs here. */
static const char *munged_socket(void)
{
    const char *s = getenv("MUNGE_SOCKET");
    if (s && s[0])
        return s;
    struct stat st;
    static const char *const paths[] = {"/run/munge/munge.socket.2",
                                        "/var/run/munge/munge.socket.2"};
    for (size_t i = 0; i < 2; i++)
        if (stat(paths[i], &st) == 0 && S_ISSOCK(st.st_mode))
            return paths[i];
    return NULL;
}

START_TEST(test_munge_real)
{
    const char *sock = munged_socket();
    if (sock == NULL) {
        fprintf(stderr, "test_munge_real: munged is not running here; skipped\n");
        return;
    }
    munge_ctx_t ctx = munge_ctx_create();
    ck_assert_int_eq(munge_ctx_set(ctx, MUNGE_OPT_SOCKET, sock), EMUNGE_SUCCESS);
    char *good = NULL, *other = NULL;
    ck_assert_int_eq(munge_encode(&good, ctx, "spur:spur", 9), EMUNGE_SUCCESS);
    ck_assert_int_eq(munge_encode(&other, ctx, "spur:else", 9), EMUNGE_SUCCESS);
    munge_ctx_destroy(ctx);

    struct test_loop l;
    test_loop_init(&l);
    struct auth_policy p = policy(NULL);
    p.munge_socket = sock;
    char why[256];
    struct auth_munge *m = auth_munge_new(l.base, &p, 0, why, sizeof(why));
    ck_assert_msg(m != NULL, "%s", why);
    struct answers a = {0};
    ck_assert_int_eq(auth_munge_submit(m, good, on_answer, &a), 0);
    ck_assert(test_loop_until(&l, &a.n, 1, 10000));
    ck_assert_msg(a.last.ok, "%s", a.last.why);
    ck_assert_uint_eq(a.last.id.uid, getuid());
    ck_assert_str_eq(a.last.id.method, "munge");
    /* The same credential again: munged says replayed. */
    ck_assert_int_eq(auth_munge_submit(m, good, on_answer, &a), 0);
    ck_assert(test_loop_until(&l, &a.n, 2, 10000));
    ck_assert(!a.last.ok);
    ck_assert_int_eq(a.last.fail, AUTH_FAIL_REPLAYED);
    /* Another cluster's payload. */
    ck_assert_int_eq(auth_munge_submit(m, other, on_answer, &a), 0);
    ck_assert(test_loop_until(&l, &a.n, 3, 10000));
    ck_assert(!a.last.ok);
    ck_assert_int_eq(a.last.fail, AUTH_FAIL_INVALID);
    auth_munge_free(m);
    free(good);
    free(other);
    test_loop_free(&l);
}
END_TEST

static Suite *auth_suite(void)
{
    Suite *s = suite_create("auth");
    check_case(s, "identity",
               (const TTest *[]){test_names, test_munge_payload, test_identity_of_uid,
                                 test_operator, test_set_caller_replaces, NULL});
    check_case(s, "tokens", (const TTest *[]){test_check_token, test_token_answer, NULL});
    TCase *tc = check_case(s, "munge",
                           (const TTest *[]){test_munge_thread_no_munged,
                                             test_munge_thread_queue_full_and_cancel,
                                             test_munge_real, NULL});
    tcase_set_timeout(tc, 60);
    return s;
}

int main(void)
{
    return check_run(auth_suite());
}
