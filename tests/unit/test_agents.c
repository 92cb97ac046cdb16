/*
 * test_agents.c - the leader's agent connections (raftd/agents.c) against fake agents: raw
 * listening sockets on free ports of 127.0.0.1 that the test plays by hand, on a real loop.
 * A fake agent proves the cluster key as spurd does (test_chanpeer.h, responder "agent")
 * and seals what it sends.
 *
 * Pinned here: the connection comes up only once the agent proved the key, and the
 * owner's first request (a Ping) is the first frame after the proof, with the protocol
 * version, the cluster name and a fresh id; an agent with another key never comes up and
 * is counted; a frame of the agent's with one bit flipped closes its connection; answers are
 * matched to their requests by id (kind, job, attempt and tag come back), an answer to an
 * unknown id is ignored, an Ended push reaches ended(); a closed connection fails what
 * waits, calls down() and is dialled again; an oversized or undecodable frame closes that
 * agent's connection only; the bounds (waiting requests, frame size, not connected)
 * refuse a send at once; a request not answered in time fails and closes the connection.
 */
#include "agents.h"
#include "check_run.h"
#include "frame.h"
#include "resolver.h"
#include "test_chanpeer.h"
#include "test_ipresolver.h"
#include "test_loop.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAME 65536

struct seen {
    unsigned ups, downs, answers, failures, ended;
    char last_up[64], last_down[64];
    struct agents_answer last; /* node, reply and err are not kept */
    uint64_t answer_tags[16];
    Spur__Agent__Msg__BodyCase reply_case[16];
    uint64_t ended_job;
    bool ping_on_up; /* send a Ping from up(), as jobctl does */
    struct agents *a;
};

static void h_up(void *arg, const char *node)
{
    struct seen *s = arg;
    s->ups++;
    snprintf(s->last_up, sizeof(s->last_up), "%s", node);
    if (s->ping_on_up) {
        Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
        Spur__Agent__Ping p = SPUR__AGENT__PING__INIT;
        p.term = 7;
        p.leader_id = 2;
        p.node_name = (char *)node;
        m.body_case = SPUR__AGENT__MSG__BODY_PING;
        m.ping = &p;
        ck_assert_int_eq(agents_request(s->a, node, &m, 0, 0, 1000 + s->ups, NULL), 0);
    }
}

static void h_down(void *arg, const char *node, const char *why)
{
    struct seen *s = arg;
    (void)why;
    s->downs++;
    snprintf(s->last_down, sizeof(s->last_down), "%s", node);
}

static void h_answer(void *arg, const struct agents_answer *ans)
{
    struct seen *s = arg;
    if (s->answers < 16) {
        s->answer_tags[s->answers] = ans->tag;
        s->reply_case[s->answers] = ans->reply ? ans->reply->body_case : 0;
    }
    s->answers++;
    if (ans->reply == NULL)
        s->failures++;
    s->last = *ans;
    s->last.node = NULL;
    s->last.reply = NULL;
    s->last.err = NULL;
}

static void h_ended(void *arg, const char *node, const Spur__Agent__Ended *e)
{
    struct seen *s = arg;
    (void)node;
    s->ended++;
    s->ended_job = e->job_id;
}

struct fixture {
    struct test_loop l;
    struct resolver *res;
    struct keyring kr; /* the leader's: outlives a */
    struct agents *a;
    struct seen s;
    char resolv[64];
};

static void fixture_start(struct fixture *fx, const struct agents_options *over)
{
    memset(fx, 0, sizeof(*fx));
    test_loop_init(&fx->l);
    fx->res = test_ipresolver_new(fx->l.base, fx->resolv, sizeof(fx->resolv));
    test_keyring(&fx->kr, 0x5a);
    struct agents_options o = {.max_frame = MAX_FRAME,
                               .cluster_name = "spur",
                               .keyring = &fx->kr,
                               .backoff_min_ms = 20,
                               .backoff_max_ms = 50,
                               .seed = 3};
    if (over) {
        o.max_pending = over->max_pending;
        o.timeout_ms = over->timeout_ms;
    }
    struct agents_hooks h = {h_up, h_down, h_answer, h_ended, &fx->s};
    fx->a = agents_new(fx->l.base, &o, fx->res, &h);
    ck_assert_ptr_nonnull(fx->a);
    fx->s.a = fx->a;
    fx->s.ping_on_up = true;
}

