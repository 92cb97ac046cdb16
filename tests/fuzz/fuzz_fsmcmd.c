/*
 * fuzz_fsmcmd.c - the log entry decoder and applier (fsm_apply) fed arbitrary entries, as
 * every replica applies whatever the log holds.
 *
 * Input layout: a run of entries, each a 16-bit big-endian length and that many bytes
 * (the last one takes what is left when its length runs past the end), at most
 * MAX_ENTRIES of them. They apply after the setup log (fuzz_fsm.h: partitions, nodes
 * n1-n3, jobs 1-3 running, configuring and held, accounting on), at the indices that
 * follow it, to two replicas: one that wants replies and records the leader's events, and
 * one that wants neither (a follower). The seeds in corpus/fsmcmd are runs of valid
 * commands of every kind and damaged copies of them.
 *
 * Each entry must be taken (FSM_OK, whatever it holds) with a reply that has a code, an
 * error line whenever the code is not OK, and CODE_INVALID for one that does not decode;
 * the log clock never goes back; the same index again is FSM_ESTALE and changes nothing.
 * After the run, the two replicas are the same state (fuzz_fsm_same: snapshot bytes,
 * reads, scheduler pass), and so is the first one's snapshot restored into a fresh state,
 * also after both go on through the same allocations and Tick (fuzz_fsm_advance). Leaks
 * are found by the sanitizer at fsm_free(). Not checked: what each command should do
 * (tests/unit/test_fsm*.c pin that), and out of memory.
 */
#define FUZZ_NAME "fuzz_fsmcmd"
#include "fuzz_check.h"
#include "fuzz_fsm.h"

#include "fsm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void apply_one(struct fsm *f, struct fsm *follower, uint64_t index, const uint8_t *p,
                      size_t len)
{
    uint64_t clock = fsm_log_time_ms(f);
    struct fsm_reply r;
    CHECK(fsm_apply(f, index, p, len, &r) == FSM_OK);
    CHECK(fsm_last_applied(f) == index && fsm_log_time_ms(f) >= clock);
    CHECK(r.resp != NULL);
    if (r.resp->code != SPUR__API__CODE__CODE_OK)
        CHECK(r.resp->error != NULL && r.resp->error[0] != '\0');
    if (r.bad_entry)
        CHECK(r.resp->code == SPUR__API__CODE__CODE_INVALID && r.client_id == 0 &&
              fsm_log_time_ms(f) == clock);
    fsm_reply_clear(&r);

    CHECK(fsm_apply(f, index, p, len, &r) == FSM_ESTALE);
    CHECK(r.resp == NULL && !r.bad_entry && !r.duplicate);
    CHECK(fsm_apply(follower, index, p, len, NULL) == FSM_OK);

    struct fsm_events ev;
    CHECK(fsm_events_take(f, &ev) == FSM_OK);
    for (size_t i = 0; i < ev.nreported; i++)
        CHECK(memchr(ev.reported[i].node, '\0', sizeof(ev.reported[i].node)) != NULL);
    fsm_events_free(&ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fsm *f = fuzz_fsm_setup(), *follower = fuzz_fsm_setup();
    fsm_events_enable(f, true);
    uint64_t index = FUZZ_FSM_SETUP_N;
    size_t pos = 0;
    for (int n = 0; n < MAX_ENTRIES && size - pos >= 2; n++) {
        size_t len = (size_t)data[pos] << 8 | data[pos + 1];
        pos += 2;
        if (len > size - pos)
            len = size - pos;
        apply_one(f, follower, ++index, data + pos, len);
        pos += len;
    }
    fuzz_fsm_same(f, follower);
    fsm_free(follower);

    uint8_t *snap;
    size_t snap_len;
    char err[FSM_ERR_MAX];
    CHECK(fsm_snapshot(f, &snap, &snap_len) == FSM_OK);
    struct fsm *g = fsm_new(NULL);
    CHECK(g != NULL);
    CHECK(fsm_restore(g, snap, snap_len, err, sizeof(err)) == FSM_OK);
    free(snap);
    fsm_events_enable(f, false);
    fuzz_fsm_same(f, g);
    fuzz_fsm_advance(f, g);
    fsm_free(g);
    fsm_free(f);
    return 0;
}
