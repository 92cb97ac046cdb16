/*
 * fsm_drive.h - how the state machine's tests (test_fsm.c, test_fsm_run.c) drive a state
 * machine: encode a command, apply it at the next index, take the reply; and compare two
 * states by their snapshot bytes, the one equality determinism promises.
 *
 * Every helper asserts what it relies on (the encoder and apply succeed, a reply comes
 * back), so a test reads as the commands it applies.
 *
 * Memory: fsm_drive_apply() returns the reply's response, which the caller frees with
 * spur__api__response__free_unpacked(); nothing else here keeps anything.
 */
#ifndef SPUR_FSM_DRIVE_H
#define SPUR_FSM_DRIVE_H

#include "fsm.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/*
 * Apply c at the next index, stamped time_ms; the response. A command without a user
 * runs as "alice": this build's version, caller_uid as given (0 unless set, the uid of a
 * spec that names none, so she owns the jobs such specs submit) and no operator unless
 * caller_operator is set. Ownership tests set user, caller_uid and caller_operator.
 */
static inline Spur__Api__Response *fsm_drive_apply(struct fsm *f, Spur__Fsm__Command *c,
                                                   uint64_t time_ms)
{
    c->time_ms = time_ms;
    if (c->user == NULL || c->user[0] == '\0')
        c->user = "alice";
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fsm_encode_command(c, &buf, &len), FSM_OK);
    struct fsm_reply reply;
    ck_assert_int_eq(fsm_apply(f, fsm_last_applied(f) + 1, buf, len, &reply), FSM_OK);
    free(buf);
    ck_assert_ptr_nonnull(reply.resp);
    Spur__Api__Response *resp = reply.resp;
    reply.resp = NULL;
    return resp;
}

static inline void fsm_drive_snapshot(struct fsm *f, uint8_t **b, size_t *n)
{
    ck_assert_int_eq(fsm_snapshot(f, b, n), FSM_OK);
}

/* Whether two states give the same snapshot bytes. */
static inline bool fsm_drive_same(struct fsm *a, struct fsm *b)
{
    uint8_t *x, *y;
    size_t nx, ny;
    fsm_drive_snapshot(a, &x, &nx);
    fsm_drive_snapshot(b, &y, &ny);
    bool same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

#endif
