/*
 * spurclient.c - blocking client for the client API; contract in spurclient.h.
 *
 * One connection at a time. What a connection is decides what goes on it: a Unix socket
 * sends requests as they are (the kernel names the caller); a TCP connection of a user
 * proves itself in its first request that is not a Ping (prove_first()); a connection in
 * cluster-key mode does chan.h's handshake first (handshake()) and seals every frame.
 * Everything that belongs to a connection (its frame reader, its channel, whether it has
 * proved itself) goes with it in disconnect().
 */
#include "spurclient.h"

#include "chan.h"
#include "frame.h"
#include "netaddr.h"
#include "strv.h"
#include "util.h"
#include "wire.h"

#include <errno.h>
#include <munge.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <openssl/crypto.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct spurclient {
    char **hosts;
    size_t nhosts;
    size_t cur; /* index of the host to try first */
    char *cluster_name;
    char *user;
    uint32_t timeout_ms;
    uint32_t max_frame;
    uint64_t client_id;
    uint64_t seq;
    uint64_t next_request_id;
    int fd;                 /* connection, -1 when none */
    char fd_target[300];    /* host:port the connection goes to */
    struct frame_reader rd; /* bytes read from fd, not yet taken as frames; emptied with it */
    char last_ok[300];
    char leader[300]; /* the leader's address as last reported, tried first */
    /* Credentials of a user on TCP (spurclient.h). */
    char *token;        /* owned, wiped by spurclient_free(); NULL: none */
    bool munge;         /* no token: a MUNGE credential per connection */
    char *munge_socket; /* owned; NULL: libmunge's default */
    char *local_socket; /* owned; NULL: none to suggest */
    /* Cluster-key mode. */
    const struct keyring *kr; /* borrowed; NULL: a user client */
    char role[CHAN_ROLE_MAX];
    /* The current connection's state, reset by disconnect(). */
    bool fd_unix;   /* fd is a Unix socket */
    bool fd_proved; /* a credential went out on fd */
    bool ch_live;   /* ch was set up for fd (cluster-key mode) */
    struct chan ch;
};

/* Wipe and free a string that held a secret. */
static void free_secret(char *s)
{
    if (s != NULL) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

static char *dup_or_null(const char *s)
{
    return s != NULL && s[0] != '\0' ? strdup(s) : NULL;
}

bool spurclient_host_is_unix(const char *host, const char **path)
{
    if (strncmp(host, "unix:", 5) == 0) {
        *path = host + 5;
        return true;
    }
    if (host[0] == '/') {
        *path = host;
        return true;
    }
    return false;
}

static uint64_t random_u64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = (uint64_t)getpid() << 32 ^ mono_ns();
    return v ? v : 1;
}

char **spurclient_hosts_parse(const char *list, size_t *n)
{
    size_t cap = 4, k = 0;
    char **v = calloc(cap + 1, sizeof(char *));
    char *copy = strdup(list ? list : "");
    if (v == NULL || copy == NULL) {
        free(v);
        free(copy);
        *n = 0;
        return NULL;
    }
    char *save = NULL;
    for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        if (k == cap) {
            char **nv = realloc(v, (cap * 2 + 1) * sizeof(char *));
            if (nv == NULL)
                break;
            v = nv;
            cap *= 2;
        }
        v[k++] = strdup(t);
    }
    v[k] = NULL;
    free(copy);
    *n = k;
    return v;
}

void spurclient_hosts_free(char **v, size_t n)
{
    strv_free(v, n);
}

