/*
 * cfg.h - the one configuration file every spur program reads (DESIGN.md section 8).
 *
 * Guarantees:
 *   - Strict: an unknown key, a duplicate key, a wrong type or an out-of-range value is an
 *     error whose message reads "FILE:LINE: key.path: reason"; nothing is silently
 *     ignored or clamped. Programs exit 78 (EX_CONFIG) on it.
 *   - The default path (/etc/spur/spur.yaml, or SPUR_CONFIG) may be missing: then the
 *     embedded defaults apply, one replica on loopback. A path given with -f must exist.
 *   - Keys the file leaves out take the embedded defaults; cfg_print() writes the effective
 *     configuration back as YAML that cfg_load() accepts (spurctld --check-config).
 *   - Every error is reported, not only the first: the loader records one, goes on where
 *     it safely can (other keys, list entries, partitions) and reports up to
 *     CFG_MAX_ERRORS. Errors of the file's structure stop it at once: a YAML syntax error,
 *     nesting deeper than CFG_MAX_DEPTH, more than CFG_MAX_NODES nodes, a second
 *     document, or a file over CFG_MAX_FILE_BYTES (reported at line 1, key "(file)").
 *     Loading costs time linear in the file's size.
 *   - Rules between keys (stall before kill, election slower than heartbeat, one default
 *     partition, listeners on distinct ports, peers...) and the rules that need the host
 *     name (which peer is this replica) live in one function, cfg_validate(); the load
 *     runs it, so --check-config and start-up apply the very same rules. Each names the
 *     line of the key at fault.
 *
 * Ownership: struct cfg owns every string and array in it; cfg_free() releases them. The
 * loader does no I/O beyond reading the one file, so tests and the fuzzer call
 * cfg_load_buffer() directly.
 */
#ifndef SPUR_CFG_H
#define SPUR_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CFG_ERR_MAX 512
#define CFG_MAX_ERRORS 16
#define CFG_MAX_FILE_BYTES (1u << 20)
#define CFG_MAX_DEPTH 32      /* lists and mappings nested; the schema needs 3 */
#define CFG_MAX_NODES 20000   /* keys, values, lists, mappings, aliases; a full file < 2000 */
#define CFG_MAX_PEERS 9
#define CFG_MAX_PARTITIONS 64

/*
 * Every error found, in the order found (the file's order, then the rules between keys).
 * Zero it before cfg_validate() on a configuration of your own; the loaders do.
 */
struct cfg_error {
    char msg[CFG_ERR_MAX];   /* the first error: "FILE:LINE: key: reason" */
    size_t count;            /* errors in list[] */
    bool more;               /* more errors than CFG_MAX_ERRORS: the rest were not looked for */
    char list[CFG_MAX_ERRORS][CFG_ERR_MAX];
};

struct cfg_where; /* lines of the keys, for messages; private to cfg.c */

struct cfg_partition {
    char *name;
    char *nodes;          /* "ALL" or a comma list of node names */
    bool is_default;
    uint32_t max_nodes;   /* 0: no limit */
    uint32_t max_time_min;/* 0: no limit */
    uint32_t max_cpus_per_node; /* 0: no limit */
    uint32_t max_mem_mb_per_node; /* 0: no limit */
    bool up;              /* state UP (true) or DOWN */
};

struct cfg {
    char *source; /* file the values came from, or "(embedded defaults)" */
    char *cluster_name;
    struct {
        char *listen;
        char *state_dir;
        uint32_t node_id; /* 0: derive from the hostname's position in peers */
        char **peers;
        size_t npeers;
        char **hosts;
        size_t nhosts;
        uint32_t finished_job_retention_s;
        uint32_t max_frame_bytes;
        uint32_t max_script_bytes;
        char *socket;       /* the local client API socket (SO_PEERCRED); "": none */
        char **admin_users; /* operators besides root, by login name */
        size_t nadmin_users;
        char *admin_group;  /* members of this group are operators; "": none */
    } controller;
    struct {
        char *key_file;      /* the cluster key (current): peers, agents, tokens */
        char *next_key_file; /* a second key accepted during rotation; "": none */
        char *munge;         /* "auto", "on" or "off": MUNGE credentials from other hosts */
        char *munge_socket;  /* munged's socket; "": libmunge's default */
        uint32_t token_lifespan_s;     /* scontrol token without lifespan= */
        uint32_t max_token_lifespan_s; /* the longest lifespan= granted */
    } auth;
    struct {
        char *listen;
        uint32_t heartbeat_ms;
        uint32_t election_timeout_ms;
        uint32_t snapshot_entries;
        uint32_t max_uncommitted_bytes; /* leader: proposed, uncommitted bytes; BUSY beyond */
        bool fsync;
    } raft;
    struct {
        bool enabled;
        char *bind; /* "all", "loopback" or an address */
        uint32_t port;
        uint32_t max_connections;
        uint32_t idle_timeout_ms;
    } health;
    struct {
        bool enabled;
        char *bind;
        uint32_t port;
    } metrics;
    struct {
        uint32_t heartbeat_ms;
        uint32_t stall_timeout_ms;
        uint32_t kill_timeout_ms;
        uint32_t shutdown_grace_ms;
        uint32_t exit_linger_ms; /* keep answering "dead" this long before exiting */
    } supervisor;
    struct {
        char *listen;            /* spurd's listener, "[::]:6818" */
        char *address;           /* host:port the leader dials; "": derived (spurd(8)) */
        char *spool_dir;         /* "/var/spool/spur/d" */
        char *node_name;         /* "": the short hostname */
        uint32_t cpus;           /* 0: detect (cgroup limits, then the CPUs online) */
        uint32_t mem_mb;         /* 0: detect (cgroup limit, then physical memory) */
        uint32_t heartbeat_s;    /* the leader pings each agent this often */
        uint32_t node_timeout_s; /* no answer this long: the node goes DOWN */
        uint32_t kill_wait_s;    /* SIGTERM to SIGKILL at a time limit or a cancel */
        char *cgroup;            /* "auto", "v2" or "none": how jobs are confined */
    } agent;
    struct {
        char *database_url;   /* libpq connection string or URI; "": no database */
        char *password_file;  /* "": none (libpq's PGPASSFILE / ~/.pgpass still apply) */
        uint32_t batch_size;  /* records per export transaction */
        uint32_t retry_max_ms;/* the reconnect back-off grows to this */
    } accounting;
    struct {
        char *level; /* debug, info, warn, error */
    } log;
    struct cfg_partition *partitions;
    size_t npartitions;
    struct cfg_where *where; /* where each key came from; NULL for the embedded defaults */
};

