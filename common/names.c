/*
 * names.c - the name tables of job states, node states and roles; see names.h.
 *
 * Each table is indexed by the enum value, with designated initializers so an entry sits
 * next to the constant it names; a hole (the "unspecified" 0) reads as NULL and the
 * lookups turn it into the fallback.
 */
#include "names.h"

#include "spur.pb-c.h"
#include "status.pb-c.h"

#include <stddef.h>
#include <strings.h>

#define J(x) SPUR__API__JOB_STATE__JOB_##x
#define N(x) SPUR__API__NODE_STATE__NODE_##x
#define R(x) SPUR__STATUS__ROLE__ROLE_##x

_Static_assert(J(CONFIGURING) + 1 == NAMES_JOB_NSTATES, "job state table size");
_Static_assert(N(UNKNOWN) + 1 == NAMES_NODE_NSTATES, "node state table size");
_Static_assert(R(PRECANDIDATE) + 1 == NAMES_NROLES, "role table size");

static const struct {
    const char *code;
    const char *name;
    const char *label;
} job_states[NAMES_JOB_NSTATES] = {
    [J(PENDING)] = {"PD", "PENDING", "pending"},
    [J(RUNNING)] = {"R", "RUNNING", "running"},
    [J(COMPLETING)] = {"CG", "COMPLETING", "completing"},
    [J(COMPLETED)] = {"CD", "COMPLETED", "completed"},
    [J(FAILED)] = {"F", "FAILED", "failed"},
    [J(CANCELLED)] = {"CA", "CANCELLED", "cancelled"},
    [J(TIMEOUT)] = {"TO", "TIMEOUT", "timeout"},
    [J(NODE_FAIL)] = {"NF", "NODE_FAIL", "node_fail"},
    [J(OUT_OF_MEMORY)] = {"OOM", "OUT_OF_MEMORY", "out_of_memory"},
    [J(CONFIGURING)] = {"CF", "CONFIGURING", "configuring"},
};

static const struct {
    const char *compact;
    const char *lng;
    const char *scontrol;
} node_states[NAMES_NODE_NSTATES] = {
    [N(IDLE)] = {"idle", "idle", "IDLE"},
    [N(ALLOCATED)] = {"alloc", "allocated", "ALLOCATED"},
    [N(MIXED)] = {"mix", "mixed", "MIXED"},
    [N(DOWN)] = {"down", "down", "DOWN"},
    [N(DRAINED)] = {"drain", "drained", "IDLE+DRAIN"},
    [N(DRAINING)] = {"drng", "draining", "MIXED+DRAIN"},
    [N(UNKNOWN)] = {"unk", "unknown", "UNKNOWN"},
};

static const char *const roles[NAMES_NROLES] = {
    [R(FOLLOWER)] = "follower", [R(CANDIDATE)] = "candidate",       [R(LEADER)] = "leader",
    [R(LEARNER)] = "learner",   [R(PRECANDIDATE)] = "precandidate",
};

static bool job_known(int state)
{
    return state >= 0 && state < NAMES_JOB_NSTATES && job_states[state].code != NULL;
}

static bool node_known(int state)
{
    return state >= 0 && state < NAMES_NODE_NSTATES && node_states[state].compact != NULL;
}

const char *names_job_state_code(int state)
{
    return job_known(state) ? job_states[state].code : "?";
}

const char *names_job_state_name(int state)
{
    return job_known(state) ? job_states[state].name : "UNKNOWN";
}

const char *names_job_state_label(int state)
{
    return job_known(state) ? job_states[state].label : "unknown";
}

int names_job_state_parse(const char *s)
{
    for (int i = 0; i < NAMES_JOB_NSTATES; i++)
        if (job_known(i) &&
            (strcasecmp(s, job_states[i].code) == 0 || strcasecmp(s, job_states[i].name) == 0))
            return i;
    if (strcasecmp(s, "CANCELED") == 0)
        return J(CANCELLED);
    return -1;
}

const char *names_node_state_compact(int state)
{
    return node_known(state) ? node_states[state].compact : "unk";
}

const char *names_node_state_long(int state)
{
    return node_known(state) ? node_states[state].lng : "unknown";
}

const char *names_node_state_scontrol(int state, bool all_cpus_allocated)
{
    if (state == N(DRAINING) && all_cpus_allocated)
        return "ALLOCATED+DRAIN";
    return node_known(state) ? node_states[state].scontrol : "UNKNOWN";
}

int names_node_state_parse(const char *s)
{
    for (int i = 0; i < NAMES_NODE_NSTATES; i++)
        if (node_known(i) &&
            (strcasecmp(s, node_states[i].compact) == 0 || strcasecmp(s, node_states[i].lng) == 0))
            return i;
    return -1;
}

const char *names_role(int role)
{
    return role >= 0 && role < NAMES_NROLES && roles[role] != NULL ? roles[role] : "unknown";
}
