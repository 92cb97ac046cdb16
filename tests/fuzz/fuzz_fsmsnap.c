/*
 * fuzz_fsmsnap.c - the state machine's snapshot reader (fsm_restore, fsm_snap.c) fed
 * arbitrary bytes, as a snapshot arrives from a peer (InstallSnapshot) or from disk.
 *
 * Input layout: the whole input is the snapshot (the seeds in corpus/fsmsnap are
 * snapshots of states with jobs in several states, nodes, partitions, sessions and
 * accounting records, and damaged copies of them).
 *
 * It is restored into a state that holds the setup log's state (fuzz_fsm.h), made with
 * the worker's limits (fsm_new(NULL)). Then:
 *   - a refusal is FSM_EINVAL with a reason "snapshot: why", and leaves the target
 *     exactly as it was (fsm.h): the same snapshot bytes (the reader builds into a
 *     separate struct fsm, so derived data cannot have changed either);
 *   - an accepted snapshot is a state like any other: its own snapshot restores into a
 *     fresh state that is the same (same bytes, reads, pass: what a restore recomputes
 *     agrees with itself), and both go on alike through the pass's allocations and a
 *     Tick a day later.
 * Not checked: that an accepted snapshot re-encodes to the input bytes (the reader skips
 * fields of later builds and takes non-canonical encodings), and out of memory.
 */
#define FUZZ_NAME "fuzz_fsmsnap"
#include "fuzz_check.h"
#include "fuzz_fsm.h"

#include "fsm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The snapshot of the setup state, made once. */
static uint8_t *base;
static size_t base_len;

static struct fsm *restored(const uint8_t *p, size_t len)
{
    char err[FSM_ERR_MAX];
    struct fsm *f = fsm_new(NULL);
    CHECK(f != NULL);
    CHECK(fsm_restore(f, p, len, err, sizeof(err)) == FSM_OK);
    return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (base == NULL) {
        struct fsm *s = fuzz_fsm_setup();
        CHECK(fsm_snapshot(s, &base, &base_len) == FSM_OK);
        fsm_free(s);
    }
    struct fsm *f = restored(base, base_len);
    char err[FSM_ERR_MAX] = "";
    int rc = fsm_restore(f, data, size, err, sizeof(err));
    if (rc != FSM_OK) {
        CHECK(rc == FSM_EINVAL);
        CHECK(strncmp(err, "snapshot: ", 10) == 0 && err[10] != '\0');
        uint8_t *now;
        size_t now_len;
        CHECK(fsm_snapshot(f, &now, &now_len) == FSM_OK);
        CHECK(now_len == base_len && memcmp(now, base, base_len) == 0);
        free(now);
        fsm_free(f);
        return 0;
    }
    uint8_t *again;
    size_t again_len;
    CHECK(fsm_snapshot(f, &again, &again_len) == FSM_OK);
    struct fsm *g = restored(again, again_len);
    free(again);
    fuzz_fsm_same(f, g);
    fuzz_fsm_advance(f, g);
    fsm_free(g);
    fsm_free(f);
    return 0;
}
