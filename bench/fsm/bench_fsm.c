/*
 * bench_fsm.c - the replicated state machine at scale: apply rate of submits, resident
 * memory, snapshot and restore times, and get_jobs(all), printed as a table.
 *
 *     build/bench/fsm/bench_fsm [--jobs 10000,100000] [--script-bytes 256] [--clients 1000]
 *                               [--accounting]
 *
 * --accounting turns the replicated accounting setting on first, so every submit also
 * appends its outbox record (docs/accounting.md): the difference is the outbox's cost.
 *
 * Each size runs in a child process of its own, so one size's memory never shows in
 * another's figures. Per size:
 *
 *   - a fresh state machine gets the default partition and 100 nodes, then N submits from
 *     `clients` clients (each with its own increasing seq, as the CLI would send them),
 *     encoded by fsm_encode_request() and applied with a reply, as on the leader; "apply"
 *     times fsm_apply() alone, "enc+apply" both;
 *   - RSS is the process's VmRSS after loading minus before creating the state machine
 *     (the state alone), and VmHWM (peak RSS of the process) at the end;
 *   - snapshot: fsm_snapshot() of the loaded state; restore: fsm_restore() of those bytes
 *     into a fresh state machine;
 *   - squeue: fsm_get_jobs() with no filter (every job, no scripts) plus packing the
 *     Response to the bytes the worker would send.
 *
 * Timings on a shared machine are indications, not pass/fail material (bench/README.md).
 */
#include "cfg.h"
#include "fsm.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A /proc/self/status field in KiB ("VmRSS", "VmHWM"), or 0. */
static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return 0;
    char line[256];
    long v = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_fsm: %s\n", what);
    exit(1);
}

static void apply_or_die(struct fsm *f, uint8_t *buf, size_t len)
{
    struct fsm_reply reply;
    if (fsm_apply(f, fsm_last_applied(f) + 1, buf, len, &reply) != FSM_OK)
        die("apply failed");
    if (reply.resp->code != SPUR__API__CODE__CODE_OK)
        die(reply.resp->error);
    fsm_reply_clear(&reply);
    free(buf);
}

static int accounting; /* --accounting */

static void setup(struct fsm *f, uint64_t t)
{
    struct cfg c;
    char err[FSM_ERR_MAX];
    uint8_t *buf;
    size_t len;
    if (cfg_defaults(&c) != 0)
        die("cfg_defaults failed");
    struct fsm_partition_conf parts[8];
    if (c.npartitions > 8)
        die("too many partitions in the defaults");
    for (size_t i = 0; i < c.npartitions; i++)
        parts[i] =
            (struct fsm_partition_conf){.name = c.partitions[i].name,
                                        .nodes = c.partitions[i].nodes,
                                        .is_default = c.partitions[i].is_default,
                                        .up = c.partitions[i].up,
                                        .max_nodes = c.partitions[i].max_nodes,
                                        .max_time_min = c.partitions[i].max_time_min,
                                        .max_cpus_per_node = c.partitions[i].max_cpus_per_node,
                                        .max_mem_mb_per_node = c.partitions[i].max_mem_mb_per_node};
    if (fsm_encode_set_partitions(parts, c.npartitions, t, &buf, &len, err, sizeof(err)) != FSM_OK)
        die(err);
    apply_or_die(f, buf, len);
    if (accounting) {
        struct fsm_settings_conf st = {.finished_job_retention_s =
                                           c.controller.finished_job_retention_s,
                                       .max_script_bytes = c.controller.max_script_bytes,
                                       .accounting = true};
        if (fsm_encode_set_settings(&st, t, &buf, &len) != FSM_OK)
            die("encode settings failed");
        apply_or_die(f, buf, len);
    }
    cfg_free(&c);
    for (int i = 0; i < 100; i++) {
        char name[32];
        snprintf(name, sizeof(name), "node%03d", i);
        Spur__Api__RegisterNodeRequest rn = SPUR__API__REGISTER_NODE_REQUEST__INIT;
        rn.name = name;
        rn.address = "10.1.0.1:6818";
        rn.cpus = 64;
        rn.mem_mb = 256000;
        Spur__Api__Request req = SPUR__API__REQUEST__INIT;
        req.op_case = SPUR__API__REQUEST__OP_REGISTER_NODE;
        req.register_node = &rn;
        req.user = "root";
        Spur__Api__Caller root = SPUR__API__CALLER__INIT; /* writes carry a proved caller */
        root.user = "root";
        root.operator_ = true;
        req.caller = &root;
        if (fsm_encode_request(&req, t, &buf, &len) != FSM_OK)
            die("encode failed");
        apply_or_die(f, buf, len);
    }
}

