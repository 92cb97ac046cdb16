/*
 * node.c - the Raft shell: drives the pure core (raftd/raft/) with real storage and real
 * peers. It is the only module that steps the core (node_step) and the only one that
 * handles an update; the request handling (node_api.c) and the controller's policy
 * (controller.c) hear of what a step did through one hook, called once per step.
 *
 * What this module guarantees, and how:
 *
 * 1. Nothing is sent before what it depends on is durable. Every raft_step() update is
 *    handled whole before the next step: its hard state, snapshot and entries go to the
 *    storage writer as ONE persist request with a sequence number; its ordinary messages
 *    go out at once (a leader's AppendEntries leave while its own write runs, Raft thesis
 *    10.2.1); its after-persist messages (votes, acknowledgements) are encoded and held
 *    until the storage reports that request durable. Storage completions come back in
 *    submit order, and each one is reported to the core as "persisted up to (index, term)".
 *
 * 2. Nothing is applied before it is committed, and what a step applied is handed on
 *    whole: the applied hook gets every entry the step applied, in index order, with the
 *    state machine's answer, and the ReadIndex answers the step released. node_api.c
 *    acknowledges clients from there (an entry whose term is not the one it was proposed
 *    in is "lost to a leader change"), so no answer leaves before its entry is applied.
 *
 * 3. A fatal storage error (a failed write or fsync) stops the replica: the page cache
 *    can no longer be trusted, so the only safe continuation is a restart that recovers
 *    from the disk. The node breaks the loop with exit code 70.
 *
 * 4. Bootstrap is the controller's decision (controller.c): with empty state the shell
 *    opens everything, announces "empty" in its handshakes and waits for node_start().
 *
 * 5. Status frames tell the supervisor the truth: STARTING while recovering, RUNNING once
 *    the log is loaded, the role and term as the core reports them, STOPPING on shutdown.
 *    The leader is reported (leader_id != 0, which makes /readyz say "ok") only once this
 *    replica could serve a linearizable read at once: it has applied up to a ReadIndex it
 *    obtained from the current leader after that leader became known (readiness_check).
 *    A replica restarted on an idle cluster, or one that knows a leader but lags, is
 *    "noleader" until then: there is no leader it can serve through yet. Frames are sent
 *    on every change of phase, role, term or reported leader, and at least every
 *    supervisor.heartbeat_ms.
 *
 * 6. Snapshots are taken when raft.snapshot_entries entries have been applied since the
 *    last one: the state machine is serialised on the loop (fast), the file is written
 *    and synced on a separate thread, and only then is the core told (it may then send
 *    the snapshot to lagging followers) and the log compacted behind it.
 */
#include "node.h"

#include "log.h"
#include "names.h"
#include "netaddr.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define TRAILING_ENTRIES_MAX 5000 /* kept behind a snapshot for slightly late followers */
#define READY_RETRY_MS 250 /* a follower's readiness read unanswered this long: ask again */

static void handle_update(struct node *n, const struct raft_update *u);
static void node_report_status(struct node *n, bool force);
static void readiness_check(struct node *n);

uint64_t node_now_ms(void)
{
    return mono_ms();
}

/* ---- status frames --------------------------------------------------------------- */

enum status_role node_status_role(uint8_t role)
{
    switch (role) {
    case RAFT_FOLLOWER:
        return STATUS_ROLE_FOLLOWER;
    case RAFT_PRECANDIDATE:
        return STATUS_ROLE_PRECANDIDATE;
    case RAFT_CANDIDATE:
        return STATUS_ROLE_CANDIDATE;
    case RAFT_LEADER:
        return STATUS_ROLE_LEADER;
    case RAFT_LEARNER:
        return STATUS_ROLE_LEARNER;
    default:
        return STATUS_ROLE_UNKNOWN;
    }
}

const char *node_role_name(uint8_t raft_role)
{
    return names_role(node_status_role(raft_role));
}

static void node_report_status(struct node *n, bool force)
{
    struct worker_status s;
    if (!n->status_ready)
        return; /* node_open() runs while another thread sends the STARTING frames */
    memset(&s, 0, sizeof(s));
    /* RUNNING as soon as the log is loaded, even before a cluster is founded or joined. */
    s.phase = n->stopping ? STATUS_PHASE_STOPPING : STATUS_PHASE_RUNNING;
    s.node_id = n->id;
    s.pid = (uint32_t)getpid();
    if (n->raft) {
        struct raft_status rs;
        raft_get_status(n->raft, &rs);
        s.role = node_status_role(rs.role);
        s.term = rs.term;
        /* the leader it can serve through: none until caught up (readiness_check) */
        s.leader_id = n->caught_up && n->ready_leader == rs.leader ? rs.leader : 0;
        s.commit_index = rs.commit;
        s.applied_index = n->applied;
    } else {
        s.role = STATUS_ROLE_FOLLOWER;
    }
    const struct worker_status *l = &n->sw->last;
    bool changed = n->sw->sent == 0 || l->phase != s.phase || l->role != s.role ||
                   l->term != s.term || l->leader_id != s.leader_id;
    if (!force && !changed)
        return;
    if (statusw_send(n->sw, &s) < 0 && n->exit_code == 0) {
        log_event(LOG_ERROR, "raftd", "status pipe broken: the supervisor is gone; exiting",
                  NULL);
        n->exit_code = EXIT_SOFTWARE;
        event_base_loopbreak(n->base);
    }
}

