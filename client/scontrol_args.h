/*
 * scontrol_args.h - the Key=Value arguments of scontrol update and scontrol create node.
 *
 * Guarantees: keys match in any case; a refusal returns -1 with Slurm's message in err
 * and leaves the struct empty (nothing to free); success fills every required field.
 *
 * Memory: the parsed structs own their strings (malloc'd); release them with
 * scontrol_args_update_free() / scontrol_args_create_free(). argv is only read.
 */
#ifndef SPUR_SCONTROL_ARGS_H
#define SPUR_SCONTROL_ARGS_H

#include <stddef.h>
#include <stdint.h>

struct scontrol_args_update {
    char *nodes;  /* the NodeName= value (a host list) */
    char *state;  /* "drain", "resume", "down" or "idle" */
    char *reason; /* NULL when not given */
};

/*
 * Parse "NodeName=X State=S [Reason=R]" words. Refuses an unknown key ("Update of this
 * parameter is not supported: K=V"), an unknown state ("Invalid node state specified:
 * S"), and DRAIN or DOWN without a Reason (Slurm's "You must specify a reason when
 * DOWNING or DRAINING a node. Request denied"). Returns 0 or -1.
 */
int scontrol_args_update_parse(int argc, char *const *argv, struct scontrol_args_update *u,
                               char *err, size_t errlen);
void scontrol_args_update_free(struct scontrol_args_update *u);

struct scontrol_args_create {
    char *name;
    char *address; /* NodeAddr=, "" when not given */
    uint32_t cpus;
    uint64_t mem_mb;
    char **features; /* NULL-terminated */
    size_t nfeatures;
};

/*
 * Parse "NodeName=X CPUs=N RealMemory=MB [Features=a,b] [NodeAddr=host]" (a leading
 * "node" word is skipped, so both "create node NodeName=..." and Slurm's "create
 * NodeName=..." read the same). NodeName, CPUs (at least 1) and RealMemory are required;
 * RealMemory takes --mem's suffixes. Returns 0 or -1 naming the problem.
 */
int scontrol_args_create_parse(int argc, char *const *argv, struct scontrol_args_create *n,
                               char *err, size_t errlen);
void scontrol_args_create_free(struct scontrol_args_create *n);

#endif
