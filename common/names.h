/*
 * names.h - the one table of the names spur prints for job states, node states and Raft
 * roles: the CLI's Slurm forms, the metrics' label values and the log lines all read them
 * here, so a state is spelled the same way everywhere.
 *
 * Invariants:
 *   - Every lookup is total: a value outside its enum (or the enum's "unspecified" 0)
 *     gets the documented fallback, never NULL, so a caller can print the result as it is.
 *   - The strings are Slurm's user-visible forms, which scripts parse; they never change:
 *       job states   code  PD R CG CD F CA TO NF OOM CF   fallback "?"
 *                    name  PENDING RUNNING COMPLETING COMPLETED FAILED CANCELLED TIMEOUT
 *                          NODE_FAIL OUT_OF_MEMORY CONFIGURING  fallback "UNKNOWN"
 *                    label the name in lower case (Prometheus label values)
 *                                                          fallback "unknown"
 *       node states  compact idle alloc mix down drain drng unk  fallback "unk"
 *                    long    idle allocated mixed down drained draining unknown
 *                            (also the metrics label)           fallback "unknown"
 *                    scontrol IDLE ALLOCATED MIXED DOWN IDLE+DRAIN MIXED+DRAIN
 *                            (ALLOCATED+DRAIN when every CPU is allocated) UNKNOWN
 *                                                               fallback "UNKNOWN"
 *       roles        follower candidate leader learner precandidate  fallback "unknown"
 *   - Parsing is the inverse, any case; it returns -1 for a word that names nothing.
 *
 * Values: job states are Spur__Api__JobState, node states Spur__Api__NodeState (spur.proto),
 * roles enum status_role = Spur__Status__Role (status.proto; not the core's enum raft_role,
 * whose numbering differs). The tables are indexed by those values.
 *
 * Memory: every string returned is static; nothing here allocates.
 */
#ifndef SPUR_NAMES_H
#define SPUR_NAMES_H

#include <stdbool.h>

#define NAMES_JOB_NSTATES  11 /* Spur__Api__JobState 0..10 */
#define NAMES_NODE_NSTATES 8 /* Spur__Api__NodeState 0..7 */
#define NAMES_NROLES       6 /* enum status_role 0..5 */

const char *names_job_state_code(int state);  /* "PD"; "?" */
const char *names_job_state_name(int state);  /* "PENDING"; "UNKNOWN" */
const char *names_job_state_label(int state); /* "pending"; "unknown" */
/* A job state from its code or name, any case ("CANCELED" too); -1 when it is neither. */
int names_job_state_parse(const char *s);

const char *names_node_state_compact(int state); /* sinfo %t: "alloc"; "unk" */
const char *names_node_state_long(int state);    /* sinfo %T, metrics: "allocated"; "unknown" */
/* scontrol's State=: a draining node reads ALLOCATED+DRAIN when all its CPUs are in use. */
const char *names_node_state_scontrol(int state, bool all_cpus_allocated);
/* A node state from its compact or long name, any case; -1 when it is neither. */
int names_node_state_parse(const char *s);

const char *names_role(int role); /* "follower"; "unknown" */

#endif