/* Fill *c with the embedded defaults (one replica on loopback). */
int cfg_defaults(struct cfg *c);
void cfg_free(struct cfg *c);

/*
 * Load a file. path NULL: the default path (SPUR_CONFIG, else the build's sysconfdir
 * spur/spur.yaml), falling back to the embedded defaults when that file does not exist.
 * Returns 0, or -1 with every error in *err (err->msg the first) and *c empty.
 * A file that cannot be opened or read has no line: "FILE: (file): cannot open: why".
 */
int cfg_load(const char *path, struct cfg *c, struct cfg_error *err);
/*
 * cfg_load() plus the rules that need this host's name (see cfg_validate()): what the
 * controller's programs call, so that a configuration they accept is one they can run.
 * On success cfg_node_id(c, hostname) is not 0.
 */
int cfg_load_host(const char *path, const char *hostname, struct cfg *c,
                  struct cfg_error *err);
/* Parse YAML held in memory; name is used in messages. Returns 0 or -1. */
int cfg_load_buffer(const char *name, const char *buf, size_t len, struct cfg *c,
                    struct cfg_error *err);
int cfg_load_buffer_host(const char *name, const char *buf, size_t len, const char *hostname,
                         struct cfg *c, struct cfg_error *err);

/*
 * Every rule between keys, in one place, pure (no I/O): appends each broken rule to err
 * ("FILE:LINE: key: reason", the line from c->where when c was loaded from a file) and
 * returns -1 when it added any, else 0. The rules:
 *   - supervisor.stall_timeout_ms > supervisor.heartbeat_ms, kill_timeout_ms >=
 *     stall_timeout_ms; raft.election_timeout_ms >= 3 x raft.heartbeat_ms;
 *   - controller.node_id <= the number of controller.peers;
 *   - this replica's listeners (controller.listen, raft.listen, and health.port and
 *     metrics.port when enabled) have distinct ports where their addresses could overlap;
 *   - controller.peers: not exactly 2 entries; no replica twice, however spelt (names in
 *     any case, IP addresses by value);
 *   - this replica's entry in controller.peers is known: controller.node_id, a single
 *     peer, or exactly one peer matching hostname (hostname NULL skips only this rule);
 *     and no peer on this replica's host names a port that one of its other listeners
 *     holds;
 *   - partition names unique and of letters, digits, '.', '-', '_'; at most one default.
 */
int cfg_validate(const struct cfg *c, const char *hostname, struct cfg_error *err);
/* Every error of err, one per line, each after prefix (spurctld --check-config). */
void cfg_print_errors(FILE *out, const char *prefix, const struct cfg_error *err);
/*
 * Every error of err as a logfmt line (msg="configuration error"), then the one line that
 * explains the exit (msg="invalid configuration; exiting 78", the first error again).
 */
void cfg_log_errors(const char *comp, const struct cfg_error *err);
/* The path cfg_load(NULL, ...) reads. */
const char *cfg_default_path(void);

/* Write the effective configuration as YAML. */
void cfg_print(FILE *out, const struct cfg *c);

/*
 * This replica's node id: controller.node_id when set, else 1 + the index of the peer
 * whose host is hostname (exact, or, when no host is, the first DNS label equal to the
 * short hostname, as StatefulSet pods are named), else 1 when there is exactly one peer.
 * Returns 0 when nothing matches, or when two peers match at the same step (the id
 * would be a guess; cfg_validate() says which).
 */
uint32_t cfg_node_id(const struct cfg *c, const char *hostname);

/* The dotted names of every key the loader accepts (NULL-terminated), for docs tests. */
const char *const *cfg_key_names(void);

#endif
