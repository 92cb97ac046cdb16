/*
 * spool.h - spurd's spool (agent.spool_dir): what the agent must remember across its own
 * restarts, so that no job attempt ever starts twice and no completion report is lost.
 *
 * Invariants:
 *   - An attempt (job_id, attempt) starts at most once on this node, ever: its directory
 *     is created (with its launch record) before its monitor is forked, exists until the
 *     leader acknowledges its Ended report, and is then replaced by a tombstone. A Launch
 *     of an attempt that is present, tombstoned, or lower than one present or tombstoned
 *     never starts anything (spool_launch_check()).
 *   - The highest leader term seen only grows, and is on disk (fsync'd) before the Launch
 *     that it fences could be refused or accepted by it.
 *   - A report (the ended file) is written by the monitor with write, fsync, rename; the
 *     spool only reads it, and removes it only with its whole directory on an ack.
 *   - Nothing read from the spool can crash the agent: a torn or garbage file (a term that
 *     is not a number, a tombstone line that is not "ID.ATTEMPT", a directory name that is
 *     not one, a launch or ended record that does not decode) is logged once, counted in
 *     struct spool's skipped, and left where it is for an operator.
 *
 * The layout (agent.spool_dir, mode 0700):
 *
 *     term                  the highest leader term seen, decimal text and a newline;
 *                           replaced by term.tmp + fsync + rename + fsync of the spool
 *     tombstones            "JOB_ID.ATTEMPT\n" lines, oldest first, appended (one write
 *                           and an fsync per line); when it holds 1.25 x SPOOL_TOMB_KEEP
 *                           lines it is rewritten with the newest SPOOL_TOMB_KEEP jobs, by
 *                           tombstones.tmp + fsync + rename. A tombstone of attempt A of
 *                           a job stands for every attempt up to A (attempts only grow).
 *     jobs/JOB_ID.ATTEMPT/  one per attempt not yet acknowledged:
 *         launch            the packed Spur__Agent__Launch (launch.tmp + fsync + rename);
 *                           its modification time is the attempt's start time
 *         monitor, ctl      the monitor's pid file and control socket (monitor.c)
 *         ended             the packed Spur__Agent__Ended (monitor.c), once it ended
 *
 * A directory whose launch record is missing (spurd died between mkdir and the rename)
 * was never started: spool_open() removes it. One whose launch does not decode is
 * skipped and reported, and still counts as present, so its attempt never starts.
 *
 * Ownership: struct spool owns its descriptors, the tombstone table and the list of
 * struct spool_job; each spool_job owns its directory descriptor, its decoded launch and
 * its packed report. The caller owns struct spool itself and calls spool_close().
 */
#ifndef SPUR_SPOOL_H
#define SPUR_SPOOL_H

#include "agent.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPOOL_TOMB_KEEP 100000u

struct spool_job {
    uint64_t job_id;
    uint32_t attempt;
    int dirfd;                   /* jobs/JOB_ID.ATTEMPT, O_DIRECTORY, owned */
    Spur__Agent__Launch *launch; /* owned; NULL when the record does not decode */
    uint64_t start_time_ms;      /* the launch record's modification time */
    pid_t pid;                   /* our child monitor; 0: not ours (found at start) or reaped */
    uint8_t *ended;              /* owned packed Ended report, NULL until it ended */
    size_t ended_len;
    bool ended_bad;      /* the ended file is there but does not decode (reported) */
    bool abandon_failed; /* main: monitor_abandoned() failed once (logged once) */
    struct spool_job *next;
};

struct spool_tomb; /* the tombstone table, private to spool.c */

struct spool {
    char *path;               /* owned */
    int dirfd;                /* the spool, O_DIRECTORY */
    int jobsfd;               /* jobs/ */
    int tombfd;               /* tombstones, O_APPEND */
    uint64_t term;            /* highest leader term seen */
    struct spool_tomb *tombs; /* owned */
    size_t tomb_lines;        /* lines in the tombstones file */
    size_t tomb_keep;         /* SPOOL_TOMB_KEEP after spool_open(); tests lower it */
    struct spool_job *jobs;   /* owned list, newest first */
    size_t njobs;
    unsigned skipped; /* torn or garbage items found and left alone */
};

/*
 * Open (creating it, mode 0700, and its parents) the spool at path: read the term, the
 * tombstones and every attempt directory. Returns 0, or -1 with err set ("PATH: what:
 * strerror") when the spool cannot be created, opened or written.
 */
int spool_open(struct spool *sp, const char *path, char *err, size_t errlen);
void spool_close(struct spool *sp);

/*
 * Record a leader term: when higher than sp->term, write it durably first, then take it.
 * Returns 0 (also when not higher), or -1 with err (sp->term unchanged).
 */
int spool_set_term(struct spool *sp, uint64_t term, char *err, size_t errlen);

/* The highest attempt of job_id tombstoned, or 0. */
uint32_t spool_tomb_attempt(const struct spool *sp, uint64_t job_id);
/* Tombstone (job_id, attempt) durably. Returns 0 or -1 with err. */
int spool_tombstone(struct spool *sp, uint64_t job_id, uint32_t attempt, char *err, size_t errlen);

/* The attempt's record, or (attempt 0) the job's highest one present; NULL: none. */
struct spool_job *spool_find(const struct spool *sp, uint64_t job_id, uint32_t attempt);

enum spool_launch_verdict {
    SPOOL_LAUNCH_NEW = 0,      /* never seen: may start */
    SPOOL_LAUNCH_PRESENT = 1,  /* its directory exists: started (or ended) already */
    SPOOL_LAUNCH_FINISHED = 2, /* tombstoned, or a higher attempt is present or tombstoned */
};
/* Pure: what a Launch of (job_id, attempt) may do, given the spool as it stands. */
enum spool_launch_verdict spool_launch_check(const struct spool *sp, uint64_t job_id,
                                             uint32_t attempt);

/*
 * Create the attempt's directory and its launch record (durably) and add it to the list.
 * Returns 0 with *out, or -1 with err (nothing left behind).
 */
int spool_create(struct spool *sp, const Spur__Agent__Launch *l, struct spool_job **out, char *err,
                 size_t errlen);

/*
 * Read the attempt's ended file when it has not been read yet. Returns 1 (j->ended set,
 * or it is there and does not decode: j->ended_bad), 0 (no report yet) or -1 (I/O error,
 * err set).
 */
int spool_read_ended(struct spool *sp, struct spool_job *j, char *err, size_t errlen);

/*
 * Forget the attempt: remove its directory, tombstone it, free j. Returns 0, or -1 with
 * err when the tombstone could not be written (the directory is then kept, so the
 * attempt still cannot start again).
 */
int spool_remove(struct spool *sp, struct spool_job *j, char *err, size_t errlen);

#endif
