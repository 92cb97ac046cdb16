/*
 * raft.h - the Raft consensus core: a pure, deterministic state machine.
 *
 * INVARIANTS (what the core guarantees, given that the shell keeps the contract below)
 *
 *   - Election safety: at most one leader per term. A node votes at most once per term and
 *     its vote request or vote grant is only ever released in msgs_after_persist, i.e.
 *     after the hard state that records the vote is durable.
 *   - Log matching: a follower appends only after the entry before the new ones matches the
 *     leader's (index, term); it truncates only a suffix that really conflicts, so a stale or
 *     reordered AppendEntries never removes matching entries.
 *   - Leader completeness / Figure 8: a leader commits by counting only entries of its own
 *     term; earlier entries commit with them. A new leader appends a no-op and serves no read
 *     and accepts no membership change before an entry of its term has committed.
 *   - Durability of acknowledgements: a follower acknowledges only entries the shell has
 *     reported durable ("persisted up to (index, term)"); a leader counts itself in a quorum
 *     only up to its own durable index (it may send before its own write finishes, Raft
 *     thesis 10.2.1). Committed entries are handed out for applying only once they are
 *     committed AND durable locally.
 *   - Linearizable reads (ReadIndex): a read is released only after a quorum answered a
 *     heartbeat round sent after the read arrived, and only at an index taken after the
 *     leader committed an entry of its term. Every attempt gets a fresh internal token, so
 *     a retry (even with the same caller id) never receives an older attempt's index.
 *   - Membership: single-server changes, one at a time, only after an entry of the current
 *     term has committed; a node uses the latest configuration in its log (committed or
 *     not); a leader that removed itself steps down once the removal commits.
 *   - Nothing reachable from a message or another input can crash the process: malformed
 *     input is refused with RAFT_EINVAL and counted in raft_counters, never asserted.
 *   - Purity: no I/O, no clock reads, no global state. Time is what the caller passes in
 *     (monotonic milliseconds); randomness comes from raft_options.seed.
 *
 * THE SHELL'S CONTRACT (what the caller must do with each update)
 *
 *   Every call to raft_step() fills one struct raft_update. Handle it completely, in this
 *   order, before the next raft_step() on the same node:
 *
 *     1. Start durable writes, IN ORDER with the writes of earlier updates:
 *          a. the hard state (term, vote) if hs_changed, no later than (b);
 *          b. if snapshot != NULL: store the snapshot and drop every stored log entry
 *             (the core's log is empty after it, based at snapshot->index);
 *          c. entries[0..n_entries): first delete every stored entry with index >=
 *             entries[0].index (a conflicting suffix), then append them.
 *        The writes may complete later, on another thread. When they complete, report
 *        RAFT_EV_PERSISTED with the (index, term) of the last entry written and
 *        RAFT_EV_SNAPSHOT_INSTALLED for (b). Reports must follow write order.
 *     2. Send msgs[] at once (they depend on nothing unwritten; a leader's AppendEntries go
 *        out in parallel with its own write). Send msgs_after_persist[] ONLY after every
 *        write of this update (1a-1c) AND of every earlier update is durable; an update
 *        may carry such messages without writes of its own (a vote granted again to a
 *        duplicated request), so treat them as a barrier in the write queue. Messages may
 *        be dropped or reordered: Raft retries.
 *     3. If snapshot != NULL, restore the state machine from it before applying (4).
 *     4. Apply committed[0..n_committed) in order (types NORMAL, NOOP, CONFIG).
 *     5. Deliver reads[] (a read may be served once the applied index >= reads[i].index).
 *     6. Call raft_step() with RAFT_EV_TICK no later than next_deadline.
 *
 *   Lifetimes: every array in the update and every pointer inside it (entry data, message
 *   entries, snapshot chunks, configuration bytes) is owned by the core and valid until
 *   the next raft_step() or raft_free() on this node. Entry data and snapshot data live in
 *   reference-counted struct raft_buf: a shell that needs bytes longer (a writer thread,
 *   a queue of delayed messages) takes raft_buf_ref(entry->buf) and later drops it with
 *   raft_buf_unref(). The refcount is atomic, so the unref may happen on another thread;
 *   the bytes of a raft_buf never change after creation. Nothing else in this module is
 *   thread-safe: one node is driven by one thread at a time.
 *
 *   Restart: raft_start() takes what was durable (hard state, latest snapshot, the log
 *   after it). A crash loses what was not durable; that is safe because nothing that
 *   depended on it was sent (msgs_after_persist) or acknowledged (acks wait for
 *   RAFT_EV_PERSISTED).
 */
