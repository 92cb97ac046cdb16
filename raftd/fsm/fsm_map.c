/*
 * fsm_map.c - open-addressing hash map from a non-zero u64 to a pointer. See fsm_map.h.
 */
#include "fsm_map.h"

#include <stdlib.h>

#define MIN_CAP 16

/* splitmix64's finalizer: job ids are sequential, so the low bits need mixing. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

void fsm_map_init(struct fsm_map *m)
{
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
}

void fsm_map_free(struct fsm_map *m)
{
    free(m->slots);
    fsm_map_init(m);
}

static size_t find_slot(const struct fsm_map *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)mix(key) & mask;
    while (m->slots[i].key != 0 && m->slots[i].key != key)
        i = (i + 1) & mask;
    return i;
}

void *fsm_map_get(const struct fsm_map *m, uint64_t key)
{
    if (m->cap == 0 || key == 0)
        return NULL;
    size_t i = find_slot(m, key);
    return m->slots[i].key == key ? m->slots[i].val : NULL;
}

static int rehash(struct fsm_map *m, size_t newcap)
{
    struct fsm_map_slot *slots = calloc(newcap, sizeof(*slots));
    if (slots == NULL)
        return -1;
    struct fsm_map old = *m;
    m->slots = slots;
    m->cap = newcap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].key != 0) {
            size_t j = find_slot(m, old.slots[i].key);
            m->slots[j] = old.slots[i];
        }
    }
    free(old.slots);
    return 0;
}

int fsm_map_reserve(struct fsm_map *m, size_t n)
{
    size_t cap = m->cap ? m->cap : MIN_CAP;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 4)
            return -1;
        cap *= 2;
    }
    return cap == m->cap ? 0 : rehash(m, cap);
}

int fsm_map_put(struct fsm_map *m, uint64_t key, void *val)
{
    if (key == 0)
        return -1;
    if (fsm_map_reserve(m, m->count + 1) != 0)
        return -1;
    size_t i = find_slot(m, key);
    if (m->slots[i].key == 0) {
        m->slots[i].key = key;
        m->count++;
    }
    m->slots[i].val = val;
    return 0;
}

void *fsm_map_del(struct fsm_map *m, uint64_t key)
{
    if (m->cap == 0 || key == 0)
        return NULL;
    size_t mask = m->cap - 1;
    size_t i = find_slot(m, key);
    if (m->slots[i].key != key)
        return NULL;
    void *val = m->slots[i].val;
    /*
     * Backward-shift deletion: walk the run after the hole and move back every entry
     * whose home slot does not lie (cyclically) between the hole and its position, so
     * every key stays reachable from its home without tombstones.
     */
    size_t hole = i;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (m->slots[j].key == 0)
            break;
        size_t home = (size_t)mix(m->slots[j].key) & mask;
        int stays = (hole <= j) ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].key = 0;
    m->slots[hole].val = NULL;
    m->count--;
    return val;
}

size_t fsm_map_bytes(const struct fsm_map *m)
{
    return m->cap * sizeof(struct fsm_map_slot);
}
