/*
 * fuzz_agentmsg.c - the agent protocol (proto/agent.proto) as spurd takes it: what the
 * agent does with a decoded spur.agent.Msg, and its spool read back from disk.
 *
 * The frame handlers themselves (agent/server.c handle_frame and on_*, raftd/agents.c
 * on_read, msg_ok and deliver, raftd/jobctl.c on_ended and pong) are static and driven
 * by libevent connections behind the cluster-key channel, so this fuzzer reaches the
 * pure modules they hand a decoded message to, with the same arguments: the spool
 * (agent/spool.c: term, tombstones, attempt directories, launch and ended records) and
 * what a Launch turns into (agent/jobenv.c: the job's environment and output names, and
 * client/hostlist.c's SLURM_JOB_NODELIST). Not reached: the envelope checks (protocol
 * version, cluster name, request ids) and the leader's use of Pong, LaunchReply and
 * SignalReply, which are only decoded here.
 *
 * Input layout: byte 0 picks what the rest is.
 *   even  a frame body as it is after chan_open: a packed spur.agent.Msg, decoded with
 *         the generated code, then, in a fresh spool, handled as server.c does:
 *           Ping      the term recorded when higher (spool_set_term) and read back after
 *                     a reopen;
 *           Launch    when it passes on_launch's first check (job id, attempt, spec, this
 *                     node's place in node_list): NEW, created (spool_create), PRESENT,
 *                     read back after a reopen as the same record, its environment and
 *                     output names built as the monitor builds them, and removed:
 *                     FINISHED, also after a reopen;
 *           Signal    an attempt not present, terminated: tombstoned, FINISHED for it
 *                     and every lower attempt, also after a reopen;
 *           Ended     the report as the monitor writes it (the ended file of its attempt):
 *                     spool_read_ended takes it byte for byte, a reopen finds it again,
 *                     and the EndedAck of it removes the attempt;
 *         (Re-encoding is protobuf-c's business and not checked: it keeps a field
 *         numbered 0 whose tag is written in two bytes as an unknown field and writes
 *         it back in one, which it then refuses; and it cuts a string at a NUL.)
 *   odd   the spool as spurd finds it at start: the rest split, each part after a 16-bit
 *         big-endian length (the last one takes what is left), into the files term,
 *         tombstones, jobs/7.1/launch and jobs/7.1/ended. spool_open must succeed, count
 *         what it skipped, find attempt 7.1 (its launch decoded only when it is that
 *         attempt's, its report taken only when it decodes as that attempt's, otherwise
 *         marked bad) and never let it start again; a second open after the first one's
 *         repairs reads the same term and tombstones.
 * The spools live in a directory under $TMPDIR (unset: /dev/shm, else /tmp), removed at
 * exit; the term's fsync is cheap there.
 */
#define FUZZ_NAME "fuzz_agentmsg"
#include "fuzz_check.h"

#include "hostlist.h"
#include "jobenv.h"
#include "log.h"
#include "spool.h"

#include "agent.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NODE    "n2"
#define CLUSTER "spur"

static char root[4096]; /* the fuzzer's directory */
static char path[4200]; /* this input's spool */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p) != 0 && errno != ENOENT ? -1 : 0;
}

static void rm_tree(const char *p)
{
    nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void rm_root(void)
{
    rm_tree(root);
}

static void setup_root(void)
{
    if (root[0] != '\0')
        return;
    const char *tmp = getenv("TMPDIR");
    struct stat st;
    if (tmp == NULL || tmp[0] == '\0')
        tmp = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(root, sizeof(root), "%s/fuzz_agentmsg.XXXXXX", tmp);
    CHECK(mkdtemp(root) != NULL);
    snprintf(path, sizeof(path), "%s/spool", root);
    atexit(rm_root);
    log_setup(LOG_ERROR, "fuzz_agentmsg"); /* the spool's "skipped" lines are expected */
}

static void open_spool(struct spool *sp)
{
    char err[512];
    CHECK(spool_open(sp, path, err, sizeof(err)) == 0);
}

static void reopen(struct spool *sp)
{
    spool_close(sp);
    open_spool(sp);
}

static void write_file(const char *dir, const char *name, const uint8_t *p, size_t len)
{
    char f[4400];
    snprintf(f, sizeof(f), "%s/%s", dir, name);
    int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(len == 0 || write(fd, p, len) == (ssize_t)len);
    CHECK(close(fd) == 0);
}

/* The packed bytes of a message, malloc'd. */
static uint8_t *packed(const ProtobufCMessage *m, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *p = malloc(n ? n : 1);
    CHECK(p != NULL);
    *len = protobuf_c_message_pack(m, p);
    CHECK(*len == n);
    return p;
}

/* ---- a Launch's environment and output names (monitor.c's use of jobenv) -------------- */

static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; env[i] != NULL; i++)
        if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
            return env[i] + n + 1;
    return NULL;
}

