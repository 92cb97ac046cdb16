/*
 * server.h - spurd's side of the agent protocol (proto/agent.proto, docs/agent.md): the
 * connections the Raft leader (and, for a while, a deposed one) opens to port 6818.
 *
 * Invariants:
 *   - Only a member of the cluster is heard: every connection first proves the cluster
 *     key (common/chan.h: the leader dials as initiator, role "controller"; spurd answers
 *     as responder, role "agent"), within SERVER_HANDSHAKE_S, and every frame after the
 *     proof is sealed both ways (chan_ev.h). A leader without a common key gets a refusal
 *     hello naming both sides' key ids, so its log says why too; a failed proof or a frame
 *     that does not verify (altered, replayed, out of order) closes the connection. Each
 *     refusal is one warn line naming the peer and the reason, at most once a minute for
 *     the same host and reason. Nothing of the agent protocol is read before the proof.
 *   - Fencing: a Launch is refused ("stale leader") on a connection whose last Ping
 *     carried a term below the highest term the spool has seen; the higher term is on
 *     disk before the Pong that follows it is sent.
 *   - At most once: a Launch starts an attempt only when the spool has never seen it nor
 *     a higher attempt of the job (spool_launch_check()); the attempt's directory and
 *     launch record exist before its monitor is forked. A repeated Launch of a present
 *     attempt answers ok + already and starts nothing.
 *   - No lost report: on each Ping every report still in the spool is sent on that
 *     connection before the Pong, so a job missing from running[] and not reported is
 *     gone; a report that appears is pushed at once to every connection that has pinged.
 *     Only an EndedAck removes it.
 *   - Bounded input: a frame over max_frame is refused from its header; a frame that does
 *     not decode, of another protocol version or cluster, or of a type the agent does not
 *     take gets one Error message naming the problem, then the connection closes. Nothing
 *     a peer sends can crash the agent.
 *
 * Mechanics: libevent bufferevents, frames through common/frame_ev; requests are
 * answered in order, synchronously (the spool's writes are small). A Signal of an attempt
 * with no directory answers found = false and, when it terminates, tombstones the
 * attempt, so a Launch that arrives late can never start it.
 *
 * Ownership: struct server owns its listener and its connections (each owns its
 * bufferevent, and the socket with it, and its channel, wiped when it closes). The spool,
 * the monitor configuration, the keyring and the strings of struct server_conf are the
 * caller's and outlive the server.
 */
#ifndef SPUR_SERVER_H
#define SPUR_SERVER_H

#include "spool.h"

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct monitor_conf;
struct keyring;

#define SERVER_HANDSHAKE_S 5 /* a connection proves the key within this */

struct server_conf {
    const char *listen; /* HOST:PORT, an IP literal host */
    const char *cluster_name;
    const char *node_name;
    uint32_t cpus;
    uint64_t mem_mb;
    uint32_t max_frame; /* controller.max_frame_bytes */
    struct spool *spool;
    const struct monitor_conf *mon;
    const struct keyring *keyring; /* the cluster key(s) (auth.key_file); required */
};

struct server;

/* Listen. Returns NULL with err ("LISTEN: bind: why") when the address cannot be had. */
struct server *server_new(struct event_base *base, const struct server_conf *c, char *err,
                          size_t errlen);
void server_free(struct server *s);

/* j's report is in j->ended: send it to every connection that has pinged. */
void server_push_ended(struct server *s, const struct spool_job *j);

/* mono_ms() of the last Ping on any connection; 0: none since the server started. */
uint64_t server_last_ping_ms(const struct server *s);

#endif