#ifndef SPUR_RAFT_H
#define SPUR_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint32_t raft_id;    /* node id, 1-based; 0 means none */
typedef uint64_t raft_index; /* log index, 1-based; 0 means none */
typedef uint64_t raft_term;  /* term; 0 only before the first term */

#define RAFT_NO_DEADLINE UINT64_MAX
#define RAFT_MAX_MEMBERS 64  /* voters + learners in one configuration */
#define RAFT_MAX_ADDRESS 255 /* bytes of a member address */

/* Return codes. 0 is success; errors are negative. */
enum raft_rc {
    RAFT_OK = 0,
    RAFT_EINVAL = -1,     /* malformed input (counted when it came from a message) */
    RAFT_ENOMEM = -2,     /* allocation failed; the node's state is unchanged */
    RAFT_ENOTLEADER = -3, /* this node does not lead; see update.leader for a hint */
    RAFT_EBUSY = -4,      /* a change is pending, a transfer is running, or a limit is hit
                           * (e.g. max_uncommitted_bytes): retry later */
    RAFT_ENOTREADY = -5,  /* the leader has not yet committed an entry of its term */
    RAFT_ESTALE = -6,     /* an input that no longer applies (old index, old term) */
};
const char *raft_rc_name(int rc);

/* ---------------------------------------------------------------- buffers */

/*
 * An immutable, reference-counted byte buffer. Created with one reference owned by the
 * creator. Entries and snapshot chunks point into a buffer (data + len) and hold one
 * reference on it while they live in the core's log.
 */
struct raft_buf {
    _Atomic uint64_t refs;
    size_t len;
    uint8_t data[];
};
struct raft_buf *raft_buf_new(size_t len); /* NULL on allocation failure */
struct raft_buf *raft_buf_copy(const void *data, size_t len);
/*
 * Resize a buffer that is still being written by its creator, which holds the only
 * reference (nobody else has seen it). Returns the moved buffer with len bytes (the first
 * min(old, new) bytes kept), or NULL on allocation failure with b untouched.
 */
struct raft_buf *raft_buf_resize(struct raft_buf *b, size_t len);
void raft_buf_ref(struct raft_buf *b);   /* NULL-safe */
void raft_buf_unref(struct raft_buf *b); /* NULL-safe; frees at zero */

/* ---------------------------------------------------------------- entries */

enum raft_entry_type {
    RAFT_ENTRY_NORMAL = 1, /* opaque application bytes */
    RAFT_ENTRY_NOOP = 2,   /* appended by every new leader; empty */
    RAFT_ENTRY_CONFIG = 3, /* a whole configuration, encoded by raft_config_encode() */
};

struct raft_entry {
    raft_term term;
    raft_index index;
    uint8_t type;         /* enum raft_entry_type */
    uint32_t len;         /* bytes at data */
    const uint8_t *data;  /* points into buf; NULL when len == 0 */
    struct raft_buf *buf; /* holder of data; may be NULL when len == 0 */
};

/* ---------------------------------------------------------------- configuration */

enum raft_member_role { RAFT_MEMBER_VOTER = 1, RAFT_MEMBER_LEARNER = 2 };

struct raft_member {
    raft_id id;
    uint8_t role;                       /* enum raft_member_role */
    char address[RAFT_MAX_ADDRESS + 1]; /* opaque to the core; NUL-terminated */
};

/* A configuration: members sorted by id, ids unique and non-zero. Plain value type. */
struct raft_config {
    uint32_t n;
    struct raft_member members[RAFT_MAX_MEMBERS];
};

/*
 * The byte encoding of a configuration, used as the data of RAFT_ENTRY_CONFIG entries and
 * in snapshot metadata (stable: it is stored on disk):
 *   u8 version (=1), u8 count, then per member: u32 id (LE), u8 role, u8 addr_len, addr.
 * raft_config_encode() returns the bytes written or a negative raft_rc when out is short
 * (out may be NULL with cap 0 to learn the size); raft_config_decode() validates everything
 * (version, count, sorted unique non-zero ids, roles, lengths, trailing bytes, at least one
 * voter) and returns RAFT_OK or RAFT_EINVAL.
 */
int raft_config_encode(const struct raft_config *c, uint8_t *out, size_t cap);
int raft_config_decode(const uint8_t *data, size_t len, struct raft_config *c);
/* Helpers on a configuration. */
const struct raft_member *raft_config_find(const struct raft_config *c, raft_id id);
int raft_config_add(struct raft_config *c, raft_id id, int role, const char *address);
int raft_config_remove(struct raft_config *c, raft_id id);
uint32_t raft_config_voters(const struct raft_config *c);