/* A name of the usual form (letters, then digits): the host list must give it back. */
static bool plain_name(const char *s)
{
    size_t i = 0, letters, digits;
    while (s[i] >= 'a' && s[i] <= 'z')
        i++;
    letters = i;
    while (s[i] >= '0' && s[i] <= '9')
        i++;
    digits = i - letters;
    return s[i] == '\0' && letters > 0 && letters <= 16 && digits <= 6;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_nodelist(const Spur__Agent__Launch *l, const char *list)
{
    size_t n = l->n_node_list;
    if (n > 64)
        return;
    for (size_t i = 0; i < n; i++)
        if (!plain_name(l->node_list[i]))
            return;
    char **want = malloc((n ? n : 1) * sizeof(*want)), **got;
    CHECK(want != NULL);
    memcpy(want, l->node_list, n * sizeof(*want));
    qsort(want, n, sizeof(*want), cmp_str);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || strcmp(want[m - 1], want[i]) != 0)
            want[m++] = want[i];
    /* Sorted by prefix then number, not as strings: compare as sets of the same size. */
    size_t ngot;
    char err[256];
    CHECK(hostlist_expand(list, &got, &ngot, err, sizeof(err)) == 0);
    CHECK(ngot == m);
    qsort(got, ngot, sizeof(*got), cmp_str);
    for (size_t i = 0; i < m; i++)
        CHECK(strcmp(got[i], want[i]) == 0);
    for (size_t i = 0; i < ngot; i++)
        free(got[i]);
    free(got);
    free(want);
}

static void check_expand(const char *pattern, const Spur__Agent__Launch *l)
{
    char *out = jobenv_expand(pattern, l, "alice", NODE);
    CHECK(out != NULL);
    if (pattern != NULL && pattern[0] != '\0' && strchr(pattern, '\\') != NULL) {
        /* Taken literally, backslashes dropped. */
        size_t k = 0;
        for (const char *p = pattern; *p; p++)
            if (*p != '\\')
                CHECK(out[k++] == *p);
        CHECK(out[k] == '\0');
    } else if (pattern != NULL && pattern[0] != '\0' && strchr(pattern, '%') == NULL) {
        CHECK(strcmp(out, pattern) == 0);
    }
    free(out);
}

static void check_jobenv(const Spur__Agent__Launch *l)
{
    struct jobenv_user u = {"alice", "/home/alice", "/bin/sh", 1000, 1000};
    char **env = jobenv_build(l, &u, NODE, CLUSTER);
    CHECK(env != NULL);
    for (size_t i = 0; env[i] != NULL; i++) {
        const char *eq = strchr(env[i], '=');
        CHECK(eq != NULL);
        for (size_t k = 0; k < i; k++)
            CHECK(strncmp(env[k], env[i], (size_t)(eq - env[i]) + 1) != 0);
    }
    char id[24];
    snprintf(id, sizeof(id), "%" PRIu64, l->job_id);
    const char *v = env_get(env, "SLURM_JOB_ID");
    CHECK(v != NULL && strcmp(v, id) == 0);
    v = env_get(env, "SLURMD_NODENAME");
    CHECK(v != NULL && strcmp(v, NODE) == 0);
    CHECK(env_get(env, "PATH") != NULL && env_get(env, "HOME") != NULL);
    v = env_get(env, "SLURM_JOB_NODELIST");
    CHECK(v != NULL);
    check_nodelist(l, v);
    jobenv_free(env);
    check_expand(l->spec->stdout_path, l);
    check_expand(l->spec->stderr_path, l);
}

/* ---- messages --------------------------------------------------------------------------- */

static void on_ping(struct spool *sp, const Spur__Agent__Ping *p)
{
    char err[512];
    uint64_t before = sp->term;
    CHECK(spool_set_term(sp, p->term, err, sizeof(err)) == 0);
    uint64_t want = p->term > before ? p->term : before;
    CHECK(sp->term == want);
    reopen(sp);
    CHECK(sp->term == want && sp->skipped == 0);
}