static void fixture_stop(struct fixture *fx)
{
    agents_free(fx->a);
    resolver_free(fx->res);
    test_loop_free(&fx->l);
    unlink(fx->resolv);
}

/*
 * One fake agent: its listening socket, the leader's connection to it, a frame reader,
 * its key (the leader's unless a test says otherwise) and the connection's channel.
 */
struct fake {
    int lfd, cfd;
    char addr[64];
    struct frame_reader r;
    struct keyring kr;
    struct chan ch;
};

static void fake_open_key(struct fake *f, uint8_t key_fill)
{
    f->lfd = test_listen(f->addr, sizeof(f->addr));
    f->cfd = -1;
    test_keyring(&f->kr, key_fill);
}

static void fake_open(struct fake *f)
{
    fake_open_key(f, 0x5a);
}

/* Accept the leader's (next) connection and answer its key proof: the outcome. */
static enum chan_rc fake_take_rc(struct fixture *fx, struct fake *f)
{
    f->cfd = test_accept(&fx->l, f->lfd);
    test_chanpeer_reader_init(&f->r, MAX_FRAME);
    return test_chanpeer_accept(&fx->l, f->cfd, &f->r, &f->ch, &f->kr, "agent");
}

static void fake_take(struct fixture *fx, struct fake *f)
{
    ck_assert_int_eq(fake_take_rc(fx, f), CHAN_OK);
}

/* Close the connection (the agent goes away; its listener stays). */
static void fake_drop(struct fake *f)
{
    close(f->cfd);
    f->cfd = -1;
    frame_reader_free(&f->r);
    chan_free(&f->ch);
}

static void fake_close(struct fake *f)
{
    if (f->cfd >= 0)
        fake_drop(f);
    close(f->lfd);
}

/* The next message the leader sent to f (the caller frees it). */
static Spur__Agent__Msg *fake_recv(struct fixture *fx, struct fake *f)
{
    const uint8_t *p = NULL;
    size_t len = 0;
    ck_assert_int_eq(test_chanpeer_recv(&fx->l, f->cfd, &f->r, &f->ch, &p, &len), 1);
    Spur__Agent__Msg *m = spur__agent__msg__unpack(NULL, len, p);
    ck_assert_ptr_nonnull(m);
    return m;
}

/* Seal m and send it; flip_at >= 0 flips a bit of that byte of the sealed payload. */
static void fake_send_flip(struct fake *f, Spur__Agent__Msg *m, long flip_at)
{
    m->protocol_version = SPUR_AGENT_PROTOCOL;
    m->cluster_name = (char *)"spur";
    size_t n = spur__agent__msg__get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    spur__agent__msg__pack(m, buf);
    test_chanpeer_send(&f->ch, f->cfd, buf, n, flip_at);
    free(buf);
}

static void fake_send(struct fake *f, Spur__Agent__Msg *m)
{
    fake_send_flip(f, m, -1);
}

static void fake_pong(struct fake *f, uint64_t id)
{
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    Spur__Agent__Pong pg = SPUR__AGENT__PONG__INIT;
    pg.node_name = (char *)"n1";
    m.id = id;
    m.body_case = SPUR__AGENT__MSG__BODY_PONG;
    m.pong = &pg;
    fake_send(f, &m);
}

static void signal_msg(Spur__Agent__Msg *m, Spur__Agent__Signal *s, uint64_t job)
{
    spur__agent__msg__init(m);
    spur__agent__signal__init(s);
    s->job_id = job;
    s->terminate = true;
    m->body_case = SPUR__AGENT__MSG__BODY_SIGNAL;
    m->signal = s;
}

