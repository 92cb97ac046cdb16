/*
 * fsm_arena.c - bump allocator in chunks. See fsm_arena.h.
 */
#include "fsm_arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_MIN (256u * 1024u)

struct fsm_arena_chunk {
    struct fsm_arena_chunk *next;
    size_t cap;
    alignas(max_align_t) unsigned char data[];
};

void fsm_arena_init(struct fsm_arena *a)
{
    a->head = NULL;
    a->used = 0;
    a->total = 0;
}

void fsm_arena_free(struct fsm_arena *a)
{
    struct fsm_arena_chunk *c = a->head;
    while (c != NULL) {
        struct fsm_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    fsm_arena_init(a);
}

void *fsm_arena_alloc(struct fsm_arena *a, size_t n, size_t size)
{
    const size_t align = alignof(max_align_t);
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    size_t bytes = n * size;
    if (bytes > SIZE_MAX - align)
        return NULL;
    bytes = (bytes + align - 1) & ~(align - 1);
    if (bytes == 0)
        bytes = align;
    if (a->head == NULL || a->head->cap - a->used < bytes) {
        size_t cap = bytes > CHUNK_MIN ? bytes : CHUNK_MIN;
        if (cap > SIZE_MAX - sizeof(struct fsm_arena_chunk))
            return NULL;
        /* Chunks are zeroed when handed out, not here, so untouched pages stay unmapped. */
        struct fsm_arena_chunk *c = malloc(sizeof(*c) + cap);
        if (c == NULL)
            return NULL;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
        a->used = 0;
        a->total += cap;
    }
    void *p = a->head->data + a->used;
    a->used += bytes;
    memset(p, 0, bytes);
    return p;
}
