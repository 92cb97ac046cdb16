/*
 * auth.c - identities, credential checks and the MUNGE thread; contract in auth.h.
 *
 * The MUNGE thread: the loop thread pushes jobs on a queue under a mutex and signals a
 * condition; the thread pops one, calls munge_decode() (which blocks on munged), computes
 * the identity (the passwd and group look-ups happen there too, off the loop), pushes the
 * result on a done list and writes one byte to a pipe. The loop reads the pipe, takes the
 * whole done list under the mutex and calls the callbacks outside it. Nothing but the two
 * lists and the stop flag is shared, and only under the mutex.
 */
#include "auth.h"

#include "token.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <munge.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NSS_BUF    16384 /* getpw*_r / getgr*_r buffer; a larger entry gets ERANGE -> retried */
#define MAX_GROUPS 1024

const char *auth_method_name(enum auth_method m)
{
    static const char *const names[AUTH_NMETHODS] = {"socket", "token", "munge", "member"};
    return (unsigned)m < AUTH_NMETHODS ? names[m] : "?";
}

const char *auth_fail_name(enum auth_fail f)
{
    static const char *const names[AUTH_NFAILS] = {"missing",  "expired",      "invalid",
                                                   "replayed", "unknown_user", "disabled",
                                                   "munge",    "busy",         "member"};
    return (unsigned)f < AUTH_NFAILS ? names[f] : "?";
}

/* ---- the passwd and group databases --------------------------------------------------- */

/*
 * getpwnam_r / getpwuid_r with a buffer that grows on ERANGE. Returns 1 found, 0 no such
 * entry, -1 a lookup error (errno). On 1, name (when not NULL) gets the login name.
 */
static int pw_lookup(const char *byname, uid_t byuid, uid_t *uid, gid_t *gid, char *name,
                     size_t namelen)
{
    size_t len = NSS_BUF;
    for (int tries = 0; tries < 4; tries++, len *= 4) {
        char *buf = malloc(len);
        if (buf == NULL)
            return -1;
        struct passwd pw, *res = NULL;
        int rc = byname ? getpwnam_r(byname, &pw, buf, len, &res)
                        : getpwuid_r(byuid, &pw, buf, len, &res);
        if (rc == 0 && res != NULL) {
            if (uid)
                *uid = pw.pw_uid;
            if (gid)
                *gid = pw.pw_gid;
            if (name)
                snprintf(name, namelen, "%s", pw.pw_name);
            free(buf);
            return 1;
        }
        free(buf);
        if (rc == ERANGE)
            continue;
        /* Not found is 0 with res NULL, or one of these by glibc's own account. */
        if (rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM)
            return 0;
        errno = rc;
        return -1;
    }
    errno = ERANGE;
    return -1;
}

/* The gid of the group named name: 1 found, 0 none, -1 error. */
static int gr_lookup(const char *name, gid_t *gid)
{
    size_t len = NSS_BUF;
    for (int tries = 0; tries < 4; tries++, len *= 4) {
        char *buf = malloc(len);
        if (buf == NULL)
            return -1;
        struct group gr, *res = NULL;
        int rc = getgrnam_r(name, &gr, buf, len, &res);
        if (rc == 0 && res != NULL) {
            *gid = gr.gr_gid;
            free(buf);
            return 1;
        }
        free(buf);
        if (rc == ERANGE)
            continue;
        return rc == 0 || rc == ENOENT ? 0 : -1;
    }
    return -1;
}

/* Whether user (primary gid gid) belongs to group want, by getgrouplist(). */
static bool in_group(const char *user, gid_t gid, gid_t want)
{
    if (gid == want)
        return true;
    gid_t groups[MAX_GROUPS];
    int n = MAX_GROUPS;
    if (getgrouplist(user, gid, groups, &n) < 0)
        n = MAX_GROUPS; /* more groups than room: look at the first MAX_GROUPS */
    for (int i = 0; i < n && i < MAX_GROUPS; i++)
        if (groups[i] == want)
            return true;
    return false;
}

bool auth_is_operator(const struct auth_policy *p, const char *user, uid_t uid, gid_t gid)
{
    if (uid == 0)
        return true;
    for (size_t i = 0; i < p->nadmin_users; i++)
        if (p->admin_users[i] && strcmp(p->admin_users[i], user) == 0)
            return true;
    if (p->admin_group == NULL || p->admin_group[0] == '\0')
        return false;
    gid_t want;
    if (gr_lookup(p->admin_group, &want) != 1)
        return false; /* a group this host does not know has no members here */
    return in_group(user, gid, want);
}

