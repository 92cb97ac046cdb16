/*
 * test_cfg.c - the strict configuration loader (common/cfg.c).
 *
 * What is pinned here: every way a file can be refused, and that each refusal reads
 * "FILE:LINE: key: reason" with the line of the mistake; that a file leaving keys out gets
 * the embedded defaults; the default-path rules (SPUR_CONFIG, missing files); that
 * cfg_print() writes YAML that loads back to the same configuration; that the host:port
 * and bind helpers are netaddr's (whose grammar test_netaddr.c pins); node id derivation; and that cfg_key_names() matches what the loader and
 * the printer know.
 *
 * Check runs every test in its own forked process, so the tests that set SPUR_CONFIG do
 * not leak it into the others.
 */
#include "cfg.h"
#include "check_run.h"
#include "netaddr.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NAME "t.yaml"

/* ---- helpers ------------------------------------------------------------------------ */

static int load(const char *yaml, struct cfg *c, struct cfg_error *e)
{
    memset(e, 0, sizeof(*e));
    return cfg_load_buffer(NAME, yaml, strlen(yaml), c, e);
}

/*
 * yaml must be refused with a message that starts exactly with prefix ("t.yaml:LINE: key: ")
 * and whose reason holds why. A refused load leaves the struct empty.
 */
static void expect_error(const char *yaml, const char *prefix, const char *why)
{
    struct cfg c;
    struct cfg_error e;
    int rc = load(yaml, &c, &e);
    ck_assert_msg(rc == -1, "accepted:\n%s", yaml);
    ck_assert_msg(strncmp(e.msg, prefix, strlen(prefix)) == 0,
                  "message \"%s\" does not start with \"%s\"\nfor:\n%s", e.msg, prefix, yaml);
    const char *reason = e.msg + strlen(prefix);
    ck_assert_msg(reason[0] != '\0' && reason[0] != ' ', "no reason in \"%s\"", e.msg);
    ck_assert_msg(strstr(reason, why) != NULL, "reason of \"%s\" lacks \"%s\"", e.msg, why);
    ck_assert_msg(strchr(e.msg, '\n') == NULL, "message spans lines: \"%s\"", e.msg);
    ck_assert_ptr_null(c.cluster_name);
    ck_assert_ptr_null(c.partitions);
}

static void expect_ok(const char *yaml, struct cfg *c)
{
    struct cfg_error e;
    int rc = load(yaml, c, &e);
    ck_assert_msg(rc == 0, "refused (%s):\n%s", e.msg, yaml);
}

/* cfg_print() into a heap string the caller frees. */
static char *print_to_string(const struct cfg *c)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ck_assert_ptr_nonnull(f);
    cfg_print(f, c);
    ck_assert_int_eq(fclose(f), 0);
    return out;
}

static void assert_strlist_eq(char *const *a, size_t na, char *const *b, size_t nb)
{
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++)
        ck_assert_str_eq(a[i], b[i]);
}

/* Every field but source. */
static void assert_cfg_equal(const struct cfg *a, const struct cfg *b)
{
    ck_assert_str_eq(a->cluster_name, b->cluster_name);
    ck_assert_str_eq(a->controller.listen, b->controller.listen);
    ck_assert_str_eq(a->controller.state_dir, b->controller.state_dir);
    ck_assert_uint_eq(a->controller.node_id, b->controller.node_id);
    assert_strlist_eq(a->controller.peers, a->controller.npeers, b->controller.peers,
                      b->controller.npeers);
    assert_strlist_eq(a->controller.hosts, a->controller.nhosts, b->controller.hosts,
                      b->controller.nhosts);
    ck_assert_uint_eq(a->controller.finished_job_retention_s,
                      b->controller.finished_job_retention_s);
    ck_assert_uint_eq(a->controller.max_frame_bytes, b->controller.max_frame_bytes);
    ck_assert_uint_eq(a->controller.max_script_bytes, b->controller.max_script_bytes);
    ck_assert_str_eq(a->raft.listen, b->raft.listen);
    ck_assert_uint_eq(a->raft.heartbeat_ms, b->raft.heartbeat_ms);
    ck_assert_uint_eq(a->raft.election_timeout_ms, b->raft.election_timeout_ms);
    ck_assert_uint_eq(a->raft.snapshot_entries, b->raft.snapshot_entries);
    ck_assert_uint_eq(a->raft.max_uncommitted_bytes, b->raft.max_uncommitted_bytes);
    ck_assert_int_eq(a->raft.fsync, b->raft.fsync);
    ck_assert_int_eq(a->health.enabled, b->health.enabled);
    ck_assert_str_eq(a->health.bind, b->health.bind);
    ck_assert_uint_eq(a->health.port, b->health.port);
    ck_assert_uint_eq(a->health.max_connections, b->health.max_connections);
    ck_assert_uint_eq(a->health.idle_timeout_ms, b->health.idle_timeout_ms);
    ck_assert_int_eq(a->metrics.enabled, b->metrics.enabled);
    ck_assert_str_eq(a->metrics.bind, b->metrics.bind);
    ck_assert_uint_eq(a->metrics.port, b->metrics.port);
    ck_assert_uint_eq(a->supervisor.heartbeat_ms, b->supervisor.heartbeat_ms);
    ck_assert_uint_eq(a->supervisor.stall_timeout_ms, b->supervisor.stall_timeout_ms);
    ck_assert_uint_eq(a->supervisor.kill_timeout_ms, b->supervisor.kill_timeout_ms);
    ck_assert_uint_eq(a->supervisor.shutdown_grace_ms, b->supervisor.shutdown_grace_ms);
    ck_assert_str_eq(a->accounting.database_url, b->accounting.database_url);
    ck_assert_str_eq(a->accounting.password_file, b->accounting.password_file);
    ck_assert_uint_eq(a->accounting.batch_size, b->accounting.batch_size);
    ck_assert_uint_eq(a->accounting.retry_max_ms, b->accounting.retry_max_ms);
    ck_assert_str_eq(a->log.level, b->log.level);
    ck_assert_uint_eq(a->npartitions, b->npartitions);
    for (size_t i = 0; i < a->npartitions; i++) {
        const struct cfg_partition *p = &a->partitions[i], *q = &b->partitions[i];
        ck_assert_str_eq(p->name, q->name);
        ck_assert_str_eq(p->nodes, q->nodes);
        ck_assert_int_eq(p->is_default, q->is_default);
        ck_assert_uint_eq(p->max_nodes, q->max_nodes);
        ck_assert_uint_eq(p->max_time_min, q->max_time_min);
        ck_assert_uint_eq(p->max_cpus_per_node, q->max_cpus_per_node);
        ck_assert_uint_eq(p->max_mem_mb_per_node, q->max_mem_mb_per_node);
        ck_assert_int_eq(p->up, q->up);
    }
}

/* Print c, load the text back, and require the same configuration and the same text. */
static void assert_round_trip(const struct cfg *c)
{
    struct cfg back;
    struct cfg_error e;
    char *text = print_to_string(c);
    int rc = cfg_load_buffer(NAME, text, strlen(text), &back, &e);
    ck_assert_msg(rc == 0, "cfg_print output refused (%s):\n%s", e.msg, text);
    assert_cfg_equal(c, &back);
    char *again = print_to_string(&back);
    /* The first line names the source; the rest must match byte for byte. */
    ck_assert_str_eq(strchr(text, '\n'), strchr(again, '\n'));
    free(again);
    free(text);
    cfg_free(&back);
}

static char *data_path(const char *rel)
{
    const char *dir = getenv("SPUR_TEST_DATA");
    ck_assert_msg(dir != NULL, "SPUR_TEST_DATA is not set (run through meson test)");
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "%s/%s", dir, rel), 0);
    return p;
}

