/*
 * cgroup.h - confining a job: one cgroup per job attempt, the job's whole tree inside it,
 * signalled and reaped through it.
 *
 * Guarantees:
 *   - A job attempt's processes are all in its cgroup from before the job's exec on (the
 *     job child enters it itself, cgroup_job_enter()), so everything it forks, including
 *     what setsid()s or double-forks away, is found by cgroup_job_signal() and counted
 *     by cgroup_job_populated(). spurd and the monitors stay outside the job cgroups: a
 *     kill of a job never reaches them.
 *   - Layout, cgroup v2 ("unified"): spurd's own cgroup OWN (from /proc/self/cgroup's
 *     "0::" line, below the cgroup2 mount: /sys/fs/cgroup, or /sys/fs/cgroup/unified on
 *     a hybrid host). When controllers must be enabled under a non-root OWN that holds
 *     processes, spurd first moves itself into the leaf OWN/spurd-<node> (cgroup v2
 *     allows no processes in a cgroup that hands controllers down). The jobs live in
 *     OWN/spur-<node>/job_<id>.<attempt>: the node's name in the parent keeps two spurd
 *     on one host (two nodes of one job) from sharing a job cgroup.
 *   - Controllers: cpu, memory and pids are enabled for the jobs where OWN offers them.
 *     memory.max (and memory.swap.max 0) = the job's --mem; cpu.weight = 100 per CPU
 *     allocated (the CPU set itself is not known to the agent: the scheduler counts CPUs,
 *     it does not number them). memory.events oom_kill > 0 is the job's OOM.
 *   - Fallback for --mem on a hybrid host whose v2 hierarchy has no memory controller:
 *     the cgroup v1 memory controller, the job in MEMV1/spur-<node>/job_<id>.<attempt>
 *     (MEMV1 = the v1 memory mount plus spurd's own v1 memory cgroup) with
 *     memory.limit_in_bytes (and memory.memsw.limit_in_bytes where present) = --mem, and
 *     memory.oom_control's oom_kill counter for the OOM. Where v2 is missing altogether,
 *     the v1 memory cgroup is also what tracks and signals the job.
 *   - Signalling: SIGKILL through cgroup.kill where the kernel has it (atomic: forks
 *     racing it are killed too); any other signal, or no cgroup.kill, by freezing the
 *     cgroup (v2), sending to every pid in cgroup.procs and thawing: a frozen process
 *     neither forks nor exits, so no pid signalled can have been reused. The v1-only path
 *     cannot freeze and signals the pids it read (documented in docs/agent-jobs.md).
 *   - Modes: "none" never uses cgroups; "auto" uses what it finds and falls back to no
 *     cgroups with a warning; "v2" fails (cgroup_init() -1: spurd exits 71) without a
 *     usable v2 hierarchy.
 *
 * Mechanics: only open/read/write/mkdir/rmdir on cgroupfs files, no allocation in the
 * functions a forked job child calls (cgroup_job_enter() is async-signal-safe).
 *
 * Memory: struct cgroup_ctx is malloc'd by cgroup_init() and the caller's (cgroup_free());
 * read-only after it. struct cgroup_job is the caller's (often on the monitor's stack);
 * its descriptors are closed by cgroup_job_close().
 */
#ifndef SPUR_CGROUP_H
#define SPUR_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the host offers the jobs, found once at spurd's start. */
struct cgroup_ctx {
    bool v2;                /* jobs get a v2 cgroup below v2_node */
    bool v2_cpu;            /* cpu controller enabled for the jobs */
    bool v2_memory;         /* memory controller enabled for the jobs */
    bool v2_pids;           /* pids controller enabled for the jobs */
    bool v2_kill;           /* cgroup.kill exists (Linux >= 5.14) */
    bool v1_memory;         /* --mem through the v1 memory controller below v1_node */
    char v2_node[PATH_MAX]; /* OWN/spur-<node> */
    char v1_node[PATH_MAX]; /* MEMV1/spur-<node> */
};

/*
 * Find and prepare the hierarchy for node_name's jobs (see the header comment); mode is
 * "auto", "v2" or "none". Returns 0 with *out, or -1 with err ("v2" could not be had).
 * Warnings (an "auto" fallback) are logged, comp=cgroup.
 */
int cgroup_init(const char *mode, const char *node_name, struct cgroup_ctx **out, char *err,
                size_t errlen);
void cgroup_free(struct cgroup_ctx *c);
/* Remove the node's job parents (OWN/spur-<node>, MEMV1/spur-<node>) when they are empty:
 * on a clean stop with no job left. A directory still holding jobs stays. */
void cgroup_remove_node(const struct cgroup_ctx *c);

/*
 * The limits of spurd's own cgroup: *cpus from cpu.max (quota / period, rounded up) and
 * *mem_mb from memory.max (v2), else the v1 cpu and memory controllers; 0 where there is
 * no limit or no cgroup to read.
 */
void cgroup_detect_cpus_mem(uint32_t *cpus, uint64_t *mem_mb);

/* One job attempt's cgroups; -1 where there is none. */
struct cgroup_job {
    int v2_fd;        /* the v2 job cgroup, O_DIRECTORY */
    int v1_fd;        /* the v1 memory job cgroup */
    int v2_parent_fd; /* the node directories, for the rmdir at the end */
    int v1_parent_fd;
    bool v2_kill;
    char name[48]; /* "job_<id>.<attempt>" */
};

/* A cgroup_job with nothing open (every fd -1). */
void cgroup_job_none(struct cgroup_job *j);
/*
 * Create (or open, when left by a monitor that died) the job's cgroups and set the
 * limits: mem_mb (0: none), cpus (the weight). c NULL or without cgroups: nothing, 0.
 * Returns 0, or -1 with err (the node cannot confine jobs: a node fault).
 */
int cgroup_job_create(const struct cgroup_ctx *c, uint64_t job_id, uint32_t attempt, uint32_t cpus,
                      uint64_t mem_mb, struct cgroup_job *j, char *err, size_t errlen);
/* Open the existing cgroups of a job (after its monitor died). 0 (even with none found). */
int cgroup_job_open(const struct cgroup_ctx *c, uint64_t job_id, uint32_t attempt,
                    struct cgroup_job *j);
/* Whether the job has any cgroup to track it by. */
bool cgroup_job_tracked(const struct cgroup_job *j);
/* Move the calling process into the job's cgroups. Async-signal-safe. 0 or -1 (errno). */
int cgroup_job_enter(const struct cgroup_job *j);
/* Send sig to every process of the job. Returns how many were signalled (SIGKILL through
 * cgroup.kill counts 1 when any process was there), or -1 with errno. */
int cgroup_job_signal(const struct cgroup_job *j, int sig);
/* Whether any process is left in the job's cgroup. */
bool cgroup_job_populated(const struct cgroup_job *j);
/* Whether the kernel's OOM killer killed a process of the job. */
bool cgroup_job_oom(const struct cgroup_job *j);
/* Remove the job's cgroups (they must be empty; retried briefly) and close them. */
void cgroup_job_remove(struct cgroup_job *j);
/* Close the descriptors without removing anything. */
void cgroup_job_close(struct cgroup_job *j);

#endif