struct spurclient *spurclient_new(const struct spurclient_options *o)
{
    struct spurclient *c = calloc(1, sizeof(*c));
    if (c == NULL || o->nhosts == 0)
        goto fail;
    c->hosts = calloc(o->nhosts, sizeof(char *));
    if (c->hosts == NULL)
        goto fail;
    for (size_t i = 0; i < o->nhosts; i++) {
        c->hosts[i] = strdup(o->hosts[i]);
        if (c->hosts[i] == NULL)
            goto fail;
        c->nhosts++;
    }
    /* "": not known yet; the first answer names it (learn_cluster()). */
    c->cluster_name = strdup(o->cluster_name ? o->cluster_name : "");
    const char *user = o->user;
    if (user == NULL) {
        struct passwd *pw = getpwuid(getuid());
        user = pw ? pw->pw_name : "unknown";
    }
    c->user = strdup(user);
    if (c->cluster_name == NULL || c->user == NULL)
        goto fail;
    c->token = dup_or_null(o->token);
    c->munge_socket = dup_or_null(o->munge_socket);
    c->local_socket = dup_or_null(o->local_socket);
    if ((o->token && o->token[0] && c->token == NULL) ||
        (o->munge_socket && o->munge_socket[0] && c->munge_socket == NULL) ||
        (o->local_socket && o->local_socket[0] && c->local_socket == NULL))
        goto fail;
    c->munge = o->munge;
    if (o->keyring != NULL) {
        /* The handshake names the cluster and this side's role: both must be known. */
        if (c->cluster_name[0] == '\0' || o->role == NULL || o->role[0] == '\0' ||
            strlen(o->role) >= sizeof(c->role))
            goto fail;
        c->kr = o->keyring;
        snprintf(c->role, sizeof(c->role), "%s", o->role);
    }
    c->timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
    c->max_frame = o->max_frame ? o->max_frame : SPUR_DEFAULT_MAX_FRAME;
    frame_reader_init(&c->rd, c->max_frame);
    c->client_id = random_u64();
    c->next_request_id = random_u64() >> 16;
    c->fd = -1;
    return c;
fail:
    spurclient_free(c);
    return NULL;
}

static void disconnect(struct spurclient *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->fd_target[0] = '\0';
    frame_reader_free(&c->rd); /* what was read belongs to that connection */
    if (c->ch_live)
        chan_free(&c->ch); /* its keys too */
    c->ch_live = false;
    c->fd_unix = false;
    c->fd_proved = false;
}

void spurclient_free(struct spurclient *c)
{
    if (c == NULL)
        return;
    disconnect(c);
    spurclient_hosts_free(c->hosts, c->nhosts);
    free(c->cluster_name);
    free(c->user);
    free_secret(c->token);
    free(c->munge_socket);
    free(c->local_socket);
    free(c);
}

const char *spurclient_current_host(const struct spurclient *c)
{
    return c->last_ok[0] ? c->last_ok : NULL;
}

uint32_t spurclient_set_timeout(struct spurclient *c, uint32_t timeout_ms)
{
    uint32_t old = c->timeout_ms;
    c->timeout_ms = timeout_ms ? timeout_ms : 10000;
    return old;
}

uint64_t spurclient_client_id(const struct spurclient *c)
{
    return c->client_id;
}

const char *spurclient_cluster_name(const struct spurclient *c)
{
    return c->cluster_name[0] ? c->cluster_name : NULL;
}

/* Take the cluster name a replica's answer carries, the first time one does. */
static int adopt_cluster(struct spurclient *c, const spurclient_response *r)
{
    if (c->cluster_name[0] != '\0' || r->cluster_name == NULL || r->cluster_name[0] == '\0')
        return 0;
    char *name = strdup(r->cluster_name);
    if (name == NULL)
        return -1;
    free(c->cluster_name);
    c->cluster_name = name;
    return 0;
}

void spurclient_response_free(spurclient_response *r)
{
    if (r)
        spur__api__response__free_unpacked(r, NULL);
}

static int remaining_ms(uint64_t deadline)
{
    uint64_t now = mono_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Wait for a non-blocking connect() to finish. Returns 0, or -1 with err. */
static int connect_wait(int fd, const char *target, uint64_t deadline, char *err, size_t errlen)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r = poll(&p, 1, remaining_ms(deadline));
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
        return 0;
    snprintf(err, errlen, "%s: connect: %s", target,
             r == 0 ? "timed out" : strerror(soerr ? soerr : errno));
    return -1;
}