static void on_status_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    readiness_check(arg); /* retries a readiness read that got no answer */
    node_report_status(arg, true);
}

/* ---- readiness -------------------------------------------------------------------- */

bool node_is_caught_up(const struct node *n)
{
    return n->raft != NULL && !n->stopping && n->leader != 0 && n->caught_up &&
           n->ready_leader == n->leader && n->ready_term == n->term;
}

static void issue_ready_read(struct node *n)
{
    n->ready_read_id = node_new_read_id(n); /* one id space: no clash with a client's */
    n->ready_read_ms = node_now_ms();
    n->ready_released = false;
    n->in_readiness = true;
    struct raft_event ev = {.type = RAFT_EV_READ, .now = n->ready_read_ms};
    ev.read_id = n->ready_read_id;
    int rc = node_step(n, &ev, NULL, NULL);
    n->in_readiness = false;
    if (rc != RAFT_OK)
        n->ready_read_id = 0; /* not taken (no leader, too many reads): the next check asks */
}

/*
 * Is this replica caught up with the current leader? It is once it has applied up to a
 * ReadIndex the leader gave it after it became known: exactly what a linearizable read
 * here would wait for. On the leader the read is released once its no-op has committed
 * and a quorum confirmed it still leads. A changed (term, leader) starts over. Called
 * after every update and from the status timer, which also retries a follower's read
 * whose request or answer was lost (a retry with the same id replaces the attempt).
 */
static void readiness_check(struct node *n)
{
    if (n->in_readiness || n->raft == NULL || n->exit_code != 0)
        return;
    if (n->leader != n->ready_leader || n->term != n->ready_term) {
        if (n->caught_up)
            log_event(LOG_INFO, "raftd", "not caught up: the leader changed",
                      "leader=%u term=%llu", n->leader, (unsigned long long)n->term);
        n->caught_up = false;
        n->ready_leader = n->leader;
        n->ready_term = n->term;
        n->ready_read_id = 0;
        n->ready_released = false;
    }
    if (n->caught_up || n->leader == 0 || n->stopping)
        return;
    if (n->ready_released) {
        if (n->applied < n->ready_index)
            return;
        n->caught_up = true;
        n->ready_read_id = 0;
        log_event(LOG_INFO, "raftd", "caught up with the leader",
                  "leader=%u term=%llu applied=%llu", n->leader, (unsigned long long)n->term,
                  (unsigned long long)n->applied);
        node_report_status(n, false);
        return;
    }
    uint64_t now = node_now_ms();
    if (n->ready_read_id == 0 ||
        (n->role != RAFT_LEADER && now - n->ready_read_ms >= READY_RETRY_MS)) {
        issue_ready_read(n);
        if (n->ready_released)
            readiness_check(n); /* released at once (a sole voter): caught up now */
    }
}

/* Take the readiness read's answer out of reads[]; true when rs was it. */
static bool readiness_read_released(struct node *n, const struct raft_read_state *rs)
{
    if (n->ready_read_id == 0 || rs->id != n->ready_read_id)
        return false;
    if (rs->rc == RAFT_OK) {
        n->ready_released = true;
        n->ready_index = rs->index;
    } else {
        n->ready_read_id = 0; /* leadership moved first: ask the next leader */
    }
    return true;
}

/* ---- stepping the core ------------------------------------------------------------ */

static void fatal(struct node *n, const char *msg, const char *detail)
{
    char q[512];
    log_event(LOG_ERROR, "raftd", msg, "detail=%s; exiting 70",
              log_quote(q, sizeof(q), detail ? detail : ""));
    if (n->exit_code == 0)
        n->exit_code = EXIT_SOFTWARE;
    event_base_loopbreak(n->base);
}

int node_step(struct node *n, const struct raft_event *ev, raft_index *index, raft_term *term)
{
    struct raft_update u;
    if (n->raft == NULL || n->exit_code != 0)
        return RAFT_ENOTLEADER;
    int rc = raft_step(n->raft, ev, &u);
    if (rc == RAFT_ENOMEM) {
        fatal(n, "out of memory in the Raft core", NULL);
        return rc;
    }
    if (index)
        *index = u.proposed_index;
    if (term)
        *term = u.proposed_term;
    handle_update(n, &u);
    return rc;
}

uint64_t node_new_read_id(struct node *n)
{
    return ++n->next_read_id;
}

static void tick_now(struct node *n)
{
    struct raft_event ev = {.type = RAFT_EV_TICK, .now = node_now_ms()};
    node_step(n, &ev, NULL, NULL);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct node *n = arg;
    (void)fd;
    (void)what;
    n->tick_at = 0;
    tick_now(n);
}

static void arm_tick(struct node *n, uint64_t deadline)
{
    if (deadline == RAFT_NO_DEADLINE)
        return;
    if (n->tick_at != 0 && n->tick_at <= deadline)
        return; /* already armed for an earlier moment */
    uint64_t now = node_now_ms();
    uint64_t wait = deadline > now ? deadline - now : 0;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)((wait % 1000) * 1000)};
    n->tick_at = deadline;
    evtimer_add(n->ev_tick, &tv);
}

