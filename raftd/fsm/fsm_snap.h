/*
 * fsm_snap.h - the whole replicated state as bytes, and back.
 *
 * Format: a packed spur.fsm.Snapshot (proto/fsm.proto), written record by record in this
 * order, each as a length-delimited field:
 *
 *     field 1  SnapshotHeader  once: versions, last applied index, job id counter, log
 *                              clock, settings, partitions (configuration order)
 *     field 2  NodeRecord      per node, by name (byte order)
 *     field 3  SessionRecord   per session, by last use (log index, increasing)
 *     field 4  JobRecord       per job, by id
 *     field 5  AcctRecord      per outbox record, by seq (format 2; the bytes as kept)
 *
 * Guarantees:
 *   - Deterministic: every order above is a property of the state, never of a hash
 *     table; same state, same bytes. Derived data (node allocations, job counts, the
 *     finished list, pending reasons) is not written; a restore recomputes it.
 *   - Bounded memory: the writer packs one record at a time into one growing buffer, and
 *     the reader decodes one record at a time, so neither holds a decoded copy of the
 *     whole state beside the state itself.
 *   - The reader reads formats 1 (no outbox: accounting off, next seq 1) and 2. It
 *     checks what it relies on (record order, unique keys, enum ranges, counts, node
 *     references, outbox seqs strictly increasing and below the next seq, each outbox
 *     record decoding) and fails with one line naming the problem instead of
 *     building a state that could misbehave; it builds into a separate struct fsm, so a
 *     failed restore changes nothing.
 *
 * Ownership: the writer's buffer goes to the caller (free()); the reader's struct fsm is
 * the caller's to free with fsm_state_free() (also after a failure).
 */
#ifndef SPUR_FSM_SNAP_H
#define SPUR_FSM_SNAP_H

#include "fsm_state.h"

int fsm_snap_write(const struct fsm *f, uint8_t **bytes, size_t *len);
/*
 * Build *out (initialised here with lim) from a snapshot. FSM_OK, FSM_EINVAL with err,
 * or FSM_ENOMEM. out must be freed with fsm_state_free() in every case.
 */
int fsm_snap_read(struct fsm *out, const struct fsm_limits *lim, const uint8_t *bytes, size_t len,
                  char *err, size_t errlen);

#endif