START_TEST(test_connect_ping_pong)
{
    struct fixture fx;
    fixture_start(&fx, NULL);
    struct fake f;
    fake_open(&f);
    ck_assert(!agents_is_up(fx.a, "n1"));
    ck_assert_int_eq(agents_set(fx.a, "n1", f.addr), 0);
    ck_assert(agents_known(fx.a, "n1"));
    fake_take(&fx, &f);
    Spur__Agent__Msg *m = fake_recv(&fx, &f);
    /* The first frame is the owner's Ping, in the protocol's envelope. */
    ck_assert_uint_eq(fx.s.ups, 1);
    ck_assert_str_eq(fx.s.last_up, "n1");
    ck_assert(agents_is_up(fx.a, "n1"));
    ck_assert_uint_eq(m->protocol_version, SPUR_AGENT_PROTOCOL);
    ck_assert_str_eq(m->cluster_name, "spur");
    ck_assert_uint_ne(m->id, 0);
    ck_assert_int_eq(m->body_case, SPUR__AGENT__MSG__BODY_PING);
    ck_assert_uint_eq(m->ping->term, 7);
    ck_assert_str_eq(m->ping->node_name, "n1");
    fake_pong(&f, m->id);
    spur__agent__msg__free_unpacked(m, NULL);
    ck_assert(test_loop_until(&fx.l, &fx.s.answers, 1, 3000));
    ck_assert_uint_eq(fx.s.failures, 0);
    ck_assert_int_eq(fx.s.last.kind, SPUR__AGENT__MSG__BODY_PING);
    ck_assert_uint_eq(fx.s.last.tag, 1001);
    ck_assert_int_eq(fx.s.reply_case[0], SPUR__AGENT__MSG__BODY_PONG);
    struct agents_stats st;
    agents_get_stats(fx.a, &st);
    ck_assert_uint_eq(st.connected, 1);
    ck_assert_uint_eq(st.connects, 1);
    fake_close(&f);
    fixture_stop(&fx);
}
END_TEST

START_TEST(test_request_ids_matched)
{
    struct fixture fx;
    fixture_start(&fx, NULL);
    struct fake f;
    fake_open(&f);
    ck_assert_int_eq(agents_set(fx.a, "n1", f.addr), 0);
    fake_take(&fx, &f);
    Spur__Agent__Msg *ping = fake_recv(&fx, &f);
    uint64_t ids[3] = {0};
    Spur__Agent__Msg m;
    Spur__Agent__Signal s;
    for (int i = 0; i < 3; i++) {
        signal_msg(&m, &s, 40 + (uint64_t)i);
        ck_assert_int_eq(
            agents_request(fx.a, "n1", &m, 40 + (uint64_t)i, 2, 500 + (uint64_t)i, &ids[i]), 0);
    }
    ck_assert(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ping->id);
    uint64_t got[3];
    for (int i = 0; i < 3; i++) {
        Spur__Agent__Msg *q = fake_recv(&fx, &f);
        ck_assert_int_eq(q->body_case, SPUR__AGENT__MSG__BODY_SIGNAL);
        ck_assert_uint_eq(q->signal->job_id, 40 + (uint64_t)i);
        got[i] = q->id;
        spur__agent__msg__free_unpacked(q, NULL);
    }
    ck_assert_uint_eq(got[0], ids[0]);
    ck_assert_uint_eq(got[2], ids[2]);
    /* An answer to an id nobody asked with is ignored; a push (id 0) goes to ended(). */
    Spur__Agent__Msg ans = SPUR__AGENT__MSG__INIT;
    Spur__Agent__SignalReply sr = SPUR__AGENT__SIGNAL_REPLY__INIT;
    sr.found = true;
    ans.body_case = SPUR__AGENT__MSG__BODY_SIGNAL_REPLY;
    ans.signal_reply = &sr;
    ans.id = 999999;
    fake_send(&f, &ans);
    Spur__Agent__Msg push = SPUR__AGENT__MSG__INIT;
    Spur__Agent__Ended e = SPUR__AGENT__ENDED__INIT;
    e.job_id = 41;
    push.body_case = SPUR__AGENT__MSG__BODY_ENDED;
    push.ended = &e;
    fake_send(&f, &push);
    /* Answers in the order asked: the Ping, then the three signals. */
    fake_pong(&f, ping->id);
    for (int i = 0; i < 3; i++) {
        ans.id = got[i];
        fake_send(&f, &ans);
    }
    ck_assert(test_loop_until(&fx.l, &fx.s.answers, 4, 3000));
    test_loop_run(&fx.l, 50);
    ck_assert_uint_eq(fx.s.answers, 4);
    ck_assert_uint_eq(fx.s.failures, 0);
    ck_assert_uint_eq(fx.s.ended, 1);
    ck_assert_uint_eq(fx.s.ended_job, 41);
    ck_assert_uint_eq(fx.s.answer_tags[0], 1001);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(fx.s.answer_tags[1 + i], 500 + (uint64_t)i);
        ck_assert_int_eq(fx.s.reply_case[1 + i], SPUR__AGENT__MSG__BODY_SIGNAL_REPLY);
    }
    ck_assert_uint_eq(fx.s.last.job_id, 42);
    ck_assert_uint_eq(fx.s.last.attempt, 2);
    /* A push from the leader goes with id 0 and is not waited for. */
    Spur__Agent__Msg ack = SPUR__AGENT__MSG__INIT;
    Spur__Agent__EndedAck ea = SPUR__AGENT__ENDED_ACK__INIT;
    ea.job_id = 41;
    ack.body_case = SPUR__AGENT__MSG__BODY_ENDED_ACK;
    ack.ended_ack = &ea;
    ck_assert_int_eq(agents_push(fx.a, "n1", &ack), 0);
    Spur__Agent__Msg *q = fake_recv(&fx, &f);
    ck_assert_uint_eq(q->id, 0);
    ck_assert_int_eq(q->body_case, SPUR__AGENT__MSG__BODY_ENDED_ACK);
    spur__agent__msg__free_unpacked(q, NULL);
    spur__agent__msg__free_unpacked(ping, NULL);
    fake_close(&f);
    fixture_stop(&fx);
}
END_TEST

