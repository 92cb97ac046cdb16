/*
 * fuzz_status.c - status_decode() on arbitrary payloads.
 *
 * A payload that decodes must carry known enum values, must fit the size limit, and must
 * survive an encode/decode round trip unchanged.
 */
#define FUZZ_NAME "fuzz_status"
#include "fuzz_check.h"

#include "status.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct worker_status s, back;
    if (status_decode(data, size, &s) != 0)
        return 0;
    CHECK(size <= STATUS_MAX_PAYLOAD);
    CHECK(s.phase >= STATUS_PHASE_UNKNOWN && s.phase <= STATUS_PHASE_STOPPING);
    CHECK(s.role >= STATUS_ROLE_UNKNOWN && s.role <= STATUS_ROLE_PRECANDIDATE);
    CHECK(strcmp(status_phase_name(s.phase), "") != 0);
    CHECK(strcmp(status_role_name(s.role), "") != 0);

    uint8_t buf[STATUS_MAX_FRAME];
    int n = status_encode(&s, buf, sizeof(buf));
    CHECK(n >= 4);
    CHECK(status_decode(buf + 4, (size_t)n - 4, &back) == 0);
    CHECK(back.seq == s.seq && back.phase == s.phase && back.node_id == s.node_id &&
          back.role == s.role && back.term == s.term && back.leader_id == s.leader_id &&
          back.commit_index == s.commit_index && back.applied_index == s.applied_index &&
          back.pid == s.pid);
    return 0;
}
