/*
 * scontrol.h - the job, node and partition parts of scontrol, which cmd_scontrol.c
 * dispatches to:
 *
 *   scontrol show job [ID] | node [NAMES] | partition [NAME]   (reads)
 *   scontrol hold|release JOBID...                              (writes, exactly once)
 *   scontrol update NodeName=NAMES State=S [Reason=TEXT]        (writes, exactly once)
 *   scontrol create node NodeName=X CPUs=N RealMemory=MB ...    (when the API has it)
 *   scontrol token [lifespan=SECONDS] [username=NAME]           (prints SPUR_JWT=...)
 *
 * argv holds the words after the subcommand (argv[0] is the first of them). Every
 * function returns the command's exit status: 0, or 1 after printing one error line per
 * failure, in Slurm's words where scripts look for them ("Invalid job id specified").
 */
#ifndef SPUR_SCONTROL_H
#define SPUR_SCONTROL_H

#include "cli.h"

int scontrol_show(struct cli *c, int argc, char **argv);
int scontrol_job_action(struct cli *c, const char *action, int argc, char **argv);
int scontrol_update(struct cli *c, int argc, char **argv);
int scontrol_create(struct cli *c, int argc, char **argv);
/*
 * A token for the caller (or, operators only, for username=NAME), valid lifespan seconds
 * (default auth.token_lifespan_s, at most auth.max_token_lifespan_s: the replica
 * decides). Prints "SPUR_JWT=TOKEN" like Slurm's "SLURM_JWT=TOKEN", so that
 * `export $(scontrol token)` sets it; --json prints {"token", "user", "expires"}.
 */
int scontrol_token(struct cli *c, int argc, char **argv);

#endif
