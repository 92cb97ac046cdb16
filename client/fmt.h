/*
 * fmt.h - what the printers of jobs, nodes and partitions share (fmt_squeue, fmt_sinfo,
 * fmt_show, fmt_json): the message types they read, the context they are given, and the
 * values of a job that more than one form prints, so every form derives them alike.
 *
 * Guarantees:
 *   - Nothing here or in the fmt_* printers reads the clock, the environment or a socket:
 *     "now" and the group name lookup come in struct fmt_ctx, output goes to the FILE *
 *     (or struct json) given, so tests pin every byte.
 *   - A missing JobSpec reads as an empty one; counts of 0 (ntasks, cpus per task, nodes)
 *     read as 1, as Slurm shows them.
 *
 * Memory: the protobuf messages passed in stay the caller's; fmt_expand_path() returns a
 * malloc'd string the caller frees.
 */
#ifndef SPUR_FMT_H
#define SPUR_FMT_H

#include "spur.pb-c.h"

#include <stdint.h>

typedef Spur__Api__Job fmt_job;
typedef Spur__Api__Node fmt_node;
typedef Spur__Api__Partition fmt_partition;

struct fmt_ctx {
    uint64_t now_ms; /* wall clock, for elapsed times */
    /* The name of a group, or NULL to print the number. NULL function: numbers. */
    const char *(*group_name)(uint32_t gid, void *arg);
    void *arg;
};

/* v, or 1 when it is 0 (an unset count). */
uint32_t fmt_or1(uint32_t v);
/* Seconds the job has run: to its end, or to now while it runs or completes; 0 unstarted. */
uint64_t fmt_job_elapsed_s(const fmt_job *j, uint64_t now_ms);
/* The job's reason; "JobHeldUser" for a held job without one, else "None". */
const char *fmt_job_reason(const fmt_job *j);
/* Nodes it runs on, or the nodes it asked for (at least 1) before it runs. */
uint32_t fmt_job_node_count(const fmt_job *j);
/* ntasks x cpus per task. */
uint64_t fmt_job_cpus(const fmt_job *j);
/*
 * A stdout/stderr pattern as the job will see it: %j job id, %x job name, %u user, %N
 * first node ("" before it runs), %% a percent sign; a relative path is taken from the
 * job's working directory. NULL when out of memory.
 */
char *fmt_expand_path(const fmt_job *j, const char *pattern);

#endif
