/*
 * monitor.h - the per-job monitor: one process per job attempt (as slurmstepd is) that
 * runs the batch script as the user, confines and watches it, enforces its time limit,
 * and writes its Ended report. spurd may die and restart; the monitor and its job go on.
 *
 * Guarantees:
 *   - One monitor per attempt, forked by spurd (its parent, which reaps it), in a session
 *     of its own. It never runs libevent code: plain system calls only, one thread.
 *   - The job's whole process tree stays findable: the job is in its cgroup from before
 *     exec (cgroup.h); without cgroups it is its own process group and the monitor is a
 *     child subreaper, so orphans of the job come back to the monitor, which then knows
 *     every pid it signals is not reused (its own unreaped children, or descendants found
 *     in /proc while it walks them).
 *   - "ended" is written (ended.tmp, fsync, rename, fsync of the directory) after every
 *     process of the job is gone, and it is the last thing the monitor does before it
 *     removes the cgroup and exits 0. An Ended on disk therefore means nothing of the
 *     attempt runs any more.
 *   - monitor_spawn() returns only after the monitor wrote "monitor", made the job's
 *     cgroup and listens on "ctl" (or failed, with why): a caller can signal or check the
 *     monitor as soon as it returns.
 *
 * Files the monitor keeps in its job directory (the spool layout is in
 * docs/agent-jobs.md; spool.c owns the rest):
 *   monitor  "PID STARTTIME\n": the monitor (STARTTIME is /proc/PID/stat field 22)
 *   job      "PID STARTTIME START_MS\n": the job's first process (its process group
 *            leader) and the wall clock at its start; written after the fork
 *   script   the batch script, 0500, owned by the user
 *   ctl      the control socket (AF_UNIX stream, root only: the spool is 0700). A request
 *            is one line, "SIG <n>\n" or "TERM\n"; the answer "OK\n", or "ENDED\n" once the
 *            job's processes are gone.
 *   ended    the packed Spur__Agent__Ended
 *
 * Memory: struct monitor_conf and its strings are the caller's and only read. Nothing
 * here keeps state between calls.
 */
#ifndef SPUR_MONITOR_H
#define SPUR_MONITOR_H

#include "agent.pb-c.h"
#include "cgroup.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct monitor_conf {
    const char *node_name;
    const char *cluster_name;
    const struct cgroup_ctx *cg; /* from cgroup_init(); NULL: no cgroups */
};

/* The monitor's clocks for one attempt, in milliseconds (0 time limit: none). */
struct monitor_limits {
    uint64_t time_limit_ms;
    uint64_t kill_wait_ms;
};

/*
 * Whether the job's user exists here (getpwuid of spec.uid; its name must match spec.user
 * when spec.user is set). -1 with err: a job fault (the job cannot run anywhere).
 */
int monitor_check_user(const Spur__Agent__Launch *l, char *err, size_t errlen);

/*
 * Fork the monitor of one attempt (the job dir exists, launch written). The monitor
 * setsid()s, creates the job cgroup, forks the job as the user and waits for it; the
 * caller (spurd) is its parent and reaps it on SIGCHLD. Returns 0 with *pid, or -1 with
 * err (a node fault: fork or cgroup failed). The limits are the Launch's
 * (time_limit_min, kill_wait_s).
 */
int monitor_spawn(const struct monitor_conf *c, int job_dirfd, const Spur__Agent__Launch *l,
                  pid_t *pid, char *err, size_t errlen);
/* monitor_spawn() with the limits given in milliseconds (what the unit tests time). */
int monitor_spawn_limits(const struct monitor_conf *c, int job_dirfd, const Spur__Agent__Launch *l,
                         const struct monitor_limits *lim, pid_t *pid, char *err, size_t errlen);

/*
 * Ask the attempt's monitor to send sig to every process of the job, or (terminate) to
 * end it: SIGCONT + SIGTERM, SIGKILL after kill_wait_s. Returns 0 sent, 1 the monitor is
 * gone (the job ended or the monitor died), -1 error with err.
 */
int monitor_signal(int job_dirfd, int sig, bool terminate, char *err, size_t errlen);

/* Whether the monitor recorded in job_dirfd/monitor still runs (pid + start time). */
bool monitor_alive(int job_dirfd);

/*
 * The monitor died without writing ended (killed): kill what is left of the job through
 * its cgroup (or process group), and write an Ended with signal SIGKILL and the times
 * known. Returns 0 or -1 with err. Nothing is done when ended exists already.
 */
int monitor_abandoned(const struct monitor_conf *c, int job_dirfd, const Spur__Agent__Launch *l,
                      char *err, size_t errlen);

#endif
