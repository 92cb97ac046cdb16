/*
 * raft_log.h - the in-memory Raft log from the last snapshot on.
 *
 * Invariants:
 *   - Entries are contiguous: e[i].index == base + 1 + i, and terms never decrease.
 *   - base/base_term describe the last entry folded into a snapshot (0/0: none); the term of
 *     index `base` is known even though the entry itself is gone.
 *   - The log owns one reference on the raft_buf of every entry it holds and drops it when
 *     the entry is truncated, compacted or the log is freed.
 *   - The array is one contiguous allocation, so a run of entries can be handed out as a
 *     pointer and a count without copying (valid until the next change of the log).
 * Appending is amortised O(1) (the array doubles); compaction moves the kept tail down.
 */
#ifndef SPUR_RAFT_LOG_H
#define SPUR_RAFT_LOG_H

#include "raft.h"

struct raft_log {
    struct raft_entry *e; /* owned */
    size_t n;
    size_t cap;
    raft_index base;
    raft_term base_term;
};

void raft_log_init(struct raft_log *l);
void raft_log_free(struct raft_log *l);
/* Drop every entry and rebase the log at (base, base_term). */
void raft_log_reset(struct raft_log *l, raft_index base, raft_term base_term);
/* Make room for n more entries. RAFT_OK or RAFT_ENOMEM. */
int raft_log_reserve(struct raft_log *l, size_t n);
/*
 * Append copies of entries (their index must continue the log) and take a reference on
 * each buf. RAFT_OK, RAFT_EINVAL (not contiguous) or RAFT_ENOMEM (nothing appended).
 */
int raft_log_append(struct raft_log *l, const struct raft_entry *entries, size_t n);
/* Remove every entry with index >= from. */
void raft_log_truncate(struct raft_log *l, raft_index from);
/* Remove every entry with index <= upto (upto <= last index) and rebase there. */
void raft_log_compact(struct raft_log *l, raft_index upto);

raft_index raft_log_last(const struct raft_log *l);
raft_term raft_log_last_term(const struct raft_log *l);
/* Term at index: base_term at base, 0 when the index is outside [base, last]. */
raft_term raft_log_term(const struct raft_log *l, raft_index index);
/* The entry at index, or NULL when not in memory. */
const struct raft_entry *raft_log_get(const struct raft_log *l, raft_index index);

#endif