int auth_id_from_uid(const struct auth_policy *p, uid_t uid, gid_t gid, enum auth_method m,
                     struct auth_id *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof(*out));
    int rc = pw_lookup(NULL, uid, NULL, NULL, out->user, sizeof(out->user));
    if (rc < 0) {
        snprintf(why, whylen, "passwd lookup of uid %u failed: %s", (unsigned)uid, strerror(errno));
        return -1;
    }
    if (rc == 0) {
        if (m != AUTH_SOCKET) {
            snprintf(why, whylen, "uid %u has no passwd entry on this host", (unsigned)uid);
            return -1;
        }
        snprintf(out->user, sizeof(out->user), "%u", (unsigned)uid);
    }
    out->uid = uid;
    out->gid = gid;
    out->is_operator = auth_is_operator(p, out->user, uid, gid);
    snprintf(out->method, sizeof(out->method), "%s", auth_method_name(m));
    return 0;
}

int auth_id_from_name(const struct auth_policy *p, const char *name, enum auth_method m,
                      struct auth_id *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof(*out));
    uid_t uid;
    gid_t gid;
    int rc = name[0] ? pw_lookup(name, 0, &uid, &gid, out->user, sizeof(out->user)) : 0;
    if (rc < 0) {
        snprintf(why, whylen, "passwd lookup of user %.64s failed: %s", name, strerror(errno));
        return -1;
    }
    if (rc == 0) {
        snprintf(why, whylen, "user %.64s does not exist on this host", name);
        return -1;
    }
    out->uid = uid;
    out->gid = gid;
    out->is_operator = auth_is_operator(p, out->user, uid, gid);
    snprintf(out->method, sizeof(out->method), "%s", auth_method_name(m));
    return 0;
}

void auth_id_member(const char *role, struct auth_id *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->user, sizeof(out->user), "spur:%s", role);
    out->is_operator = true;
    snprintf(out->method, sizeof(out->method), "%s", role);
}

/* ---- credentials ------------------------------------------------------------------------ */

int auth_check_token(const struct auth_policy *p, const char *token, uint64_t now_s,
                     struct auth_id *out, enum auth_fail *fail, char *why, size_t whylen)
{
    if (p->kr == NULL || p->kr->n == 0) {
        *fail = AUTH_FAIL_DISABLED;
        snprintf(why, whylen, "no cluster key loaded: tokens cannot be verified");
        return -1;
    }
    struct token_claims cl;
    enum token_rc rc = token_verify(p->kr, token, now_s, &cl);
    if (rc != TOKEN_OK) {
        *fail = rc == TOKEN_EXPIRED ? AUTH_FAIL_EXPIRED : AUTH_FAIL_INVALID;
        snprintf(why, whylen, "%s", rc == TOKEN_EXPIRED ? "expired" : token_rc_name(rc));
        return -1;
    }
    if (auth_id_from_name(p, cl.user, AUTH_TOKEN, out, why, whylen) != 0) {
        *fail = AUTH_FAIL_UNKNOWN_USER;
        return -1;
    }
    out->until_s = cl.expires_s;
    return 0;
}

bool auth_munge_payload_ok(const char *cluster_name, const void *payload, size_t len)
{
    size_t cl = strlen(cluster_name);
    return payload != NULL && len == 5 + cl && memcmp(payload, "spur:", 5) == 0 &&
           memcmp((const char *)payload + 5, cluster_name, cl) == 0;
}

/* The string replaced in a field protobuf-c owns: its default is never freed. */
static void replace_string(char **field, char *s)
{
    if (*field && *field != protobuf_c_empty_string)
        free(*field);
    *field = s;
}

int auth_set_caller(Spur__Api__Request *req, const struct auth_id *id)
{
    if (req->caller) {
        spur__api__caller__free_unpacked(req->caller, NULL);
        req->caller = NULL;
    }
    Spur__Api__Caller *c = malloc(sizeof(*c));
    char *user = strdup(id->user);
    char *cuser = strdup(id->user);
    char *method = strdup(id->method);
    if (c == NULL || user == NULL || cuser == NULL || method == NULL) {
        free(c);
        free(user);
        free(cuser);
        free(method);
        return -1;
    }
    spur__api__caller__init(c);
    c->user = cuser;
    c->uid = id->uid;
    c->gid = id->gid;
    c->operator_ = id->is_operator;
    c->method = method;
    req->caller = c;
    replace_string(&req->user, user);
    return 0;
}

int auth_keep_caller(Spur__Api__Request *req)
{
    char *user = strdup(req->caller->user ? req->caller->user : "");
    if (user == NULL)
        return -1;
    replace_string(&req->user, user);
    return 0;
}

void auth_clear_caller(Spur__Api__Request *req)
{
    if (req->caller) {
        spur__api__caller__free_unpacked(req->caller, NULL);
        req->caller = NULL;
    }
    replace_string(&req->user, (char *)protobuf_c_empty_string);
}

