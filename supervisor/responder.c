/*
 * responder.c - the health responder process; contract in responder.h.
 *
 * One thread, one epoll set: the listening socket, the worker's pidfd and the client
 * sockets. Connections live in a doubly linked list ordered by last activity, oldest
 * first, which gives both the victim when the cap is reached and a cheap sweep for
 * timeouts (a sweep runs at most every SWEEP_MS and on every wakeup after it is due).
 */
#include "responder.h"

#include "cfg.h"
#include "health.h"
#include "http.h"
#include "log.h"
#include "netaddr.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define IN_MAX 2048  /* request header limit; above it: 431 */
#define OUT_MAX 1024 /* pending response bytes per connection */
#define SWEEP_MS 100

struct conn {
    int fd;
    struct conn *prev, *next; /* activity list, oldest at head */
    uint64_t last_active_ms;
    uint64_t request_start_ms; /* first byte of the request being read; 0 when none */
    size_t in_len;
    size_t out_len;
    size_t out_off;
    bool close_after_write;
    bool peer_closed; /* read EOF: wait only for writability from now on */
    char in[IN_MAX];
    char out[OUT_MAX];
};

struct responder {
    const struct responder_config *rc;
    int ep;
    struct conn *head, *tail;
    uint32_t nconns;
    uint64_t next_sweep_ms;
    bool worker_gone; /* the pidfd became readable: the worker has exited */
};

/* Tags in epoll data for the two non-connection descriptors. */
static char tag_listen, tag_pidfd;

static void list_unlink(struct responder *r, struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        r->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        r->tail = c->prev;
    c->prev = c->next = NULL;
}

static void list_append(struct responder *r, struct conn *c)
{
    c->prev = r->tail;
    c->next = NULL;
    if (r->tail)
        r->tail->next = c;
    else
        r->head = c;
    r->tail = c;
}

static void touch(struct responder *r, struct conn *c, uint64_t now)
{
    c->last_active_ms = now;
    if (r->tail != c) {
        list_unlink(r, c);
        list_append(r, c);
    }
}

static void conn_close(struct responder *r, struct conn *c)
{
    list_unlink(r, c);
    close(c->fd); /* also removes it from the epoll set */
    free(c);
    r->nconns--;
}

/* Is the worker gone? Poll the pidfd without waiting; cheap enough for every request. */
static bool worker_exited(struct responder *r)
{
    if (r->worker_gone)
        return true;
    if (r->rc->worker_pidfd < 0)
        return false;
    struct pollfd pfd = {.fd = r->rc->worker_pidfd, .events = POLLIN};
    if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN | POLLHUP | POLLERR)))
        r->worker_gone = true;
    return r->worker_gone;
}

static void answer(struct responder *r, int route, struct health_answer *out)
{
    struct health_inputs in;
    struct health_answer hz, rz;
    health_shm_read(r->rc->shm, &in);
    if (worker_exited(r))
        in.worker_state = WORKER_DEAD;
    health_eval(&in, mono_ns(), &hz, &rz);
    *out = route == ROUTE_READYZ ? rz : hz;
}

/* Try to send what is pending. Returns -1 when the connection must be closed. */
static int flush_out(struct responder *r, struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                uint32_t want = c->peer_closed ? EPOLLOUT : (EPOLLIN | EPOLLOUT | EPOLLRDHUP);
                struct epoll_event ev = {.events = want, .data.ptr = c};
                epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev);
                return 0;
            }
            return -1;
        }
        c->out_off += (size_t)w;
    }
    c->out_off = c->out_len = 0;
    if (c->close_after_write)
        return -1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev);
    return 0;
}

static void queue_response(struct conn *c, int code, const char *body, bool head, bool keep,
                           bool allow)
{
    size_t n = http_format_response(c->out + c->out_len, OUT_MAX - c->out_len, code, body, head,
                                    keep, allow);
    c->out_len += n;
    if (!keep)
        c->close_after_write = true;
}

