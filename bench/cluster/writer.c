/*
 * writer.c - a client that submits tiny jobs back to back and records when each write
 * started and was acknowledged, for the failover and hand-over benchmarks.
 *
 *   bench-writer HOSTS CLUSTER_NAME DURATION_MS [PER_WRITE_TIMEOUT_MS]
 *
 * Prints one line per write: "<start_ms> <end_ms> <ok 0|1>", times in milliseconds of the
 * monotonic clock (comparable with other processes' CLOCK_MONOTONIC), after the run.
 */
#include "spurclient.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rec {
    double t0, t1;
    int ok;
};

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench-writer HOSTS CLUSTER DURATION_MS [TIMEOUT_MS]\n");
        return 64;
    }
    size_t nhosts;
    char **hosts = spurclient_hosts_parse(argv[1], &nhosts);
    uint64_t duration = strtoull(argv[3], NULL, 10);
    uint32_t timeout = argc > 4 ? (uint32_t)atoi(argv[4]) : 5000;
    struct spurclient_options o = {.hosts = (const char *const *)hosts,
                                   .nhosts = nhosts,
                                   .cluster_name = argv[2],
                                   .timeout_ms = timeout,
                                   .token = getenv("SPUR_JWT")}; /* bench_cluster.py's */
    struct spurclient *c = spurclient_new(&o);
    if (c == NULL)
        return 71;
    size_t cap = 1 << 16, n = 0;
    struct rec *recs = malloc(cap * sizeof(*recs));
    static const char script[] = "#!/bin/sh\ntrue\n";
    uint64_t end = mono_ms() + duration;
    while (mono_ms() < end && n < cap) {
        Spur__Api__Request req = SPUR__API__REQUEST__INIT;
        Spur__Api__SubmitJobRequest sj = SPUR__API__SUBMIT_JOB_REQUEST__INIT;
        Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
        spec.name = "bench";
        spec.script.data = (uint8_t *)script;
        spec.script.len = sizeof(script) - 1;
        spec.workdir = "/tmp";
        sj.spec = &spec;
        req.op_case = SPUR__API__REQUEST__OP_SUBMIT_JOB;
        req.submit_job = &sj;
        spurclient_response *r = NULL;
        char err[256];
        double t0 = (double)mono_ns() / 1e6;
        int rc = spurclient_call(c, &req, true, &r, err, sizeof(err));
        double t1 = (double)mono_ns() / 1e6;
        recs[n++] = (struct rec){t0, t1, rc == 0 && r->code == SPUR__API__CODE__CODE_OK};
        spurclient_response_free(r);
    }
    for (size_t i = 0; i < n; i++)
        printf("%.3f %.3f %d\n", recs[i].t0, recs[i].t1, recs[i].ok);
    free(recs);
    spurclient_free(c);
    spurclient_hosts_free(hosts, nhosts);
    return 0;
}