/* ---------------------------------------------------------------- snapshots */

/*
 * Snapshot metadata and data. `config` is the configuration in force at `index`; the shell
 * stores it with the snapshot so that a restart recovers the membership.
 */
struct raft_snapshot {
    raft_index index;
    raft_term term;
    struct raft_config config;
    struct raft_buf *data; /* the whole serialized state machine; may be NULL when empty */
};

/* ---------------------------------------------------------------- messages */

enum raft_msg_type {
    RAFT_MSG_APPEND = 1,      /* index=prev index, log_term=prev term, commit, entries */
    RAFT_MSG_APPEND_RESP,     /* reject? index=rejected prev, hint_index/hint_term
                               * : index=highest durable index matching the leader */
    RAFT_MSG_PREVOTE,         /* term=the term it would run in; index/log_term=last entry */
    RAFT_MSG_PREVOTE_RESP,    /* reject */
    RAFT_MSG_VOTE,            /* index/log_term=last entry; transfer=ignore leader lease */
    RAFT_MSG_VOTE_RESP,       /* reject */
    RAFT_MSG_HEARTBEAT,       /* commit (<= what the follower matched), ctx=read round */
    RAFT_MSG_HEARTBEAT_RESP,  /* ctx=echoed read round, index=durable last index,
                               * reject=the commit sent is beyond what this follower knows
                               * matches the leader (it restarted): probe it */
    RAFT_MSG_SNAPSHOT,        /* snap: one chunk of the leader's snapshot */
    RAFT_MSG_SNAPSHOT_RESP,   /* reject? index=snapshot index, offset=next byte wanted,
                               * done=installed and durable */
    RAFT_MSG_TIMEOUT_NOW,     /* leadership transfer: campaign now */
    RAFT_MSG_READ_INDEX,      /* follower -> leader: ctx=token of one read attempt */
    RAFT_MSG_READ_INDEX_RESP, /* ctx=token, index=read index, reject=not leader */
};
#define RAFT_MSG_TYPE_MAX RAFT_MSG_READ_INDEX_RESP
const char *raft_msg_type_name(int type);

/* One chunk of an InstallSnapshot transfer. */
struct raft_snapshot_chunk {
    raft_index index; /* snapshot metadata */
    raft_term term;
    const uint8_t *config; /* raft_config_encode() bytes */
    uint32_t config_len;
    uint64_t total;      /* size of the whole snapshot data */
    uint64_t offset;     /* where this chunk starts */
    const uint8_t *data; /* chunk bytes; points into buf */
    uint32_t len;
    struct raft_buf *buf;
    bool done; /* offset + len == total */
};

/*
 * One message. Flat like etcd's raftpb.Message: each type uses the fields its comment in
 * enum raft_msg_type names and leaves the others zero. Pointers inside are owned by whoever
 * made the message (the core: valid until its next step; raft_wire: until the decoded
 * message is freed).
 */
struct raft_msg {
    uint8_t type; /* enum raft_msg_type */
    raft_id from;
    raft_id to;
    raft_term term;
    raft_index index;
    raft_term log_term;
    raft_index commit;
    raft_index hint_index;
    raft_term hint_term;
    uint64_t ctx;
    bool reject;
    bool transfer;
    uint32_t n_entries;
    const struct raft_entry *entries;
    struct raft_snapshot_chunk snap;
};

/* ---------------------------------------------------------------- options and start */

struct raft_options {
    raft_id id;                    /* this node; required */
    uint64_t seed;                 /* randomness for election timeouts */
    uint32_t election_timeout_ms;  /* default 1000; actual timeouts in [t, 2t) */
    uint32_t heartbeat_ms;         /* default 100 */
    bool disable_prevote;          /* pre-vote, check-quorum and stickiness are on by */
    bool disable_check_quorum;     /* default; these exist for tests of their absence */
    uint32_t max_inflight_msgs;    /* per follower AppendEntries in flight; default 256 */
    uint64_t max_inflight_bytes;   /* per follower entry bytes in flight; default 16 MiB */
    uint32_t max_msg_bytes;        /* entry bytes per AppendEntries; default 1 MiB */
    uint32_t max_entry_bytes;      /* one proposal entry; default 1 MiB */
    uint32_t snapshot_chunk_bytes; /* InstallSnapshot chunk; default 1 MiB */
    uint64_t max_snapshot_bytes;   /* refuse larger incoming snapshots; default 1 GiB */
    uint32_t max_pending_reads;    /* default 4096 */
    /*
     * Leader: refuse a proposal (RAFT_EBUSY) when the entry bytes it proposed in its term
     * and has not committed yet would go above this (etcd's MaxUncommittedEntriesSize).
     * A proposal is always taken when nothing is uncommitted, so one entry of any allowed
     * size goes through; the no-op and configuration entries do not count. Default
     * 64 MiB; UINT64_MAX: no limit.
     */
    uint64_t max_uncommitted_bytes;
};