/*
 * Parse and answer every complete request buffered on c, while there is room for the
 * answers. Returns -1 to close.
 */
static int serve_buffered(struct responder *r, struct conn *c, uint64_t now)
{
    while (c->in_len > 0 && !c->close_after_write) {
        if (OUT_MAX - c->out_len < 384)
            break; /* let the client read what it has first */
        struct http_request req;
        enum http_result res = http_parse_request(c->in, c->in_len, IN_MAX, &req);
        if (res == HTTP_NEED_MORE) {
            if (c->request_start_ms == 0)
                c->request_start_ms = now;
            break;
        }
        if (res == HTTP_TOO_LARGE) {
            queue_response(c, 431, "header too large\n", false, false, false);
            break;
        }
        if (res == HTTP_VERSION) {
            queue_response(c, 505, "http version not supported\n", false, false, false);
            break;
        }
        if (res == HTTP_BAD) {
            queue_response(c, 400, "bad request\n", false, false, false);
            break;
        }
        c->request_start_ms = 0;
        memmove(c->in, c->in + req.consumed, c->in_len - req.consumed);
        c->in_len -= req.consumed;
        enum http_route route = http_route_of(&req);
        bool head = req.method == HTTP_HEAD;
        if (route == ROUTE_NOT_FOUND) {
            queue_response(c, 404, "not found\n", head, req.keep_alive, false);
        } else if (req.method == HTTP_OTHER) {
            queue_response(c, 405, "method not allowed\n", false, req.keep_alive, true);
        } else {
            struct health_answer a;
            char body[16];
            answer(r, route, &a);
            snprintf(body, sizeof(body), "%s\n", a.word);
            queue_response(c, a.code, body, head, req.keep_alive, false);
        }
        if (c->in_len > 0 && c->request_start_ms == 0)
            c->request_start_ms = now;
    }
    return flush_out(r, c);
}

static void on_readable(struct responder *r, struct conn *c, uint64_t now)
{
    for (;;) {
        if (c->in_len == IN_MAX)
            break; /* the parser will answer 431 */
        ssize_t n = recv(c->fd, c->in + c->in_len, IN_MAX - c->in_len, 0);
        if (n > 0) {
            if (c->in_len == 0 && c->request_start_ms == 0)
                c->request_start_ms = now;
            c->in_len += (size_t)n;
            continue;
        }
        if (n == 0) {
            /* The client is done sending: answer what it sent, then close. */
            c->peer_closed = true;
            if (serve_buffered(r, c, now) < 0 || c->out_len == 0) {
                conn_close(r, c);
                return;
            }
            c->close_after_write = true;
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        conn_close(r, c);
        return;
    }
    touch(r, c, now);
    if (serve_buffered(r, c, now) < 0)
        conn_close(r, c);
}

static void accept_all(struct responder *r, uint64_t now)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(r->rc->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                /* Out of descriptors: free the oldest connection and retry next wakeup. */
                if (r->head)
                    conn_close(r, r->head);
            }
            return;
        }
        if (r->nconns >= r->rc->max_connections && r->head)
            conn_close(r, r->head); /* the least recently active gives way */
        struct conn *c = malloc(sizeof(*c));
        if (c == NULL) {
            close(fd);
            return;
        }
        memset(c, 0, offsetof(struct conn, in));
        c->fd = fd;
        c->last_active_ms = now;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        if (epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        list_append(r, c);
        r->nconns++;
    }
}

/* Close connections past their deadlines. */
static void sweep(struct responder *r, uint64_t now)
{
    struct conn *c = r->head, *next;
    for (; c; c = next) {
        next = c->next;
        if (c->request_start_ms != 0 && now - c->request_start_ms >= r->rc->header_timeout_ms) {
            /* A request that trickles in never completes: tell it so, then close. */
            char buf[256];
            size_t n =
                http_format_response(buf, sizeof(buf), 408, "request timeout\n", false, false, false);
            ssize_t w = send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
            conn_close(r, c);
        } else if (c->request_start_ms == 0 && now - c->last_active_ms >= r->rc->idle_timeout_ms) {
            conn_close(r, c);
        }
    }
    r->next_sweep_ms = now + SWEEP_MS;
}