static char *make_tmpdir(void)
{
    char *d = strdup("/tmp/test_cfg.XXXXXX");
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

static char *write_file(const char *dir, const char *name, const char *data, size_t len)
{
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    return p;
}

/* ---- refusals, table-driven --------------------------------------------------------- */

struct bad_case {
    const char *yaml;
    const char *prefix; /* exact "t.yaml:LINE: key: " */
    const char *why;    /* a piece of the reason */
};

static const struct bad_case bad_cases[] = {
    /* Unknown keys: top level, nested, inside a partition. */
    {"bogus: 1\n", "t.yaml:1: bogus: ", "unknown key"},
    {"cluster_name: a\nraft:\n  heartbeat_ms: 100\n  bogus: 2\n",
     "t.yaml:4: raft.bogus: ", "unknown key"},
    {"controller:\n  listen: \"[::]:6817\"\n  peer: [\"a:1\"]\n",
     "t.yaml:3: controller.peer: ", "unknown key"},
    {"partitions:\n  - name: a\n    colour: red\n",
     "t.yaml:3: partitions[0].colour: ", "unknown key"},
    {"partitions:\n  - name: a\n  - name: b\n    bogus: 1\n",
     "t.yaml:4: partitions[1].bogus: ", "unknown key"},
    {"raft:\n  heartbeat_ms: 100\n  raft:\n    heartbeat_ms: 100\n",
     "t.yaml:3: raft.raft: ", "unknown key"},
    {"# comment\n\nCluster_Name: a\n", "t.yaml:3: Cluster_Name: ", "unknown key"},
    {"? [a]\n: 1\n", "t.yaml:1: (top level): ", "a key must be a plain string"},
    {"raft:\n  ? {a: 1}\n  : 1\n", "t.yaml:2: raft: ", "a key must be a plain string"},

    /* Duplicate keys, at every level, and duplicate list entries. */
    {"cluster_name: a\ncluster_name: b\n",
     "t.yaml:2: cluster_name: ", "duplicate key (first at line 1)"},
    {"raft:\n  heartbeat_ms: 100\n  heartbeat_ms: 200\n",
     "t.yaml:3: raft.heartbeat_ms: ", "duplicate key (first at line 2)"},
    {"raft:\n  fsync: true\nhealth:\n  port: 1\nraft:\n  fsync: false\n",
     "t.yaml:5: raft: ", "duplicate key (first at line 1)"},
    {"partitions:\n  - name: a\n    nodes: x\n    name: b\n",
     "t.yaml:4: partitions[0].name: ", "duplicate key (first at line 2)"},
    {"controller:\n  peers: [\"a:1\", \"b:1\",\n          \"a:1\"]\n",
     "t.yaml:3: controller.peers[2]: ", "listed twice"},

    /* Wrong types. */
    {"raft:\n  heartbeat_ms: fast\n", "t.yaml:2: raft.heartbeat_ms: ", "not a non-negative"},
    {"raft:\n  heartbeat_ms: \"100\"\n",
     "t.yaml:2: raft.heartbeat_ms: ", "expected an integer, got the string \"100\""},
    {"raft:\n  heartbeat_ms: '100'\n", "t.yaml:2: raft.heartbeat_ms: ", "expected an integer"},
    {"raft:\n  heartbeat_ms: [100]\n",
     "t.yaml:2: raft.heartbeat_ms: ", "expected an integer, got a list"},
    {"raft:\n  heartbeat_ms: {ms: 100}\n",
     "t.yaml:2: raft.heartbeat_ms: ", "expected an integer, got a mapping"},
    {"raft:\n  heartbeat_ms:\n",
     "t.yaml:2: raft.heartbeat_ms: ", "expected an integer, got nothing (null)"},
    {"raft:\n  heartbeat_ms: ~\n", "t.yaml:2: raft.heartbeat_ms: ", "got nothing (null)"},
    {"raft:\n  heartbeat_ms: -5\n", "t.yaml:2: raft.heartbeat_ms: ", "not a non-negative"},
    {"raft:\n  heartbeat_ms: 1.5\n", "t.yaml:2: raft.heartbeat_ms: ", "not a non-negative"},
    {"raft:\n  heartbeat_ms: 0x64\n", "t.yaml:2: raft.heartbeat_ms: ", "not a non-negative"},
    {"raft:\n  heartbeat_ms: 1_000\n", "t.yaml:2: raft.heartbeat_ms: ", "not a non-negative"},
    {"raft:\n  heartbeat_ms: 0100\n", "t.yaml:2: raft.heartbeat_ms: ", "without leading zeros"},
    {"raft:\n  heartbeat_ms: 1e3\n", "t.yaml:2: raft.heartbeat_ms: ", "not a non-negative"},
    {"raft:\n  heartbeat_ms: _100\n", "t.yaml:2: raft.heartbeat_ms: ", "not a non-negative"},
    {"raft:\n  heartbeat_ms: 99999999999999999999\n",
     "t.yaml:2: raft.heartbeat_ms: ", "is not an integer in range 10..10000"},
    {"raft:\n  heartbeat_ms: true\n", "t.yaml:2: raft.heartbeat_ms: ", "not a non-negative"},
    {"cluster_name: [a, b]\n", "t.yaml:1: cluster_name: ", "expected a string, got a list"},
    {"cluster_name: {a: b}\n", "t.yaml:1: cluster_name: ", "expected a string, got a mapping"},
    {"cluster_name:\n", "t.yaml:1: cluster_name: ", "expected a string, got nothing (null)"},
    {"cluster_name: null\n", "t.yaml:1: cluster_name: ", "got nothing (null)"},
    {"cluster_name: \"a\\0b\"\n", "t.yaml:1: cluster_name: ", "NUL byte"},
    {"health:\n  enabled: yes\n",
     "t.yaml:2: health.enabled: ", "expected true or false, got \"yes\""},
    {"health:\n  enabled: treu\n", "t.yaml:2: health.enabled: ", "got \"treu\""},
    {"health:\n  enabled: 1\n", "t.yaml:2: health.enabled: ", "got \"1\""},
    {"health:\n  enabled: \"true\"\n", "t.yaml:2: health.enabled: ", "expected true or false"},
    {"health:\n  enabled: null\n", "t.yaml:2: health.enabled: ", "expected true or false"},
    {"health:\n  enabled: [true]\n",
     "t.yaml:2: health.enabled: ", "expected true or false, got a list"},
    {"raft: 5\n", "t.yaml:1: raft: ", "expected a mapping, got a scalar"},
    {"raft: [heartbeat_ms]\n", "t.yaml:1: raft: ", "expected a mapping, got a list"},
    {"raft:\n", "t.yaml:1: raft: ", "expected a mapping, got nothing (null)"},
    {"controller:\n  peers: {a: 1}\n",
     "t.yaml:2: controller.peers: ", "expected a list of strings, got a mapping"},
    {"controller:\n  hosts: \"h:1\"\n",
     "t.yaml:2: controller.hosts: ", "expected a list of strings, got a scalar"},
    {"controller:\n  peers:\n    - \"a:1\"\n    - [b]\n",
     "t.yaml:4: controller.peers[1]: ", "expected a string, got a list"},
    {"controller:\n  peers:\n    - \"a:1\"\n    -\n",
     "t.yaml:4: controller.peers[1]: ", "got nothing (null)"},
    {"controller:\n  peers: [\"a:1\\0x\"]\n", "t.yaml:2: controller.peers[0]: ", "NUL byte"},
    {"controller:\n  peers: []\n", "t.yaml:2: controller.peers: ", "needs 1 to 9 entries, has 0"},
    {"controller:\n  peers: [a:1, b:1, c:1, d:1, e:1, f:1, g:1, h:1, i:1, j:1]\n",
     "t.yaml:2: controller.peers: ", "has 10"},
    {"partitions: {name: a}\n",
     "t.yaml:1: partitions: ", "expected a list of partitions, got a mapping"},
    {"partitions: []\n", "t.yaml:1: partitions: ", "needs 1 to 64 partitions, has 0"},
    {"partitions:\n  - name: a\n  - b\n",
     "t.yaml:3: partitions[1]: ", "expected a mapping, got a scalar"},
    {"partitions:\n  - name: a\n    up: maybe\n", "t.yaml:3: partitions[0].up: ", "\"maybe\""},
    {"partitions:\n  - name: a\n    max_nodes: lots\n",
     "t.yaml:3: partitions[0].max_nodes: ", "not a non-negative"},
    {"partitions:\n  - name: [a]\n", "t.yaml:2: partitions[0].name: ", "got a list"},

    /* Ports 0 and 65536 (the other bounds are in the range table below). */
    {"health:\n  port: 0\n", "t.yaml:2: health.port: ", "0 is out of range 1..65535"},
    {"metrics:\n  port: 65536\n", "t.yaml:2: metrics.port: ", "65536 is out of range 1..65535"},

    /* Bad host:port values, where they are accepted: listen addresses, peers, hosts. */
    {"controller:\n  listen: localhost\n",
     "t.yaml:2: controller.listen: ", "\"localhost\" is not HOST:PORT"},
    {"raft:\n  listen: \"::1:6821\"\n", "t.yaml:2: raft.listen: ", "is not HOST:PORT"},
    {"raft:\n  listen: \"[::1]:0\"\n", "t.yaml:2: raft.listen: ", "is not HOST:PORT"},
    {"controller:\n  peers:\n    - \"a:6821\"\n    - \"b c:6821\"\n",
     "t.yaml:4: controller.peers[1]: ", "is not HOST:PORT"},
    {"controller:\n  hosts: [\"h$:6817\"]\n", "t.yaml:2: controller.hosts[0]: ", "HOST:PORT"},
    {"controller:\n  hosts: [\"h:65536\"]\n", "t.yaml:2: controller.hosts[0]: ", "HOST:PORT"},

    /* Bad bind values. */
    {"health:\n  bind: everywhere\n",
     "t.yaml:2: health.bind: ", "\"everywhere\" is not all, loopback or an IP address"},
    {"metrics:\n  bind: localhost\n", "t.yaml:2: metrics.bind: ", "not all, loopback"},
    {"metrics:\n  bind: 300.1.1.1\n", "t.yaml:2: metrics.bind: ", "not all, loopback"},
    {"metrics:\n  bind: \"[::1]\"\n", "t.yaml:2: metrics.bind: ", "not all, loopback"},
    {"health:\n  bind: \"\"\n", "t.yaml:2: health.bind: ", "not all, loopback"},
    {"health:\n  bind: ALL\n", "t.yaml:2: health.bind: ", "not all, loopback"},

    /* Bad cluster names, state dirs, log levels. */
    {"cluster_name: \"\"\n", "t.yaml:1: cluster_name: ", "1 to 63 characters"},
    {"cluster_name: "
     "a123456789b123456789c123456789d123456789e123456789f123456789abcd\n",
     "t.yaml:1: cluster_name: ", "1 to 63 characters"},
    {"cluster_name: \"my cluster\"\n", "t.yaml:1: cluster_name: ", "may hold only"},
    {"cluster_name: a/b\n", "t.yaml:1: cluster_name: ", "may hold only"},
    {"cluster_name: \"caf\\u00e9\"\n", "t.yaml:1: cluster_name: ", "may hold only"},
    {"controller:\n  state_dir: var/spool/spur\n",
     "t.yaml:2: controller.state_dir: ", "\"var/spool/spur\" is not an absolute path"},
    {"controller:\n  state_dir: ./spur\n", "t.yaml:2: controller.state_dir: ", "absolute path"},
    {"log:\n  level: verbose\n",
     "t.yaml:2: log.level: ", "\"verbose\" is not one of debug, info, warn, error"},
    {"log:\n  level: INFO\n", "t.yaml:2: log.level: ", "not one of"},
    {"log:\n  level: \"\"\n", "t.yaml:2: log.level: ", "not one of"},

    /* Cross-key rules, reported at the key the file set. */
    {"supervisor:\n  heartbeat_ms: 500\n  stall_timeout_ms: 500\n",
     "t.yaml:3: supervisor.stall_timeout_ms: ",
     "500 must be greater than supervisor.heartbeat_ms (500)"},
    {"supervisor:\n  heartbeat_ms: 5000\n", "t.yaml:2: supervisor.heartbeat_ms: ",
     "5000 must be less than supervisor.stall_timeout_ms (3000)"},
    {"supervisor:\n  stall_timeout_ms: 5000\n  kill_timeout_ms: 4999\n",
     "t.yaml:3: supervisor.kill_timeout_ms: ",
     "4999 must not be less than supervisor.stall_timeout_ms (5000)"},
    {"supervisor:\n  stall_timeout_ms: 20000\n", "t.yaml:2: supervisor.stall_timeout_ms: ",
     "20000 must not be greater than supervisor.kill_timeout_ms (10000)"},
    {"supervisor:\n  kill_timeout_ms: 2999\n", "t.yaml:2: supervisor.kill_timeout_ms: ",
     "must not be less than supervisor.stall_timeout_ms (3000)"},
    {"raft:\n  heartbeat_ms: 100\n  election_timeout_ms: 299\n",
     "t.yaml:3: raft.election_timeout_ms: ", "299 must be at least 3 x raft.heartbeat_ms (100)"},
    {"raft:\n  heartbeat_ms: 400\n", "t.yaml:2: raft.heartbeat_ms: ",
     "400 must be at most a third of raft.election_timeout_ms (1000)"},
    {"controller:\n  node_id: 2\n  peers: [\"a:1\"]\n",
     "t.yaml:2: controller.node_id: ", "2 is beyond the 1 entries of controller.peers"},
    {"controller:\n  node_id: 4\n  peers: [\"a:1\", \"b:1\", \"c:1\"]\n",
     "t.yaml:2: controller.node_id: ", "beyond the 3 entries"},
    {"health:\n  port: 7000\nmetrics:\n  port: 7000\n",
     "t.yaml:2: health.port: ", "7000 is also metrics.port"},
    {"metrics:\n  port: 6823\n", "t.yaml:2: metrics.port: ", "6823 is also health.port"},
    {"health:\n  port: 6822\n", "t.yaml:2: health.port: ", "6822 is also metrics.port"},
    {"partitions:\n  - name: a\n    default: true\n  - name: b\n    default: true\n",
     "t.yaml:1: partitions: ", "2 partitions are marked default"},
    {"partitions:\n  - name: a\n  - name: b\n  - name: a\n",
     "t.yaml:4: partitions[2]: ", "partition name \"a\" is used twice"},
    {"partitions:\n  - nodes: n1\n", "t.yaml:2: partitions[0]: ", "a partition needs a name"},
    {"partitions:\n  - name: a\n  - {nodes: x, up: true}\n",
     "t.yaml:3: partitions[1]: ", "needs a name"},
    {"partitions:\n  - name: \"a b\"\n", "t.yaml:2: partitions[0]: ", "may hold only"},
    {"partitions:\n  - name: \"\"\n", "t.yaml:2: partitions[0].name: ", "must not be empty"},
    {"partitions:\n  - name: a\n    nodes: \"\"\n",
     "t.yaml:3: partitions[0].nodes: ", "must not be empty"},

    /* Syntax and document structure. */
    {"cluster_name: a\nraft: {heartbeat_ms: 100\n", "t.yaml:3: (yaml): ", "flow"},
    {"raft:\n\theartbeat_ms: 100\n", "t.yaml:2: (yaml): ", "cannot start any token"},
    {"cluster_name: a: b\n", "t.yaml:1: (yaml): ", "mapping values are not allowed"},
    {"cluster_name: \"open\n", "t.yaml:2: (yaml): ", "quoted scalar"},
    {"raft: *nowhere\n", "t.yaml:1: (yaml): ", "undefined alias"},
    {"cluster_name: a\n---\ncluster_name: b\n",
     "t.yaml:2: (file): ", "holds more than one YAML document"},
    {"cluster_name: a\n\n\n---\nraft: {}\n", "t.yaml:4: (file): ", "more than one YAML document"},
    {"cluster_name: a\n...\n---\ncluster_name: b\n", "t.yaml:3: (file): ", "more than one"},
    {"cluster_name: a\n...\ncluster_name: b\n", "t.yaml:3: (yaml): ", "document start"},
    /* A second document stops the load where it starts, whatever follows. */
    {"cluster_name: a\n---\n[oops\n", "t.yaml:2: (file): ", "more than one YAML document"},
    {"cluster_name: a\n[oops\n", "t.yaml:3: (yaml): ", "could not find expected ':'"},
    {"[1, 2]\n", "t.yaml:1: (top level): ", "expected a mapping of keys, got a list"},
    {"\n\njust words\n", "t.yaml:3: (top level): ", "expected a mapping of keys, got a scalar"},
};

START_TEST(test_refusals)
{
    const struct bad_case *bc = &bad_cases[_i];
    expect_error(bc->yaml, bc->prefix, bc->why);
}
END_TEST

/* ---- range boundaries --------------------------------------------------------------- */

struct range_case {
    const char *section; /* "partitions" for a partition key */
    const char *key;
    uint64_t min, max;
    const char *context; /* other lines of the section, so the cross-key rules hold */
};

static const struct range_case range_cases[] = {
    {"controller", "node_id", 0, 9, "  peers: [a:1, b:1, c:1, d:1, e:1, f:1, g:1, h:1, i:1]\n"},
    {"controller", "finished_job_retention_s", 0, 31536000, ""},
    {"controller", "max_frame_bytes", 65536, 67108864, ""},
    {"controller", "max_script_bytes", 1, 4194304, ""},
    {"raft", "heartbeat_ms", 10, 10000, "  election_timeout_ms: 60000\n"},
    {"raft", "election_timeout_ms", 50, 60000, "  heartbeat_ms: 10\n"},
    {"raft", "snapshot_entries", 100, 100000000, ""},
    {"raft", "max_uncommitted_bytes", 1024, 4294967295u, ""},
    {"health", "port", 1, 65535, ""},
    {"health", "max_connections", 8, 65536, ""},
    {"health", "idle_timeout_ms", 100, 3600000, ""},
    {"metrics", "port", 1, 65535, ""},
    {"supervisor", "heartbeat_ms", 10, 60000,
     "  stall_timeout_ms: 3600000\n  kill_timeout_ms: 3600000\n"},
    {"supervisor", "stall_timeout_ms", 50, 3600000,
     "  heartbeat_ms: 10\n  kill_timeout_ms: 3600000\n"},
    {"supervisor", "kill_timeout_ms", 50, 3600000, "  heartbeat_ms: 10\n  stall_timeout_ms: 50\n"},
    {"supervisor", "shutdown_grace_ms", 0, 3600000, ""},
    {"partitions", "max_nodes", 0, 1000000, ""},
    {"partitions", "max_time_min", 0, 5256000, ""},
    {"partitions", "max_cpus_per_node", 0, 1000000, ""},
    {"partitions", "max_mem_mb_per_node", 0, 4294967295u, ""},
};

/* YAML setting the case's key to v; the key sits on line 2 (sections) or 3 (partitions). */
static char *range_yaml(const struct range_case *rc, uint64_t v)
{
    char *y = NULL;
    int n;
    if (strcmp(rc->section, "partitions") == 0)
        n = asprintf(&y, "partitions:\n  - name: p\n    %s: %llu\n", rc->key,
                     (unsigned long long)v);
    else
        n = asprintf(&y, "%s:\n  %s: %llu\n%s", rc->section, rc->key, (unsigned long long)v,
                     rc->context);
    ck_assert_int_ge(n, 0);
    return y;
}

static void expect_in_range(const struct range_case *rc, uint64_t v)
{
    struct cfg c;
    char *y = range_yaml(rc, v);
    expect_ok(y, &c);
    /* The value must land in the key's field; cfg_print shows the field under its key. */
    char *text = print_to_string(&c);
    char *want = NULL;
    ck_assert_int_ge(asprintf(&want, "\n%s%s: %llu\n",
                              strcmp(rc->section, "partitions") == 0 ? "    " : "  ", rc->key,
                              (unsigned long long)v),
                     0);
    ck_assert_msg(strstr(text, want) != NULL, "%s=%llu not in:\n%s", rc->key, (unsigned long long)v,
                  text);
    free(want);
    free(text);
    free(y);
    cfg_free(&c);
}

static void expect_out_of_range(const struct range_case *rc, uint64_t v)
{
    char *y = range_yaml(rc, v);
    char prefix[128], why[128];
    if (strcmp(rc->section, "partitions") == 0)
        snprintf(prefix, sizeof(prefix), "t.yaml:3: partitions[0].%s: ", rc->key);
    else
        snprintf(prefix, sizeof(prefix), "t.yaml:2: %s.%s: ", rc->section, rc->key);
    snprintf(why, sizeof(why), "%llu is out of range %llu..%llu", (unsigned long long)v,
             (unsigned long long)rc->min, (unsigned long long)rc->max);
    expect_error(y, prefix, why);
    free(y);
}

START_TEST(test_range_boundaries)
{
    const struct range_case *rc = &range_cases[_i];
    if (rc->min > 0)
        expect_out_of_range(rc, rc->min - 1);
    expect_in_range(rc, rc->min);
    expect_in_range(rc, rc->max);
    expect_out_of_range(rc, rc->max + 1);
}
END_TEST

/* "controller:\n  hosts: [h0:1, h1:1, ...]\n" with n entries, or n partitions. */
static void hosts_yaml(char *buf, size_t cap, int n)
{
    size_t o = (size_t)snprintf(buf, cap, "controller:\n  hosts: [");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s\"h%d:1\"", i ? ", " : "", i);
    snprintf(buf + o, cap - o, "]\n");
}

