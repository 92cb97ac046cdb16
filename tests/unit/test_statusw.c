/*
 * test_statusw.c - the worker's end of the status pipe (raftd/statusw.c): frames written to
 * a real pipe decode with common/status and carry increasing sequence numbers; the
 * descriptor is made non-blocking and close-on-exec; a full pipe drops whole frames and
 * never blocks or leaves half a frame; a closed read end is reported as broken, for good.
 */
#include "check_run.h"
#include "frame.h"
#include "status.h"
#include "statusw.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct worker_status sample(uint64_t commit)
{
    struct worker_status s = {.phase = STATUS_PHASE_RUNNING,
                              .node_id = 2,
                              .role = STATUS_ROLE_LEADER,
                              .term = 7,
                              .leader_id = 2,
                              .commit_index = commit,
                              .applied_index = commit > 0 ? commit - 1 : 0,
                              .pid = 4242};
    return s;
}

/* Read everything buffered in the (non-blocking) read end. */
static size_t drain(int fd, uint8_t *buf, size_t cap)
{
    size_t n = 0;

    for (int i = 0; i < 100000 && n < cap; i++) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r > 0) {
            n += (size_t)r;
            continue;
        }
        ck_assert_msg(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), "read: %s",
                      strerror(errno));
        break;
    }
    return n;
}

/* Decode whole frames from buf; every byte must belong to a complete frame. */
static size_t decode_all(const uint8_t *buf, size_t len, struct worker_status *out, size_t max)
{
    size_t off = 0, n = 0;

    while (off < len) {
        const uint8_t *payload;
        size_t plen, used;
        ck_assert_int_eq(
            frame_parse(buf + off, len - off, STATUS_MAX_PAYLOAD, &payload, &plen, &used),
            FRAME_READY);
        ck_assert_uint_lt(n, max);
        ck_assert_int_eq(status_decode(payload, plen, &out[n]), 0);
        n++;
        off += used;
    }
    return n;
}

START_TEST(test_unsupervised)
{
    struct statusw w;
    struct worker_status s = sample(1);

    ck_assert_int_eq(statusw_attach(&w, -1), 0);
    ck_assert_int_eq(w.fd, -1);
    ck_assert_int_eq(statusw_send(&w, &s), 0);
    ck_assert_uint_eq(w.sent, 0);
    ck_assert_uint_eq(w.dropped, 0);
}
END_TEST

START_TEST(test_attach_refuses_a_closed_fd)
{
    struct statusw w;
    int p[2];

    ck_assert_int_eq(pipe(p), 0);
    close(p[0]);
    close(p[1]);
    ck_assert_int_eq(statusw_attach(&w, p[1]), -1);
    ck_assert_int_eq(w.fd, -1);
}
END_TEST