static void on_launch(struct spool *sp, const Spur__Agent__Launch *l)
{
    /* server.c on_launch: what it refuses before it looks at the spool. */
    if (l->job_id == 0 || l->attempt == 0 || l->spec == NULL || l->node_index >= l->n_node_list)
        return;
    /*
     * spool_create() writes the Launch re-encoded and decodes it again. protobuf-c
     * re-encodes some messages it decoded into bytes it refuses (a field 0 in a two-byte
     * tag, kept as unknown, comes back as a one-byte tag 0); spool_create() then refuses
     * the Launch ("out of memory", a node fault). That is the library's, skipped here.
     */
    size_t alen, blen;
    uint8_t *a = packed(&l->base, &alen);
    Spur__Agent__Launch *again = spur__agent__launch__unpack(NULL, alen, a);
    if (again == NULL) {
        free(a);
        return;
    }
    spur__agent__launch__free_unpacked(again, NULL);
    char err[512];
    struct spool_job *j;
    CHECK(spool_launch_check(sp, l->job_id, l->attempt) == SPOOL_LAUNCH_NEW);
    CHECK(spool_create(sp, l, &j, err, sizeof(err)) == 0);
    CHECK(spool_launch_check(sp, l->job_id, l->attempt) == SPOOL_LAUNCH_PRESENT);
    CHECK(spool_find(sp, l->job_id, 0) == j && j->launch != NULL && j->ended == NULL);
    reopen(sp);
    CHECK(sp->skipped == 0 && sp->njobs == 1);
    j = spool_find(sp, l->job_id, l->attempt);
    CHECK(j != NULL && j->launch != NULL && j->ended == NULL && !j->ended_bad);
    uint8_t *b = packed(&j->launch->base, &blen);
    CHECK(alen == blen && memcmp(a, b, alen) == 0);
    free(a);
    free(b);
    check_jobenv(j->launch);
    CHECK(spool_remove(sp, j, err, sizeof(err)) == 0);
    CHECK(spool_launch_check(sp, l->job_id, l->attempt) == SPOOL_LAUNCH_FINISHED);
    reopen(sp);
    CHECK(sp->njobs == 0 && sp->skipped == 0);
    CHECK(spool_launch_check(sp, l->job_id, l->attempt) == SPOOL_LAUNCH_FINISHED);
}

static void on_signal(struct spool *sp, const Spur__Agent__Signal *s)
{
    /* server.c on_signal, for an attempt with no directory. */
    if (!s->terminate || s->attempt == 0 || s->job_id == 0)
        return;
    char err[512];
    CHECK(spool_find(sp, s->job_id, s->attempt) == NULL);
    CHECK(spool_tombstone(sp, s->job_id, s->attempt, err, sizeof(err)) == 0);
    reopen(sp);
    CHECK(sp->skipped == 0 && spool_tomb_attempt(sp, s->job_id) == s->attempt);
    CHECK(spool_launch_check(sp, s->job_id, s->attempt) == SPOOL_LAUNCH_FINISHED);
    CHECK(spool_launch_check(sp, s->job_id, s->attempt - 1) == SPOOL_LAUNCH_FINISHED);
    if (s->attempt < UINT32_MAX)
        CHECK(spool_launch_check(sp, s->job_id, s->attempt + 1) == SPOOL_LAUNCH_NEW);
}

static void on_ended(struct spool *sp, const Spur__Agent__Ended *e)
{
    if (e->job_id == 0 || e->attempt == 0)
        return; /* no attempt directory can hold it */
    char err[512];
    static char *nodes[] = {NODE};
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    Spur__Agent__Launch l = SPUR__AGENT__LAUNCH__INIT;
    l.job_id = e->job_id;
    l.attempt = e->attempt;
    l.spec = &spec;
    l.n_node_list = 1;
    l.node_list = nodes;
    struct spool_job *j;
    CHECK(spool_create(sp, &l, &j, err, sizeof(err)) == 0);
    size_t len;
    uint8_t *p = packed(&e->base, &len);
    Spur__Agent__Ended *again = spur__agent__ended__unpack(NULL, len, p);
    if (again == NULL) { /* as for a Launch in on_launch() */
        free(p);
        return;
    }
    spur__agent__ended__free_unpacked(again, NULL);
    char dir[4400];
    snprintf(dir, sizeof(dir), "%s/jobs/%" PRIu64 ".%u", path, e->job_id, e->attempt);
    write_file(dir, "ended", p, len);
    CHECK(spool_read_ended(sp, j, err, sizeof(err)) == 1);
    CHECK(j->ended != NULL && !j->ended_bad && j->ended_len == len);
    CHECK(len == 0 || memcmp(j->ended, p, len) == 0);
    reopen(sp);
    j = spool_find(sp, e->job_id, e->attempt);
    CHECK(sp->skipped == 0 && j != NULL && j->ended != NULL && j->ended_len == len);
    CHECK(len == 0 || memcmp(j->ended, p, len) == 0);
    free(p);
    /* server.c on_ended_ack of it. */
    CHECK(spool_remove(sp, j, err, sizeof(err)) == 0);
    CHECK(spool_launch_check(sp, e->job_id, e->attempt) == SPOOL_LAUNCH_FINISHED);
}

