/*
 * wal_replay.h - the log rebuilt from its records, in order; pure.
 *
 * Guarantees: the live entries are always v[start..n), indexes contiguous, terms
 * non-decreasing; a record that could not have come from a correct writer is refused with
 * a reason and leaves the replay as it was, so recovery can name the file and offset and
 * refuse to start. No I/O and no allocation: v is an array with room for cap entries that
 * the caller provides and owns (recovery sizes it for the worst case, see wal.h).
 *
 * Rules (anything else is an error):
 *   ENTRY i, t:    i must equal `next` (when known) and t must not be below `last_term`;
 *                  appended; next = i + 1.
 *   TRUNCATE i:    i >= 1 and i <= next (when known); entries >= i dropped; next = i.
 *   RESET s, t:    entries <= s dropped; if the remaining entries do not start at s + 1,
 *                  all are dropped; next = max(next, s + 1) and last_term = t when empty.
 */
#ifndef SPUR_WAL_REPLAY_H
#define SPUR_WAL_REPLAY_H

#include "wal_codec.h"

#include <stddef.h>
#include <stdint.h>

struct wal_replay {
    struct wal_entry *v; /* borrowed from the caller */
    size_t cap;
    size_t start;
    size_t n;
    uint64_t next;      /* expected next index; 0 before the first record */
    uint64_t last_term; /* term of the last entry or reset; 0 unknown */
};

void wal_replay_init(struct wal_replay *r, struct wal_entry *v, size_t cap);
/* 0, or -1 with *why (static string) when the record breaks the rules or cap is reached. */
int wal_replay_apply(struct wal_replay *r, const struct wal_record *rec, const char **why);

#endif