START_TEST(test_reconnect_after_close)
{
    struct fixture fx;
    fixture_start(&fx, NULL);
    struct fake f;
    fake_open(&f);
    ck_assert_int_eq(agents_set(fx.a, "n1", f.addr), 0);
    fake_take(&fx, &f);
    spur__agent__msg__free_unpacked(fake_recv(&fx, &f), NULL);
    /* The agent goes away with the Ping unanswered: it fails, down(), then a new dial. */
    fake_drop(&f);
    ck_assert(test_loop_until(&fx.l, &fx.s.downs, 1, 3000));
    ck_assert_str_eq(fx.s.last_down, "n1");
    ck_assert_uint_eq(fx.s.failures, 1);
    ck_assert_uint_eq(fx.s.last.tag, 1001);
    ck_assert(!agents_is_up(fx.a, "n1"));
    Spur__Agent__Msg m;
    Spur__Agent__Signal s;
    signal_msg(&m, &s, 1);
    ck_assert_int_eq(agents_request(fx.a, "n1", &m, 1, 1, 0, NULL), -1);
    fake_take(&fx, &f);
    Spur__Agent__Msg *ping = fake_recv(&fx, &f);
    ck_assert_uint_eq(fx.s.ups, 2);
    ck_assert_int_eq(ping->body_case, SPUR__AGENT__MSG__BODY_PING);
    fake_pong(&f, ping->id);
    spur__agent__msg__free_unpacked(ping, NULL);
    ck_assert(test_loop_until(&fx.l, &fx.s.answers, 2, 3000));
    ck_assert_uint_eq(fx.s.last.tag, 1002);
    ck_assert_uint_eq(fx.s.failures, 1);
    /* Removal closes without calling back. */
    agents_remove(fx.a, "n1");
    ck_assert(!agents_known(fx.a, "n1"));
    ck_assert(test_closed_by_peer(&fx.l, f.cfd, 3000));
    ck_assert_uint_eq(fx.s.downs, 1);
    fake_close(&f);
    fixture_stop(&fx);
}
END_TEST

/* n1 is up and its Ping taken: ready for the bad frame the test sends next. */
static void n1_up(struct fixture *fx, struct fake *f1)
{
    fake_take(fx, f1);
    spur__agent__msg__free_unpacked(fake_recv(fx, f1), NULL);
}

/* n1's bad frame closed its connection only: n2's stays up. */
static void n1_closed(struct fixture *fx, struct fake *f1, unsigned downs)
{
    ck_assert(test_closed_by_peer(&fx->l, f1->cfd, 3000));
    ck_assert_uint_eq(fx->s.downs, downs);
    ck_assert_str_eq(fx->s.last_down, "n1");
    ck_assert(agents_is_up(fx->a, "n2"));
    fake_drop(f1);
}