/* ---- persistence ------------------------------------------------------------------ */

static void release_raft_buf(void *arg)
{
    raft_buf_unref(arg);
}

static void hold_messages(struct node *n, uint64_t seq, const struct raft_msg *msgs, size_t cnt)
{
    struct held_msgs *h = calloc(1, sizeof(*h));
    struct tframe **frames = calloc(cnt, sizeof(*frames));
    if (h == NULL || frames == NULL) {
        free(h);
        free(frames);
        return; /* dropped: Raft retries */
    }
    for (size_t i = 0; i < cnt; i++)
        frames[h->n++] = transport_encode(n->tr, &msgs[i]);
    h->seq = seq;
    h->frames = frames;
    if (n->held_tail)
        n->held_tail->next = h;
    else
        n->held_head = h;
    n->held_tail = h;
}

static void release_held(struct node *n)
{
    while (n->held_head && n->held_head->seq <= n->persist_done) {
        struct held_msgs *h = n->held_head;
        n->held_head = h->next;
        if (n->held_head == NULL)
            n->held_tail = NULL;
        for (size_t i = 0; i < h->n; i++)
            if (h->frames[i])
                transport_send_frame(n->tr, h->frames[i]);
        free(h->frames);
        free(h);
    }
}

static int persist(struct node *n, const struct raft_update *u)
{
    struct storage_write w;
    struct storage_install in;
    struct wal_entry stack_entries[64];
    struct wal_entry *ents = stack_entries;
    struct diskio_err err;
    uint8_t cfgbuf[RAFT_MAX_MEMBERS * (RAFT_MAX_ADDRESS + 8) + 8];

    memset(&w, 0, sizeof(w));
    if (u->hs_changed) {
        w.has_hard_state = true;
        w.term = u->term;
        w.vote = u->vote;
    }
    if (u->snapshot != NULL) {
        int clen = raft_config_encode(&u->snapshot->config, cfgbuf, sizeof(cfgbuf));
        if (clen < 0) {
            fatal(n, "cannot encode a snapshot's configuration", NULL);
            return -1;
        }
        memset(&in, 0, sizeof(in));
        in.index = u->snapshot->index;
        in.term = u->snapshot->term;
        in.config = cfgbuf;
        in.config_len = (uint32_t)clen;
        if (u->snapshot->data) {
            raft_buf_ref(u->snapshot->data);
            in.data = u->snapshot->data->data;
            in.data_len = u->snapshot->data->len;
            in.release = release_raft_buf;
            in.release_arg = u->snapshot->data;
        }
        w.install = &in;
        w.truncate_from = u->snapshot->index + 1; /* the core's log is empty after it */
    }
    if (u->n_entries > 64) {
        ents = malloc(u->n_entries * sizeof(*ents));
        if (ents == NULL) {
            fatal(n, "out of memory persisting entries", NULL);
            return -1;
        }
    }
    for (size_t i = 0; i < u->n_entries; i++) {
        ents[i].index = u->entries[i].index;
        ents[i].term = u->entries[i].term;
        ents[i].type = u->entries[i].type;
        ents[i].len = u->entries[i].len;
        ents[i].data = u->entries[i].data;
    }
    w.entries = ents;
    w.n_entries = u->n_entries;
    w.cookie = (void *)(uintptr_t)(n->persist_seq + 1);
    int rc = storage_submit(n->st, &w, &err);
    if (ents != stack_entries)
        free(ents);
    if (rc != DISKIO_OK) {
        if (u->snapshot && u->snapshot->data)
            raft_buf_unref(u->snapshot->data);
        fatal(n, "storage refused a write", err.msg);
        return -1;
    }
    n->persist_seq++;
    if (u->snapshot != NULL) {
        n->install_seq = n->persist_seq;
        n->install_index = u->snapshot->index;
        n->install_term = u->snapshot->term;
    }
    return 0;
}

static void on_storage(evutil_socket_t fd, short what, void *arg)
{
    struct node *n = arg;
    struct storage_done done[64];
    (void)fd;
    (void)what;
    size_t k;
    while ((k = storage_poll(n->st, done, 64)) > 0) {
        for (size_t i = 0; i < k; i++) {
            if (done[i].status != DISKIO_OK) {
                struct diskio_err err;
                storage_failed(n->st, &err);
                fatal(n, "storage write failed; restart to recover from disk", err.msg);
                return;
            }
            n->persist_done = (uint64_t)(uintptr_t)done[i].cookie;
        }
        release_held(n);
        /* One PERSISTED for the newest completion covers every earlier one. */
        struct raft_event ev = {.type = RAFT_EV_PERSISTED, .now = node_now_ms()};
        ev.persisted.index = done[k - 1].last_index;
        ev.persisted.term = done[k - 1].last_term;
        node_step(n, &ev, NULL, NULL);
        if (n->install_seq != 0 && n->persist_done >= n->install_seq) {
            struct raft_event iev = {.type = RAFT_EV_SNAPSHOT_INSTALLED, .now = node_now_ms()};
            iev.persisted.index = n->install_index;
            iev.persisted.term = n->install_term;
            n->install_seq = 0;
            n->snapshot_index = n->install_index;
            node_step(n, &iev, NULL, NULL);
        }
        if (k < 64)
            break;
    }
}