static void partitions_yaml(char *buf, size_t cap, int n)
{
    size_t o = (size_t)snprintf(buf, cap, "partitions:\n");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(buf + o, cap - o, "  - name: p%d\n", i);
}

START_TEST(test_list_length_bounds)
{
    /* controller.hosts holds 1 to 16 entries, partitions 1 to 64 (0 is in the table). */
    char buf[4096];
    struct cfg c;
    hosts_yaml(buf, sizeof(buf), 16);
    expect_ok(buf, &c);
    ck_assert_uint_eq(c.controller.nhosts, 16);
    cfg_free(&c);
    hosts_yaml(buf, sizeof(buf), 17);
    expect_error(buf, "t.yaml:2: controller.hosts: ", "needs 1 to 16 entries, has 17");
    hosts_yaml(buf, sizeof(buf), 0);
    expect_error(buf, "t.yaml:2: controller.hosts: ", "needs 1 to 16 entries, has 0");

    partitions_yaml(buf, sizeof(buf), 64);
    expect_ok(buf, &c);
    ck_assert_uint_eq(c.npartitions, 64);
    ck_assert(c.partitions[0].is_default);
    cfg_free(&c);
    partitions_yaml(buf, sizeof(buf), 65);
    expect_error(buf, "t.yaml:2: partitions: ", "needs 1 to 64 partitions, has 65");
}
END_TEST

