/*
 * job_filter.h - which jobs a command shows and in what order: the job id and job state
 * lists the commands accept (squeue -j/-t, scancel, scontrol), the filter they build, and
 * squeue's order.
 *
 * Guarantees:
 *   - A list is refused whole: a bad word adds nothing and the error names it ("Invalid
 *     job id X", "Invalid job state specified: X"), Slurm's messages.
 *   - States parse by code or name in any case (common/names); "all" alone means every
 *     state.
 *   - The order is squeue's: partition, then state (pending first), then job id.
 *
 * Memory: the filter borrows every array it points at; job_filter_ids_parse() grows the
 * caller's *ids with realloc (the caller frees it). Jobs are the caller's messages.
 */
#ifndef SPUR_JOB_FILTER_H
#define SPUR_JOB_FILTER_H

#include "fmt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct job_filter {
    const uint64_t *ids;
    size_t nids;
    char **users;
    size_t nusers;
    const int *states; /* none: any state */
    size_t nstates;
    char **partitions;
    size_t npartitions;
    char **names;
    size_t nnames;
};

/*
 * A comma list of job states; "all" (alone) sets *all. Fills states[] (up to max, no
 * duplicates). Returns 0, or -1 with err "Invalid job state specified: X".
 */
int job_filter_states_parse(const char *list, int *states, size_t max, size_t *n, bool *all,
                            char *err, size_t errlen);
/* True for pending, configuring, running and completing: what squeue shows by default. */
bool job_filter_state_active(int state);
/*
 * Job ids from comma lists ("42", "42,43"); appends to *ids (realloc'd). Returns 0, or -1
 * with err "Invalid job id X" naming the first word that is not a job id.
 */
int job_filter_ids_parse(const char *list, uint64_t **ids, size_t *n, char *err, size_t errlen);

/* Does the job pass every filter that has entries? */
bool job_filter_matches(const fmt_job *j, const struct job_filter *f);
/* squeue's order: partition, then state (pending first), then job id. */
void job_filter_sort(fmt_job **jobs, size_t n);

#endif