/* ---- snapshots ---------------------------------------------------------------------- */

struct snap_job {
    struct storage *st;
    uint64_t index, term;
    uint8_t cfg[RAFT_MAX_MEMBERS * (RAFT_MAX_ADDRESS + 8) + 8];
    uint32_t cfg_len;
    struct raft_buf *data;
    int pipe_fd;
    int rc;
    char err[DISKIO_MSG_MAX];
    uint64_t ms;
};

static void *snap_thread(void *arg)
{
    struct snap_job *j = arg;
    struct diskio_err err;
    uint64_t t0 = mono_ms();
    j->rc = storage_snapshot_save(j->st, j->index, j->term, j->cfg, j->cfg_len,
                                  j->data ? j->data->data : NULL, j->data ? j->data->len : 0,
                                  &err);
    j->ms = mono_ms() - t0;
    if (j->rc != DISKIO_OK)
        snprintf(j->err, sizeof(j->err), "%s", err.msg);
    /* Hand the job back to the loop; a pointer fits in one atomic pipe write. */
    ssize_t w = write(j->pipe_fd, &j, sizeof(j));
    (void)w;
    return NULL;
}

static void on_snapshot_done(evutil_socket_t fd, short what, void *arg)
{
    struct node *n = arg;
    struct snap_job *j;
    (void)what;
    if (read(fd, &j, sizeof(j)) != (ssize_t)sizeof(j))
        return;
    n->snapshot_running = false;
    if (j->rc != DISKIO_OK) {
        log_event(LOG_ERROR, "raftd", "snapshot failed; will retry", "index=%llu err=%s",
                  (unsigned long long)j->index, log_q(j->err));
        raft_buf_unref(j->data);
        free(j);
        return;
    }
    log_event(LOG_INFO, "raftd", "snapshot saved", "index=%llu term=%llu bytes=%zu ms=%llu",
              (unsigned long long)j->index, (unsigned long long)j->term,
              j->data ? j->data->len : (size_t)0, (unsigned long long)j->ms);
    n->snapshot_index = j->index;
    n->last_snapshot_ms = node_now_ms();
    n->last_snapshot_bytes = j->data ? j->data->len : 0;
    uint64_t trailing = n->cfg->raft.snapshot_entries / 2;
    if (trailing > TRAILING_ENTRIES_MAX)
        trailing = TRAILING_ENTRIES_MAX;
    struct raft_event ev = {.type = RAFT_EV_SNAPSHOT_TAKEN, .now = node_now_ms()};
    ev.snapshot.index = j->index;
    ev.snapshot.data = j->data;
    ev.snapshot.trailing = trailing;
    node_step(n, &ev, NULL, NULL);
    raft_buf_unref(j->data); /* the core took its own reference */
    if (j->index > trailing) {
        struct diskio_err err;
        storage_compact(n->st, j->index - trailing, &err);
    }
    free(j);
}

/*
 * When to snapshot: at least raft.snapshot_entries entries since the last one, and at
 * least half the last snapshot's size in entry bytes since then. The second rule keeps
 * the cost of snapshotting proportional to the write rate as the state grows (a 50 MB
 * state is not serialised every 10,000 small entries), while the log held in memory and
 * on disk stays below half the state's size plus snapshot_entries entries.
 */
static void maybe_snapshot(struct node *n)
{
    if (n->snapshot_running || n->applied < n->snapshot_index + n->cfg->raft.snapshot_entries)
        return;
    if (n->bytes_since_snapshot < n->last_snapshot_bytes / 2)
        return;
    struct snap_job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return;
    struct raft_config conf;
    if (raft_snapshot_meta(n->raft, n->applied, &j->term, &conf) != RAFT_OK) {
        free(j);
        return;
    }
    int clen = raft_config_encode(&conf, j->cfg, sizeof(j->cfg));
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (clen < 0 || fsm_snapshot(n->fsm, &bytes, &len) != FSM_OK) {
        free(j);
        free(bytes);
        log_event(LOG_ERROR, "raftd", "cannot serialise the state machine for a snapshot",
                  NULL);
        return;
    }
    j->cfg_len = (uint32_t)clen;
    n->bytes_since_snapshot = 0;
    j->data = raft_buf_copy(bytes, len);
    free(bytes);
    if (j->data == NULL) {
        free(j);
        return;
    }
    j->st = n->st;
    j->index = n->applied;
    j->pipe_fd = n->snap_pipe[1];
    if (n->snap_thread_valid) {
        pthread_join(n->snap_thread, NULL); /* the previous one has finished: reap it */
        n->snap_thread_valid = false;
    }
    if (pthread_create(&n->snap_thread, NULL, snap_thread, j) != 0) {
        raft_buf_unref(j->data);
        free(j);
    } else {
        n->snap_thread_valid = true;
        n->snapshot_running = true;
    }
}

/* ---- applying --------------------------------------------------------------------- */

static void sync_transport_peers(struct node *n)
{
    const struct raft_config *c = raft_get_config(n->raft);
    for (uint32_t i = 0; c && i < c->n; i++)
        if (c->members[i].id != n->id)
            transport_set_peer(n->tr, c->members[i].id, c->members[i].address);
    transport_set_local_state(n->tr, true, c);
}

