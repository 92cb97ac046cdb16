/*
 * main.c - spur, the multi-call client: sbatch, squeue, scancel, sinfo, sacct and scontrol are
 * links to this one program, which picks the command from the name it was run as, or
 * from its first argument ("spur squeue -u alice").
 *
 * Exit status is the command's: 0 on success, 1 on any error (scontrol ping: 1 when a
 * controller is down). Configuration (SPUR_CONFIG, SPUR_CONTROLLER, SPUR_CLUSTER,
 * SPUR_TIMEOUT_MS) is loaded before the command runs; an invalid file is an error of every
 * command.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(struct cli *c, int argc, char **argv);
    const char *what;
} commands[] = {
    {"sbatch", cmd_sbatch, "submit a batch script"},
    {"squeue", cmd_squeue, "show the jobs in the queue"},
    {"scancel", cmd_scancel, "cancel jobs"},
    {"sinfo", cmd_sinfo, "show partitions and nodes"},
    {"sacct", cmd_sacct, "show the accounting records of jobs, finished or not"},
    {"scontrol", cmd_scontrol, "show and change jobs, nodes, partitions and the Raft cluster"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
    fprintf(out, "Usage: spur COMMAND [ARGS...]   (or run COMMAND through its link)\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].what);
    fprintf(out, "  help       this text;  --version  the version\n"
                 "Each command takes --help. Environment: SPUR_CONTROLLER, SPUR_CLUSTER, "
                 "SPUR_CONFIG, SPUR_TIMEOUT_MS.\n");
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int main(int argc, char **argv)
{
    const char *name = argc > 0 ? base_name(argv[0]) : "spur";
    size_t k;
    for (k = 0; k < NCOMMANDS; k++)
        if (strcmp(name, commands[k].name) == 0)
            break;
    if (k == NCOMMANDS) {
        /* Run as "spur" (or under any other name): the command is the first argument. */
        if (argc < 2) {
            usage(stderr);
            return 1;
        }
        const char *cmd = argv[1];
        if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0 ||
            strcmp(cmd, "version") == 0) {
            cli_print_version();
            return 0;
        }
        if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        for (k = 0; k < NCOMMANDS; k++)
            if (strcmp(cmd, commands[k].name) == 0)
                break;
        if (k == NCOMMANDS) {
            fprintf(stderr, "spur: error: unknown command \"%s\" (try \"spur help\")\n", cmd);
            return 1;
        }
        argc--;
        argv++;
    }
    struct cli c;
    if (cli_init(&c, commands[k].name) != 0) {
        cli_fini(&c);
        return 1;
    }
    int rc = commands[k].run(&c, argc, argv);
    cli_fini(&c);
    return rc;
}
