/*
 * fsm_sess.h - client sessions: the exactly-once memory of the state machine.
 *
 * A session remembers, per client id, the sequence number of the client's last write and
 * the packed response it got, so that a retry of that write (after a lost reply or a
 * failover) is answered from here instead of being applied twice.
 *
 * Guarantees:
 *   - Sessions are kept on a list in the order of their last use, measured in log
 *     indexes (unique and increasing), so the order is the same on every replica and
 *     after a restore, which lists them in that order.
 *   - Expiry and eviction only ever take from the head of that list: a session idle for
 *     longer than the TTL (log time) goes, and while there are more than the cap, the
 *     least recently used goes. Both depend on nothing but the log.
 *
 * Ownership: struct fsm_sessions owns its sessions; a session owns its response bytes.
 */
#ifndef SPUR_FSM_SESS_H
#define SPUR_FSM_SESS_H

#include "fsm_map.h"

#include <stddef.h>
#include <stdint.h>

struct fsm_sess {
    uint64_t client_id;
    uint64_t last_seq;
    uint64_t last_index; /* log index of the last write */
    uint64_t last_ms;    /* log time of the last write */
    uint8_t *resp;       /* owned: the packed spur.api.Response of that write */
    size_t resp_len;
    struct fsm_sess *prev; /* toward older */
    struct fsm_sess *next; /* toward newer */
};

struct fsm_sessions {
    struct fsm_map by_client;
    struct fsm_sess *oldest;
    struct fsm_sess *newest;
    size_t count;
    size_t bytes; /* response bytes held */
};

void fsm_sess_init(struct fsm_sessions *s);
void fsm_sess_free(struct fsm_sessions *s);
struct fsm_sess *fsm_sess_find(const struct fsm_sessions *s, uint64_t client_id);
/*
 * Record a write of client_id (not 0) at log index / time, taking ownership of resp
 * (malloc'd) on success. The session becomes the newest. index must exceed every
 * last_index held. Returns 0 or -1 (out of memory; resp still belongs to the caller).
 */
int fsm_sess_record(struct fsm_sessions *s, uint64_t client_id, uint64_t seq, uint64_t index,
                    uint64_t time_ms, uint8_t *resp, size_t resp_len);
/* Mark a session used at index / time without changing its answer. */
void fsm_sess_touch(struct fsm_sessions *s, struct fsm_sess *sess, uint64_t index,
                    uint64_t time_ms);
/*
 * Drop sessions idle for more than ttl_ms (last_ms + ttl_ms < now_ms), then the oldest
 * while more than max remain. Returns how many went.
 */
size_t fsm_sess_expire(struct fsm_sessions *s, uint64_t now_ms, uint64_t ttl_ms, size_t max);

#endif