/*
 * Apply the committed entries to the state machine, recording each one's answer in
 * out[] (room for u->n_committed). Returns how many were applied; fewer than committed
 * only after a fatal error.
 */
static size_t apply_entries(struct node *n, const struct raft_update *u,
                            struct node_applied_entry *out, struct fsm_reply *replies)
{
    size_t k = 0;
    for (size_t i = 0; i < u->n_committed; i++) {
        const struct raft_entry *e = &u->committed[i];
        if (e->index <= n->applied)
            continue;
        n->bytes_since_snapshot += e->len + 32; /* payload plus per-entry overhead */
        out[k].entry = e;
        out[k].reply = NULL;
        memset(&replies[k], 0, sizeof(replies[k])); /* cleared by the caller in any case */
        if (e->type == RAFT_ENTRY_NORMAL) {
            struct fsm_reply *reply = &replies[k];
            int rc = fsm_apply(n->fsm, e->index, e->data, e->len, reply);
            if (rc == FSM_ENOMEM) {
                fsm_reply_clear(reply);
                fatal(n, "out of memory applying an entry; restart to recover", NULL);
                return k;
            }
            if (rc == FSM_OK)
                out[k].reply = reply;
            n->applied = e->index;
        } else {
            n->applied = e->index;
            if (e->type == RAFT_ENTRY_CONFIG)
                sync_transport_peers(n);
        }
        k++;
    }
    return k;
}

/* ---- the update ------------------------------------------------------------------- */

/*
 * Role, leader and term as the core reports them (every update carries all three).
 * Called after every step, so it costs nothing unless one of them changed. Returns true
 * when the role or the leader changed.
 */
static bool soft_state(struct node *n, const struct raft_update *u)
{
    raft_term term = u->term;
    if (u->role == n->role && u->leader == n->leader && term == n->term)
        return false;
    if (u->leader != n->leader) {
        n->leader_changes++;
        if (u->leader != 0)
            n->last_leader_ms = node_now_ms();
        log_event(LOG_INFO, "raftd", "leader changed", "leader=%u term=%llu role=%s", u->leader,
                  (unsigned long long)term, node_role_name(u->role));
    } else if (u->role != n->role) {
        if (u->role == RAFT_CANDIDATE)
            n->elections_started++;
        log_event(LOG_DEBUG, "raftd", "role changed", "role=%s term=%llu", node_role_name(u->role),
                  (unsigned long long)term);
    }
    bool changed = u->role != n->role || u->leader != n->leader;
    if (u->role == RAFT_LEADER && n->role != RAFT_LEADER) {
        struct raft_status rs;
        raft_get_status(n->raft, &rs);
        n->leader_noop_index = rs.last_index; /* the new leader's no-op is its last entry */
    }
    n->role = u->role;
    n->leader = u->leader;
    n->term = term;
    node_report_status(n, false);
    return changed;
}

/*
 * The core learned that its leader holds our acknowledgement of entries this replica no
 * longer has (raft_counters.lost_acked): the state dir was wiped or replaced, or writes
 * were lost with fsync off. This is the evidence that a disk was lost; an empty state
 * dir alone is not, since a founding member that starts after the others were already
 * founding the cluster also starts empty.
 */
static void lost_log_check(struct node *n)
{
    struct raft_status rs;
    if (n->raft == NULL)
        return;
    raft_get_status(n->raft, &rs);
    if (rs.counters.lost_acked <= n->lost_acked_seen)
        return;
    n->lost_acked_seen = rs.counters.lost_acked;
    log_event(LOG_WARN, "raftd",
              "this replica lost log entries it had acknowledged: it lost its disk (state dir "
              "wiped or replaced) or writes that were not synced; the leader catches it up, "
              "but it may have forgotten a vote: the safe course is to remove it and add it "
              "back with a new id",
              "node_id=%u leader=%u term=%llu last_index=%llu", n->id, rs.leader,
              (unsigned long long)rs.term, (unsigned long long)rs.last_index);
}

/*
 * Handle one update whole, in this order: persist (and send what may go before it is
 * durable), install a snapshot, apply committed entries, record released reads and the
 * new soft state, arm the timer, maybe snapshot; then tell the hooks once what the step
 * did (node_api completes its waiters there, the controller runs its duties), and last
 * check readiness, which may step the core again for a read of its own.
 */