/*
 * What was durable at start. `entries` are the stored log after the snapshot (index
 * snapshot.index + 1 onward, contiguous, terms non-decreasing); the core takes its own
 * reference on each entry's buf, the caller keeps its own. `bootstrap`, when not NULL and
 * the state is empty (no term, no snapshot, no entries), makes this node create the
 * identical first entry every founding member creates from the same voter set: index 1,
 * term 1, a CONFIG entry; it appears in the first update's entries to persist. A node
 * started empty without bootstrap waits as a follower until a leader contacts it.
 */
struct raft_start {
    raft_term term;
    raft_id vote;
    const struct raft_snapshot *snapshot; /* NULL: none */
    const struct raft_entry *entries;
    size_t n_entries;
    const struct raft_config *bootstrap; /* NULL: do not bootstrap */
};

/* ---------------------------------------------------------------- events */

enum raft_event_type {
    RAFT_EV_TICK = 1,           /* only the time moves */
    RAFT_EV_RECEIVE,            /* a message arrived */
    RAFT_EV_PROPOSE,            /* a batch of NORMAL entries */
    RAFT_EV_PERSISTED,          /* log durable up to (index, term) */
    RAFT_EV_SNAPSHOT_TAKEN,     /* the application snapshotted at index; durable */
    RAFT_EV_SNAPSHOT_INSTALLED, /* update.snapshot (index, term) is durable and restored */
    RAFT_EV_READ,               /* a linearizable read, id chosen by the caller */
    RAFT_EV_TRANSFER,           /* leadership transfer to target (0: most up to date) */
    RAFT_EV_CHANGE,             /* membership change */
};

enum raft_change_type {
    RAFT_CHANGE_ADD_LEARNER = 1, /* id must be new; address is stored in the config */
    RAFT_CHANGE_PROMOTE = 2,     /* learner -> voter */
    RAFT_CHANGE_REMOVE = 3,      /* voter or learner (may be the leader itself) */
};

struct raft_proposal {
    const void *data;
    uint32_t len;
};

struct raft_event {
    uint8_t type; /* enum raft_event_type */
    uint64_t now; /* monotonic ms; never goes back (older values are treated as equal) */
    union {
        const struct raft_msg *msg; /* RECEIVE */
        struct {
            const struct raft_proposal *entries; /* data is copied */
            uint32_t n;
        } propose;
        struct {
            raft_index index;
            raft_term term;
        } persisted; /* PERSISTED and SNAPSHOT_INSTALLED */
        struct {
            raft_index index;      /* <= applied index */
            struct raft_buf *data; /* the core takes its own reference */
            raft_index trailing;   /* keep this many entries before index in the log */
        } snapshot;
        uint64_t read_id; /* READ */
        raft_id target;   /* TRANSFER */
        struct {
            uint8_t type; /* enum raft_change_type */
            raft_id id;
            const char *address; /* ADD_LEARNER; may be NULL */
        } change;
    };
};

/* ---------------------------------------------------------------- output */

enum raft_role {
    RAFT_FOLLOWER = 1,
    RAFT_PRECANDIDATE = 2,
    RAFT_CANDIDATE = 3,
    RAFT_LEADER = 4,
    RAFT_LEARNER = 5, /* a follower whose configuration lists it as a learner */
};
const char *raft_role_name(int role);

struct raft_read_state {
    uint64_t id;      /* the caller's read id */
    raft_index index; /* serve once applied >= index */
    int rc;           /* RAFT_OK, or RAFT_ENOTLEADER when leadership was lost first */
};

/* Counters of refused input; they only grow. */
struct raft_counters {
    uint64_t invalid_msgs;   /* malformed messages (RAFT_EINVAL) */
    uint64_t stale_msgs;     /* messages of an older term, or for another node */
    uint64_t unknown_sender; /* responses from nodes not in the configuration */
    uint64_t rejected_appends;
    uint64_t dropped_proposals;
    uint64_t lost_logs;  /* followers that refused entries they had acknowledged */
    uint64_t lost_acked; /* terms in which this node's leader held its acknowledgement of
                          * entries this node no longer has: its log was lost (wiped
                          * disk, unsynced writes) */
};

