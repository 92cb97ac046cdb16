/*
 * mklog.c - write a state directory holding a valid one-replica Raft log of N entries,
 * for the "restart with 1,000,000 log entries" benchmark.
 *
 *   bench-mklog STATE_DIR N RAFT_ADDRESS [tick|submit]
 *
 * The log: entry 1 is the bootstrap configuration (node 1, voter, RAFT_ADDRESS), entries
 * 2..N are valid state-machine commands, all in term 1, with term 1 and a vote for node 1
 * in the hard state: "tick" (default) ~30-byte clock ticks, or "submit" job submissions
 * with a 256-byte script (~330-byte entries, and N jobs once applied). Written through the real storage module, so the
 * worker recovers it exactly as it would its own.
 */
#include "fsm.h"
#include "raft.h"
#include "storage.h"
#include "util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: bench-mklog STATE_DIR N RAFT_ADDRESS [tick|submit]\n");
        return 64;
    }
    bool submit = argc == 5 && strcmp(argv[4], "submit") == 0;
    const char *dir = argv[1];
    uint64_t n = strtoull(argv[2], NULL, 10);
    mkdir(dir, 0700);
    struct storage_options so;
    storage_options_default(&so);
    so.fsync = false;
    struct storage *st;
    struct storage_recovered rec;
    struct diskio_err err;
    if (storage_open(dir, &so, &st, &rec, &err) != DISKIO_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    storage_recovered_free(&rec);

    struct raft_config conf;
    memset(&conf, 0, sizeof(conf));
    raft_config_add(&conf, 1, RAFT_MEMBER_VOTER, argv[3]);
    uint8_t cfgbuf[512];
    int clen = raft_config_encode(&conf, cfgbuf, sizeof(cfgbuf));
    uint8_t *tick = NULL;
    size_t tlen = 0;
    if (submit) {
        char script[257];
        memset(script, '#', 256);
        memcpy(script, "#!/bin/sh\n", 10);
        script[255] = '\n';
        Spur__Api__Request req = SPUR__API__REQUEST__INIT;
        Spur__Api__SubmitJobRequest sj = SPUR__API__SUBMIT_JOB_REQUEST__INIT;
        Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
        spec.name = "restart-bench";
        spec.script.data = (uint8_t *)script;
        spec.script.len = 256;
        spec.workdir = "/tmp";
        sj.spec = &spec;
        req.op_case = SPUR__API__REQUEST__OP_SUBMIT_JOB;
        req.submit_job = &sj;
        req.user = "bench";
        Spur__Api__Caller who = SPUR__API__CALLER__INIT; /* writes carry a proved caller */
        who.user = "bench";
        who.uid = 1000;
        who.gid = 1000;
        req.caller = &who;
        if (fsm_encode_request(&req, wall_ms(), &tick, &tlen) != FSM_OK)
            return 1;
    } else if (fsm_encode_tick(wall_ms(), &tick, &tlen) != FSM_OK) {
        return 1;
    }
    if (clen < 0)
        return 1;

    enum { BATCH = 8192 };
    struct wal_entry *ents = calloc(BATCH, sizeof(*ents));
    uint64_t next = 1, submitted = 0, done = 0;
    uint64_t t0 = mono_ms();
    while (next <= n) {
        size_t k = 0;
        while (k < BATCH && next <= n) {
            ents[k].index = next;
            ents[k].term = 1;
            if (next == 1) {
                ents[k].type = RAFT_ENTRY_CONFIG;
                ents[k].data = cfgbuf;
                ents[k].len = (uint32_t)clen;
            } else {
                ents[k].type = RAFT_ENTRY_NORMAL;
                ents[k].data = tick;
                ents[k].len = (uint32_t)tlen;
            }
            k++;
            next++;
        }
        struct storage_write w = {.entries = ents, .n_entries = k};
        if (submitted == 0) {
            w.has_hard_state = true;
            w.term = 1;
            w.vote = 1;
        }
        if (storage_submit(st, &w, &err) != DISKIO_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        submitted++;
        struct storage_done d[16];
        while (submitted - done > 8) {
            done += storage_poll(st, d, 16);
            if (submitted - done > 8)
                usleep(1000);
        }
    }
    while (done < submitted) {
        struct storage_done d[16];
        done += storage_poll(st, d, 16);
        if (done < submitted)
            usleep(1000);
    }
    storage_close(st);
    printf("wrote %llu entries in %llu ms\n", (unsigned long long)n,
           (unsigned long long)(mono_ms() - t0));
    free(ents);
    free(tick);
    return 0;
}