static void handle_update(struct node *n, const struct raft_update *u)
{
    bool wrote = false;
    if (u->hs_changed || u->snapshot != NULL || u->n_entries > 0) {
        if (persist(n, u) != 0)
            return;
        wrote = true;
    }
    for (size_t i = 0; i < u->n_msgs; i++)
        transport_send(n->tr, &u->msgs[i]);
    if (u->n_msgs_after_persist > 0) {
        if (!wrote && n->persist_done >= n->persist_seq) {
            for (size_t i = 0; i < u->n_msgs_after_persist; i++)
                transport_send(n->tr, &u->msgs_after_persist[i]);
        } else {
            hold_messages(n, n->persist_seq, u->msgs_after_persist, u->n_msgs_after_persist);
        }
    }
    if (u->snapshot != NULL) {
        char err[256];
        const struct raft_buf *d = u->snapshot->data;
        if (fsm_restore(n->fsm, d ? d->data : NULL, d ? d->len : 0, err, sizeof(err)) !=
            FSM_OK) {
            fatal(n, "cannot restore the state machine from the leader's snapshot", err);
            return;
        }
        n->applied = u->snapshot->index;
        log_event(LOG_INFO, "raftd", "installed the leader's snapshot", "index=%llu term=%llu",
                  (unsigned long long)u->snapshot->index,
                  (unsigned long long)u->snapshot->term);
        sync_transport_peers(n);
    }

    /* Room for what this step applies: grown once, kept for the next steps. */
    if (u->n_committed > n->apply_cap) {
        size_t cap = n->apply_cap ? n->apply_cap : 64;
        while (cap < u->n_committed)
            cap *= 2;
        struct node_applied_entry *v = realloc(n->apply_entries, cap * sizeof(*v));
        if (v != NULL)
            n->apply_entries = v;
        struct fsm_reply *rv = v ? realloc(n->apply_replies, cap * sizeof(*rv)) : NULL;
        if (rv != NULL)
            n->apply_replies = rv;
        if (v == NULL || rv == NULL) {
            fatal(n, "out of memory applying entries; restart to recover", NULL);
            return;
        }
        n->apply_cap = cap;
    }
    struct node_applied_entry *applied = n->apply_entries;
    struct fsm_reply *replies = n->apply_replies;
    struct node_applied a = {.entries = applied, .reads = u->reads, .n_reads = u->n_reads};
    if (u->n_committed > 0)
        a.n_entries = apply_entries(n, u, applied, replies);
    for (size_t i = 0; i < u->n_reads; i++)
        readiness_read_released(n, &u->reads[i]);
    a.state_moved = u->n_committed > 0 || u->snapshot != NULL;
    a.leadership_changed = soft_state(n, u);
    arm_tick(n, u->next_deadline);
    if (u->n_committed > 0)
        maybe_snapshot(n);
    lost_log_check(n);
    /*
     * On every update, not only on commits: the controller's log clock must tick on an
     * idle cluster, where nothing commits (then the leader's heartbeat ticks call us).
     */
    if (n->hooks.applied)
        n->hooks.applied(n->hooks.arg, &a);
    for (size_t i = 0; i < a.n_entries; i++)
        fsm_reply_clear(&replies[i]);
    readiness_check(n);
}

/* ---- peers ------------------------------------------------------------------------ */

static void on_message(void *arg, const struct raft_msg *m)
{
    struct node *n = arg;
    if (n->raft == NULL)
        return; /* still deciding whether to bootstrap; Raft will retry */
    struct raft_event ev = {.type = RAFT_EV_RECEIVE, .now = node_now_ms()};
    ev.msg = m;
    node_step(n, &ev, NULL, NULL);
}

static void on_peer(void *arg, const struct transport_peer_info *info, bool up)
{
    struct node *n = arg;
    if (n->hooks.peer)
        n->hooks.peer(n->hooks.arg, info, up);
}

/* ---- start ------------------------------------------------------------------------ */

