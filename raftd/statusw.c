/*
 * statusw.c - non-blocking status frames to the supervisor; see statusw.h.
 */
#include "statusw.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int statusw_attach(struct statusw *w, int fd)
{
    memset(w, 0, sizeof(*w));
    w->fd = -1;
    if (fd < 0)
        return 0;
    if (fcntl(fd, F_GETFD) < 0)
        return -1;
    if (fd_set_cloexec(fd, 1) < 0 || fd_set_nonblock(fd) < 0)
        return -1;
    w->fd = fd;
    return 0;
}

bool statusw_changed(const struct statusw *w, const struct worker_status *s)
{
    const struct worker_status *l = &w->last;
    return w->sent == 0 || l->phase != s->phase || l->role != s->role || l->term != s->term ||
           l->leader_id != s->leader_id || l->commit_index != s->commit_index ||
           l->applied_index != s->applied_index || l->node_id != s->node_id;
}

int statusw_send(struct statusw *w, const struct worker_status *s)
{
    uint8_t buf[STATUS_MAX_FRAME];
    struct worker_status f = *s;

    if (w->fd < 0)
        return 0;
    if (w->broken)
        return -1;
    f.seq = ++w->seq;
    int n = status_encode(&f, buf, sizeof(buf));
    if (n < 0)
        return 0;
    for (;;) {
        ssize_t r = write(w->fd, buf, (size_t)n);
        if (r == n) {
            w->sent++;
            w->last = f;
            return 0;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            w->dropped++;
            return 0;
        }
        if (r < 0 && errno == EPIPE) {
            w->broken = true;
            return -1;
        }
        /* A short write cannot happen below PIPE_BUF; any other error: count and go on. */
        w->dropped++;
        return 0;
    }
}
