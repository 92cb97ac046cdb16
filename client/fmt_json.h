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
/* A whole --json answer on out: the array of the n jobs (nodes), ended by json_end(). */
void fmt_json_job_array(FILE *out, fmt_job *const *jobs, size_t n);
void fmt_json_node_array(FILE *out, fmt_node *const *nodes, size_t n);

#endif