static int start_raft(struct node *n, struct storage_recovered *rec, bool bootstrap)
{
    struct raft_options opt;
    struct raft_start st;
    struct raft_snapshot snap;
    struct raft_config boot;
    struct raft_entry *ents = NULL;
    struct raft_buf *arena = NULL;
    memset(&opt, 0, sizeof(opt));
    memset(&st, 0, sizeof(st));

    opt.id = n->id;
    if (getrandom(&opt.seed, sizeof(opt.seed), 0) != (ssize_t)sizeof(opt.seed))
        opt.seed = mono_ns() ^ (uint64_t)getpid();
    opt.election_timeout_ms = n->cfg->raft.election_timeout_ms;
    opt.heartbeat_ms = n->cfg->raft.heartbeat_ms;
    opt.max_entry_bytes = n->cfg->controller.max_frame_bytes;
    opt.max_msg_bytes = n->cfg->controller.max_frame_bytes / 2;
    opt.snapshot_chunk_bytes = 256 * 1024;
    opt.max_uncommitted_bytes = n->cfg->raft.max_uncommitted_bytes;

    st.term = rec->term;
    st.vote = (raft_id)rec->vote;
    if (rec->has_snapshot) {
        memset(&snap, 0, sizeof(snap));
        snap.index = rec->snapshot.index;
        snap.term = rec->snapshot.term;
        if (raft_config_decode(rec->snapshot.config, rec->snapshot.config_len, &snap.config) !=
            RAFT_OK)
            return EXIT_DATAERR;
        snap.data = raft_buf_new(rec->snapshot.data_len);
        if (snap.data == NULL)
            return EXIT_OSERR;
        struct diskio_err err;
        if (storage_snapshot_read(n->st, &rec->snapshot, snap.data->data, snap.data->len,
                                  &err) != DISKIO_OK) {
            log_event(LOG_ERROR, "raftd", "cannot read the snapshot", "err=%s", log_q(err.msg));
            raft_buf_unref(snap.data);
            return err.rc == DISKIO_ECORRUPT ? EXIT_DATAERR : EXIT_OSERR;
        }
        char why[256];
        if (fsm_restore(n->fsm, snap.data->data, snap.data->len, why, sizeof(why)) != FSM_OK) {
            log_event(LOG_ERROR, "raftd", "the snapshot does not restore", "err=%s", log_q(why));
            raft_buf_unref(snap.data);
            return EXIT_DATAERR;
        }
        n->applied = snap.index;
        n->snapshot_index = snap.index;
        st.snapshot = &snap;
    }
    if (rec->n_entries > 0) {
        size_t total = 0;
        for (size_t i = 0; i < rec->n_entries; i++)
            total += rec->entries[i].len;
        arena = raft_buf_new(total);
        ents = calloc(rec->n_entries, sizeof(*ents));
        if (arena == NULL || ents == NULL) {
            raft_buf_unref(arena);
            free(ents);
            return EXIT_OSERR;
        }
        size_t off = 0;
        for (size_t i = 0; i < rec->n_entries; i++) {
            const struct wal_entry *w = &rec->entries[i];
            ents[i].index = w->index;
            ents[i].term = w->term;
            ents[i].type = w->type;
            ents[i].len = w->len;
            if (w->len > 0) {
                memcpy(arena->data + off, w->data, w->len);
                ents[i].data = arena->data + off;
                ents[i].buf = arena;
                off += w->len;
            }
        }
        st.entries = ents;
        st.n_entries = rec->n_entries;
    }
    if (bootstrap) {
        memset(&boot, 0, sizeof(boot));
        for (size_t i = 0; i < n->cfg->controller.npeers; i++)
            raft_config_add(&boot, (raft_id)(i + 1), RAFT_MEMBER_VOTER,
                            n->cfg->controller.peers[i]);
        st.bootstrap = &boot;
    }
    int rc = raft_new(&opt, &st, node_now_ms(), &n->raft);
    if (st.snapshot)
        raft_buf_unref(snap.data);
    raft_buf_unref(arena);
    free(ents);
    if (rc != RAFT_OK) {
        log_event(LOG_ERROR, "raftd", "the recovered state is inconsistent; refusing to start",
                  "rc=%s", raft_rc_name(rc));
        return rc == RAFT_ENOMEM ? EXIT_OSERR : EXIT_DATAERR;
    }
    n->started = true;
    sync_transport_peers(n);
    transport_set_local_state(n->tr, rec->term > 0 || rec->n_entries > 0 || rec->has_snapshot ||
                                         bootstrap,
                              raft_get_config(n->raft));
    tick_now(n);
    node_report_status(n, true);
    return 0;
}

int node_start(struct node *n, bool found)
{
    struct storage_recovered none;
    memset(&none, 0, sizeof(none));
    return start_raft(n, &none, found);
}

/* The client API address we announce: our listen address, with a wildcard host replaced
 * by the host peers use to reach us. */
static void compute_api_address(struct node *n)
{
    char host[256], rhost[256];
    uint16_t port, rport;
    const struct cfg *c = n->cfg;
    netaddr_split_hostport(c->controller.listen, host, sizeof(host), &port);
    if (strcmp(host, "::") != 0 && strcmp(host, "0.0.0.0") != 0) {
        snprintf(n->api_address, sizeof(n->api_address), "%s", c->controller.listen);
        return;
    }
    const char *mine = n->id <= c->controller.npeers ? c->controller.peers[n->id - 1] : NULL;
    if (mine && netaddr_split_hostport(mine, rhost, sizeof(rhost), &rport) == 0) {
        if (strchr(rhost, ':'))
            snprintf(n->api_address, sizeof(n->api_address), "[%s]:%u", rhost, port);
        else
            snprintf(n->api_address, sizeof(n->api_address), "%s:%u", rhost, port);
    } else {
        snprintf(n->api_address, sizeof(n->api_address), "127.0.0.1:%u", port);
    }
}

const char *node_leader_api(const struct node *n)
{
    if (n->leader == 0)
        return NULL;
    if (n->leader == n->id)
        return n->api_address;
    return transport_peer_api(n->tr, n->leader);
}

