/*
 * fsm_map.h - a hash map from a non-zero 64-bit key to a pointer (jobs by id, sessions
 * by client id).
 *
 * Guarantees:
 *   - Lookup, insert and delete in expected O(1): open addressing with linear probing,
 *     the table kept at most half full, deletion by backward shift (no tombstones, so a
 *     map that churns never slows down).
 *   - The map is never iterated by callers, so its layout (which depends on the order of
 *     inserts and on growth) can never leak into replicated state: ordered views live
 *     beside it in the modules that use it.
 *   - Key 0 is reserved for "empty slot" and is refused.
 *
 * Ownership: the map owns its slot array only; the values belong to the caller.
 */
#ifndef SPUR_FSM_MAP_H
#define SPUR_FSM_MAP_H

#include <stddef.h>
#include <stdint.h>

struct fsm_map_slot {
    uint64_t key; /* 0: empty */
    void *val;
};

struct fsm_map {
    struct fsm_map_slot *slots; /* owned; NULL while the map is empty and never grown */
    size_t cap;                 /* power of two, or 0 */
    size_t count;
};

void fsm_map_init(struct fsm_map *m);
void fsm_map_free(struct fsm_map *m);
/* The value stored under key, or NULL. */
void *fsm_map_get(const struct fsm_map *m, uint64_t key);
/*
 * Store val under key, replacing an earlier value. Returns 0, or -1 when key is 0 or the
 * table cannot grow (the map is unchanged then).
 */
int fsm_map_put(struct fsm_map *m, uint64_t key, void *val);
/* Remove key; returns the value it held, or NULL. */
void *fsm_map_del(struct fsm_map *m, uint64_t key);
/* Grow so that n keys fit without further growth. Returns 0 or -1. */
int fsm_map_reserve(struct fsm_map *m, size_t n);
/* Bytes held by the slot array. */
size_t fsm_map_bytes(const struct fsm_map *m);

#endif
