/*
 * fsm_query.h - answers to reads (get jobs / job / nodes / partitions) built on the state.
 *
 * Guarantees:
 *   - Answers borrow strings and arrays from the state instead of copying them, and take
 *     the rest (message structs, pointer arrays) from one arena per answer: listing
 *     100,000 jobs costs a few large allocations and no per-job malloc.
 *   - Jobs come in id order, nodes in name order, partitions in configuration order:
 *     every replica answers a read of the same state with the same bytes.
 *   - Reads never change the state.
 *
 * Ownership: struct fsm_read.priv owns the arena; fsm_query_free() releases it. The
 * answer is valid until the state next changes (see fsm.h).
 */
#ifndef SPUR_FSM_QUERY_H
#define SPUR_FSM_QUERY_H

#include "fsm_state.h"

int fsm_query_jobs(const struct fsm *f, const Spur__Api__GetJobsRequest *req, struct fsm_read *out);
int fsm_query_job(const struct fsm *f, uint64_t job_id, struct fsm_read *out);
int fsm_query_nodes(const struct fsm *f, const Spur__Api__GetNodesRequest *req,
                    struct fsm_read *out);
int fsm_query_partitions(const struct fsm *f, const Spur__Api__GetPartitionsRequest *req,
                         struct fsm_read *out);
void fsm_query_free(struct fsm_read *out);

#endif