static void take_msg(const uint8_t *p, size_t len)
{
    Spur__Agent__Msg *m = spur__agent__msg__unpack(NULL, len, p);
    if (m == NULL)
        return;
    struct spool sp;
    open_spool(&sp);
    switch (m->body_case) {
    case SPUR__AGENT__MSG__BODY_PING:
        on_ping(&sp, m->ping);
        break;
    case SPUR__AGENT__MSG__BODY_LAUNCH:
        on_launch(&sp, m->launch);
        break;
    case SPUR__AGENT__MSG__BODY_SIGNAL:
        on_signal(&sp, m->signal);
        break;
    case SPUR__AGENT__MSG__BODY_ENDED:
        on_ended(&sp, m->ended);
        break;
    default:
        break; /* the leader's side: decoded only */
    }
    spool_close(&sp);
    spur__agent__msg__free_unpacked(m, NULL);
}

/* ---- a spool found on disk -------------------------------------------------------------- */

static void take_spool(const uint8_t *p, size_t len)
{
    const uint8_t *part[4];
    size_t plen[4], pos = 0;
    for (int i = 0; i < 4; i++) {
        size_t n = len - pos;
        if (i < 3 && len - pos >= 2) {
            n = (size_t)p[pos] << 8 | p[pos + 1];
            pos += 2;
            if (n > len - pos)
                n = len - pos;
        } else if (i < 3) {
            n = 0;
            pos = len;
        }
        part[i] = p + pos;
        plen[i] = n;
        pos += n;
    }
    char dir[4400];
    snprintf(dir, sizeof(dir), "%s/jobs/7.1", path);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(dir, sizeof(dir), "%s/jobs", path);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(dir, sizeof(dir), "%s/jobs/7.1", path);
    CHECK(mkdir(dir, 0700) == 0);
    write_file(path, "term", part[0], plen[0]);
    write_file(path, "tombstones", part[1], plen[1]);
    write_file(dir, "launch", part[2], plen[2]);
    if (plen[3] > 0)
        write_file(dir, "ended", part[3], plen[3]);

    Spur__Agent__Launch *l = spur__agent__launch__unpack(NULL, plen[2], part[2]);
    bool launch_ok = l != NULL && l->job_id == 7 && l->attempt == 1;
    if (l != NULL)
        spur__agent__launch__free_unpacked(l, NULL);
    Spur__Agent__Ended *e = plen[3] > 0 ? spur__agent__ended__unpack(NULL, plen[3], part[3]) : NULL;
    bool ended_ok = e != NULL && e->job_id == 7 && e->attempt == 1;
    if (e != NULL)
        spur__agent__ended__free_unpacked(e, NULL);

    struct spool sp;
    open_spool(&sp);
    CHECK(sp.njobs == 1);
    struct spool_job *j = spool_find(&sp, 7, 1);
    CHECK(j != NULL && j->next == NULL);
    CHECK((j->launch != NULL) == launch_ok);
    CHECK((j->ended != NULL) == ended_ok);
    CHECK(j->ended_bad == (plen[3] > 0 && !ended_ok));
    CHECK(!ended_ok || (j->ended_len == plen[3] && memcmp(j->ended, part[3], plen[3]) == 0));
    CHECK(spool_launch_check(&sp, 7, 1) != SPOOL_LAUNCH_NEW);
    CHECK(sp.skipped >= (unsigned)!launch_ok + (unsigned)(plen[3] > 0 && !ended_ok));
    uint64_t term = sp.term;
    uint32_t tomb = spool_tomb_attempt(&sp, 7);
    reopen(&sp);
    CHECK(sp.term == term && spool_tomb_attempt(&sp, 7) == tomb && sp.njobs == 1);
    spool_close(&sp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    setup_root();
    if (data[0] % 2 == 0)
        take_msg(data + 1, size - 1);
    else
        take_spool(data + 1, size - 1);
    rm_tree(path);
    return 0;
}
