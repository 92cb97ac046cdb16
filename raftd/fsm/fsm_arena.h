/*
 * fsm_arena.h - a bump allocator for the short-lived protobuf trees the state machine
 * builds for one answer (a read, a reply, a snapshot record).
 *
 * Guarantees:
 *   - Allocations are zeroed and aligned for any scalar or pointer type.
 *   - Everything allocated from an arena is released at once by fsm_arena_free(); nothing
 *     is freed one by one, so building 100,000 Job messages costs a few large mallocs.
 *
 * Ownership: the arena owns its chunks; the memory it hands out belongs to it.
 */
#ifndef SPUR_FSM_ARENA_H
#define SPUR_FSM_ARENA_H

#include <stddef.h>

struct fsm_arena_chunk;

struct fsm_arena {
    struct fsm_arena_chunk *head; /* owned list, newest first */
    size_t used;                  /* bytes used in head */
    size_t total;                 /* bytes allocated in every chunk, for stats */
};

void fsm_arena_init(struct fsm_arena *a);
void fsm_arena_free(struct fsm_arena *a);
/* n zeroed bytes, or NULL when out of memory (or n * size overflows). */
void *fsm_arena_alloc(struct fsm_arena *a, size_t n, size_t size);

#endif
