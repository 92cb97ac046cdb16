/*
 * jobenv.h - what a batch job sees of Slurm: its environment and its output file names.
 *
 * Guarantees:
 *   - Pure: both functions read only their arguments (no getenv, no clock, no passwd
 *     lookup: the caller passes the passwd entry in), so the unit test pins every
 *     variable and every pattern.
 *   - The environment is the job's --export result (spec.env, "NAME=value" strings, kept
 *     in order) with Slurm's variables overriding any of the same name, then HOME, USER,
 *     LOGNAME and SHELL from the passwd entry only when spec.env does not set them, and
 *     PATH set to JOBENV_DEFAULT_PATH only when it is unset. Each name appears once: a
 *     later spec.env entry of a name replaces an earlier one, as the shell would.
 *   - The node list is Slurm's host list expression (client/hostlist.c's compression:
 *     "n[1-3,7]"), the same for SLURM_JOB_NODELIST and SLURM_NODELIST.
 *   - Patterns (sbatch(1) "filename pattern"): %j and %A the job id, %a 4294967294 (the
 *     value Slurm prints for a job that is not an array task), %x the job name, %u the
 *     user, %N this node's name, %n this node's index, %% one '%'. A number between '%'
 *     and the letter zero-pads a numeric value to that width ("%5j" -> 00042). Any other
 *     letter is kept as written, with its '%'. A pattern holding a backslash is taken
 *     literally with its backslashes removed, as Slurm does ("\\" turns patterns off).
 *
 * Memory: returned strings and vectors are malloc'd and the caller's (free(),
 * jobenv_free()); the Launch and the user are only read.
 */
#ifndef SPUR_JOBENV_H
#define SPUR_JOBENV_H

#include "agent.pb-c.h"

#include <stddef.h>

#define JOBENV_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
#define JOBENV_NO_ARRAY_ID  4294967294u
#define JOBENV_DEFAULT_OUT  "slurm-%j.out"

/* The job user's passwd entry as the caller looked it up (all borrowed, none NULL). */
struct jobenv_user {
    const char *name;
    const char *home;
    const char *shell;
    unsigned uid;
    unsigned gid;
};

/*
 * The job's environment, NULL-terminated, for execve(); NULL when out of memory.
 * node_name is this node's, cluster_name the cluster's.
 */
char **jobenv_build(const Spur__Agent__Launch *l, const struct jobenv_user *u,
                    const char *node_name, const char *cluster_name);
void jobenv_free(char **env);

/*
 * pattern with Slurm's filename patterns expanded; NULL when out of memory. An empty or
 * NULL pattern expands JOBENV_DEFAULT_OUT.
 */
char *jobenv_expand(const char *pattern, const Spur__Agent__Launch *l, const char *user,
                    const char *node_name);

#endif