void auth_drop_credential(Spur__Api__Request *req)
{
    if (req->credential) {
        spur__api__credential__free_unpacked(req->credential, NULL);
        req->credential = NULL;
    }
}

Spur__Api__Code auth_token_answer(const struct auth_policy *p, const Spur__Api__Caller *caller,
                                  const Spur__Api__TokenRequest *tr, uint64_t now_s, char **token,
                                  char *user, size_t userlen, uint64_t *expires_s, char *msg,
                                  size_t msglen)
{
    *token = NULL;
    if (caller == NULL) {
        snprintf(msg, msglen, "not authenticated");
        return SPUR__API__CODE__CODE_UNAUTHENTICATED;
    }
    uint32_t life = tr && tr->lifespan_s ? tr->lifespan_s : p->token_lifespan_s;
    if (life > p->max_token_lifespan_s) {
        snprintf(msg, msglen, "lifespan %u s is over the limit of %u s (auth.max_token_lifespan_s)",
                 life, p->max_token_lifespan_s);
        return SPUR__API__CODE__CODE_INVALID;
    }
    const char *want = tr && tr->username && tr->username[0] ? tr->username : caller->user;
    if (strcmp(want, caller->user) != 0 && !caller->operator_) {
        snprintf(msg, msglen, "Access/permission denied");
        return SPUR__API__CODE__CODE_DENIED;
    }
    int rc = pw_lookup(want, 0, NULL, NULL, user, userlen);
    if (rc < 0) {
        snprintf(msg, msglen, "passwd lookup of user %.64s failed: %s", want, strerror(errno));
        return SPUR__API__CODE__CODE_INTERNAL;
    }
    if (rc == 0) {
        snprintf(msg, msglen, "user %.64s not found on this host", want);
        return SPUR__API__CODE__CODE_NOT_FOUND;
    }
    if (p->kr == NULL || p->kr->n == 0) {
        snprintf(msg, msglen, "no cluster key loaded: tokens cannot be issued");
        return SPUR__API__CODE__CODE_UNAVAILABLE;
    }
    enum token_rc trc = token_issue(p->kr, user, now_s, life, token);
    if (trc != TOKEN_OK) {
        snprintf(msg, msglen, "token: %s", token_rc_name(trc));
        return SPUR__API__CODE__CODE_INTERNAL;
    }
    *expires_s = now_s + life;
    return SPUR__API__CODE__CODE_OK;
}

/* ---- the MUNGE thread ------------------------------------------------------------------ */

struct mjob {
    struct mjob *next;
    char *cred;
    auth_munge_cb cb;
    void *arg;
    struct auth_munge_result res;
};

/*
 * Ownership: everything below is the module's. queue (FIFO, head/tail) holds the jobs
 * waiting for the thread, done those it answered; the job the thread works on belongs to
 * it until it moves it to done. Both lists, nqueued and stop are guarded by mu.
 */
struct auth_munge {
    const struct auth_policy *p;
    munge_ctx_t ctx; /* the thread's alone once it runs */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct mjob *qhead, *qtail, *done;
    unsigned nqueued, queue_max;
    bool stop;
    int pipe_r, pipe_w;
    struct event *ev;
};

static void decode_one(struct auth_munge *m, struct mjob *j)
{
    struct auth_munge_result *r = &j->res;
    void *buf = NULL;
    int len = 0;
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    munge_err_t e = munge_decode(j->cred, m->ctx, &buf, &len, &uid, &gid);
    r->ok = false;
    if (e != EMUNGE_SUCCESS) {
        r->fail = e == EMUNGE_CRED_REPLAYED  ? AUTH_FAIL_REPLAYED
                  : e == EMUNGE_CRED_EXPIRED ? AUTH_FAIL_EXPIRED
                  : e == EMUNGE_CRED_INVALID || e == EMUNGE_BAD_CRED || e == EMUNGE_CRED_REWOUND
                      ? AUTH_FAIL_INVALID
                      : AUTH_FAIL_MUNGE;
        const char *s = munge_ctx_strerror(m->ctx);
        snprintf(r->why, sizeof(r->why), "%s", s ? s : munge_strerror(e));
    } else if (!auth_munge_payload_ok(m->p->cluster_name, buf, len > 0 ? (size_t)len : 0)) {
        r->fail = AUTH_FAIL_INVALID;
        snprintf(r->why, sizeof(r->why), "payload is not \"spur:%s\"", m->p->cluster_name);
    } else if (auth_id_from_uid(m->p, uid, gid, AUTH_MUNGE, &r->id, r->why, sizeof(r->why)) != 0) {
        r->fail = AUTH_FAIL_UNKNOWN_USER;
    } else {
        r->ok = true;
    }
    free(buf); /* allocated even for some errors (libmunge) */
}

