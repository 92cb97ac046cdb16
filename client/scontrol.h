/*
 * scontrol.h - the job, node and partition parts of scontrol, which cmd_scontrol.c
 * dispatches to:
 *
 *   scontrol show job [ID] | node [NAMES] | partition [NAME]   (reads)
 *   scontrol hold|release JOBID...                              (writes, exactly once)
 *   scontrol update NodeName=NAMES State=S [Reason=TEXT]        (writes, exactly once)
 *   scontrol create node NodeName=X CPUs=N RealMemory=MB ...    (when the API has it)
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

#endif