struct row {
    size_t jobs;
    double apply_s, enc_apply_s;
    long state_kib, hwm_kib;
    double snap_s, restore_s, squeue_s, squeue_pack_s;
    size_t snap_bytes, squeue_bytes;
};

static void run_size(size_t njobs, size_t script_bytes, unsigned clients, struct row *r)
{
    memset(r, 0, sizeof(*r));
    r->jobs = njobs;
    uint8_t *script = malloc(script_bytes);
    if (script == NULL)
        die("out of memory");
    memset(script, '#', script_bytes);
    memcpy(script, "#!/bin/sh\n", script_bytes < 10 ? script_bytes : 10);
    long rss0 = status_kib("VmRSS");

    struct fsm *f = fsm_new(NULL);
    if (f == NULL)
        die("fsm_new failed");
    uint64_t t = 1700000000000ull;
    setup(f, t);
    uint64_t *seq = calloc(clients, sizeof(*seq));
    if (seq == NULL)
        die("out of memory");
    static const char *users[] = {"alice", "bob", "carol", "dave"};
    double t0 = now_s();
    for (size_t i = 0; i < njobs; i++) {
        char name[32];
        snprintf(name, sizeof(name), "job%zu", i % 1000);
        Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
        s.name = name;
        s.script.data = script;
        s.script.len = script_bytes;
        s.ntasks = 1 + (uint32_t)(i % 4);
        s.workdir = "/home/user/work";
        s.stdout_path = "slurm-%j.out";
        Spur__Api__SubmitJobRequest sj = SPUR__API__SUBMIT_JOB_REQUEST__INIT;
        sj.spec = &s;
        Spur__Api__Request req = SPUR__API__REQUEST__INIT;
        req.op_case = SPUR__API__REQUEST__OP_SUBMIT_JOB;
        req.submit_job = &sj;
        unsigned c = (unsigned)(i % clients);
        req.client_id = 1000 + c;
        req.seq = ++seq[c];
        req.user = (char *)users[i % 4];
        Spur__Api__Caller who = SPUR__API__CALLER__INIT; /* writes carry a proved caller */
        who.user = req.user;
        who.uid = 1000 + (uint32_t)(i % 4);
        who.gid = who.uid;
        req.caller = &who;
        uint8_t *buf;
        size_t len;
        if (fsm_encode_request(&req, t + i, &buf, &len) != FSM_OK)
            die("encode failed");
        struct fsm_reply reply;
        double a0 = now_s();
        if (fsm_apply(f, fsm_last_applied(f) + 1, buf, len, &reply) != FSM_OK)
            die("apply failed");
        r->apply_s += now_s() - a0;
        if (reply.resp->code != SPUR__API__CODE__CODE_OK)
            die(reply.resp->error);
        fsm_reply_clear(&reply);
        free(buf);
    }
    r->enc_apply_s = now_s() - t0;
    free(seq);
    r->state_kib = status_kib("VmRSS") - rss0;

    uint8_t *snap;
    size_t snap_len;
    t0 = now_s();
    if (fsm_snapshot(f, &snap, &snap_len) != FSM_OK)
        die("snapshot failed");
    r->snap_s = now_s() - t0;
    r->snap_bytes = snap_len;

    struct fsm *g = fsm_new(NULL);
    char err[FSM_ERR_MAX];
    t0 = now_s();
    if (g == NULL || fsm_restore(g, snap, snap_len, err, sizeof(err)) != FSM_OK)
        die("restore failed");
    r->restore_s = now_s() - t0;
    free(snap);
    fsm_free(g);

    struct fsm_read rd;
    t0 = now_s();
    if (fsm_get_jobs(f, NULL, &rd) != FSM_OK || rd.resp.jobs->n_jobs != njobs)
        die("get_jobs failed");
    double t1 = now_s();
    size_t n = spur__api__response__get_packed_size(&rd.resp);
    uint8_t *out = malloc(n);
    if (out == NULL)
        die("out of memory");
    spur__api__response__pack(&rd.resp, out);
    double t2 = now_s();
    r->squeue_s = t1 - t0;
    r->squeue_pack_s = t2 - t1;
    r->squeue_bytes = n;
    free(out);
    fsm_read_free(&rd);
    r->hwm_kib = status_kib("VmHWM");
    fsm_free(f);
    free(script);
}