START_TEST(test_bad_frames_close_one_agent)
{
    struct fixture fx;
    fixture_start(&fx, NULL);
    struct fake f1, f2;
    fake_open(&f1);
    fake_open(&f2);
    ck_assert_int_eq(agents_set(fx.a, "n2", f2.addr), 0);
    fake_take(&fx, &f2);
    Spur__Agent__Msg *p2 = fake_recv(&fx, &f2);
    ck_assert_int_eq(agents_set(fx.a, "n1", f1.addr), 0);
    /* A header announcing more than the limit (and the seal), refused before its payload. */
    n1_up(&fx, &f1);
    uint8_t big[FRAME_HEADER_LEN];
    frame_put_header(big, MAX_FRAME + CHAN_TRAILER_LEN + 1);
    ck_assert_int_eq(send(f1.cfd, big, sizeof(big), MSG_NOSIGNAL), (ssize_t)sizeof(big));
    n1_closed(&fx, &f1, 1);
    /* A sealed frame that does not decode. */
    n1_up(&fx, &f1);
    uint8_t junk[5] = {0xff, 0xff, 0xff, 0xff, 0x0f};
    test_chanpeer_send(&f1.ch, f1.cfd, junk, sizeof(junk), -1);
    n1_closed(&fx, &f1, 2);
    /* A well-formed sealed frame of another cluster. */
    n1_up(&fx, &f1);
    Spur__Agent__Msg other = SPUR__AGENT__MSG__INIT;
    Spur__Agent__Pong pg = SPUR__AGENT__PONG__INIT;
    other.body_case = SPUR__AGENT__MSG__BODY_PONG;
    other.pong = &pg;
    other.id = 1;
    other.protocol_version = SPUR_AGENT_PROTOCOL;
    other.cluster_name = (char *)"elsewhere";
    test_chanpeer_send_message(&f1.ch, f1.cfd, &other.base);
    n1_closed(&fx, &f1, 3);
    /* A Pong with one bit of its tag flipped: it does not verify. */
    n1_up(&fx, &f1);
    Spur__Agent__Msg pong = SPUR__AGENT__MSG__INIT;
    pong.body_case = SPUR__AGENT__MSG__BODY_PONG;
    pong.pong = &pg;
    pong.id = 1;
    fake_send_flip(&f1, &pong, (long)spur__agent__msg__get_packed_size(&pong) + 10);
    n1_closed(&fx, &f1, 4);
    /* n2 never noticed: its Ping is answered on the same connection. */
    fake_pong(&f2, p2->id);
    spur__agent__msg__free_unpacked(p2, NULL);
    ck_assert(test_loop_until(&fx.l, &fx.s.answers, 5, 3000)); /* n1's 4 failed Pings + n2's */
    ck_assert_uint_eq(fx.s.failures, 4);
    ck_assert_uint_eq(fx.s.answer_tags[4], 1001);
    struct agents_stats st;
    agents_get_stats(fx.a, &st);
    ck_assert_uint_eq(st.bad_frames, 3);
    ck_assert_uint_eq(st.auth_refused, 1);
    ck_assert_uint_eq(st.connected, 1);
    fake_close(&f1);
    fake_close(&f2);
    fixture_stop(&fx);
}
END_TEST

/*
 * An agent holding another cluster key refuses the leader's hello: never up(), no Ping
 * sent, the dial retried with back-off and each refusal counted.
 */
START_TEST(test_other_key_never_up)
{
    struct fixture fx;
    fixture_start(&fx, NULL);
    struct fake f;
    fake_open_key(&f, 0x77);
    ck_assert_int_eq(agents_set(fx.a, "n1", f.addr), 0);
    ck_assert_int_eq(fake_take_rc(&fx, &f), CHAN_NO_COMMON_KEY);
    ck_assert(test_closed_by_peer(&fx.l, f.cfd, 3000));
    fake_drop(&f);
    /* It dials again (back-off 20..50 ms here) and is refused again. */
    ck_assert_int_eq(fake_take_rc(&fx, &f), CHAN_NO_COMMON_KEY);
    ck_assert(test_closed_by_peer(&fx.l, f.cfd, 3000));
    fake_drop(&f);
    test_loop_run(&fx.l, 20);
    ck_assert_uint_eq(fx.s.ups, 0);
    ck_assert(!agents_is_up(fx.a, "n1"));
    struct agents_stats st;
    agents_get_stats(fx.a, &st);
    ck_assert_uint_ge(st.auth_refused, 2);
    ck_assert_uint_eq(st.connects, 0);
    Spur__Agent__Msg m;
    Spur__Agent__Signal s;
    signal_msg(&m, &s, 1);
    ck_assert_int_eq(agents_request(fx.a, "n1", &m, 1, 1, 0, NULL), -1);
    fake_close(&f);
    fixture_stop(&fx);
}
END_TEST