static void *munge_thread(void *arg)
{
    struct auth_munge *m = arg;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        while (m->qhead == NULL && !m->stop)
            pthread_cond_wait(&m->cv, &m->mu);
        if (m->stop)
            break;
        struct mjob *j = m->qhead;
        m->qhead = j->next;
        if (m->qhead == NULL)
            m->qtail = NULL;
        m->nqueued--;
        pthread_mutex_unlock(&m->mu);
        decode_one(m, j);
        pthread_mutex_lock(&m->mu);
        j->next = m->done;
        m->done = j;
        /* The loop drains every byte and the whole list: a full pipe loses nothing. */
        char one = 1;
        ssize_t w = write(m->pipe_w, &one, 1);
        (void)w;
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

static void job_free(struct mjob *j)
{
    free(j->cred);
    free(j);
}

/* Answers in the order they were decoded: reverse the done list, which is newest first. */
static void deliver(struct mjob *list, bool cancelled)
{
    struct mjob *rev = NULL;
    while (list) {
        struct mjob *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    while (rev) {
        struct mjob *n = rev->next;
        rev->cb(rev->arg, cancelled ? NULL : &rev->res);
        job_free(rev);
        rev = n;
    }
}

static void on_pipe(evutil_socket_t fd, short what, void *arg)
{
    struct auth_munge *m = arg;
    (void)what;
    char sink[256];
    while (read(fd, sink, sizeof(sink)) > 0)
        ;
    pthread_mutex_lock(&m->mu);
    struct mjob *list = m->done;
    m->done = NULL;
    pthread_mutex_unlock(&m->mu);
    deliver(list, false);
}

struct auth_munge *auth_munge_new(struct event_base *base, const struct auth_policy *p,
                                  unsigned queue_max, char *why, size_t whylen)
{
    struct auth_munge *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(why, whylen, "auth: out of memory");
        return NULL;
    }
    m->p = p;
    m->queue_max = queue_max ? queue_max : AUTH_MUNGE_QUEUE;
    m->pipe_r = m->pipe_w = -1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->ctx = munge_ctx_create();
    if (m->ctx == NULL) {
        snprintf(why, whylen, "auth: munge_ctx_create failed");
        goto fail;
    }
    if (p->munge_socket && p->munge_socket[0] &&
        munge_ctx_set(m->ctx, MUNGE_OPT_SOCKET, p->munge_socket) != EMUNGE_SUCCESS) {
        snprintf(why, whylen, "auth: munge socket %s: %s", p->munge_socket,
                 munge_ctx_strerror(m->ctx));
        goto fail;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(why, whylen, "auth: pipe: %s", strerror(errno));
        goto fail;
    }
    m->pipe_r = fds[0];
    m->pipe_w = fds[1];
    m->ev = event_new(base, m->pipe_r, EV_READ | EV_PERSIST, on_pipe, m);
    if (m->ev == NULL || event_add(m->ev, NULL) != 0) {
        snprintf(why, whylen, "auth: out of memory");
        goto fail;
    }
    int rc = pthread_create(&m->thread, NULL, munge_thread, m);
    if (rc != 0) {
        snprintf(why, whylen, "auth: MUNGE thread: %s", strerror(rc));
        goto fail;
    }
    m->started = true;
    return m;
fail:
    auth_munge_free(m);
    return NULL;
}

int auth_munge_submit(struct auth_munge *m, const char *cred, auth_munge_cb cb, void *arg)
{
    struct mjob *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return -1;
    j->cred = strdup(cred);
    j->cb = cb;
    j->arg = arg;
    if (j->cred == NULL) {
        free(j);
        return -1;
    }
    pthread_mutex_lock(&m->mu);
    if (m->nqueued >= m->queue_max || m->stop) {
        pthread_mutex_unlock(&m->mu);
        job_free(j);
        return -1;
    }
    if (m->qtail)
        m->qtail->next = j;
    else
        m->qhead = j;
    m->qtail = j;
    m->nqueued++;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    return 0;
}

void auth_munge_free(struct auth_munge *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (m->started)
        pthread_join(m->thread, NULL);
    /* The thread is gone: what it answered is delivered, what it never took is cancelled. */
    struct mjob *done = m->done;
    m->done = NULL;
    deliver(done, false);
    struct mjob *q = m->qhead, *rev = NULL;
    m->qhead = m->qtail = NULL;
    while (q) { /* deliver() reverses: hand it the queue newest first */
        struct mjob *n = q->next;
        q->next = rev;
        rev = q;
        q = n;
    }
    deliver(rev, true);
    if (m->ev)
        event_free(m->ev);
    if (m->pipe_r >= 0)
        close(m->pipe_r);
    if (m->pipe_w >= 0)
        close(m->pipe_w);
    if (m->ctx)
        munge_ctx_destroy(m->ctx);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
