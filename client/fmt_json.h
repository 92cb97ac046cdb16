/*
 * fmt_json.h - the --json objects of jobs, nodes and partitions (squeue, sinfo and
 * scontrol show --json).
 *
 * Guarantees: one object per message with stable keys (job_id, state, state_code, ...);
 * states as common/names prints them (jobs: name and code; nodes: long and compact);
 * missing strings as "", counts of 0 as 1 where Slurm shows 1 (fmt.h); times in
 * milliseconds since the epoch, 0 for none.
 *
 * Memory: the writer and the messages are the caller's.
 */
#ifndef SPUR_FMT_JSON_H
#define SPUR_FMT_JSON_H

#include "fmt.h"
#include "json.h"

void fmt_json_job(struct json *j, const fmt_job *job);
void fmt_json_node(struct json *j, const fmt_node *n);
void fmt_json_partition(struct json *j, const fmt_partition *p);
/* The array of the n jobs (nodes, partitions) as one JSON value, in the order given. */
void fmt_json_jobs(struct json *j, fmt_job *const *jobs, size_t n);
void fmt_json_nodes(struct json *j, fmt_node *const *nodes, size_t n);
void fmt_json_partitions(struct json *j, fmt_partition *const *parts, size_t n);

#endif
