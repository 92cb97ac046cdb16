/*
 * bench_submit.c - job submission through the client API: jobs/s and latency percentiles
 * with N concurrent blocking clients, printed as a table.
 *
 *     build/bench/submit/bench_submit --hosts H:P[,H:P...] [--cluster NAME]
 *         [--clients 1,16,64] [--seconds 10] [--warmup 1] [--script-bytes 256]
 *         [--jobs N] [--name NAME] [--user NAME] [--timeout-ms 10000]
 *
 * What one row measures: `clients` threads, each with its own struct spurclient (one
 * connection, its own client id), submit jobs back to back as exactly-once writes, the
 * way sbatch does: a SubmitJob with a `script-bytes` batch script, the default partition,
 * no environment (sbatch --export=NONE). A submission counts when the reply says OK and
 * carries a job id; its latency is spurclient_call()'s wall time, so it includes the leader's
 * batching, the fsync of the log on the leader and on a follower, replication, apply and
 * the reply. The first `warmup` seconds are not counted; then the row counts every
 * submission that completes in the next `seconds` seconds.
 *
 * Before the first row the leader is looked up (RaftStatus) and put first in the host
 * list, so the clients talk to it directly instead of through a follower's forwarding.
 *
 * --jobs N: instead of a fixed time, submit exactly N jobs (shared by the clients) and
 * report the same row; bench/scale uses it to fill the state.
 *
 * Exit status 0 when every row finished without a failed submission, 1 otherwise (a row
 * with errors is still printed; the errors column says how many, and the first error
 * message goes to stderr). Timings on a shared machine are indications, not pass/fail
 * material (bench/README.md).
 */
#include "spurclient.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROWS 16

struct options {
    char **hosts;
    size_t nhosts;
    const char *cluster;
    unsigned clients[MAX_ROWS];
    size_t nrows;
    double seconds;
    double warmup;
    size_t script_bytes;
    uint64_t jobs; /* 0: run for `seconds` */
    const char *name;
    const char *user;
    uint32_t timeout_ms;
};

/* What every thread of one row shares. */
struct run {
    const struct options *o;
    const char *script;
    atomic_bool measuring; /* set after the warm-up */
    atomic_bool stop;
    atomic_llong left; /* --jobs mode: submissions still to start */
    pthread_mutex_t err_lock;
    char first_error[400];
};

/* One client thread; owns its connection and its latency samples. */
struct worker {
    struct run *run;
    struct spurclient *client;
    uint64_t *lat_ns; /* latencies of the counted submissions */
    size_t n, cap;
    uint64_t errors;
    pthread_t tid;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void note_error(struct run *run, const char *msg)
{
    pthread_mutex_lock(&run->err_lock);
    if (run->first_error[0] == '\0')
        snprintf(run->first_error, sizeof(run->first_error), "%s", msg);
    pthread_mutex_unlock(&run->err_lock);
}

static int push_sample(struct worker *w, uint64_t ns)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 4096;
        uint64_t *v = realloc(w->lat_ns, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        w->lat_ns = v;
        w->cap = cap;
    }
    w->lat_ns[w->n++] = ns;
    return 0;
}