START_TEST(test_send_bounds)
{
    struct fixture fx;
    struct agents_options over = {.max_pending = 4};
    fixture_start(&fx, &over);
    struct fake f;
    fake_open(&f);
    Spur__Agent__Msg m;
    Spur__Agent__Signal s;
    signal_msg(&m, &s, 1);
    /* Unknown node, then known but not connected yet: refused at once. */
    ck_assert_int_eq(agents_request(fx.a, "n1", &m, 1, 1, 0, NULL), -1);
    ck_assert_int_eq(agents_set(fx.a, "n1", f.addr), 0);
    ck_assert_int_eq(agents_request(fx.a, "n1", &m, 1, 1, 0, NULL), -1);
    fake_take(&fx, &f);
    ck_assert(test_loop_until(&fx.l, &fx.s.ups, 1, 3000));
    /* The Ping from up() is one of the four that may wait. */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(agents_request(fx.a, "n1", &m, 1, 1, 0, NULL), 0);
    ck_assert_int_eq(agents_request(fx.a, "n1", &m, 1, 1, 0, NULL), -1);
    /* A message over the frame limit is never sent. */
    Spur__Agent__Msg big = SPUR__AGENT__MSG__INIT;
    Spur__Agent__Launch l = SPUR__AGENT__LAUNCH__INIT;
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    uint8_t *script = calloc(1, MAX_FRAME + 10);
    spec.script.data = script;
    spec.script.len = MAX_FRAME + 10;
    l.spec = &spec;
    big.body_case = SPUR__AGENT__MSG__BODY_LAUNCH;
    big.launch = &l;
    ck_assert_int_eq(agents_push(fx.a, "n1", &big), -1);
    free(script);
    struct agents_stats st;
    agents_get_stats(fx.a, &st);
    ck_assert_uint_eq(st.refused, 4); /* unknown, not connected, the bound, too large */
    /* Nothing was answered, nothing failed: the refusals made no callback. */
    ck_assert_uint_eq(fx.s.answers, 0);
    fake_close(&f);
    fixture_stop(&fx);
}
END_TEST

START_TEST(test_unanswered_request_times_out)
{
    struct fixture fx;
    struct agents_options over = {.timeout_ms = 200};
    fixture_start(&fx, &over);
    struct fake f;
    fake_open(&f);
    ck_assert_int_eq(agents_set(fx.a, "n1", f.addr), 0);
    fake_take(&fx, &f);
    ck_assert(test_loop_until(&fx.l, &fx.s.ups, 1, 3000));
    uint64_t t0 = test_now_ms();
    ck_assert(test_loop_until(&fx.l, &fx.s.failures, 1, 3000));
    ck_assert_uint_ge(test_now_ms() - t0, 150);
    ck_assert_uint_eq(fx.s.downs, 1);
    ck_assert(test_closed_by_peer(&fx.l, f.cfd, 3000));
    struct agents_stats st;
    agents_get_stats(fx.a, &st);
    ck_assert_uint_eq(st.timeouts, 1);
    fake_close(&f);
    fixture_stop(&fx);
}
END_TEST

static Suite *agents_suite(void)
{
    Suite *s = suite_create("agents");
    TCase *tc =
        check_case(s, "loopback",
                   (const TTest *[]){test_connect_ping_pong, test_request_ids_matched,
                                     test_reconnect_after_close, test_bad_frames_close_one_agent,
                                     test_other_key_never_up, test_send_bounds,
                                     test_unanswered_request_times_out, NULL});
    tcase_set_timeout(tc, 30);
    return s;
}

int main(void)
{
    return check_run(agents_suite());
}