START_TEST(test_state_dir_length)
{
    /* The state dir must leave room for the files under it within PATH_MAX. */
    size_t longest = PATH_MAX - 64;
    char *dir = malloc(longest + 2);
    ck_assert_ptr_nonnull(dir);
    memset(dir, 'd', longest + 1);
    dir[0] = '/';
    dir[longest] = '\0';
    char *y = NULL;
    struct cfg c;
    ck_assert_int_ge(asprintf(&y, "controller:\n  state_dir: %s\n", dir), 0);
    expect_ok(y, &c);
    ck_assert_uint_eq(strlen(c.controller.state_dir), longest);
    cfg_free(&c);
    free(y);
    dir[longest] = 'd';
    dir[longest + 1] = '\0';
    ck_assert_int_ge(asprintf(&y, "controller:\n  state_dir: %s\n", dir), 0);
    expect_error(y, "t.yaml:2: controller.state_dir: ", "path too long");
    free(y);
    free(dir);
}
END_TEST

/* ---- values that are accepted ------------------------------------------------------- */

START_TEST(test_accepted_values)
{
    struct cfg c;
    expect_ok("cluster_name: "
              "a123456789b123456789c123456789d123456789e123456789f123456789abc\n"
              "controller:\n"
              "  listen: \"[fe80::1]:6817\"\n"
              "  peers: [\"10.0.0.1:6821\", \"[::1]:6821\", \"host_1.example-x:65535\"]\n"
              "raft:\n  heartbeat_ms: 1000\n  election_timeout_ms: 3000\n  fsync: False\n"
              "health:\n  enabled: FALSE\n  bind: 0.0.0.0\n  port: 6822\n"
              "metrics:\n  enabled: True\n  bind: \"::\"\n"
              "supervisor:\n  heartbeat_ms: 100\n  stall_timeout_ms: 101\n"
              "  kill_timeout_ms: 101\n"
              "log:\n  level: warn\n",
              &c);
    ck_assert_uint_eq(strlen(c.cluster_name), 63);
    ck_assert_uint_eq(c.controller.npeers, 3);
    ck_assert_uint_eq(c.raft.heartbeat_ms, 1000);
    ck_assert(!c.raft.fsync);
    /* Equal ports are fine while one listener is off. */
    ck_assert(!c.health.enabled);
    ck_assert_uint_eq(c.health.port, c.metrics.port);
    ck_assert_str_eq(c.metrics.bind, "::");
    ck_assert_uint_eq(c.supervisor.stall_timeout_ms, 101);
    ck_assert_uint_eq(c.supervisor.kill_timeout_ms, 101);
    ck_assert_str_eq(c.log.level, "warn");
    cfg_free(&c);

    /* The other way round: metrics off, same port. */
    expect_ok("metrics:\n  enabled: false\n  port: 6823\n", &c);
    cfg_free(&c);

    /* node_id equal to the number of peers is the last replica, not beyond it. */
    expect_ok("controller:\n  node_id: 3\n  peers: [a:1, b:1, c:1]\n", &c);
    ck_assert_uint_eq(c.controller.node_id, 3);
    cfg_free(&c);
}
END_TEST

START_TEST(test_partitions)
{
    struct cfg c;
    /* No partition marked default: the first one is. Missing nodes means ALL. */
    expect_ok("partitions:\n  - name: batch\n    up: false\n  - name: debug\n    nodes: n[1-4]\n",
              &c);
    ck_assert_uint_eq(c.npartitions, 2);
    ck_assert_str_eq(c.partitions[0].name, "batch");
    ck_assert(c.partitions[0].is_default);
    ck_assert(!c.partitions[0].up);
    ck_assert_str_eq(c.partitions[0].nodes, "ALL");
    ck_assert(!c.partitions[1].is_default);
    ck_assert(c.partitions[1].up);
    ck_assert_str_eq(c.partitions[1].nodes, "n[1-4]");
    cfg_free(&c);

    /* An explicit default elsewhere is kept, and the first is then not the default. */
    expect_ok("partitions:\n  - name: a\n  - name: b\n    default: true\n", &c);
    ck_assert(!c.partitions[0].is_default);
    ck_assert(c.partitions[1].is_default);
    cfg_free(&c);
}
END_TEST

START_TEST(test_full_file)
{
    struct cfg c;
    struct cfg_error e;
    char *path = data_path("cfg/full.yaml");
    int rc = cfg_load(path, &c, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_str_eq(c.source, path);
    ck_assert_str_eq(c.cluster_name, "prod-west.1");
    ck_assert_str_eq(c.controller.listen, "10.0.0.5:7817");
    ck_assert_str_eq(c.controller.state_dir, "/srv/spur/state");
    ck_assert_uint_eq(c.controller.node_id, 2);
    ck_assert_uint_eq(c.controller.npeers, 3);
    ck_assert_str_eq(c.controller.peers[0], "spurctld-0.spurctld.ns.svc:6821");
    ck_assert_str_eq(c.controller.peers[2], "[fd00::3]:6821");
    ck_assert_uint_eq(c.controller.nhosts, 2);
    ck_assert_str_eq(c.controller.hosts[1], "ctl-b:7817");
    ck_assert_uint_eq(c.controller.finished_job_retention_s, 3600);
    ck_assert_uint_eq(c.controller.max_frame_bytes, 1048576);
    ck_assert_uint_eq(c.controller.max_script_bytes, 65536);
    ck_assert_str_eq(c.raft.listen, "0.0.0.0:7821");
    ck_assert_uint_eq(c.raft.heartbeat_ms, 50);
    ck_assert_uint_eq(c.raft.election_timeout_ms, 500);
    ck_assert_uint_eq(c.raft.snapshot_entries, 5000);
    ck_assert(!c.raft.fsync);
    ck_assert(!c.health.enabled);
    ck_assert_str_eq(c.health.bind, "::1");
    ck_assert_uint_eq(c.health.port, 7823);
    ck_assert_uint_eq(c.health.max_connections, 64);
    ck_assert_uint_eq(c.health.idle_timeout_ms, 2000);
    ck_assert(!c.metrics.enabled);
    ck_assert_str_eq(c.metrics.bind, "127.0.0.2");
    ck_assert_uint_eq(c.metrics.port, 7822);
    ck_assert_uint_eq(c.supervisor.heartbeat_ms, 200);
    ck_assert_uint_eq(c.supervisor.stall_timeout_ms, 2000);
    ck_assert_uint_eq(c.supervisor.kill_timeout_ms, 4000);
    ck_assert_uint_eq(c.supervisor.shutdown_grace_ms, 0);
    ck_assert_str_eq(c.accounting.database_url,
                     "postgresql://spur:s3cr\"et@db.example:5432/spur?x=\\y");
    ck_assert_str_eq(c.log.level, "debug");
    ck_assert_uint_eq(c.npartitions, 3);
    ck_assert_str_eq(c.partitions[0].name, "batch");
    ck_assert_str_eq(c.partitions[0].nodes, "node[001-064]");
    ck_assert(!c.partitions[0].is_default);
    ck_assert_uint_eq(c.partitions[0].max_nodes, 32);
    ck_assert_uint_eq(c.partitions[0].max_time_min, 1440);
    ck_assert_uint_eq(c.partitions[0].max_cpus_per_node, 128);
    ck_assert_uint_eq(c.partitions[0].max_mem_mb_per_node, 4294967295u);
    ck_assert(c.partitions[0].up);
    ck_assert_str_eq(c.partitions[1].name, "debug");
    ck_assert(c.partitions[1].is_default);
    ck_assert(!c.partitions[1].up);
    ck_assert_str_eq(c.partitions[2].name, "gpu");
    ck_assert_str_eq(c.partitions[2].nodes, "ALL");
    assert_round_trip(&c);
    cfg_free(&c);
    free(path);
}
END_TEST

/* ---- empty documents and defaults --------------------------------------------------- */

START_TEST(test_empty_is_defaults)
{
    static const char *const empties[] = {"",      "\n\n",    "# only a comment\n",
                                          "---\n", "--- ~\n", "---\n...\n"};
    struct cfg def;
    ck_assert_int_eq(cfg_defaults(&def), 0);
    ck_assert_str_eq(def.source, "(embedded defaults)");
    for (size_t i = 0; i < sizeof(empties) / sizeof(empties[0]); i++) {
        struct cfg c;
        expect_ok(empties[i], &c);
        ck_assert_str_eq(c.source, NAME);
        assert_cfg_equal(&def, &c);
        cfg_free(&c);
    }
    /* The documented defaults (DESIGN.md section 8), not just whatever cfg_defaults says. */
    ck_assert_str_eq(def.cluster_name, "spur");
    ck_assert_str_eq(def.controller.listen, "[::]:6817");
    ck_assert_str_eq(def.controller.state_dir, "/var/spool/spur");
    ck_assert_uint_eq(def.controller.node_id, 0);
    ck_assert_uint_eq(def.controller.npeers, 1);
    ck_assert_str_eq(def.raft.listen, "[::]:6821");
    ck_assert_uint_eq(def.raft.heartbeat_ms, 100);
    ck_assert_uint_eq(def.raft.election_timeout_ms, 1000);
    ck_assert_uint_eq(def.raft.snapshot_entries, 10000);
    ck_assert_uint_eq(def.raft.max_uncommitted_bytes, 64u << 20);
    ck_assert(def.health.enabled);
    ck_assert_str_eq(def.health.bind, "all");
    ck_assert_uint_eq(def.health.port, 6823);
    ck_assert(def.metrics.enabled);
    ck_assert_str_eq(def.metrics.bind, "loopback");
    ck_assert_uint_eq(def.metrics.port, 6822);
    ck_assert_uint_eq(def.supervisor.heartbeat_ms, 100);
    ck_assert_uint_eq(def.supervisor.stall_timeout_ms, 3000);
    ck_assert_uint_eq(def.supervisor.kill_timeout_ms, 10000);
    ck_assert_uint_eq(def.supervisor.shutdown_grace_ms, 10000);
    ck_assert_str_eq(def.accounting.database_url, "");
    ck_assert_str_eq(def.accounting.password_file, "");
    ck_assert_uint_eq(def.accounting.batch_size, 500);
    ck_assert_uint_eq(def.accounting.retry_max_ms, 30000);
    ck_assert_uint_eq(def.npartitions, 1);
    ck_assert_str_eq(def.partitions[0].name, "default");
    ck_assert_str_eq(def.partitions[0].nodes, "ALL");
    ck_assert(def.partitions[0].is_default);
    /* One replica on loopback: it must be its own node 1 whatever the hostname. */
    ck_assert_uint_eq(cfg_node_id(&def, "anything"), 1);
    assert_round_trip(&def);
    cfg_free(&def);
}
END_TEST

START_TEST(test_partial_keeps_other_defaults)
{
    struct cfg c, def;
    ck_assert_int_eq(cfg_defaults(&def), 0);
    expect_ok("raft:\n  heartbeat_ms: 200\n", &c);
    ck_assert_uint_eq(c.raft.heartbeat_ms, 200);
    ck_assert_uint_eq(c.raft.election_timeout_ms, def.raft.election_timeout_ms);
    ck_assert_str_eq(c.raft.listen, def.raft.listen);
    ck_assert_uint_eq(c.health.port, def.health.port);
    c.raft.heartbeat_ms = def.raft.heartbeat_ms;
    assert_cfg_equal(&def, &c);
    cfg_free(&c);
    cfg_free(&def);
}
END_TEST

START_TEST(test_too_large_buffer)
{
    /* A file of exactly the limit is read; one byte more is refused. */
    size_t n = CFG_MAX_FILE_BYTES + 1;
    char *buf = malloc(n);
    ck_assert_ptr_nonnull(buf);
    memset(buf, ' ', n);
    buf[0] = '#';
    buf[CFG_MAX_FILE_BYTES - 1] = '\n';
    struct cfg c;
    struct cfg_error e;
    ck_assert_int_eq(cfg_load_buffer(NAME, buf, CFG_MAX_FILE_BYTES, &c, &e), 0);
    cfg_free(&c);
    ck_assert_int_eq(cfg_load_buffer(NAME, buf, n, &c, &e), -1);
    /* Line 1 and the key "(file)": the message keeps the FILE:LINE: key: form. */
    ck_assert_str_eq(e.msg, "t.yaml:1: (file): file is larger than 1048576 bytes (1 MiB)");
    ck_assert_uint_eq(e.count, 1);
    ck_assert_ptr_null(c.cluster_name);
    free(buf);
}
END_TEST

/* ---- files and the default path ----------------------------------------------------- */

START_TEST(test_file_errors)
{
    struct cfg c;
    struct cfg_error e;
    char *dir = make_tmpdir();
    char *missing = NULL;
    ck_assert_int_ge(asprintf(&missing, "%s/none.yaml", dir), 0);

    /* An explicit path must exist. */
    ck_assert_int_eq(cfg_load(missing, &c, &e), -1);
    char *want = NULL;
    ck_assert_int_ge(asprintf(&want, "%s: cannot open: %s", missing, strerror(ENOENT)), 0);
    ck_assert_str_eq(e.msg, want);
    free(want);

    /* Too large on disk. */
    size_t n = CFG_MAX_FILE_BYTES + 1;
    char *big = malloc(n);
    ck_assert_ptr_nonnull(big);
    memset(big, '#', n);
    char *bigpath = write_file(dir, "big.yaml", big, n);
    ck_assert_int_eq(cfg_load(bigpath, &c, &e), -1);
    ck_assert_msg(strstr(e.msg, "file is larger than 1048576 bytes") != NULL, "%s", e.msg);
    ck_assert_int_ge(asprintf(&want, "%s:1: (file): ", bigpath), 0);
    ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0, "%s", e.msg);
    free(want);
    /* And at the limit it loads (a comment line that long is still one comment). */
    big[CFG_MAX_FILE_BYTES - 1] = '\n';
    char *edge = write_file(dir, "edge.yaml", big, CFG_MAX_FILE_BYTES);
    ck_assert_msg(cfg_load(edge, &c, &e) == 0, "%s", e.msg);
    cfg_free(&c);

    /* A directory cannot be read as a file. */
    ck_assert_int_eq(cfg_load(dir, &c, &e), -1);
    ck_assert_msg(strncmp(e.msg, dir, strlen(dir)) == 0, "%s", e.msg);

    /* Errors found in a real file name the path and the line. */
    char *bad = data_path("cfg/bad_line7.yaml");
    ck_assert_int_eq(cfg_load(bad, &c, &e), -1);
    ck_assert_int_ge(asprintf(&want, "%s:7: supervisor.stall_timeout_ms: ", bad), 0);
    ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0, "%s", e.msg);
    free(want);

    unlink(bigpath);
    unlink(edge);
    rmdir(dir);
    free(bad);
    free(edge);
    free(bigpath);
    free(big);
    free(missing);
    free(dir);
}
END_TEST