struct raft_update {
    bool hs_changed; /* persist (term, vote) */
    raft_term term;  /* always the current term and vote, changed or not */
    raft_id vote;

    const struct raft_entry *entries; /* to persist; see the contract above */
    size_t n_entries;

    const struct raft_snapshot *snapshot; /* to store and restore; NULL: none */

    struct raft_msg *msgs; /* send now */
    size_t n_msgs;
    struct raft_msg *msgs_after_persist; /* send after this update is durable */
    size_t n_msgs_after_persist;

    const struct raft_entry *committed; /* to apply, in order */
    size_t n_committed;

    const struct raft_read_state *reads;
    size_t n_reads;

    /* Results of RAFT_EV_PROPOSE / RAFT_EV_CHANGE: index of the first entry and its term. */
    raft_index proposed_index;
    raft_term proposed_term;

    uint64_t next_deadline; /* call again with a tick by then (RAFT_NO_DEADLINE: none) */
    bool soft_changed;      /* role, leader, term or commit changed in this step */
    uint8_t role;           /* soft state after the step */
    raft_id leader;
};

/* Per-member view for `raft status`. */
struct raft_member_status {
    raft_id id;
    uint8_t role;     /* enum raft_member_role */
    raft_index match; /* leader only: durable index known to match */
    raft_index next;  /* leader only */
    uint8_t progress; /* leader only: 1 probe, 2 replicate, 3 snapshot */
};

struct raft_status {
    raft_id id;
    uint8_t role;
    raft_term term;
    raft_id vote;
    raft_id leader;
    raft_index commit;
    raft_index applied;
    raft_index persisted;
    raft_index first_index; /* first entry in memory (snapshot index + 1) */
    raft_index last_index;
    raft_term last_term;
    raft_index snapshot_index;
    raft_term snapshot_term;
    raft_index config_index;    /* entry that holds the configuration in force (0: snapshot) */
    raft_id transferee;         /* leader: target of a running leadership transfer, else 0 */
    uint64_t uncommitted_bytes; /* leader: what counts against max_uncommitted_bytes */
    uint64_t snapshot_rx_bytes; /* memory held for a snapshot being received (its chunks) */
    uint32_t n_members;
    struct raft_member_status members[RAFT_MAX_MEMBERS];
    struct raft_counters counters;
};

/* ---------------------------------------------------------------- the core */

struct raft;

/*
 * Create a node and load its durable state. Returns RAFT_OK with *out set, RAFT_EINVAL
 * when the options or the state are inconsistent (non-contiguous entries, terms going
 * down, an undecodable configuration), RAFT_ENOMEM. The first update (entries of a
 * bootstrap, the first deadline) comes from the first raft_step(); the caller may pass
 * RAFT_EV_TICK with the current time right away.
 */
int raft_new(const struct raft_options *opt, const struct raft_start *st, uint64_t now,
             struct raft **out);
void raft_free(struct raft *r);

/*
 * Feed one event; fill *u (always, even on error; an error leaves the state as it was
 * unless the event partly applied, e.g. a message that bumped the term). Returns RAFT_OK
 * or a raft_rc. PROPOSE/CHANGE/READ/TRANSFER on a follower return RAFT_ENOTLEADER with the
 * known leader in u->leader (READ on a follower is forwarded to the leader instead and
 * returns RAFT_OK, unless no leader is known).
 */
int raft_step(struct raft *r, const struct raft_event *ev, struct raft_update *u);

/* Soft state, configuration and counters. Pointers are valid until the next step. */
void raft_get_status(const struct raft *r, struct raft_status *st);
const struct raft_config *raft_get_config(const struct raft *r);

/*
 * The metadata a snapshot at `index` must carry (its term and the configuration in force
 * there); index must be within [snapshot index, applied]. RAFT_OK or RAFT_EINVAL.
 */
int raft_snapshot_meta(const struct raft *r, raft_index index, raft_term *term,
                       struct raft_config *config);

/* Read access to the in-memory log (tests, status). NULL when index is not in memory. */
const struct raft_entry *raft_get_entry(const struct raft *r, raft_index index);
raft_term raft_get_term(const struct raft *r, raft_index index); /* 0 when unknown */

#endif