/* One exactly-once submission; returns its latency in ns, or 0 on failure. */
static uint64_t submit_one(struct worker *w)
{
    const struct options *o = w->run->o;
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__SubmitJobRequest sj = SPUR__API__SUBMIT_JOB_REQUEST__INIT;
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    spec.name = (char *)o->name;
    spec.partition = (char *)"";
    spec.nodes = 1;
    spec.ntasks = 1;
    spec.cpus_per_task = 1;
    spec.stdout_path = (char *)"slurm-%j.out";
    spec.stderr_path = (char *)"slurm-%j.out";
    spec.workdir = (char *)"/tmp";
    spec.script.data = (uint8_t *)w->run->script;
    spec.script.len = o->script_bytes;
    spec.user = (char *)o->user;
    spec.uid = (uint32_t)getuid();
    spec.gid = (uint32_t)getgid();
    sj.spec = &spec;
    req.op_case = SPUR__API__REQUEST__OP_SUBMIT_JOB;
    req.submit_job = &sj;
    req.user = (char *)o->user;

    char err[400];
    spurclient_response *r = NULL;
    uint64_t t0 = now_ns();
    if (spurclient_call(w->client, &req, true, &r, err, sizeof(err)) != 0) {
        note_error(w->run, err);
        return 0;
    }
    uint64_t dt = now_ns() - t0;
    bool ok =
        r->code == SPUR__API__CODE__CODE_OK && r->submit_job != NULL && r->submit_job->job_id != 0;
    if (!ok) {
        snprintf(err, sizeof(err), "code %d: %s", (int)r->code, r->error ? r->error : "");
        note_error(w->run, err);
    }
    spurclient_response_free(r);
    return ok ? (dt ? dt : 1) : 0;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct run *run = w->run;
    for (;;) {
        if (run->o->jobs > 0) {
            if (atomic_fetch_sub(&run->left, 1) <= 0)
                break;
        } else if (atomic_load(&run->stop)) {
            break;
        }
        uint64_t dt = submit_one(w);
        if (dt == 0) {
            w->errors++;
            continue;
        }
        /* Time mode: count what completes inside the window; jobs mode: everything. */
        bool count = run->o->jobs > 0 || (atomic_load(&run->measuring) && !atomic_load(&run->stop));
        if (count && push_sample(w, dt) != 0) {
            note_error(run, "out of memory for latency samples");
            w->errors++;
        }
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : (x > y);
}

/* The p-th percentile (0..100) of sorted values, nearest rank. */
static double pct_ms(const uint64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    double rank = p / 100.0 * (double)n;
    size_t k = (size_t)rank;
    if ((double)k < rank)
        k++;
    if (k == 0)
        k = 1;
    if (k > n)
        k = n;
    return (double)v[k - 1] / 1e6;
}

static struct spurclient *new_client(const struct options *o)
{
    struct spurclient_options so = {
        .hosts = (const char *const *)o->hosts,
        .nhosts = o->nhosts,
        .cluster_name = o->cluster,
        .timeout_ms = o->timeout_ms,
        .user = o->user,
        /* The replicas want proof of who submits: a token (SPUR_JWT), as from scontrol
         * token; run.py passes one. */
        .token = getenv("SPUR_JWT"),
    };
    return spurclient_new(&so);
}

/* Run one row; prints it. Returns the number of failed submissions, or -1. */
static long run_row(const struct options *o, const char *script, unsigned nclients)
{
    struct run run = {.o = o, .script = script};
    atomic_init(&run.measuring, false);
    atomic_init(&run.stop, false);
    atomic_init(&run.left, (long long)o->jobs);
    pthread_mutex_init(&run.err_lock, NULL);
    struct worker *ws = calloc(nclients, sizeof(*ws));
    if (ws == NULL)
        return -1;
    long rc = -1;
    unsigned started = 0;
    uint64_t t_start = 0, t_stop = 0;
    for (unsigned i = 0; i < nclients; i++) {
        ws[i].run = &run;
        ws[i].client = new_client(o);
        if (ws[i].client == NULL) {
            fprintf(stderr, "bench_submit: cannot make client %u\n", i);
            goto out;
        }
    }
    t_start = now_ns();
    for (; started < nclients; started++) {
        if (pthread_create(&ws[started].tid, NULL, worker_main, &ws[started]) != 0) {
            fprintf(stderr, "bench_submit: pthread_create: %s\n", strerror(errno));
            atomic_store(&run.stop, true);
            atomic_store(&run.left, 0);
            goto join;
        }
    }
    if (o->jobs == 0) {
        sleep_s(o->warmup);
        t_start = now_ns();
        atomic_store(&run.measuring, true);
        sleep_s(o->seconds);
        atomic_store(&run.stop, true);
        t_stop = now_ns();
    }
join:
    for (unsigned i = 0; i < started; i++)
        pthread_join(ws[i].tid, NULL);
    if (started < nclients)
        goto out;
    if (o->jobs > 0)
        t_stop = now_ns();

    size_t total = 0;
    uint64_t errors = 0;
    for (unsigned i = 0; i < nclients; i++) {
        total += ws[i].n;
        errors += ws[i].errors;
    }
    uint64_t *all = malloc((total ? total : 1) * sizeof(*all));
    if (all == NULL)
        goto out;
    size_t k = 0;
    for (unsigned i = 0; i < nclients; i++) {
        memcpy(all + k, ws[i].lat_ns, ws[i].n * sizeof(*all));
        k += ws[i].n;
    }
    qsort(all, total, sizeof(*all), cmp_u64);
    double secs = (double)(t_stop - t_start) / 1e9;
    printf("%7u %10zu %8.2f %10.0f %9.3f %9.3f %9.3f %9.3f %7llu\n", nclients, total, secs,
           secs > 0 ? (double)total / secs : 0.0, pct_ms(all, total, 50), pct_ms(all, total, 99),
           pct_ms(all, total, 99.9), total ? (double)all[total - 1] / 1e6 : 0.0,
           (unsigned long long)errors);
    fflush(stdout);
    if (run.first_error[0])
        fprintf(stderr, "bench_submit: first error: %s\n", run.first_error);
    free(all);
    rc = (long)errors;
out:
    for (unsigned i = 0; i < nclients; i++) {
        spurclient_free(ws[i].client);
        free(ws[i].lat_ns);
    }
    free(ws);
    pthread_mutex_destroy(&run.err_lock);
    return rc;
}

/* Ask any replica who leads, and move the leader's address to the front of o->hosts. */
static void leader_first(struct options *o)
{
    struct spurclient *c = new_client(o);
    if (c == NULL)
        return;
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__RaftStatusRequest rs = SPUR__API__RAFT_STATUS_REQUEST__INIT;
    req.op_case = SPUR__API__REQUEST__OP_RAFT_STATUS;
    req.raft_status = &rs;
    spurclient_response *r = NULL;
    char err[400];
    if (spurclient_call(c, &req, false, &r, err, sizeof(err)) == 0 && r->leader_hint &&
        r->leader_hint[0]) {
        for (size_t i = 1; i < o->nhosts; i++) {
            if (strcmp(o->hosts[i], r->leader_hint) == 0) {
                char *t = o->hosts[0];
                o->hosts[0] = o->hosts[i];
                o->hosts[i] = t;
            }
        }
        fprintf(stderr, "bench_submit: leader is node %u at %s\n", r->leader_id, r->leader_hint);
    } else {
        fprintf(stderr, "bench_submit: leader unknown; clients start at %s\n", o->hosts[0]);
    }
    spurclient_response_free(r);
    spurclient_free(c);
}

/* "#!/bin/sh" + a comment filling the script to exactly n bytes + "true". */
static char *make_script(size_t n)
{
    static const char head[] = "#!/bin/sh\n# bench_submit ";
    static const char tail[] = "\ntrue\n";
    size_t min = sizeof(head) - 1 + sizeof(tail) - 1;
    if (n < min)
        n = min;
    char *s = malloc(n + 1);
    if (s == NULL)
        return NULL;
    memcpy(s, head, sizeof(head) - 1);
    memset(s + sizeof(head) - 1, 'x', n - min);
    memcpy(s + n - (sizeof(tail) - 1), tail, sizeof(tail) - 1);
    s[n] = '\0';
    return s;
}

static void usage(FILE *out)
{
    fputs("Usage: bench_submit --hosts H:P[,H:P...] [--cluster NAME] [--clients 1,16,64]\n"
          "                    [--seconds 10] [--warmup 1] [--script-bytes 256] [--jobs N]\n"
          "                    [--name NAME] [--user NAME] [--timeout-ms 10000]\n",
          out);
}

static int parse_clients(struct options *o, const char *s)
{
    char *copy = strdup(s), *save = NULL;
    if (copy == NULL)
        return -1;
    o->nrows = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long v = strtol(t, NULL, 10);
        if (v < 1 || v > 4096 || o->nrows == MAX_ROWS) {
            free(copy);
            return -1;
        }
        o->clients[o->nrows++] = (unsigned)v;
    }
    free(copy);
    return o->nrows ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct options o = {
        .cluster = "spur",
        .seconds = 10,
        .warmup = 1,
        .script_bytes = 256,
        .name = "bench",
        .user = getenv("USER") ? getenv("USER") : "bench",
        .timeout_ms = 10000,
    };
    const char *hosts = NULL;
    parse_clients(&o, "1,16,64");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (v == NULL) {
            usage(stderr);
            return 64;
        }
        i++;
        if (strcmp(a, "--hosts") == 0)
            hosts = v;
        else if (strcmp(a, "--cluster") == 0)
            o.cluster = v;
        else if (strcmp(a, "--clients") == 0 && parse_clients(&o, v) == 0)
            ;
        else if (strcmp(a, "--seconds") == 0 && (o.seconds = atof(v)) > 0)
            ;
        else if (strcmp(a, "--warmup") == 0 && (o.warmup = atof(v)) >= 0)
            ;
        else if (strcmp(a, "--script-bytes") == 0 && atol(v) > 0)
            o.script_bytes = (size_t)atol(v);
        else if (strcmp(a, "--jobs") == 0 && atoll(v) > 0)
            o.jobs = (uint64_t)atoll(v);
        else if (strcmp(a, "--name") == 0)
            o.name = v;
        else if (strcmp(a, "--user") == 0)
            o.user = v;
        else if (strcmp(a, "--timeout-ms") == 0 && atol(v) > 0)
            o.timeout_ms = (uint32_t)atol(v);
        else {
            fprintf(stderr, "bench_submit: bad option or value: %s %s\n", a, v);
            usage(stderr);
            return 64;
        }
    }
    if (hosts == NULL) {
        usage(stderr);
        return 64;
    }
    o.hosts = spurclient_hosts_parse(hosts, &o.nhosts);
    if (o.hosts == NULL || o.nhosts == 0) {
        fprintf(stderr, "bench_submit: no hosts in \"%s\"\n", hosts);
        return 64;
    }
    char *script = make_script(o.script_bytes);
    if (script == NULL) {
        fprintf(stderr, "bench_submit: out of memory\n");
        return 1;
    }
    o.script_bytes = strlen(script);
    leader_first(&o);
    printf("# %zu-byte scripts, %s, %s\n", o.script_bytes,
           o.jobs ? "fixed job count" : "fixed time", "exactly-once writes");
    printf("%7s %10s %8s %10s %9s %9s %9s %9s %7s\n", "clients", "jobs", "seconds", "jobs/s",
           "p50_ms", "p99_ms", "p99.9_ms", "max_ms", "errors");
    int status = 0;
    for (size_t i = 0; i < o.nrows; i++) {
        long e = run_row(&o, script, o.clients[i]);
        if (e != 0)
            status = 1;
    }
    free(script);
    spurclient_hosts_free(o.hosts, o.nhosts);
    return status;
}