static void parent_check(const struct responder_config *rc)
{
    if (getppid() != rc->parent_pid)
        _exit(0); /* the supervisor is gone: nothing we say would be true any more */
}

void responder_main(const struct responder_config *rc)
{
    struct responder r = {.rc = rc};
    struct epoll_event evs[64];

    prctl(PR_SET_NAME, "spurctld-health", 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    parent_check(rc);

    r.ep = epoll_create1(EPOLL_CLOEXEC);
    if (r.ep < 0) {
        log_event(LOG_ERROR, "health", "epoll_create1 failed", "err=\"%s\"", strerror(errno));
        _exit(EXIT_OSERR);
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tag_listen};
    if (epoll_ctl(r.ep, EPOLL_CTL_ADD, rc->listen_fd, &ev) < 0) {
        log_event(LOG_ERROR, "health", "cannot watch the listening socket", "err=\"%s\"",
                  strerror(errno));
        _exit(EXIT_OSERR);
    }
    if (rc->worker_pidfd >= 0) {
        struct epoll_event pev = {.events = EPOLLIN, .data.ptr = &tag_pidfd};
        epoll_ctl(r.ep, EPOLL_CTL_ADD, rc->worker_pidfd, &pev);
    }
    r.next_sweep_ms = mono_ms() + SWEEP_MS;

    for (;;) {
        uint64_t now = mono_ms();
        int timeout = r.nconns > 0 ? (int)(r.next_sweep_ms > now ? r.next_sweep_ms - now : 0)
                                   : 1000;
        int n = epoll_wait(r.ep, evs, 64, timeout);
        if (n < 0 && errno != EINTR) {
            log_event(LOG_ERROR, "health", "epoll_wait failed", "err=\"%s\"", strerror(errno));
            _exit(EXIT_OSERR);
        }
        now = mono_ms();
        parent_check(rc);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &tag_listen) {
                accept_all(&r, now);
            } else if (p == &tag_pidfd) {
                /* Remember, and stop watching: a readable pidfd stays readable. */
                r.worker_gone = true;
                epoll_ctl(r.ep, EPOLL_CTL_DEL, rc->worker_pidfd, NULL);
            } else {
                struct conn *c = p;
                if (c->peer_closed) {
                    if (flush_out(&r, c) < 0 || c->out_len == 0)
                        conn_close(&r, c);
                } else if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                    on_readable(&r, c, now);
                } else if (evs[i].events & EPOLLOUT) {
                    touch(&r, c, now);
                    if (flush_out(&r, c) < 0 || serve_buffered(&r, c, now) < 0)
                        conn_close(&r, c);
                }
            }
        }
        if (now >= r.next_sweep_ms)
            sweep(&r, now);
    }
}

int responder_listen(const char *bind_to, uint32_t port, char *why, size_t whylen)
{
    char addr[80];
    struct sockaddr_storage ss;
    socklen_t sl;
    int one = 1, zero = 0;

    if (netaddr_bind(bind_to, port, &ss, &sl, why, whylen) != 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && ss.ss_family == AF_INET6 && strcmp(bind_to, "all") == 0 &&
        (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT)) {
        /* No IPv6 on this host: "all" means every IPv4 address then. */
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        memset(&ss, 0, sizeof(ss));
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        s4->sin_addr.s_addr = htonl(INADDR_ANY);
        sl = sizeof(*s4);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    }
    netaddr_format(&ss, addr, sizeof(addr));
    if (fd < 0) {
        snprintf(why, whylen, "%s: socket: %s", addr, strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
        int e = errno;
        close(fd);
        snprintf(why, whylen, "%s: bind: %s", addr, strerror(e));
        return -1;
    }
    if (listen(fd, 1024) < 0) {
        int e = errno;
        close(fd);
        snprintf(why, whylen, "%s: listen: %s", addr, strerror(e));
        return -1;
    }
    return fd;
}