/* Connect to the Unix socket at path before the deadline. */
static int dial_unix(const char *target, const char *path, uint64_t deadline, char *err,
                     size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (path[0] == '\0' || strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(err, errlen, "%s: not a socket path (1 to %zu bytes)", target,
                 sizeof(sa.sun_path) - 1);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(err, errlen, "%s: socket: %s", target, strerror(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        return fd;
    if (errno == EINPROGRESS && connect_wait(fd, target, deadline, err, errlen) == 0)
        return fd;
    if (errno != EINPROGRESS)
        snprintf(err, errlen, "%s: connect: %s", target, strerror(errno));
    close(fd);
    return -1;
}

/*
 * Connect to target before the deadline: a Unix socket ("unix:/path", "/path"), else
 * host:port (brackets for IPv6). *is_unix says which it was.
 */
static int dial(const char *target, uint64_t deadline, bool *is_unix, char *err, size_t errlen)
{
    const char *path = NULL;
    *is_unix = spurclient_host_is_unix(target, &path);
    if (*is_unix)
        return dial_unix(target, path, deadline, err, errlen);
    /* The configuration's grammar (netaddr): a port is 1..65535, and nothing follows it. */
    char host[256], port[8];
    uint16_t portnum;
    if (netaddr_split_hostport(target, host, sizeof(host), &portnum) != 0) {
        snprintf(err, errlen, "%s: not HOST:PORT", target);
        return -1;
    }
    snprintf(port, sizeof(port), "%u", (unsigned)portnum);

    struct addrinfo hints = {
        .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "%s: cannot resolve: %s", target, gai_strerror(gai));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS) {
            if (connect_wait(fd, target, deadline, err, errlen) == 0)
                break;
        } else {
            snprintf(err, errlen, "%s: connect: %s", target, strerror(errno));
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    return fd;
}

static int send_all(int fd, const uint8_t *p, size_t n, uint64_t deadline)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            if (poll(&pf, 1, remaining_ms(deadline)) <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            continue;
        }
        return -1;
    }
    return 0;
}

/*
 * Read what the socket has into the frame reader, waiting for it until the deadline.
 * Returns 0, 1 with errno set (ECONNRESET at end of stream, ETIMEDOUT), or the reader's
 * FRAME_TOO_BIG (a buffered header announces more than max_frame) or FRAME_NOMEM.
 */
static int read_some(struct spurclient *c, uint64_t deadline)
{
    uint8_t *p = NULL;
    size_t space = 0;
    int rc = frame_reader_space(&c->rd, 4096, &p, &space);
    if (rc != 0)
        return rc;
    for (;;) {
        ssize_t r = recv(c->fd, p, space, 0);
        if (r > 0) {
            frame_reader_commit(&c->rd, (size_t)r);
            return 0;
        }
        if (r == 0) {
            errno = ECONNRESET;
            return 1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            struct pollfd pf = {.fd = c->fd, .events = POLLIN};
            if (poll(&pf, 1, remaining_ms(deadline)) <= 0) {
                errno = ETIMEDOUT;
                return 1;
            }
            continue;
        }
        return 1;
    }
}

/*
 * Send one frame: payload, sealed with the channel's trailer when seal and the
 * connection has an established channel. Returns 0, or -1 with errno set.
 */
static int send_frame(struct spurclient *c, const uint8_t *payload, size_t n, bool seal,
                      uint64_t deadline)
{
    seal = seal && c->ch_live && chan_established(&c->ch);
    size_t total = n + (seal ? CHAN_TRAILER_LEN : 0);
    uint8_t *buf = malloc(FRAME_HEADER_LEN + total);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    frame_put_header(buf, (uint32_t)total);
    memcpy(buf + FRAME_HEADER_LEN, payload, n);
    if (seal && chan_seal(&c->ch, payload, n, buf + FRAME_HEADER_LEN + n) != CHAN_OK) {
        OPENSSL_cleanse(buf, FRAME_HEADER_LEN + total);
        free(buf);
        errno = EPROTO;
        return -1;
    }
    int rc = send_all(c->fd, buf, FRAME_HEADER_LEN + total, deadline);
    int e = errno;
    OPENSSL_cleanse(buf, FRAME_HEADER_LEN + total); /* it may hold a credential */
    free(buf);
    errno = e;
    return rc;
}

/*
 * The next whole frame's payload (valid until the reader is used again). Returns 0, -1
 * (connection trouble: try elsewhere) or -2 (give up), with err.
 */
static int read_frame(struct spurclient *c, uint64_t deadline, const uint8_t **payload, size_t *len,
                      char *err, size_t errlen)
{
    for (;;) {
        int st = frame_reader_next(&c->rd, payload, len);
        if (st == FRAME_READY)
            return 0;
        if (st == FRAME_NEED_MORE) {
            st = read_some(c, deadline);
            if (st == 0)
                continue;
            if (st == 1) {
                if (frame_reader_buffered(&c->rd) < FRAME_HEADER_LEN)
                    snprintf(err, errlen, "%s: no answer: %s", c->fd_target, strerror(errno));
                else
                    snprintf(err, errlen, "%s: answer cut short: %s", c->fd_target,
                             strerror(errno));
                return -1;
            }
        }
        if (st == FRAME_TOO_BIG) {
            /* Every replica would give the same answer: asking the next one only costs. */
            snprintf(err, errlen,
                     "%s: answer of %u bytes is over the %u-byte limit "
                     "(controller.max_frame_bytes)",
                     c->fd_target, (uint32_t)c->rd.last_len, c->max_frame);
            return -2;
        }
        snprintf(err, errlen, "out of memory");
        return -2;
    }
}

/*
 * Cluster-key mode: chan.h's handshake as the initiator on the new connection. Returns 0
 * (established), -1 (connection trouble: try elsewhere) or -2 (the replica refused us, or
 * we it: every replica of the cluster holds the same keys, so give up), with err.
 */
static int handshake(struct spurclient *c, uint64_t deadline, char *err, size_t errlen)
{
    if (chan_init(&c->ch, CHAN_INITIATOR, c->kr, c->cluster_name, c->role) != 0) {
        snprintf(err, errlen, "%s: cluster key handshake: %s", c->fd_target, chan_why(&c->ch));
        return -2;
    }
    c->ch_live = true;
    uint8_t *out = NULL;
    size_t outlen = 0;
    enum chan_rc rc = chan_hello(&c->ch, &out, &outlen);
    if (rc != CHAN_OK) {
        snprintf(err, errlen, "%s: cluster key handshake: %s", c->fd_target, chan_why(&c->ch));
        return -2;
    }
    int st = send_frame(c, out, outlen, false, deadline);
    free(out);
    out = NULL;
    if (st != 0) {
        snprintf(err, errlen, "%s: send: %s", c->fd_target, strerror(errno));
        return -1;
    }
    const uint8_t *payload = NULL;
    size_t len = 0;
    st = read_frame(c, deadline, &payload, &len, err, errlen);
    if (st != 0)
        return st;
    rc = chan_take_hello(&c->ch, payload, len, &out, &outlen);
    if (rc != CHAN_OK) {
        free(out);
        snprintf(err, errlen, "%s: cluster key handshake failed: %s (%s)", c->fd_target,
                 chan_why(&c->ch), chan_rc_name(rc));
        /* Not a handshake answer at all (a replica without cluster keys?): another may. */
        return rc == CHAN_BAD_FRAME ? -1 : -2;
    }
    /* The proof goes as it is: the channel is established on our side, not yet on theirs. */
    st = send_frame(c, out, outlen, false, deadline);
    free(out);
    if (st != 0) {
        snprintf(err, errlen, "%s: send: %s", c->fd_target, strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * A MUNGE credential for this connection, payload "spur:<cluster>" (no NUL), *cred
 * malloc'd by libmunge. Returns 0, or -1 with why (munge's own words).
 */
static int make_munge(const struct spurclient *c, char **cred, char *why, size_t whylen)
{
    *cred = NULL;
    if (c->cluster_name[0] == '\0') {
        snprintf(why, whylen, "the cluster name is not known yet");
        return -1;
    }
    char payload[160];
    int n = snprintf(payload, sizeof(payload), "spur:%s", c->cluster_name);
    if (n < 0 || (size_t)n >= sizeof(payload)) {
        snprintf(why, whylen, "cluster name too long");
        return -1;
    }
    munge_ctx_t ctx = munge_ctx_create();
    if (ctx == NULL) {
        snprintf(why, whylen, "%s", munge_strerror(EMUNGE_NO_MEMORY));
        return -1;
    }
    munge_err_t e = EMUNGE_SUCCESS;
    if (c->munge_socket != NULL)
        e = munge_ctx_set(ctx, MUNGE_OPT_SOCKET, c->munge_socket);
    if (e == EMUNGE_SUCCESS)
        e = munge_encode(cred, ctx, payload, n);
    if (e != EMUNGE_SUCCESS) {
        const char *m = munge_ctx_strerror(ctx);
        snprintf(why, whylen, "%s", m ? m : munge_strerror(e));
        free(*cred);
        *cred = NULL;
    }
    munge_ctx_destroy(ctx);
    return e == EMUNGE_SUCCESS ? 0 : -1;
}

/* Does req have to carry this connection's proof (spurclient.h, Credentials)? */
static bool needs_credential(const struct spurclient *c, const spurclient_request *req)
{
    return !c->fd_unix && c->kr == NULL && !c->fd_proved && (c->token != NULL || c->munge) &&
           req->op_case != SPUR__API__REQUEST__OP_PING;
}

/*
 * Could this client prove itself on a TCP connection? A token or a cluster key says yes;
 * MUNGE only when munged makes a credential now (thrown away unused: harmless).
 */
static bool can_prove_on_tcp(const struct spurclient *c)
{
    if (c->kr != NULL || c->token != NULL)
        return true;
    if (!c->munge)
        return false;
    char *cred = NULL;
    char why[200];
    bool ok = make_munge(c, &cred, why, sizeof(why)) == 0;
    free_secret(cred);
    return ok;
}

static int receive(struct spurclient *c, const spurclient_request *req, uint64_t deadline,
                   spurclient_response **resp, char *err, size_t errlen);

/* One exchange on the current connection. Returns 0 with *resp, or -1/-2 with err. */
static int exchange(struct spurclient *c, spurclient_request *req, uint64_t deadline,
                    spurclient_response **resp, char *err, size_t errlen)
{
    Spur__Api__Credential cred = SPUR__API__CREDENTIAL__INIT;
    char *munge_cred = NULL;
    bool prove = needs_credential(c, req);
    if (prove) {
        if (c->token != NULL) {
            cred.kind_case = SPUR__API__CREDENTIAL__KIND_TOKEN;
            cred.token = c->token;
        } else {
            char why[256];
            if (make_munge(c, &munge_cred, why, sizeof(why)) != 0) {
                snprintf(err, errlen,
                         "not authenticated: no credential for %s: munge: %s; set SPUR_JWT "
                         "(scontrol token)%s%s",
                         c->fd_target, why, c->local_socket ? " or use the local socket " : "",
                         c->local_socket ? c->local_socket : "");
                return -2;
            }
            cred.kind_case = SPUR__API__CREDENTIAL__KIND_MUNGE;
            cred.munge = munge_cred;
        }
        req->credential = &cred;
    }
    size_t n = spur__api__request__get_packed_size(req);
    size_t trailer = c->ch_live ? CHAN_TRAILER_LEN : 0;
    size_t limit = c->max_frame > trailer ? c->max_frame - trailer : 0;
    uint8_t *buf = n <= limit ? malloc(n ? n : 1) : NULL;
    if (buf != NULL)
        spur__api__request__pack(req, buf);
    /* The credential lives no longer than the bytes that carry it. */
    req->credential = NULL;
    free_secret(munge_cred);
    if (n > limit) {
        snprintf(err, errlen, "request of %zu bytes is over the %u-byte frame limit", n,
                 c->max_frame);
        return -2;
    }
    if (buf == NULL) {
        snprintf(err, errlen, "out of memory");
        return -2;
    }
    int rc = send_frame(c, buf, n, true, deadline);
    int e = errno;
    OPENSSL_cleanse(buf, n);
    free(buf);
    if (rc != 0) {
        /*
         * A replica that refuses the frame (over its size limit) answers and closes the
         * connection before it has read the rest, so the send fails with a reset. Its
         * answer may still be waiting here, and says more than the reset does.
         */
        if (receive(c, req, deadline, resp, err, errlen) == 0)
            return 0;
        snprintf(err, errlen, "%s: send: %s", c->fd_target, strerror(e));
        return -1;
    }
    if (prove)
        c->fd_proved = true;
    return receive(c, req, deadline, resp, err, errlen);
}

/*
 * Read frames until the answer to req. Returns 0 with *resp, -1 (connection or frame
 * trouble: try elsewhere), or -2 (give up) with err.
 */
static int receive(struct spurclient *c, const spurclient_request *req, uint64_t deadline,
                   spurclient_response **resp, char *err, size_t errlen)
{
    for (;;) {
        const uint8_t *payload = NULL;
        size_t len = 0;
        int st = read_frame(c, deadline, &payload, &len, err, errlen);
        if (st != 0)
            return st;
        if (c->ch_live) {
            enum chan_rc crc = chan_open(&c->ch, payload, len, &len);
            if (crc != CHAN_OK) {
                snprintf(err, errlen, "%s: answer refused by the cluster key channel: %s",
                         c->fd_target, chan_rc_name(crc));
                return -1;
            }
        }
        spurclient_response *r = spur__api__response__unpack(NULL, len, payload);
        if (r == NULL) {
            snprintf(err, errlen, "%s: undecodable answer", c->fd_target);
            return -1;
        }
        /*
         * request_id 0 with an error: the replica could not read a request (too large,
         * undecodable) and closes the connection; that is the answer to the one in
         * flight. Any other id is an answer to an earlier, abandoned request: skip it.
         */
        if (r->request_id != req->request_id &&
            !(r->request_id == 0 && r->code != SPUR__API__CODE__CODE_OK)) {
            spurclient_response_free(r);
            continue;
        }
        if (r->protocol_version != SPUR_PROTOCOL_VERSION &&
            r->code != SPUR__API__CODE__CODE_REFUSED) {
            snprintf(err, errlen, "%s: speaks protocol version %u, this client %u", c->fd_target,
                     r->protocol_version, SPUR_PROTOCOL_VERSION);
            spurclient_response_free(r);
            return -2;
        }
        *resp = r;
        return 0;
    }
}

/*
 * A client that was not told its cluster's name asks the replica with a Ping that names
 * none (the only request a replica answers without one) and keeps the name the answer
 * carries. Every later request, on this or any other connection, names that cluster, so
 * a replica of another cluster further down the host list still refuses it.
 * Returns 0 (learned), 1 with *refusal set (the replica refused: that is the call's
 * answer), -1 (connection trouble: try elsewhere) or -2 (give up), with err.
 */
static int learn_cluster(struct spurclient *c, uint64_t deadline, spurclient_response **refusal,
                         char *err, size_t errlen)
{
    Spur__Api__Request ping_req = SPUR__API__REQUEST__INIT;
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    ping_req.protocol_version = SPUR_PROTOCOL_VERSION;
    ping_req.cluster_name = (char *)"";
    ping_req.user = c->user;
    ping_req.request_id = ++c->next_request_id;
    ping_req.timeout_ms = (uint32_t)remaining_ms(deadline);
    ping_req.op_case = SPUR__API__REQUEST__OP_PING;
    ping_req.ping = &ping;
    spurclient_response *r = NULL;
    int rc = exchange(c, &ping_req, deadline, &r, err, errlen);
    if (rc != 0)
        return rc;
    if (r->code == SPUR__API__CODE__CODE_OK && r->cluster_name && r->cluster_name[0]) {
        rc = adopt_cluster(c, r);
        spurclient_response_free(r);
        if (rc != 0) {
            snprintf(err, errlen, "out of memory");
            return -2;
        }
        return 0;
    }
    if (r->code == SPUR__API__CODE__CODE_OK) {
        snprintf(err, errlen, "%s: the answer names no cluster", c->fd_target);
        spurclient_response_free(r);
        return -1;
    }
    *refusal = r;
    return 1;
}

int spurclient_call(struct spurclient *c, spurclient_request *req, bool write,
                    spurclient_response **resp, char *err, size_t errlen)
{
    uint64_t deadline = mono_ms() + c->timeout_ms;
    char hint[300] = "";
    bool hint_used = false;
    /*
     * Writes go straight to the leader when one is known: a follower would only forward
     * them. Reads stay with the replica chosen (a local read must be answered by it).
     */
    if (write && c->leader[0])
        snprintf(hint, sizeof(hint), "%s", c->leader);
    size_t idx = c->cur;
    size_t misses = 0;
    uint32_t backoff = 10; /* ms; doubles to 250: an election or hand-over takes 0.05-2 s */
    spurclient_response *last = NULL;
    char lasterr[1024] = "no replica tried";

    req->protocol_version = SPUR_PROTOCOL_VERSION;
    req->cluster_name = c->cluster_name;
    req->user = req->user && req->user[0] ? req->user : c->user;
    req->request_id = ++c->next_request_id;
    if (write && req->client_id == 0) {
        req->client_id = c->client_id;
        req->seq = ++c->seq;
    }
    if (req->timeout_ms == 0)
        req->timeout_ms = c->timeout_ms;
    *resp = NULL;

    while (remaining_ms(deadline) > 0) {
        const char *target = hint[0] ? hint : c->hosts[idx % c->nhosts];
        spurclient_response *r = NULL;
        int rc = 0;
        if (c->fd < 0 || strcmp(c->fd_target, target) != 0) {
            disconnect(c);
            bool is_unix = false;
            c->fd = dial(target, deadline, &is_unix, lasterr, sizeof(lasterr));
            if (c->fd < 0) {
                if (strcmp(target, c->leader) == 0)
                    c->leader[0] = '\0'; /* gone: find the leader again */
                hint[0] = '\0';
                goto next_host;
            }
            c->fd_unix = is_unix;
            snprintf(c->fd_target, sizeof(c->fd_target), "%s", target);
            if (c->kr != NULL)
                rc = handshake(c, deadline, lasterr, sizeof(lasterr));
        }
        /* A Ping may go without the name (and its answer brings it); nothing else may. */
        if (rc == 0 && c->cluster_name[0] == '\0' && req->op_case != SPUR__API__REQUEST__OP_PING)
            rc = learn_cluster(c, deadline, &r, lasterr, sizeof(lasterr));
        req->cluster_name = c->cluster_name;
        if (rc == 0) {
            /* Leave room for the server's own time-out to come back as an answer. */
            req->timeout_ms = (uint32_t)remaining_ms(deadline);
            rc = exchange(c, req, deadline, &r, lasterr, sizeof(lasterr));
        } else if (rc == 1) {
            rc = 0; /* the replica's refusal of the Ping is the answer to this call */
        }
        if (rc == -2) {
            /* A definite failure (see receive()): say it as it is. */
            disconnect(c);
            spurclient_response_free(last);
            snprintf(err, errlen, "%s", lasterr);
            return -1;
        }
        if (rc != 0) {
            disconnect(c);
            hint[0] = '\0';
            goto next_host;
        }
        snprintf(c->last_ok, sizeof(c->last_ok), "%s", c->fd_target);
        if (r->code == SPUR__API__CODE__CODE_UNAVAILABLE ||
            r->code == SPUR__API__CODE__CODE_TIMEOUT) {
            spurclient_response_free(last);
            last = r;
            /* On the local socket, a hint is worth following only with a TCP credential. */
            if (r->leader_hint && r->leader_hint[0] && !hint_used &&
                strcmp(r->leader_hint, c->fd_target) != 0 && (!c->fd_unix || can_prove_on_tcp(c))) {
                snprintf(hint, sizeof(hint), "%s", r->leader_hint);
                hint_used = true;
                continue;
            }
            hint[0] = '\0';
            goto next_host;
        }
        if (r->code == SPUR__API__CODE__CODE_OK && adopt_cluster(c, r) != 0) {
            spurclient_response_free(r);
            spurclient_response_free(last);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        /* Any other answer, success or a definite error, is the answer. */
        for (size_t i = 0; i < c->nhosts; i++)
            if (strcmp(c->hosts[i], c->fd_target) == 0)
                c->cur = i;
        /* Writes on the local socket stay there: the replica forwards them. */
        if (r->leader_hint && r->leader_hint[0] && r->leader_id != 0 && !c->fd_unix)
            snprintf(c->leader, sizeof(c->leader), "%s", r->leader_hint);
        if (r->request_id != req->request_id)
            disconnect(c); /* the replica closes after such an answer (receive()) */
        else if (r->code == SPUR__API__CODE__CODE_UNAUTHENTICATED)
            disconnect(c); /* the next call proves itself afresh */
        spurclient_response_free(last);
        *resp = r;
        return 0;
    next_host:
        idx++;
        if (++misses % c->nhosts == 0) {
            /* A whole round without an answer: an election may be running. */
            int left = remaining_ms(deadline);
            struct timespec ts = {0, (long)(backoff < (uint32_t)left ? backoff : (uint32_t)left) *
                                         1000000L};
            nanosleep(&ts, NULL);
            backoff = backoff * 2 > 250 ? 250 : backoff * 2;
            hint_used = false;
        }
    }
    if (last != NULL) {
        *resp = last; /* the last "not the leader" or time-out answer says more than we can */
        return 0;
    }
    snprintf(err, errlen, "no replica answered within %u ms: %s", c->timeout_ms, lasterr);
    return -1;
}