START_TEST(test_spur_config_env)
{
    struct cfg c;
    struct cfg_error e;
    char *dir = make_tmpdir();
    const char *yaml = "cluster_name: from-env\n";
    char *path = write_file(dir, "spur.yaml", yaml, strlen(yaml));

    /* SPUR_CONFIG names the default file. */
    ck_assert_int_eq(setenv("SPUR_CONFIG", path, 1), 0);
    ck_assert_str_eq(cfg_default_path(), path);
    ck_assert_msg(cfg_load(NULL, &c, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(c.cluster_name, "from-env");
    ck_assert_str_eq(c.source, path);
    cfg_free(&c);

    /* An explicit path wins over SPUR_CONFIG. */
    char *full = data_path("cfg/full.yaml");
    ck_assert_msg(cfg_load(full, &c, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(c.cluster_name, "prod-west.1");
    cfg_free(&c);

    /* SPUR_CONFIG set to a missing file is an error: someone asked for that file. */
    unlink(path);
    ck_assert_int_eq(cfg_load(NULL, &c, &e), -1);
    ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0 && strstr(e.msg, "cannot open"), "%s",
                  e.msg);
    ck_assert_ptr_null(c.cluster_name);

    unsetenv("SPUR_CONFIG");
    rmdir(dir);
    free(full);
    free(path);
    free(dir);
}
END_TEST

/*
 * With SPUR_CONFIG unset (or empty) cfg_load(NULL) reads the build's default path and
 * falls back to the embedded defaults when that file does not exist.
 */
static void check_default_path_load(void)
{
    struct cfg c;
    struct cfg_error e;
    const char *p = cfg_default_path();
    ck_assert_msg(p[0] == '/' && strstr(p, "spur/spur.yaml") != NULL, "default path %s", p);
    int rc = cfg_load(NULL, &c, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    if (access(p, F_OK) == 0)
        ck_assert_str_eq(c.source, p); /* a machine with spur installed reads its file */
    else
        ck_assert_str_eq(c.source, "(embedded defaults)");
    cfg_free(&c);
}

START_TEST(test_missing_default_file)
{
    unsetenv("SPUR_CONFIG");
    check_default_path_load();
    /* Set but empty counts as unset, for cfg_default_path() and cfg_load() alike. */
    ck_assert_int_eq(setenv("SPUR_CONFIG", "", 1), 0);
    check_default_path_load();
    unsetenv("SPUR_CONFIG");
}
END_TEST

/* ---- cfg_print ---------------------------------------------------------------------- */

START_TEST(test_print_round_trip_hard_strings)
{
    /* Strings that need escapes in YAML: quotes, backslashes, controls, line breaks. */
    struct cfg c;
    expect_ok("accounting:\n"
              "  database_url: \"q\\\"b\\\\ t\\tn\\nr\\r\\x01\\x7f\\x80\\u0085\\u00a0"
              "\\u2028\\u2029\\ufeff\\ufffe\\uffff\\ud7ff\\ue000\\U0001F600 caf\\u00e9 #x: y\"\n"
              "partitions:\n"
              "  - name: p\n"
              "    nodes: \"  leading, trailing  \"\n"
              "  - name: q\n"
              "    nodes: \"- [a]: {b} & *c ! | > % @ `\"\n",
              &c);
    ck_assert_str_eq(c.partitions[0].nodes, "  leading, trailing  ");
    assert_round_trip(&c);
    cfg_free(&c);
}
END_TEST

START_TEST(test_print_format)
{
    /* Spot-check the layout: the source comment, quoted strings, flow lists. */
    struct cfg c;
    ck_assert_int_eq(cfg_defaults(&c), 0);
    char *text = print_to_string(&c);
    const char *head = "# effective configuration, from (embedded defaults)\n"
                       "cluster_name: \"spur\"\n"
                       "controller:\n"
                       "  listen: \"[::]:6817\"\n";
    ck_assert_msg(strncmp(text, head, strlen(head)) == 0, "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\n  peers: [\"127.0.0.1:6821\"]\n"));
    ck_assert_ptr_nonnull(strstr(text, "\npartitions:\n  - name: \"default\"\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n    default: true\n"));
    free(text);
    cfg_free(&c);
}
END_TEST

/* ---- helpers: host:port, bind, node id ---------------------------------------------- */

/*
 * The address grammar and its tests live in netaddr (tests/unit/test_netaddr.c); the two
 * names cfg.h keeps for the worker must give netaddr's answers.
 */

static void set_peers(struct cfg *c, const char *const *peers, size_t n)
{
    for (size_t i = 0; i < c->controller.npeers; i++)
        free(c->controller.peers[i]);
    free(c->controller.peers);
    c->controller.peers = calloc(n, sizeof(char *));
    ck_assert_ptr_nonnull(c->controller.peers);
    for (size_t i = 0; i < n; i++)
        c->controller.peers[i] = strdup(peers[i]);
    c->controller.npeers = n;
}

START_TEST(test_node_id)
{
    static const char *const sts[] = {"spurctld-0.spurctld.ns.svc:6821",
                                      "spurctld-1.spurctld.ns.svc:6821",
                                      "spurctld-2.spurctld.ns.svc:6821"};
    struct cfg c;
    ck_assert_int_eq(cfg_defaults(&c), 0);
    set_peers(&c, sts, 3);

    /* Exact hostname match. */
    ck_assert_uint_eq(cfg_node_id(&c, "spurctld-1.spurctld.ns.svc"), 2);
    ck_assert_uint_eq(cfg_node_id(&c, "SPURCTLD-2.spurctld.ns.svc"), 3);
    /* StatefulSet pods: the short hostname is the peer's first DNS label. */
    ck_assert_uint_eq(cfg_node_id(&c, "spurctld-0"), 1);
    ck_assert_uint_eq(cfg_node_id(&c, "spurctld-1"), 2);
    ck_assert_uint_eq(cfg_node_id(&c, "spurctld-2"), 3);
    /* No match among several peers: 0, the caller must refuse to guess. */
    ck_assert_uint_eq(cfg_node_id(&c, "spurctld-3"), 0);
    ck_assert_uint_eq(cfg_node_id(&c, "spurctld"), 0);
    ck_assert_uint_eq(cfg_node_id(&c, "spurctld-1x"), 0);
    ck_assert_uint_eq(cfg_node_id(&c, ""), 0);
    ck_assert_uint_eq(cfg_node_id(&c, NULL), 0);

    /* An exact match wins over a short-name match that comes earlier in the list. */
    static const char *const mixed[] = {"db.example:6821", "db:6821", "[::1]:6821"};
    set_peers(&c, mixed, 3);
    ck_assert_uint_eq(cfg_node_id(&c, "db"), 2);
    ck_assert_uint_eq(cfg_node_id(&c, "db.example"), 1);
    ck_assert_uint_eq(cfg_node_id(&c, "::1"), 3);

    /* An explicit id wins over any hostname. */
    c.controller.node_id = 3;
    ck_assert_uint_eq(cfg_node_id(&c, "db"), 3);
    ck_assert_uint_eq(cfg_node_id(&c, NULL), 3);
    c.controller.node_id = 0;

    /* A single peer is this replica, whatever the hostname. */
    static const char *const one[] = {"elsewhere:6821"};
    set_peers(&c, one, 1);
    ck_assert_uint_eq(cfg_node_id(&c, "myhost"), 1);
    ck_assert_uint_eq(cfg_node_id(&c, NULL), 1);
    cfg_free(&c);
}
END_TEST

/* ---- every error at once ------------------------------------------------------------ */

/* yaml (loaded for hostname, NULL: no host rules) is refused with exactly these errors. */
static void expect_errors(const char *yaml, const char *hostname, const char *const *want,
                          size_t nwant)
{
    struct cfg c;
    struct cfg_error e;
    memset(&e, 0x5a, sizeof(e));
    int rc = cfg_load_buffer_host(NAME, yaml, strlen(yaml), hostname, &c, &e);
    ck_assert_msg(rc == -1, "accepted:\n%s", yaml);
    ck_assert_ptr_null(c.cluster_name);
    ck_assert_ptr_null(c.where);
    ck_assert(!e.more);
    for (size_t i = 0; i < e.count && i < nwant; i++)
        ck_assert_msg(strncmp(e.list[i], want[i], strlen(want[i])) == 0,
                      "error %zu is \"%s\", want \"%s...\"\nfor:\n%s", i, e.list[i], want[i], yaml);
    ck_assert_msg(e.count == nwant, "%zu errors, want %zu; first \"%s\", last \"%s\"", e.count,
                  nwant, e.msg, e.count ? e.list[e.count - 1] : "");
    ck_assert_str_eq(e.msg, e.list[0]);
    for (size_t i = 0; i < e.count; i++)
        ck_assert_msg(strchr(e.list[i], '\n') == NULL, "error spans lines: %s", e.list[i]);
}

START_TEST(test_every_error_reported)
{
    static const char yaml[] = "cluster_name: [x]\n"           /* 1 wrong type */
                               "raft:\n"
                               "  heartbeat_ms: fast\n"        /* 3 not an integer */
                               "  colour: blue\n"              /* 4 unknown key */
                               "health:\n"
                               "  max_connections: 1\n"        /* 6 out of range */
                               "  port: 6822\n"                /* 7 rule: metrics.port too */
                               "controller:\n"
                               "  peers: [\"a:1\", \"b c:1\", \"d:1\", \"a:1\"]\n" /* 9 x 2 */
                               "partitions:\n"
                               "  - {name: a, up: maybe}\n"    /* 11 */
                               "  - {nodes: x}\n"              /* 12 no name */
                               "  - {name: b, bogus: 1}\n"     /* 13 */
                               "  - {name: b}\n"  /* 14 b again, but [2] is refused: no rule */
                               "bogus: 1\n";                   /* 15 */
    static const char *const want[] = {
        "t.yaml:1: cluster_name: expected a string, got a list",
        "t.yaml:3: raft.heartbeat_ms: \"fast\" is not a non-negative integer",
        "t.yaml:4: raft.colour: unknown key",
        "t.yaml:6: health.max_connections: 1 is out of range 8..65536",
        "t.yaml:9: controller.peers[1]: \"b c:1\" is not HOST:PORT",
        "t.yaml:9: controller.peers[3]: \"a:1\" is listed twice",
        "t.yaml:11: partitions[0].up: expected true or false, got \"maybe\"",
        "t.yaml:12: partitions[1]: a partition needs a name",
        "t.yaml:13: partitions[2].bogus: unknown key",
        "t.yaml:15: bogus: unknown key",
        /* Then the rules between keys, on the keys that were not refused. */
        "t.yaml:7: health.port: port 6822 is also metrics.port",
    };
    expect_errors(yaml, NULL, want, sizeof(want) / sizeof(want[0]));
}
END_TEST

START_TEST(test_refused_key_is_not_reported_twice)
{
    /* heartbeat_ms is refused; the rule "stall > heartbeat" must not then complain about
     * the default it kept, nor about the stall value next to it. */
    static const char *const one[] = {"t.yaml:2: supervisor.heartbeat_ms: "};
    expect_errors("supervisor:\n  heartbeat_ms: abc\n  stall_timeout_ms: 60\n", NULL, one, 1);
    static const char *const peers[] = {"t.yaml:3: controller.peers[0]: "};
    expect_errors("controller:\n  node_id: 3\n  peers: [\"x\", \"b:1\"]\n", NULL, peers, 1);
    static const char *const parts[] = {"t.yaml:2: partitions[0].name: "};
    expect_errors("partitions:\n  - {name: [a], default: true}\n  - {name: a, default: true}\n",
                  NULL, parts, 1);
}
END_TEST

START_TEST(test_error_count_is_capped)
{
    char yaml[4096];
    size_t n = 0;
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(yaml + n, sizeof(yaml) - n, "bogus%d: 1\n", i);
    struct cfg c;
    struct cfg_error e;
    ck_assert_int_eq(cfg_load_buffer(NAME, yaml, n, &c, &e), -1);
    ck_assert_uint_eq(e.count, CFG_MAX_ERRORS);
    ck_assert(e.more);
    ck_assert_str_eq(e.list[0], "t.yaml:1: bogus0: unknown key");
    ck_assert_str_eq(e.list[CFG_MAX_ERRORS - 1], "t.yaml:16: bogus15: unknown key");
    /* The printed list ends with a line that says there is more. */
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    cfg_print_errors(f, "p: ", &e);
    fclose(f);
    size_t lines = 0;
    for (char *p = out; *p; p++)
        lines += *p == '\n';
    ck_assert_uint_eq(lines, CFG_MAX_ERRORS + 1);
    ck_assert_ptr_nonnull(strstr(out, "p: t.yaml:1: bogus0: unknown key\n"));
    ck_assert_ptr_nonnull(strstr(out, "p: and more errors"));
    free(out);
}
END_TEST

/* ---- the rules start-up applies ---------------------------------------------------- */

struct rule_case {
    const char *yaml;
    const char *host; /* NULL: no host-name rules */
    const char *prefix;
    const char *why;
};

static const struct rule_case rule_cases[] = {
    /* A node id that cannot be derived: at node_id when the file sets it, else at peers. */
    {"controller:\n  peers: [\"ctl1:6821\", \"ctl2:6821\", \"ctl3:6821\"]\n", "ctl9",
     "t.yaml:2: controller.node_id: ", "host \"ctl9\" is none of the 3 controller.peers"},
    {"controller:\n  node_id: 0\n  peers: [\"ctl1:6821\", \"ctl2:6821\", \"ctl3:6821\"]\n",
     "other.example", "t.yaml:2: controller.node_id: ", "set controller.node_id"},
    {"controller:\n  peers: [\"ctl1:6821\", \"ctl2:6821\", \"ctl3:6821\"]\n", "",
     "t.yaml:2: controller.node_id: ", "is none of the 3"},
    /* A host name two peers match is a guess, not an id. */
    {"controller:\n  peers: [\"db.a:6821\", \"db.b:6821\", \"c:6821\"]\n", "db",
     "t.yaml:2: controller.node_id: ", "matches both controller.peers[0] and [1]"},
    {"controller:\n  peers: [\"h:16821\", \"h:26821\", \"c:6821\"]\n", "h",
     "t.yaml:2: controller.node_id: ", "matches both"},
    /* Listeners of this replica on one port. */
    {"raft:\n  listen: \"[::]:6817\"\n", NULL, "t.yaml:2: raft.listen: ",
     "port 6817 is also the port of controller.listen"},
    {"controller:\n  listen: \"0.0.0.0:6823\"\n", NULL, "t.yaml:2: controller.listen: ",
     "port 6823 is also health.port"},
    {"metrics:\n  port: 6821\n", NULL, "t.yaml:2: metrics.port: ",
     "port 6821 is also the port of raft.listen"},
    {"controller:\n  listen: \"ctl1:7000\"\nraft:\n  listen: \"127.0.0.1:7000\"\n", NULL,
     "t.yaml:2: controller.listen: ", "also the port of raft.listen"},
    {"health:\n  port: 7000\nmetrics:\n  port: 7000\n", NULL, "t.yaml:2: health.port: ",
     "7000 is also metrics.port"},
    /* The two-peer list, and one replica listed twice under two spellings. */
    {"controller:\n  node_id: 1\n  peers: [\"a:6821\", \"b:6821\"]\n", NULL,
     "t.yaml:3: controller.peers: ", "2 peers make a cluster that stops when either"},
    {"controller:\n  node_id: 1\n  peers:\n    - \"ctl1:6821\"\n    - \"CTL1:6821\"\n"
     "    - \"c:6821\"\n",
     NULL, "t.yaml:5: controller.peers[1]: ", "the same replica as controller.peers[0]"},
    {"controller:\n  node_id: 1\n  peers: [\"[::1]:6821\", \"[0:0::1]:6821\", \"c:6821\"]\n",
     NULL, "t.yaml:3: controller.peers[1]: ", "same replica"},
    {"controller:\n  node_id: 1\n  peers: [\"127.0.0.1:6821\", \"x:1\", \"[::ffff:127.0.0.1]:6821\"]\n",
     NULL, "t.yaml:3: controller.peers[2]: ", "same replica as controller.peers[0]"},
    /* This replica's own entry on the port of another of its listeners. */
    {"controller:\n  node_id: 1\n  peers: [\"127.0.0.1:6817\", \"b:6821\", \"c:6821\"]\n", NULL,
     "t.yaml:3: controller.peers[0]: ", "is this replica (node 1), but port 6817 is the port "
     "of controller.listen here"},
    {"controller:\n  peers: [\"ctl1:6822\", \"ctl2:6821\", \"ctl3:6821\"]\n", "ctl1",
     "t.yaml:2: controller.peers[0]: ", "port 6822 is metrics.port here"},
    {"controller:\n  peers: [\"ctl1:6823\"]\n", "anything", "t.yaml:2: controller.peers[0]: ",
     "port 6823 is health.port here"},
    /* Another replica on this host, on a port this one listens on. */
    {"controller:\n  node_id: 2\n  listen: \"127.0.0.1:26817\"\n"
     "  peers: [\"127.0.0.1:16821\", \"127.0.0.1:26821\", \"127.0.0.1:26823\"]\n"
     "raft:\n  listen: \"127.0.0.1:26821\"\nhealth:\n  port: 26823\n",
     NULL, "t.yaml:4: controller.peers[2]: ", "is on this replica's host (like "
     "controller.peers[1], node 2), and port 26823 is health.port here"},
};

START_TEST(test_rule)
{
    const struct rule_case *rc = &rule_cases[_i];
    struct cfg c;
    struct cfg_error e;
    int r = cfg_load_buffer_host(NAME, rc->yaml, strlen(rc->yaml), rc->host, &c, &e);
    ck_assert_msg(r == -1, "accepted:\n%s", rc->yaml);
    ck_assert_msg(e.count == 1, "%zu errors, first %s", e.count, e.msg);
    ck_assert_msg(strncmp(e.msg, rc->prefix, strlen(rc->prefix)) == 0, "\"%s\" lacks \"%s\"",
                  e.msg, rc->prefix);
    ck_assert_msg(strstr(e.msg + strlen(rc->prefix), rc->why) != NULL, "\"%s\" lacks \"%s\"",
                  e.msg, rc->why);
}
END_TEST

/* Files every rule accepts, with and without the host rules. */
struct ok_case {
    const char *yaml;
    const char *host;
    uint32_t node_id;
};

static const struct ok_case ok_cases[] = {
    {"", "anything", 1},
    {"controller:\n  peers: [\"ctl1.example.org:6821\", \"ctl2.example.org:6821\", "
     "\"ctl3.example.org:6821\"]\n",
     "ctl2", 2},
    {"controller:\n  peers: [\"spurctld-0.spurctld:6821\", \"spurctld-1.spurctld:6821\", "
     "\"spurctld-2.spurctld:6821\"]\n",
     "spurctld-2.spurctld.ns.svc.cluster.local", 3},
    /* Exact names first: db.a is no guess even though "db" also matches. */
    {"controller:\n  peers: [\"db:6821\", \"db.a:6821\", \"c:6821\"]\n", "db.a", 2},
    /* The local three-replica example: one host, every port its own. */
    {"controller:\n  listen: \"127.0.0.1:16817\"\n  node_id: 1\n"
     "  peers: [\"127.0.0.1:16821\", \"127.0.0.1:26821\", \"127.0.0.1:36821\"]\n"
     "raft:\n  listen: \"127.0.0.1:16821\"\nhealth:\n  bind: loopback\n  port: 16823\n"
     "metrics:\n  port: 16822\n",
     "whatever", 1},
    /* The same port on addresses that cannot overlap. */
    {"controller:\n  listen: \"10.0.0.5:7000\"\nraft:\n  listen: \"127.0.0.1:7000\"\n", NULL, 1},
    {"controller:\n  listen: \"10.0.0.5:6822\"\n", NULL, 1},
    /* A disabled listener holds no port. */
    {"health:\n  enabled: false\n  port: 6822\n", NULL, 1},
    {"metrics:\n  enabled: false\n  port: 6817\n", NULL, 1},
    /* Behind port mapping, this replica's peer address need not be raft.listen's port. */
    {"controller:\n  peers: [\"127.0.0.1:40000\"]\n", "x", 1},
    /* Four and five peers are allowed; only two is refused. */
    {"controller:\n  node_id: 4\n  peers: [a:1, b:1, c:1, d:1]\n", NULL, 4},
    {"controller:\n  node_id: 5\n  peers: [a:1, b:1, c:1, d:1, e:1]\n", NULL, 5},
};

START_TEST(test_rule_accepts)
{
    const struct ok_case *oc = &ok_cases[_i];
    struct cfg c;
    struct cfg_error e;
    int r = cfg_load_buffer_host(NAME, oc->yaml, strlen(oc->yaml), oc->host, &c, &e);
    ck_assert_msg(r == 0, "refused (%s):\n%s", e.msg, oc->yaml);
    ck_assert_uint_eq(cfg_node_id(&c, oc->host), oc->node_id);
    cfg_free(&c);
}
END_TEST

START_TEST(test_load_host_agrees_with_validate)
{
    /*
     * cfg_load_buffer_host() == cfg_load_buffer() + cfg_validate(hostname), for every case
     * above: one set of rules, whoever asks. And without a host name, the host-name rule
     * (the only one that needs it) stays silent.
     */
    for (size_t i = 0; i < sizeof(rule_cases) / sizeof(rule_cases[0]); i++) {
        const struct rule_case *rc = &rule_cases[i];
        struct cfg c;
        struct cfg_error e1, e2;
        int with = cfg_load_buffer_host(NAME, rc->yaml, strlen(rc->yaml), rc->host, &c, &e1);
        ck_assert_int_eq(with, -1);
        int plain = cfg_load_buffer(NAME, rc->yaml, strlen(rc->yaml), &c, &e2);
        if (plain == 0) {
            /* Refused only for the host: validate with the host must say the same. */
            ck_assert_ptr_nonnull(rc->host);
            struct cfg_error e3;
            memset(&e3, 0, sizeof(e3));
            ck_assert_int_eq(cfg_validate(&c, rc->host, &e3), -1);
            ck_assert_str_eq(e3.msg, e1.msg);
            ck_assert_int_eq(cfg_validate(&c, NULL, &e3), 0);
            cfg_free(&c);
        } else {
            ck_assert_str_eq(e2.msg, e1.msg);
        }
    }
}
END_TEST

START_TEST(test_validate_own_config)
{
    /* A configuration built in code: errors have no line, they name the source. */
    struct cfg c;
    struct cfg_error e;
    ck_assert_int_eq(cfg_defaults(&c), 0);
    memset(&e, 0, sizeof(e));
    ck_assert_int_eq(cfg_validate(&c, "anyhost", &e), 0);
    ck_assert_uint_eq(e.count, 0);
    static const char *const two[] = {"a:1", "A:1"};
    set_peers(&c, two, 2);
    c.raft.heartbeat_ms = 1000;
    ck_assert_int_eq(cfg_validate(&c, "a", &e), -1);
    ck_assert_uint_eq(e.count, 4);
    ck_assert_str_eq(e.list[0], "(embedded defaults): raft.election_timeout_ms: 1000 must be at "
                                "least 3 x raft.heartbeat_ms (1000)");
    ck_assert_ptr_nonnull(strstr(e.list[1], "(embedded defaults): controller.peers: 2 peers"));
    ck_assert_ptr_nonnull(strstr(e.list[2], "controller.peers[1]: \"A:1\" is the same replica"));
    ck_assert_ptr_nonnull(strstr(e.list[3], "controller.node_id: 0 takes the id from the host "
                                            "name, and host \"a\" matches both"));
    cfg_free(&c);
}
END_TEST

/* ---- nesting, node count, time ------------------------------------------------------ */

static char *nested(const char *key, size_t depth, char open, char close)
{
    size_t kl = strlen(key);
    char *y = malloc(kl + 2 * depth + 4);
    ck_assert_ptr_nonnull(y);
    memcpy(y, key, kl);
    memset(y + kl, open, depth);
    memset(y + kl + depth, close, depth);
    memcpy(y + kl + 2 * depth, "\n", 2);
    return y;
}

START_TEST(test_depth_cap)
{
    /* The top-level mapping is level 1: 31 more lists are fine (and an unknown key)... */
    char *y = nested("a: ", CFG_MAX_DEPTH - 1, '[', ']');
    expect_error(y, "t.yaml:1: a: ", "unknown key");
    free(y);
    /* ... one more is refused where it opens, before the walk. */
    y = nested("a: ", CFG_MAX_DEPTH, '[', ']');
    expect_error(y, "t.yaml:1: (file): ", "nest deeper than 32 levels");
    free(y);
    /* Block style: the cap names the line of the mapping that went over. */
    char block[8192];
    size_t n = 0;
    for (int i = 0; i < CFG_MAX_DEPTH + 5; i++)
        n += (size_t)snprintf(block + n, sizeof(block) - n, "%*sk%d:\n", i, "", i);
    snprintf(block + n, sizeof(block) - n, "%*s1\n", CFG_MAX_DEPTH + 5, "");
    expect_error(block, "t.yaml:33: (file): ", "deeper than 32");
    y = nested("partitions: ", 40, '{', '}');
    expect_error(y, "t.yaml:1: (file): ", "deeper");
    free(y);
}
END_TEST

START_TEST(test_node_cap)
{
    /* A flow list of CFG_MAX_NODES scalars: with the top mapping, its key and the list,
     * that is three nodes too many; the message names the line of the first one over. */
    size_t n = CFG_MAX_NODES;
    char *y = malloc(16 + 4 * n);
    ck_assert_ptr_nonnull(y);
    size_t len = (size_t)sprintf(y, "a:\n");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(y + len, "- x\n");
    expect_error(y, "t.yaml:", "holds more than 20000 YAML nodes");
    struct cfg c;
    struct cfg_error e;
    ck_assert_int_eq(cfg_load_buffer(NAME, y, len, &c, &e), -1);
    ck_assert_str_eq(e.msg, "t.yaml:19999: (file): holds more than 20000 YAML nodes (keys, "
                            "values, lists, mappings and aliases)");
    free(y);
    /* Aliases count as nodes too. */
    y = malloc(32 + 4 * n);
    ck_assert_ptr_nonnull(y);
    len = (size_t)sprintf(y, "a: &x 1\nb: [");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(y + len, "*x,");
    sprintf(y + len, "]\n");
    expect_error(y, "t.yaml:2: (file): ", "holds more than 20000 YAML nodes");
    free(y);
}
END_TEST

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

START_TEST(test_hostile_files_are_fast)
{
    /*
     * What took seconds to minutes through libyaml's document loader: 100,000 levels in a
     * 200 kB file, a 1 MiB file of "[", and thousands of anchors and aliases. The bound is
     * loose (a slow, shared machine, sanitizers): the old code needed more than 20 s for
     * the first alone.
     */
    struct timespec t0;
    struct cfg c;
    struct cfg_error e;
    char *y = nested("a: ", 100000, '[', ']');
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(cfg_load_buffer(NAME, y, strlen(y), &c, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "deeper than"));
    free(y);

    size_t big = CFG_MAX_FILE_BYTES;
    y = malloc(big);
    ck_assert_ptr_nonnull(y);
    memset(y, '[', big);
    ck_assert_int_eq(cfg_load_buffer(NAME, y, big, &c, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "deeper than"));

    /* Anchors up to the node cap, each then used: a hash, not a list. */
    size_t len = (size_t)sprintf(y, "a:\n");
    for (int i = 0; i < 6000; i++)
        len += (size_t)sprintf(y + len, "  - &a%d x\n", i);
    len += (size_t)sprintf(y + len, "b:\n");
    for (int i = 0; i < 6000; i++)
        len += (size_t)sprintf(y + len, "  - *a%d\n", i);
    ck_assert_int_eq(cfg_load_buffer(NAME, y, len, &c, &e), -1);
    ck_assert_str_eq(e.msg, "t.yaml:1: a: unknown key");
    /* Many keys in one known mapping: errors stop the walk, no quadratic duplicate scan. */
    len = (size_t)sprintf(y, "raft:\n");
    for (int i = 0; i < 9000; i++)
        len += (size_t)sprintf(y + len, "  k%d: 1\n", i);
    ck_assert_int_eq(cfg_load_buffer(NAME, y, len, &c, &e), -1);
    ck_assert(e.more);
    free(y);
    double s = seconds_since(&t0);
    ck_assert_msg(s < 5.0, "hostile files took %.2f s", s);
}
END_TEST

START_TEST(test_aliases)
{
    /* An alias is the node it names: here a listen address reused as the client host. */
    struct cfg c;
    expect_ok("controller:\n  listen: &l \"127.0.0.1:7000\"\n  hosts: [*l]\n", &c);
    ck_assert_str_eq(c.controller.hosts[0], "127.0.0.1:7000");
    cfg_free(&c);
    /* A rule sees through aliases: the same port twice. */
    expect_error("health:\n  port: &p 7001\nmetrics:\n  port: *p\n", "t.yaml:2: health.port: ",
                 "also metrics.port");
    /* An alias to the node it sits in would be a cycle: undefined. */
    expect_error("raft: &r {heartbeat_ms: 100, x: *r}\n", "t.yaml:1: (yaml): ",
                 "undefined alias *r");
    /* An alias before its anchor: undefined. */
    expect_error("a: *later\nb: &later 1\n", "t.yaml:1: (yaml): ", "undefined alias");
    /* A second anchor of one name replaces the first (YAML 1.2). */
    expect_ok("raft:\n  listen: &h \"127.0.0.1:7001\"\ncontroller:\n"
              "  listen: &h \"127.0.0.1:7000\"\n  hosts: [*h]\n", &c);
    ck_assert_str_eq(c.controller.hosts[0], "127.0.0.1:7000");
    cfg_free(&c);
}
END_TEST

/* ---- cfg_key_names ------------------------------------------------------------------ */

static bool names_has(const char *const *names, const char *k)
{
    for (size_t i = 0; names[i] != NULL; i++)
        if (strcmp(names[i], k) == 0)
            return true;
    return false;
}

START_TEST(test_key_names_match_printer)
{
    /*
     * cfg_print() writes every key; rebuild the dotted names from its layout and require
     * the same set as cfg_key_names().
     */
    const char *const *names = cfg_key_names();
    size_t nnames = 0;
    for (; names[nnames] != NULL; nnames++)
        for (size_t j = 0; j < nnames; j++)
            ck_assert_msg(strcmp(names[j], names[nnames]) != 0, "%s listed twice", names[j]);
    ck_assert_uint_ge(nnames, 30);

    struct cfg c;
    ck_assert_int_eq(cfg_defaults(&c), 0);
    char *text = print_to_string(&c);
    char section[64] = "";
    size_t nprinted = 0;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char key[64], full[160];
        const char *k = line;
        if (strncmp(line, "  - ", 4) == 0 || strncmp(line, "    ", 4) == 0)
            k = line + 4;
        else if (strncmp(line, "  ", 2) == 0)
            k = line + 2;
        size_t kl = strcspn(k, ":");
        ck_assert_msg(k[kl] == ':' && kl < sizeof(key), "odd line \"%s\"", line);
        memcpy(key, k, kl);
        key[kl] = '\0';
        if (k == line) {
            snprintf(section, sizeof(section), "%s", key);
            /* A section header, unless the key itself holds a list (partitions). */
            if (k[kl + 1] == '\0' && !names_has(names, key))
                continue;
            snprintf(full, sizeof(full), "%s", key);
        } else {
            snprintf(full, sizeof(full), "%s.%s", section, key);
        }
        ck_assert_msg(names_has(names, full), "printed key %s missing from cfg_key_names()", full);
        nprinted++;
    }
    ck_assert_uint_eq(nprinted, nnames);
    free(text);
    cfg_free(&c);
}
END_TEST

START_TEST(test_key_names_known_to_loader)
{
    /* Every listed key is one the loader knows: a wrong type names it, never "unknown key". */
    const char *const *names = cfg_key_names();
    for (size_t i = 0; names[i] != NULL; i++) {
        const char *k = names[i];
        const char *dot = strchr(k, '.');
        char *yaml = NULL, *prefix = NULL;
        int n1, n2;
        if (strncmp(k, "partitions.", 11) == 0) {
            bool is_nodes = strcmp(k, "partitions.nodes") == 0;
            n1 = asprintf(&yaml, "partitions:\n  - %s: p\n    %s: {x: 1}\n",
                          is_nodes ? "name" : "nodes", k + 11);
            n2 = asprintf(&prefix, "t.yaml:3: partitions[0].%s: ", k + 11);
        } else if (dot != NULL) {
            n1 = asprintf(&yaml, "%.*s:\n  %s: {x: 1}\n", (int)(dot - k), k, dot + 1);
            n2 = asprintf(&prefix, "t.yaml:2: %s: ", k);
        } else {
            n1 = asprintf(&yaml, "%s: {x: 1}\n", k);
            n2 = asprintf(&prefix, "t.yaml:1: %s: ", k);
        }
        ck_assert(n1 >= 0 && n2 >= 0);
        expect_error(yaml, prefix, "expected");
        free(yaml);
        free(prefix);
    }
}
END_TEST

/* ---- error message form ------------------------------------------------------------- */

START_TEST(test_message_form_long_key)
{
    /* A long unknown key still yields one bounded, well-formed message. */
    char yaml[1200];
    memset(yaml, 'k', 1000);
    memcpy(yaml + 1000, ": 1\n", 5);
    struct cfg c;
    struct cfg_error e;
    ck_assert_int_eq(load(yaml, &c, &e), -1);
    ck_assert(strncmp(e.msg, "t.yaml:1: kkkk", 14) == 0);
    ck_assert_uint_lt(strlen(e.msg), sizeof(e.msg));
}
END_TEST

static Suite *cfg_suite(void)
{
    Suite *s = suite_create("cfg");
    TCase *tc = check_case(s, "refusals",
                           (const TTest *[]){test_message_form_long_key, test_list_length_bounds,
                                             test_state_dir_length, NULL});
    tcase_add_loop_test(tc, test_refusals, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_loop_test(tc, test_range_boundaries, 0,
                        (int)(sizeof(range_cases) / sizeof(range_cases[0])));

    check_case(s, "loading",
               (const TTest *[]){test_accepted_values, test_partitions, test_full_file,
                                 test_empty_is_defaults, test_partial_keeps_other_defaults,
                                 test_too_large_buffer, test_file_errors, test_spur_config_env,
                                 test_missing_default_file, NULL});

    check_case(s, "print",
               (const TTest *[]){test_print_round_trip_hard_strings, test_print_format, NULL});

    check_case(s, "helpers",
               (const TTest *[]){test_node_id, test_key_names_match_printer,
                                 test_key_names_known_to_loader, NULL});

    check_case(s, "every error",
               (const TTest *[]){test_every_error_reported, test_refused_key_is_not_reported_twice,
                                 test_error_count_is_capped, NULL});

    tc = check_case(
        s, "rules",
        (const TTest *[]){test_load_host_agrees_with_validate, test_validate_own_config, NULL});
    tcase_add_loop_test(tc, test_rule, 0, (int)(sizeof(rule_cases) / sizeof(rule_cases[0])));
    tcase_add_loop_test(tc, test_rule_accepts, 0, (int)(sizeof(ok_cases) / sizeof(ok_cases[0])));

    check_case(s, "bounds",
               (const TTest *[]){test_depth_cap, test_node_cap, test_hostile_files_are_fast,
                                 test_aliases, NULL});
    return s;
}

int main(void)
{
    return check_run(cfg_suite());
}