int node_open(struct event_base *base, const struct cfg *cfg, uint32_t node_id, struct statusw *sw,
              const struct keyring *kr, const struct node_hooks *hooks, struct node **out,
              char *why, size_t whylen)
{
    struct node *n = calloc(1, sizeof(*n));
    struct storage_options so;
    struct storage_recovered rec;
    struct diskio_err err;
    int code;

    if (n == NULL) {
        snprintf(why, whylen, "out of memory");
        return EXIT_OSERR;
    }
    n->base = base;
    n->cfg = cfg;
    n->kr = kr;
    n->id = node_id;
    n->sw = sw;
    n->hooks = *hooks;
    n->snap_pipe[0] = n->snap_pipe[1] = -1;
    compute_api_address(n);
    memset(&rec, 0, sizeof(rec));

    /* Recover. Frames say STARTING meanwhile (sent by the caller before node_open). */
    storage_options_default(&so);
    so.fsync = cfg->raft.fsync;
    so.max_entry_bytes = cfg->controller.max_frame_bytes + 65536;
    uint64_t t0 = mono_ms();
    if (storage_open(cfg->controller.state_dir, &so, &n->st, &rec, &err) != DISKIO_OK) {
        snprintf(why, whylen, "%s", err.msg);
        free(n);
        return err.rc == DISKIO_ECORRUPT ? EXIT_DATAERR : EXIT_OSERR;
    }
    log_event(LOG_INFO, "raftd", "state recovered",
              "term=%llu vote=%llu snapshot=%llu entries=%zu last_index=%llu ms=%llu",
              (unsigned long long)rec.term, (unsigned long long)rec.vote,
              (unsigned long long)(rec.has_snapshot ? rec.snapshot.index : 0), rec.n_entries,
              (unsigned long long)rec.last_index, (unsigned long long)(mono_ms() - t0));

    n->fsm = fsm_new(NULL);
    n->ev_storage = event_new(base, storage_event_fd(n->st), EV_READ | EV_PERSIST, on_storage, n);
    n->ev_tick = evtimer_new(base, on_tick, n);
    n->ev_status = event_new(base, -1, EV_PERSIST, on_status_timer, n);
    if (pipe2(n->snap_pipe, O_CLOEXEC | O_NONBLOCK) == 0)
        n->ev_snap = event_new(base, n->snap_pipe[0], EV_READ | EV_PERSIST, on_snapshot_done, n);
    if (!n->fsm || !n->ev_storage || !n->ev_tick || !n->ev_status || !n->ev_snap) {
        snprintf(why, whylen, "out of memory");
        code = EXIT_OSERR;
        goto fail;
    }
    event_add(n->ev_storage, NULL);
    event_add(n->ev_snap, NULL);
    uint32_t hb = cfg->supervisor.heartbeat_ms;
    struct timeval stv = {hb / 1000, (hb % 1000) * 1000};
    event_add(n->ev_status, &stv);

    struct transport_options to = {
        .self = n->id,
        .keyring = kr,
        .cluster_name = cfg->cluster_name,
        .listen = cfg->raft.listen,
        .api_address = n->api_address,
        .max_frame = cfg->controller.max_frame_bytes,
        .seed = mono_ns() ^ ((uint64_t)n->id << 32),
    };
    struct transport_callbacks tcb = {.on_message = on_message, .on_peer = on_peer, .arg = n};
    n->tr = transport_new(base, &to, &tcb, why, whylen);
    if (n->tr == NULL) {
        code = EXIT_OSERR;
        goto fail;
    }
    for (size_t i = 0; i < cfg->controller.npeers; i++)
        if (i + 1 != n->id)
            transport_set_peer(n->tr, (raft_id)(i + 1), cfg->controller.peers[i]);

    bool empty_start = rec.term == 0 && rec.n_entries == 0 && !rec.has_snapshot;
    if (!empty_start) {
        code = start_raft(n, &rec, false);
        if (code != 0) {
            snprintf(why, whylen, "the recovered Raft state cannot be loaded");
            goto fail;
        }
    } else {
        /* Empty: the controller decides whether to found a cluster or join one. */
        transport_set_local_state(n->tr, false, NULL);
        node_report_status(n, true);
    }
    storage_recovered_free(&rec);
    *out = n;
    return 0;
fail:
    storage_recovered_free(&rec);
    node_free(n);
    return code;
}

/* ---- shutdown --------------------------------------------------------------------- */

bool node_begin_stop(struct node *n)
{
    if (n->stopping)
        return n->stop_transfer;
    n->stopping = true;
    node_report_status(n, true);
    if (n->raft != NULL && n->role == RAFT_LEADER) {
        const struct raft_config *c = raft_get_config(n->raft);
        if (raft_config_voters(c) > 1) {
            n->stop_transfer = true;
            log_event(LOG_INFO, "raftd", "handing leadership over before stopping", NULL);
            struct raft_event ev = {.type = RAFT_EV_TRANSFER, .now = node_now_ms()};
            ev.target = 0;
            node_step(n, &ev, NULL, NULL);
        }
    }
    return n->stop_transfer;
}

void node_enable_status(struct node *n)
{
    n->status_ready = true;
    node_report_status(n, true);
}

int node_exit_code(const struct node *n)
{
    return n->exit_code;
}

void node_free(struct node *n)
{
    if (n == NULL)
        return;
    while (n->held_head) {
        struct held_msgs *h = n->held_head;
        n->held_head = h->next;
        for (size_t i = 0; i < h->n; i++)
            transport_frame_free(h->frames[i]);
        free(h->frames);
        free(h);
    }
    transport_free(n->tr);
    if (n->snap_thread_valid) {
        /* A snapshot may still be writing with the storage: let it finish first. */
        pthread_join(n->snap_thread, NULL);
        struct snap_job *j;
        /* Its job comes back through the pipe unless the loop already took it. */
        if (n->snapshot_running &&
            read(n->snap_pipe[0], &j, sizeof(j)) == (ssize_t)sizeof(j)) {
            raft_buf_unref(j->data);
            free(j);
        }
    }
    storage_close(n->st); /* finishes queued writes first */
    if (n->ev_storage)
        event_free(n->ev_storage);
    if (n->ev_tick)
        event_free(n->ev_tick);
    if (n->ev_status)
        event_free(n->ev_status);
    if (n->ev_snap)
        event_free(n->ev_snap);
    if (n->snap_pipe[0] >= 0)
        close(n->snap_pipe[0]);
    if (n->snap_pipe[1] >= 0)
        close(n->snap_pipe[1]);
    raft_free(n->raft);
    fsm_free(n->fsm);
    free(n->apply_entries);
    free(n->apply_replies);
    free(n);
}