int main(int argc, char **argv)
{
    char sizes[256] = "10000,100000";
    size_t script_bytes = 256;
    unsigned clients = 1000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            snprintf(sizes, sizeof(sizes), "%s", argv[++i]);
        else if (strcmp(argv[i], "--script-bytes") == 0 && i + 1 < argc)
            script_bytes = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--clients") == 0 && i + 1 < argc)
            clients = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--accounting") == 0)
            accounting = 1;
        else {
            fprintf(stderr, "usage: bench_fsm [--jobs N,N...] [--script-bytes B] [--clients C] "
                            "[--accounting]\n");
            return 64;
        }
    }
    if (script_bytes == 0 || clients == 0) {
        fprintf(stderr, "bench_fsm: --script-bytes and --clients must be positive\n");
        return 64;
    }
    printf("fsm benchmark: %zu-byte scripts, %u clients, 100 nodes, accounting %s\n\n",
           script_bytes, clients, accounting ? "on" : "off");
    printf("%8s | %12s | %14s | %9s | %8s | %9s | %10s | %10s | %10s | %9s | %10s\n", "jobs",
           "apply/s", "enc+apply/s", "state RSS", "peak RSS", "snapshot", "snap size", "restore",
           "get_jobs", "pack", "resp size");
    printf("---------+--------------+----------------+-----------+----------+-----------+-"
           "-----------+------------+------------+-----------+-----------\n");
    fflush(stdout);
    for (char *tok = strtok(sizes, ","); tok != NULL; tok = strtok(NULL, ",")) {
        size_t n = strtoul(tok, NULL, 10);
        int fds[2];
        if (n == 0 || pipe(fds) != 0)
            die("bad size or pipe failed");
        pid_t pid = fork();
        if (pid < 0)
            die("fork failed");
        if (pid == 0) {
            close(fds[0]);
            struct row r;
            run_size(n, script_bytes, clients, &r);
            ssize_t w = write(fds[1], &r, sizeof(r));
            _exit(w == (ssize_t)sizeof(r) ? 0 : 1);
        }
        close(fds[1]);
        struct row r;
        ssize_t got = read(fds[0], &r, sizeof(r));
        close(fds[0]);
        int status;
        waitpid(pid, &status, 0);
        if (got != (ssize_t)sizeof(r) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            die("a size failed");
        printf("%8zu | %12.0f | %14.0f | %6.1f MiB | %4.0f MiB | %6.1f ms | %6.1f MiB | %7.1f ms | "
               "%7.1f ms | %6.1f ms | %6.1f MiB\n",
               r.jobs, (double)r.jobs / r.apply_s, (double)r.jobs / r.enc_apply_s,
               (double)r.state_kib / 1024.0, (double)r.hwm_kib / 1024.0, r.snap_s * 1e3,
               (double)r.snap_bytes / 1048576.0, r.restore_s * 1e3, r.squeue_s * 1e3,
               r.squeue_pack_s * 1e3, (double)r.squeue_bytes / 1048576.0);
        fflush(stdout);
    }
    return 0;
}
