/*
 * fmt_squeue.h - squeue's table: the job field letters, Slurm's default and --long
 * formats, and one line per job.
 *
 * Guarantees (Slurm's forms, which scripts parse): the headers and field letters are
 * squeue's (%i JOBID, %t ST, %M TIME, %R NODELIST(REASON), ...); a pending job's %R is its
 * reason in parentheses, as is a failed job's when it has one; times and sizes print as
 * units.h says; jobs print in the order given (job_filter_sort() gives squeue's).
 *
 * Memory: the spec is the caller's (table_spec_free()); the jobs stay the caller's.
 */
#ifndef SPUR_FMT_SQUEUE_H
#define SPUR_FMT_SQUEUE_H

#include "fmt.h"
#include "table.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Slurm's default and --long formats. */
#define FMT_SQUEUE_DEFAULT "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
#define FMT_SQUEUE_LONG    "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"

/* Parse a squeue -o format. Returns 0, or -1 with err naming the bad field. */
int fmt_squeue_spec_parse(const char *format, struct table_spec *spec, char *err, size_t errlen);
/*
 * Sort jobs by squeue -S's list ("P,t,-p": field letters, each optionally preceded by '+'
 * ascending, the default, or '-' descending; the job id breaks ties). The letters are
 * those Slurm 22.05's squeue sorts by: b B c C d D e f g G h H i I j J l L m M n N O p P
 * Q S t T u U v V z; numbers and times by value, text by bytes. Returns 0, or -1 with
 * err "Invalid sort specification: X" (Slurm's words) for any other; the jobs are then
 * in the order given.
 */
int fmt_squeue_sort(fmt_job **jobs, size_t n, const char *keys, const struct fmt_ctx *ctx,
                    char *err, size_t errlen);
/* A header line (unless !header) and one line per job, in the order given. */
void fmt_squeue(FILE *out, const struct table_spec *spec, fmt_job *const *jobs, size_t n,
                bool header, const struct fmt_ctx *ctx);

#endif