START_TEST(test_frames_decode)
{
    struct statusw w;
    struct worker_status got[8];
    uint8_t buf[4096];
    int p[2];
    size_t len;

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    ck_assert_int_eq(statusw_attach(&w, p[1]), 0);
    ck_assert_int_ne(fcntl(p[1], F_GETFD) & FD_CLOEXEC, 0);
    ck_assert_int_ne(fcntl(p[1], F_GETFL) & O_NONBLOCK, 0);
    for (uint64_t i = 1; i <= 3; i++) {
        struct worker_status s = sample(i * 10);
        s.seq = 999; /* the writer numbers the frames itself */
        ck_assert_int_eq(statusw_send(&w, &s), 0);
    }
    ck_assert_uint_eq(w.sent, 3);
    len = drain(p[0], buf, sizeof(buf));
    ck_assert_uint_eq(decode_all(buf, len, got, 8), 3);
    for (size_t i = 0; i < 3; i++) {
        struct worker_status want = sample((i + 1) * 10);
        ck_assert_uint_eq(got[i].seq, i + 1);
        ck_assert_int_eq(got[i].phase, want.phase);
        ck_assert_uint_eq(got[i].node_id, want.node_id);
        ck_assert_int_eq(got[i].role, want.role);
        ck_assert_uint_eq(got[i].term, want.term);
        ck_assert_uint_eq(got[i].leader_id, want.leader_id);
        ck_assert_uint_eq(got[i].commit_index, want.commit_index);
        ck_assert_uint_eq(got[i].applied_index, want.applied_index);
    }
    ck_assert_uint_eq(w.last.seq, 3);
    ck_assert_uint_eq(w.last.commit_index, 30);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(test_changed)
{
    struct statusw w;
    struct worker_status s = sample(5), t;
    int p[2];

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(statusw_attach(&w, p[1]), 0);
    ck_assert(statusw_changed(&w, &s)); /* nothing sent yet */
    ck_assert_int_eq(statusw_send(&w, &s), 0);
    ck_assert(!statusw_changed(&w, &s));
    t = s;
    t.seq = 77;
    ck_assert(!statusw_changed(&w, &t)); /* the sequence number alone is no change */
    t = s;
    t.phase = STATUS_PHASE_STOPPING;
    ck_assert(statusw_changed(&w, &t));
    t = s;
    t.role = STATUS_ROLE_FOLLOWER;
    ck_assert(statusw_changed(&w, &t));
    t = s;
    t.term++;
    ck_assert(statusw_changed(&w, &t));
    t = s;
    t.leader_id = 0;
    ck_assert(statusw_changed(&w, &t));
    t = s;
    t.commit_index++;
    ck_assert(statusw_changed(&w, &t));
    t = s;
    t.applied_index++;
    ck_assert(statusw_changed(&w, &t));
    t = s;
    t.node_id = 9;
    ck_assert(statusw_changed(&w, &t));
    close(p[0]);
    close(p[1]);
}
END_TEST

/* A full pipe: frames are dropped whole and counted, the caller never blocks. */
START_TEST(test_full_pipe_drops_whole_frames)
{
    static uint8_t buf[1 << 20];
    static struct worker_status got[70000];
    struct statusw w;
    struct worker_status s;
    size_t sends = 0, len, n;
    int p[2];

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    fcntl(p[1], F_SETPIPE_SZ, 4096); /* as small as the kernel allows; best effort */
    ck_assert_int_eq(statusw_attach(&w, p[1]), 0);
    while (w.dropped == 0 && sends < 60000) {
        s = sample(sends + 1);
        ck_assert_int_eq(statusw_send(&w, &s), 0);
        sends++;
    }
    ck_assert_uint_gt(w.dropped, 0);
    /* A few more while full: all dropped, none blocks. */
    for (int i = 0; i < 5; i++) {
        s = sample(sends + 1);
        ck_assert_int_eq(statusw_send(&w, &s), 0);
        sends++;
    }
    ck_assert_uint_eq(w.sent + w.dropped, sends);
    len = drain(p[0], buf, sizeof(buf));
    n = decode_all(buf, len, got, 70000);
    ck_assert_uint_eq(n, w.sent);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(got[i].seq, i + 1); /* the pipe kept the first frames, in order */
    /* Drained: the next frame goes through, numbered after the dropped ones. */
    s = sample(1);
    ck_assert_int_eq(statusw_send(&w, &s), 0);
    len = drain(p[0], buf, sizeof(buf));
    ck_assert_uint_eq(decode_all(buf, len, got, 70000), 1);
    ck_assert_uint_eq(got[0].seq, sends + 1);
    close(p[0]);
    close(p[1]);
}
END_TEST

/* The supervisor is gone: EPIPE is remembered and reported on every later send. */
START_TEST(test_closed_read_end_is_broken)
{
    struct statusw w;
    struct worker_status s = sample(3);
    int p[2];

    signal(SIGPIPE, SIG_IGN); /* as the worker does; otherwise the write kills us */
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(statusw_attach(&w, p[1]), 0);
    ck_assert_int_eq(statusw_send(&w, &s), 0);
    close(p[0]);
    ck_assert_int_eq(statusw_send(&w, &s), -1);
    ck_assert(w.broken);
    ck_assert_int_eq(statusw_send(&w, &s), -1);
    ck_assert_uint_eq(w.sent, 1);
    close(p[1]);
}
END_TEST

static Suite *statusw_suite(void)
{
    Suite *s = suite_create("statusw");
    check_case(s, "pipe",
               (const TTest *[]){test_unsupervised, test_attach_refuses_a_closed_fd,
                                 test_frames_decode, test_changed,
                                 test_full_pipe_drops_whole_frames, test_closed_read_end_is_broken,
                                 NULL});

    return s;
}

int main(void)
{
    return check_run(statusw_suite());
}
