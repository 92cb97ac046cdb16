/*
 * cli.h - what every spur command shares: configuration, the client connection, output
 * mode, and one way of reporting errors.
 *
 * Error lines read "PROG: error: what went wrong" on stderr, one line. Like Slurm's
 * commands, these exit 1 on any error and 0 on success, except where a man page says
 * otherwise (scontrol ping).
 *
 * Authentication (spurclient.h): on the local socket nothing is sent; over TCP the first
 * request of a connection carries SPUR_JWT when set, else a MUNGE credential (munged's
 * socket: SPUR_MUNGE_SOCKET, else auth.munge_socket, else libmunge's default; none
 * when auth.munge is "off"). Every UNAUTHENTICATED answer, whatever the command, prints
 * "PROG: error: not authenticated" and a hint line on how to get a credential, and the
 * command exits 1. A DENIED answer reads "Access/permission denied" in the words of the
 * command's Slurm counterpart (cli_response_error(), and the commands' own lines).
 */
#ifndef SPUR_CLI_H
#define SPUR_CLI_H

#include "cfg.h"
#include "json.h"
#include "spurclient.h"

#include <stdbool.h>
#include <stdint.h>

/* slurm_strerror(ESLURM_ACCESS_DENIED), what a DENIED answer prints. */
#define CLI_MSG_DENIED "Access/permission denied"

struct cli {
    const char *prog; /* the command name used in messages */
    struct cfg cfg;
    bool cfg_loaded;
    struct spurclient *client;
    char **hosts;
    size_t nhosts;
    bool json;
    bool quiet;
    /*
     * The cluster requests name: SPUR_CLUSTER, else cluster_name of the configuration
     * file read, else NULL (no file: learn it from the replica's answer, see spurclient.h).
     * Borrowed from the environment or cfg. cluster_origin says where it came from, for
     * the message when a replica refuses the name.
     */
    const char *cluster_name;
    char cluster_origin[320];
    uint32_t timeout_ms; /* per call (SPUR_TIMEOUT_MS, default 10000) */
    bool stale_warned;   /* the possibly-stale warning is printed once per command */
};

/*
 * Load the configuration and connect lazily. Returns 0 or prints an error and returns 1.
 *
 * Where the commands look, in order: SPUR_CONTROLLER (a comma list of host:port,
 * unix:/path or /path), else the local socket controller.socket when that path exists
 * and is a socket, followed by controller.hosts of the configuration (SPUR_CONFIG, else
 * the default path, else the embedded defaults: localhost:6817). The cluster name: SPUR_CLUSTER,
 * else cluster_name of a configuration file; with neither (no file, only an address), the name the
 * first replica answers with. A replica refuses a name that is not its own.
 */
int cli_init(struct cli *c, const char *prog);
void cli_fini(struct cli *c);
/*
 * The error line for what getopt_long() returned as opt (':' a missing value, '?' an
 * unknown option), in getopt's own words, as Slurm's commands print it: "PROG: invalid
 * option -- 'Z'" and a line 'Try "PROG --help" for more information'.
 */
void cli_option_error(const struct cli *c, int opt, char **argv);
/*
 * What squeue -l and sinfo -l print above their header, as Slurm's do: the time now,
 * "Thu Dec 03 12:27:57 2026". And their refusal of -l with -o (Slurm's words, exit 1).
 */
void cli_print_date_line(FILE *out);
void cli_long_and_format(const struct cli *c);
/* "PROG: msg" and the "Try" line of cli_option_error(). */
void cli_usage_error(const struct cli *c, const char *msg);
/*
 * The getopt_long() values of --help and --usage, which every command answers alike;
 * above any option letter and below the commands' own values (1000 and up).
 */
enum { CLI_OPT_HELP = 900, CLI_OPT_USAGE };
/* "spur VERSION" on stdout: what -V, --version and "version" print. */
void cli_print_version(void);
/*
 * Answer --help (opt CLI_OPT_HELP: the command's help text), --usage (CLI_OPT_USAGE: its
 * one-line synopsis) or -V/--version ('V') on stdout; the command then exits 0.
 */
void cli_print_about(int opt, const char *help, const char *synopsis);
/*
 * What a command's getopt_long() loop does with an option it has no case of its own for:
 * answer --help, --usage or -V/--version (cli_print_about()) and return exit status 0, or
 * report getopt's ':' or '?' (cli_option_error()) and return 1.
 */
int cli_option_shared(const struct cli *c, int opt, char **argv, const char *help,
                      const char *synopsis);
/* Print "PROG: error: ..." to stderr. */
void cli_error(const struct cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * The answer is UNAUTHENTICATED: print "PROG: error: not authenticated" and the hint
 * line, free r, and return true. Otherwise return false and leave r alone.
 */
bool cli_unauthenticated(const struct cli *c, spurclient_response *r);
/*
 * Send req; on a transport failure or an error code print one line and return NULL.
 * A successful response is returned for the caller to free with spurclient_response_free().
 */
spurclient_response *cli_call(struct cli *c, spurclient_request *req, bool write);
/*
 * A read that prefers a linearizable answer and falls back to a local, possibly stale one
 * when no leader is known, saying so on stderr.
 */
spurclient_response *cli_read(struct cli *c, spurclient_request *req);
/*
 * Like cli_call() and cli_read(), but an answer with an error code is returned too, for
 * commands that word some errors the way Slurm does ("Invalid job id specified"). Only
 * a failure to get any answer, or an UNAUTHENTICATED one (cli_unauthenticated()),
 * prints and returns NULL.
 *
 * A read waits for a leader at most about three election timeouts (bounded by the call
 * timeout) before it falls back to the local, possibly stale, answer.
 */
spurclient_response *cli_call_any(struct cli *c, spurclient_request *req, bool write);
spurclient_response *cli_read_any(struct cli *c, spurclient_request *req);
/* Print r's error as one line, "PROG: error: [WHAT: ]error". */
void cli_response_error(const struct cli *c, const spurclient_response *r, const char *what);
const char *cli_code_name(int code);

/*
 * A group's name from its gid, for the fmt contexts' group_name hook (arg: a zeroed
 * struct cli_group_cache, which remembers the last lookup). NULL: no such group.
 */
struct cli_group_cache {
    uint32_t gid;
    bool valid;
    char name[256];
};
const char *cli_group_name(uint32_t gid, void *arg);

int cmd_scontrol(struct cli *c, int argc, char **argv);
int cmd_sbatch(struct cli *c, int argc, char **argv);
int cmd_squeue(struct cli *c, int argc, char **argv);
int cmd_scancel(struct cli *c, int argc, char **argv);
int cmd_sinfo(struct cli *c, int argc, char **argv);
int cmd_sacct(struct cli *c, int argc, char **argv);

#endif
