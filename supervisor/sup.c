/*
 * sup.c - the supervisor's event loop.
 *
 * What this module guarantees, and how:
 *
 * 1. A dead worker is never reported healthy or ready.
 *    The worker's only link to us is the status pipe: it holds the write end as fd 3 and
 *    nothing else does. We close our copy of the write end right after the fork, and every
 *    process we fork without exec (the health responder) closes it too, because
 *    close-on-exec does not fire on a plain fork. So EOF on the read end means the worker
 *    is gone, whatever ended it. A worker that forked a child which kept fd 3 open is
 *    still caught: SIGCHLD tells us the worker itself exited. Either signal of death first
 *    writes WORKER_DEAD into the shared health page, before logging, reaping or anything
 *    else; the responder also polls the worker's pidfd on every request, so it can answer
 *    "dead" even in the microseconds before we run.
 *
 * 2. A stalled worker is taken out of service, then killed; a frozen replica is not.
 *    Frames carry no meaning for liveness beyond "arrived at time T". The responder
 *    reports "stalled" as soon as T is older than stall_timeout_ms; at kill_timeout_ms we
 *    send SIGABRT (and SIGCONT, so a stopped worker can dump its core), and SIGKILL one
 *    second later. Only silence we saw while we ran ourselves counts: when our 20 ms tick
 *    comes more than PAUSE_MIN_MS late, we were not running (the whole replica stopped, a
 *    VM frozen), the worker most likely was not either, and the pause is excused: T moves
 *    forward by it, in the shared page too (sup_silence_origin()). A worker stopped alone
 *    is still killed on time, since our ticks keep coming.
 *
 * 3. Every exit explains itself, and the code tells the runtime what to do.
 *    0 after a clean SIGTERM/SIGINT shutdown; the worker's own 64, 65, 73 or 78 when it
 *    failed before it ever reported RUNNING (bad command line, corrupt state, unusable or
 *    locked state dir, bad config: a restart cannot help); 70 for every other end of the
 *    worker, a start-up failure with 70 or 71 included. One log line names the cause.
 *
 * 4. PID 1 duties. Every child is reaped: on each SIGCHLD we call waitpid(-1, WNOHANG)
 *    until nothing is left, and recognise the worker and the responder by pid inside that
 *    loop, so coalesced signals cannot hide a death. When we are not PID 1 we become a
 *    child subreaper, so orphans of the worker come to us and not to init. Children start
 *    with the signal mask and dispositions we inherited, and the worker inherits only
 *    descriptors 0, 1, 2 and 3, plus --supervisor-pid with our pid (the worker compares
 *    its parent with it, never with 1, since we are PID 1 in a container). On the way out
 *    the worker's process group, the responder and any remaining child are killed and
 *    reaped before we exit.
 *
 * 5. The health responder is stateless and expendable: if it dies it is forked again
 *    with exponential back-off (100 ms doubling to 10 s, reset after 30 s of life). The
 *    listening socket stays open in the supervisor meanwhile, so probes queue rather than
 *    being refused. It runs in a process group of its own and ignores SIGTERM, SIGINT and
 *    SIGHUP, so a signal meant for the replica (a terminal's Ctrl-C, `timeout`, a kill of
 *    the whole group) cannot take it away during the shutdown it must report.
 */
#include "sup.h"

#include "frame.h"
#include "health.h"
#include "log.h"
#include "notify.h"
#include "responder.h"
#include "status.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 20
#define ABORT_TO_KILL_MS 1000
#define RESPAWN_MIN_MS 100
#define RESPAWN_MAX_MS 10000
#define RESPAWN_RESET_MS 30000
#define FINAL_REAP_MS 2000
#define EOF_EXIT_WAIT_MS 100
/*
 * A tick this late (TICK_MS is the period) means the supervisor itself was not running:
 * stopped, or the whole host frozen. Well above any scheduling delay of a busy node, well
 * below the smallest useful stall timeout.
 */
#define PAUSE_MIN_MS HEALTH_PAUSE_MIN_MS

static const int handled_signals[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
#define NSIGS (sizeof(handled_signals) / sizeof(handled_signals[0]))

enum death_kind {
    DEATH_NONE,
    DEATH_EXIT,          /* the worker exited or was killed by someone else */
    DEATH_PIPE_CLOSED,   /* fd 3 closed by a live worker; we killed it */
    DEATH_STALL,         /* frames stopped; we killed it */
    DEATH_PROTOCOL,      /* unreadable status stream; we killed it */
    DEATH_GRACE,         /* did not stop within shutdown_grace_ms; we killed it */
};

/*
 * The supervisor's whole state: one instance, on sup_run()'s stack, for the life of the
 * replica. Ownership, and what becomes of each resource when sup_run() returns:
 *
 *   - The event loop (base) and every event in it (ev_*) are ours; teardown() frees the
 *     events, then the base. No event outlives sup_run().
 *   - status_rfd, the read end of the status pipe, is ours alone (the write end went to
 *     the worker as fd 3 and our copy was closed right after the fork). It stays open
 *     after EOF (only its event is deleted) and teardown() closes it.
 *   - worker_pidfd is ours; the responder gets a copy at its fork (to poll the worker's
 *     death itself). teardown() closes ours.
 *   - health_fd, the health listener, is ours and stays open while no responder runs, so
 *     probes queue during a respawn; each responder gets a copy at its fork. teardown()
 *     closes ours.
 *   - worker_pid is our child and leads its own process group; resp_pid is our child in
 *     a group of its own. finish() -> reap_everything() SIGKILLs the worker's group, the
 *     responder and any other child left (found through /proc), and reaps them all
 *     before sup_run() returns; the paths that return before the loop runs do the same
 *     for what they had started.
 *   - shm, the shared health page, is an anonymous shared mapping of ours that every
 *     responder inherits; only we write it. It is not unmapped: it lives until our exit,
 *     after the responder that reads it has been killed.
 *   - fr, the status frame reader, owns its buffer; teardown() frees it.
 *   - notify holds the systemd notification socket (when NOTIFY_SOCKET was set);
 *     teardown() closes it, after finish() (when the loop ran) sent the last STATUS=.
 *   - opt and cfg belong to the caller, who keeps them for the whole of sup_run().
 *   - The signal dispositions and mask we inherited (orig_*) are copies, put back in
 *     every child before it runs (child_restore_signals()), never in ourselves.
 * Everything else is plain state.
 */
struct sup {
    const struct sup_options *opt; /* the caller's */
    const struct cfg *cfg;         /* the caller's: opt->cfg */
    struct event_base *base;       /* owned; freed by teardown() */
    struct event *ev_status;       /* owned: status_rfd readable */
    struct event *ev_sig[NSIGS];   /* owned: one per handled signal */
    struct event *ev_tick;         /* owned: every TICK_MS, stall and shutdown clocks */
    struct event *ev_watchdog;     /* owned: systemd watchdog, when WATCHDOG_USEC is set */
    struct event *ev_respawn;      /* owned: the responder's back-off timer */

    struct health_shm *shm;  /* owned mapping, shared with the responder; see above */
    struct health_inputs hi; /* our copy of what the page says */
    struct notifier notify;  /* owns the notification socket */
    sigset_t orig_mask;
    struct sigaction orig_act[NSIGS];
    struct sigaction orig_pipe;

    /* worker */
    int status_rfd;          /* owned: the status pipe's read end, -1 before the fork */
    struct frame_reader fr;  /* owns its buffer */
    pid_t worker_pid;        /* our child, leader of its process group; 0 before the fork */
    int worker_pidfd;        /* owned, -1 when pidfd_open() is not available */
    uint64_t worker_start_ns;
    bool worker_exited;
    int worker_wstatus;
    bool reported_running;
    uint64_t extend_sent_ns; /* last EXTEND_TIMEOUT_USEC, while STARTING */
    bool have_frame;
    struct worker_status last;
    uint64_t bad_frames;
    enum death_kind death;
    uint64_t stalled_ms;

    /* stall handling */
    uint64_t last_run_ns; /* the last time we know we ran: a tick or a frame read */
    bool stall_logged;
    bool abort_sent;
    uint64_t abort_ns;
    bool stall_kill_sent;

    /* shutdown */
    bool stopping;
    int stop_signal;
    uint64_t stop_deadline_ns;

    /* health responder */
    int health_fd;            /* owned: the listener, -1 when health.enabled is false */
    pid_t resp_pid;           /* our child while one runs, else 0 */
    uint32_t resp_backoff_ms;
    uint64_t resp_started_ns;

    bool finished;
    int exit_code;
};

static void finish(struct sup *s, int code, enum log_level level, const char *msg,
                   const char *cause);

/* ---- the shared page ------------------------------------------------------------- */

static void publish(struct sup *s)
{
    health_shm_publish(s->shm, &s->hi);
}

static void mark_dead(struct sup *s)
{
    if (s->hi.worker_state != WORKER_DEAD) {
        s->hi.worker_state = WORKER_DEAD;
        publish(s);
    }
}

/* ---- children --------------------------------------------------------------------- */

/*
 * In a fresh child: put back the signal dispositions and mask we inherited, so that the
 * worker (or the responder) starts as if exec'd by our own parent. Called with every
 * signal blocked, so no handler of ours can run in the child before this.
 */
static void child_restore_signals(struct sup *s)
{
    for (size_t i = 0; i < NSIGS; i++)
        sigaction(handled_signals[i], &s->orig_act[i], NULL);
    sigaction(SIGPIPE, &s->orig_pipe, NULL);
    sigprocmask(SIG_SETMASK, &s->orig_mask, NULL);
}

/*
 * fork() with every signal blocked, so that no handler of ours can run in the child before
 * it puts back the dispositions it inherited; *old gets the mask for the parent to put
 * back after its own bookkeeping. On failure the mask is back already and errno says why.
 */
static pid_t fork_blocked(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, old);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, old, NULL);
        errno = e;
    }
    return pid;
}

static int spawn_worker(struct sup *s)
{
    int pfd[2];
    sigset_t old;

    if (pipe2(pfd, O_CLOEXEC) < 0) {
        log_event(LOG_ERROR, "sup", "cannot create the status pipe", "err=\"%s\"",
                  strerror(errno));
        return -1;
    }
    /*
     * The worker is told our pid so that it can tell, right after PR_SET_PDEATHSIG, whether
     * we died before that took effect: getppid() differs from it then. Comparing with 1
     * would be wrong, because in a container we are PID 1 ourselves.
     */
    char suppid[24];
    snprintf(suppid, sizeof(suppid), "%ld", (long)getpid());
    const char *argv[12];
    int ac = 0;
    argv[ac++] = s->opt->worker_path;
    argv[ac++] = "--status-fd";
    argv[ac++] = "3";
    argv[ac++] = "--supervisor-pid";
    argv[ac++] = suppid;
    if (s->opt->config_path) {
        argv[ac++] = "--config";
        argv[ac++] = s->opt->config_path;
    }
    if (s->opt->state_dir) {
        argv[ac++] = "--state-dir";
        argv[ac++] = s->opt->state_dir;
    }
    argv[ac] = NULL;

    pid_t parent = getpid();
    pid_t pid = fork_blocked(&old);
    if (pid < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        log_event(LOG_ERROR, "sup", "cannot fork the worker", "err=\"%s\"", strerror(e));
        return -1;
    }
    if (pid == 0) {
        /* Child. Only async-signal-safe calls until exec. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent)
            _exit(EXIT_SOFTWARE); /* the supervisor died before we could watch for it */
        if (pfd[1] == 3) {
            fd_set_cloexec(3, 0);
        } else {
            if (dup2(pfd[1], 3) < 0)
                _exit(EXIT_OSERR);
        }
        int keep[] = {3};
        fd_close_all_except(keep, 1);
        child_restore_signals(s);
        execv(argv[0], (char *const *)argv);
        char msg[512];
        int n = snprintf(msg, sizeof(msg),
                         "level=error comp=sup msg=\"cannot exec the worker\" path=\"%s\" "
                         "err=\"%s\"\n",
                         argv[0], strerror(errno));
        if (n > 0)
            write_all(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
        _exit(EXIT_OSERR);
    }
    setpgid(pid, pid); /* also in the parent, so that it holds whichever runs first */
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(pfd[1]);
    s->status_rfd = pfd[0];
    fd_set_nonblock(s->status_rfd);
    s->worker_pid = pid;
    s->worker_start_ns = mono_ns();
    s->worker_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (s->worker_pidfd >= 0)
        fd_set_cloexec(s->worker_pidfd, 1);
    s->hi.worker_state = WORKER_NOFRAME;
    s->hi.last_frame_ns = s->worker_start_ns;
    s->last_run_ns = s->worker_start_ns;
    publish(s);
    log_event(LOG_INFO, "sup", "worker started", "pid=%d path=%s", (int)pid,
              log_q(s->opt->worker_path));
    return 0;
}

static void spawn_responder(struct sup *s)
{
    sigset_t old;
    if (s->health_fd < 0 || s->finished)
        return;
    pid_t parent = getpid();
    pid_t pid = fork_blocked(&old);
    if (pid < 0) {
        log_event(LOG_ERROR, "sup", "cannot fork the health responder", "err=\"%s\"",
                  strerror(errno));
        return;
    }
    if (pid == 0) {
        int keep[] = {s->health_fd, s->worker_pidfd};
        fd_close_all_except(keep, s->worker_pidfd >= 0 ? 2 : 1);
        child_restore_signals(s);
        /*
         * The responder must outlive every signal meant for the replica, because during a
         * shutdown it is what answers "stopping". A terminal's Ctrl-C, `timeout` or a
         * kill(0, sig) reaches the whole process group, and systemd may signal every
         * process of the unit: so it gets a process group of its own and ignores the
         * stop signals. It still cannot outlive us: PR_SET_PDEATHSIG and its parent check
         * end it when we go, and we SIGKILL it on the way out. SIGTTOU is ignored so that
         * a log line to a terminal from this background group is written, not a stop.
         */
        setpgid(0, 0);
        signal(SIGPIPE, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGTTOU, SIG_IGN);
        struct responder_config rc = {
            .listen_fd = s->health_fd,
            .worker_pidfd = s->worker_pidfd,
            .shm = s->shm,
            .parent_pid = parent,
            .max_connections = s->cfg->health.max_connections,
            .idle_timeout_ms = s->cfg->health.idle_timeout_ms,
            .header_timeout_ms = s->cfg->health.idle_timeout_ms < 5000
                                     ? s->cfg->health.idle_timeout_ms
                                     : 5000,
        };
        responder_main(&rc);
    }
    setpgid(pid, pid); /* as for the worker: whichever of the two runs first */
    sigprocmask(SIG_SETMASK, &old, NULL);
    s->resp_pid = pid;
    s->resp_started_ns = mono_ns();
    log_event(LOG_DEBUG, "sup", "health responder started", "pid=%d", (int)pid);
}

/* SIGKILL every remaining child of ours, found through /proc (escapees of the group). */
static void kill_remaining_children(void)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return;
    pid_t me = getpid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[300], buf[512];
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        /* "pid (comm) state ppid ..." - comm may hold spaces and ')', so find the last ')'. */
        char *rp = strrchr(buf, ')');
        if (rp == NULL)
            continue;
        char state;
        int ppid;
        if (sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == me && state != 'Z')
            kill((pid_t)atoi(e->d_name), SIGKILL);
    }
    closedir(d);
}

/* Kill what is left of the worker's group and the responder, and reap every child. */
static void reap_everything(struct sup *s)
{
    if (s->worker_pid > 0)
        kill(-s->worker_pid, SIGKILL);
    if (s->resp_pid > 0)
        kill(s->resp_pid, SIGKILL);
    uint64_t start = mono_ns();
    bool swept = false;
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            if (p == s->worker_pid && !s->worker_exited) {
                s->worker_exited = true;
                s->worker_wstatus = st;
            }
            if (p == s->resp_pid)
                s->resp_pid = 0;
            continue;
        }
        if (p < 0 && errno == EINTR)
            continue;
        if (p < 0)
            break; /* ECHILD: nothing left */
        uint64_t waited_ms = (mono_ns() - start) / 1000000ull;
        if (waited_ms >= FINAL_REAP_MS) {
            log_event(LOG_WARN, "sup", "children still alive after kill; exiting anyway",
                      "waited_ms=%llu", (unsigned long long)waited_ms);
            break;
        }
        if (!swept && waited_ms >= 20) {
            kill_remaining_children();
            swept = true;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* ---- the end ---------------------------------------------------------------------- */

static void finish(struct sup *s, int code, enum log_level level, const char *msg,
                   const char *cause)
{
    if (s->finished)
        return;
    s->finished = true;
    mark_dead(s);
    if (code != 0 && s->cfg->supervisor.exit_linger_ms > 0) {
        /*
         * Leave the responder answering "dead" or "stalled" for a while, so a person or a
         * test can see why this replica went down; the worker's group goes first.
         */
        if (s->worker_pid > 0)
            kill(-s->worker_pid, SIGKILL);
        uint64_t until = mono_ns() + (uint64_t)s->cfg->supervisor.exit_linger_ms * 1000000ull;
        while (mono_ns() < until) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
            pid_t p;
            while ((p = waitpid(-1, NULL, WNOHANG)) > 0)
                if (p == s->resp_pid)
                    s->resp_pid = 0;
        }
    }
    reap_everything(s);
    if (s->stopping)
        notify_send(&s->notify, "STOPPING=1");
    char status[640];
    snprintf(status, sizeof(status), "STATUS=%s: %s", msg, cause);
    notify_send(&s->notify, status);
    s->exit_code = code;
    char qcause[400];
    log_event(level, "sup", msg, "exit=%d cause=%s worker_pid=%d uptime_ms=%llu", code,
              log_quote(qcause, sizeof(qcause), cause), (int)s->worker_pid,
              (unsigned long long)((mono_ns() - s->worker_start_ns) / 1000000ull));
    event_base_loopbreak(s->base);
}

/* The worker has exited (reaped, status in s->worker_wstatus): decide the exit code. */
static void worker_ended(struct sup *s)
{
    char desc[160], cause[320];
    int st = s->worker_wstatus;

    mark_dead(s);
    describe_wait_status(st, desc, sizeof(desc));
    if (s->stopping) {
        bool clean = (WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
                     (WIFSIGNALED(st) && WTERMSIG(st) == s->stop_signal);
        if (s->death == DEATH_GRACE) {
            snprintf(cause, sizeof(cause),
                     "worker did not stop within shutdown_grace_ms (%u ms); %s",
                     s->cfg->supervisor.shutdown_grace_ms, desc);
            finish(s, EXIT_SOFTWARE, LOG_ERROR, "worker killed after the grace period", cause);
        } else if (clean) {
            snprintf(cause, sizeof(cause), "shutdown by %s; worker %s",
                     signal_name(s->stop_signal), desc);
            finish(s, 0, LOG_INFO, "stopped", cause);
        } else {
            snprintf(cause, sizeof(cause), "worker crashed during shutdown: %s", desc);
            finish(s, EXIT_SOFTWARE, LOG_ERROR, "worker failed during shutdown", cause);
        }
        return;
    }
    switch (s->death) {
    case DEATH_STALL:
        snprintf(cause, sizeof(cause), "worker stalled: no status frame for %llu ms; %s",
                 (unsigned long long)s->stalled_ms, desc);
        finish(s, EXIT_SOFTWARE, LOG_ERROR, "worker stalled; killed", cause);
        return;
    case DEATH_PIPE_CLOSED:
        snprintf(cause, sizeof(cause), "worker closed its status pipe while running; %s", desc);
        finish(s, EXIT_SOFTWARE, LOG_ERROR, "worker closed its status pipe; killed", cause);
        return;
    case DEATH_PROTOCOL:
        snprintf(cause, sizeof(cause), "worker broke the status protocol; %s", desc);
        finish(s, EXIT_SOFTWARE, LOG_ERROR, "worker status stream unreadable; killed", cause);
        return;
    default:
        break;
    }
    if (!s->reported_running && WIFEXITED(st) && sup_startup_code_is_final(WEXITSTATUS(st))) {
        snprintf(cause, sizeof(cause),
                 "worker failed during start-up: %s; passing the code through (a restart "
                 "would not help)",
                 desc);
        finish(s, WEXITSTATUS(st), LOG_ERROR, "worker failed at start-up", cause);
        return;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        snprintf(cause, sizeof(cause), "worker %s without being asked to stop", desc);
    else if (!s->reported_running && WIFEXITED(st))
        snprintf(cause, sizeof(cause),
                 "worker failed during start-up: %s; a restart may help, so exiting 70", desc);
    else
        snprintf(cause, sizeof(cause), "worker %s", desc);
    finish(s, EXIT_SOFTWARE, LOG_ERROR, "worker died", cause);
}

/* Kill the worker (and its group) because of kind; the reap finishes the story. */
static void kill_worker(struct sup *s, enum death_kind kind)
{
    if (s->death == DEATH_NONE)
        s->death = kind;
    mark_dead(s);
    kill(-s->worker_pid, SIGKILL);
    kill(s->worker_pid, SIGKILL);
}

/* Reap the worker synchronously after it has been killed or was seen leaving. */
static void reap_worker_now(struct sup *s)
{
    while (!s->worker_exited) {
        int st;
        pid_t p = waitpid(s->worker_pid, &st, 0);
        if (p == s->worker_pid) {
            s->worker_exited = true;
            s->worker_wstatus = st;
        } else if (p < 0 && errno != EINTR) {
            /* Already reaped elsewhere, which would be a bug; report it honestly. */
            s->worker_exited = true;
            s->worker_wstatus = 0x7f00; /* "exited with code 127" */
            log_event(LOG_ERROR, "sup", "worker could not be reaped", "err=\"%s\"",
                      strerror(errno));
        }
    }
}

/* ---- status pipe ------------------------------------------------------------------ */

static void notify_status(struct sup *s)
{
    char buf[200];
    const struct worker_status *w = &s->last;
    snprintf(buf, sizeof(buf), "STATUS=%s node=%u role=%s term=%llu leader=%u commit=%llu",
             status_phase_name(w->phase), w->node_id, status_role_name(w->role),
             (unsigned long long)w->term, w->leader_id, (unsigned long long)w->commit_index);
    notify_send(&s->notify, buf);
}

/*
 * Which start-up failures are passed through as our own exit code: exactly the four of
 * DESIGN.md section 4, where a restart cannot help: a bad command line (64), state on disk
 * corrupt beyond a torn tail (65), a state directory that cannot be created or is locked
 * (73) and an invalid configuration (78). They are also exactly the codes the shipped
 * systemd unit (RestartPreventExitStatus=) and init script refuse to restart on, so a
 * code outside this set would only be an undocumented exit status that gets restarted
 * anyway. Everything else, 70 (internal error) and 71 (an OS failure such as a port still
 * in use or fork failing) among them, may be cured by a restart, and becomes 70.
 */
int sup_startup_code_is_final(int code)
{
    switch (code) {
    case EXIT_USAGE:
    case EXIT_DATAERR:
    case EXIT_CANTCREAT:
    case EXIT_CONFIG:
        return 1;
    default:
        return 0;
    }
}

/*
 * The stall clock counts only time during which we ran ourselves. "seen" is the last
 * moment we know we were running (a tick or a frame read); a gap from there to now longer
 * than pause_ns means we were not scheduled at all (SIGSTOP of the whole replica, a VM
 * freeze), and whatever the worker did meanwhile we cannot hold against it: it was most
 * likely frozen too. The gap is excused in full, so the silence that still counts is the
 * part from the last frame to "seen", which we did witness.
 */
uint64_t sup_silence_origin(uint64_t last_frame_ns, uint64_t last_run_ns, uint64_t now_ns,
                            uint64_t pause_ns, uint64_t *paused_ns)
{
    uint64_t seen = last_run_ns > last_frame_ns ? last_run_ns : last_frame_ns;
    *paused_ns = 0;
    if (now_ns <= seen || now_ns - seen <= pause_ns)
        return last_frame_ns;
    *paused_ns = now_ns - seen;
    return last_frame_ns + *paused_ns;
}

static void on_frame(struct sup *s, const struct worker_status *w, uint64_t now)
{
    bool changed = !s->have_frame || w->phase != s->last.phase || w->role != s->last.role ||
                   w->leader_id != s->last.leader_id || w->term != s->last.term;
    bool was_stalled = s->stall_logged;

    s->hi.worker_state = WORKER_ALIVE;
    s->hi.last_frame_ns = now;
    s->last_run_ns = now;
    s->hi.phase = (uint32_t)w->phase;
    s->hi.leader_id = w->leader_id;
    publish(s);

    s->last = *w;
    s->have_frame = true;
    if (was_stalled && !s->abort_sent) {
        s->stall_logged = false;
        log_event(LOG_WARN, "sup", "worker resumed sending status frames", NULL);
    }
    if (changed) {
        log_event(LOG_INFO, "sup", "worker status", "phase=%s worker_node=%u role=%s term=%llu leader=%u",
                  status_phase_name(w->phase), w->node_id, status_role_name(w->role),
                  (unsigned long long)w->term, w->leader_id);
        notify_status(s);
    }
    if (w->phase == STATUS_PHASE_RUNNING && !s->reported_running) {
        s->reported_running = true;
        notify_send(&s->notify, "READY=1");
    } else if (w->phase == STATUS_PHASE_STARTING && !s->reported_running &&
               now - s->extend_sent_ns >= 1000000000ull) {
        /*
         * A long log replay keeps sending STARTING frames; each second of them buys
         * systemd's start timeout another stall period, so TimeoutStartSec can stay short
         * while a live replay is never killed for being slow.
         */
        char ext[64];
        s->extend_sent_ns = now;
        snprintf(ext, sizeof(ext), "EXTEND_TIMEOUT_USEC=%llu",
                 (unsigned long long)s->cfg->supervisor.stall_timeout_ms * 2000ull);
        notify_send(&s->notify, ext);
    }
}

static void on_pipe_eof(struct sup *s)
{
    mark_dead(s);
    event_del(s->ev_status);
    if (!s->worker_exited) {
        /*
         * EOF comes when the worker's descriptors are closed, a moment before it becomes a
         * zombie. Give it that moment (the pidfd turns readable), so that an exit code can
         * be read; a worker still alive after it closed fd 3 on purpose and gets killed.
         */
        bool exiting = false;
        if (s->worker_pidfd >= 0) {
            struct pollfd pfd = {.fd = s->worker_pidfd, .events = POLLIN};
            int r;
            do {
                r = poll(&pfd, 1, EOF_EXIT_WAIT_MS);
            } while (r < 0 && errno == EINTR);
            exiting = r == 1;
        } else {
            for (int i = 0; i < EOF_EXIT_WAIT_MS && !exiting; i++) {
                int st;
                pid_t p = waitpid(s->worker_pid, &st, WNOHANG);
                if (p == s->worker_pid) {
                    s->worker_exited = true;
                    s->worker_wstatus = st;
                    exiting = true;
                } else {
                    struct timespec ts = {0, 1000000};
                    nanosleep(&ts, NULL);
                }
            }
        }
        if (!exiting && !s->stopping) {
            log_event(LOG_ERROR, "sup", "worker closed its status pipe but is still running",
                      "pid=%d", (int)s->worker_pid);
            kill_worker(s, DEATH_PIPE_CLOSED);
        } else if (!exiting && s->stopping) {
            /* During shutdown a closed pipe is expected; the grace timer still applies. */
            return;
        }
        reap_worker_now(s);
    }
    worker_ended(s);
}

static void on_status_readable(evutil_socket_t fd, short what, void *arg)
{
    struct sup *s = arg;
    uint64_t now = mono_ns();
    (void)what;
    for (;;) {
        uint8_t *p;
        size_t space;
        if (frame_reader_space(&s->fr, 256, &p, &space) != 0) {
            log_event(LOG_ERROR, "sup", "worker sent a status frame over the limit",
                      "len=%zu max=%d", s->fr.last_len, STATUS_MAX_PAYLOAD);
            event_del(s->ev_status);
            kill_worker(s, DEATH_PROTOCOL);
            reap_worker_now(s);
            worker_ended(s);
            return;
        }
        ssize_t n = read(fd, p, space);
        if (n > 0) {
            frame_reader_commit(&s->fr, (size_t)n);
            const uint8_t *payload;
            size_t len;
            enum frame_status fs;
            struct worker_status w;
            bool got = false;
            while ((fs = frame_reader_next(&s->fr, &payload, &len)) == FRAME_READY) {
                if (status_decode(payload, len, &w) == 0) {
                    got = true;
                } else {
                    s->bad_frames++;
                    if (s->bad_frames == 1 || s->bad_frames % 100 == 0)
                        log_event(LOG_WARN, "sup", "undecodable status frame ignored",
                                  "len=%zu count=%llu", len, (unsigned long long)s->bad_frames);
                }
            }
            if (got)
                on_frame(s, &w, now);
            if (fs == FRAME_TOO_BIG) {
                log_event(LOG_ERROR, "sup", "worker sent a status frame over the limit",
                          "len=%zu max=%d", len, STATUS_MAX_PAYLOAD);
                event_del(s->ev_status);
                kill_worker(s, DEATH_PROTOCOL);
                reap_worker_now(s);
                worker_ended(s);
                return;
            }
            continue;
        }
        if (n == 0) {
            on_pipe_eof(s);
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        log_event(LOG_ERROR, "sup", "status pipe read failed", "err=\"%s\"", strerror(errno));
        on_pipe_eof(s);
        return;
    }
}

/* ---- signals ---------------------------------------------------------------------- */

static void on_sigchld(struct sup *s)
{
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p < 0 && errno == EINTR)
            continue;
        if (p <= 0)
            break;
        if (p == s->worker_pid && !s->worker_exited) {
            mark_dead(s);
            s->worker_exited = true;
            s->worker_wstatus = st;
        } else if (p == s->resp_pid) {
            char desc[160];
            describe_wait_status(st, desc, sizeof(desc));
            s->resp_pid = 0;
            if (s->finished)
                continue;
            uint64_t lived_ms = (mono_ns() - s->resp_started_ns) / 1000000ull;
            if (lived_ms >= RESPAWN_RESET_MS)
                s->resp_backoff_ms = RESPAWN_MIN_MS;
            log_event(LOG_WARN, "sup", "health responder died; respawning",
                      "status=\"%s\" delay_ms=%u", desc, s->resp_backoff_ms);
            struct timeval tv = {s->resp_backoff_ms / 1000, (s->resp_backoff_ms % 1000) * 1000};
            evtimer_add(s->ev_respawn, &tv);
            s->resp_backoff_ms *= 2;
            if (s->resp_backoff_ms > RESPAWN_MAX_MS)
                s->resp_backoff_ms = RESPAWN_MAX_MS;
        } else {
            log_event(LOG_DEBUG, "sup", "reaped an orphan", "pid=%d", (int)p);
        }
    }
    if (s->worker_exited && !s->finished)
        worker_ended(s);
}

static void begin_shutdown(struct sup *s, int sig)
{
    if (s->stopping) {
        log_event(LOG_INFO, "sup", "already shutting down; signal forwarded again", "signal=%s",
                  signal_name(sig));
        if (!s->worker_exited)
            kill(s->worker_pid, sig);
        return;
    }
    /* Readiness off before anything else: the endpoint must drop us first. */
    s->stopping = true;
    s->stop_signal = sig;
    s->hi.stopping = 1;
    publish(s);
    notify_send(&s->notify, "STOPPING=1");
    s->stop_deadline_ns = mono_ns() + (uint64_t)s->cfg->supervisor.shutdown_grace_ms * 1000000ull;
    log_event(LOG_INFO, "sup", "shutting down", "signal=%s grace_ms=%u", signal_name(sig),
              s->cfg->supervisor.shutdown_grace_ms);
    if (!s->worker_exited)
        kill(s->worker_pid, sig);
    if (s->cfg->supervisor.shutdown_grace_ms == 0 && !s->worker_exited) {
        s->death = DEATH_GRACE;
        kill_worker(s, DEATH_GRACE);
    }
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct sup *s = arg;
    (void)what;
    if (s->finished)
        return;
    switch (sig) {
    case SIGCHLD:
        on_sigchld(s);
        break;
    case SIGTERM:
    case SIGINT:
        begin_shutdown(s, (int)sig);
        break;
    default:
        if (!s->worker_exited) {
            log_event(LOG_INFO, "sup", "signal forwarded to the worker", "signal=%s",
                      signal_name((int)sig));
            kill(s->worker_pid, (int)sig);
        }
        break;
    }
}

/* ---- timers ----------------------------------------------------------------------- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct sup *s = arg;
    (void)fd;
    (void)what;
    if (s->finished || s->worker_exited)
        return;
    uint64_t now = mono_ns();
    const struct cfg *c = s->cfg;

    /*
     * Were we frozen ourselves? Then so, most likely, was the worker: move every clock
     * that measures the worker forward by the pause, in the shared page too, so neither we
     * nor the responder take the frozen time for a stall (see sup_silence_origin()).
     */
    uint64_t paused_ns;
    uint64_t origin = sup_silence_origin(s->hi.last_frame_ns, s->last_run_ns, now,
                                         (uint64_t)PAUSE_MIN_MS * 1000000ull, &paused_ns);
    s->last_run_ns = now;
    if (paused_ns > 0) {
        s->hi.last_frame_ns = origin;
        publish(s);
        if (s->stopping)
            s->stop_deadline_ns += paused_ns; /* the grace period is the worker's time too */
        if (s->abort_sent)
            s->abort_ns += paused_ns;
        log_event(LOG_WARN, "sup", "supervisor was not running; the pause does not count "
                  "against the worker", "paused_ms=%llu silence_ms=%llu",
                  (unsigned long long)(paused_ns / 1000000ull),
                  (unsigned long long)((now - origin) / 1000000ull));
    }
    uint64_t since_ms = (now - s->hi.last_frame_ns) / 1000000ull;

    if (s->stopping) {
        if (now >= s->stop_deadline_ns && s->death != DEATH_GRACE) {
            log_event(LOG_WARN, "sup", "worker did not stop within the grace period; killing it",
                      "grace_ms=%u", c->supervisor.shutdown_grace_ms);
            s->death = DEATH_GRACE;
            kill_worker(s, DEATH_GRACE);
        }
        return;
    }
    if (since_ms >= c->supervisor.stall_timeout_ms && !s->stall_logged) {
        s->stall_logged = true;
        log_event(LOG_WARN, "sup", "worker stalled: no status frame", "ms=%llu stall_timeout_ms=%u",
                  (unsigned long long)since_ms, c->supervisor.stall_timeout_ms);
        notify_send(&s->notify, "STATUS=worker stalled");
    }
    if (since_ms >= c->supervisor.kill_timeout_ms && !s->abort_sent) {
        s->abort_sent = true;
        s->abort_ns = now;
        s->stalled_ms = since_ms;
        s->death = DEATH_STALL;
        s->hi.stall_latched = 1;
        publish(s);
        log_event(LOG_ERROR, "sup", "worker stalled past kill_timeout_ms; sending SIGABRT",
                  "ms=%llu kill_timeout_ms=%u pid=%d", (unsigned long long)since_ms,
                  c->supervisor.kill_timeout_ms, (int)s->worker_pid);
        kill(s->worker_pid, SIGABRT);
        kill(s->worker_pid, SIGCONT); /* a stopped worker must run to dump its core */
    }
    if (s->abort_sent && !s->stall_kill_sent &&
        now - s->abort_ns >= (uint64_t)ABORT_TO_KILL_MS * 1000000ull) {
        s->stall_kill_sent = true;
        log_event(LOG_ERROR, "sup", "worker still alive a second after SIGABRT; sending SIGKILL",
                  "pid=%d", (int)s->worker_pid);
        kill_worker(s, DEATH_STALL);
    }
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    struct sup *s = arg;
    (void)fd;
    (void)what;
    if (s->finished || s->worker_exited || s->hi.worker_state == WORKER_DEAD)
        return;
    uint64_t since_ms = (mono_ns() - s->hi.last_frame_ns) / 1000000ull;
    /* Fed only while frames are fresh: a stalled worker lets systemd's watchdog fire. */
    if (s->hi.worker_state == WORKER_ALIVE && since_ms < s->cfg->supervisor.stall_timeout_ms)
        notify_send(&s->notify, "WATCHDOG=1");
}

static void on_respawn(evutil_socket_t fd, short what, void *arg)
{
    struct sup *s = arg;
    (void)fd;
    (void)what;
    if (s->resp_pid == 0)
        spawn_responder(s);
}

/* ---- set-up ----------------------------------------------------------------------- */

static int setup_events(struct sup *s)
{
    struct event_config *ec = event_config_new();
    if (ec == NULL)
        return -1;
    /* One thread, no locks; epoll is the backend on Linux. */
    event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
    s->base = event_base_new_with_config(ec);
    event_config_free(ec);
    if (s->base == NULL)
        return -1;
    for (size_t i = 0; i < NSIGS; i++) {
        s->ev_sig[i] = evsignal_new(s->base, handled_signals[i], on_signal, s);
        if (s->ev_sig[i] == NULL || evsignal_add(s->ev_sig[i], NULL) < 0)
            return -1;
    }
    s->ev_tick = event_new(s->base, -1, EV_PERSIST, on_tick, s);
    s->ev_respawn = evtimer_new(s->base, on_respawn, s);
    if (s->ev_tick == NULL || s->ev_respawn == NULL)
        return -1;
    struct timeval tick = {0, TICK_MS * 1000};
    event_add(s->ev_tick, &tick);
    uint64_t wd = notify_watchdog_usec(&s->notify);
    if (wd > 0) {
        s->ev_watchdog = event_new(s->base, -1, EV_PERSIST, on_watchdog, s);
        if (s->ev_watchdog == NULL)
            return -1;
        uint64_t half = wd / 2;
        struct timeval tv = {(time_t)(half / 1000000ull), (suseconds_t)(half % 1000000ull)};
        event_add(s->ev_watchdog, &tv);
    }
    return 0;
}

static void save_signal_state(struct sup *s)
{
    sigprocmask(SIG_SETMASK, NULL, &s->orig_mask);
    for (size_t i = 0; i < NSIGS; i++)
        sigaction(handled_signals[i], NULL, &s->orig_act[i]);
    sigaction(SIGPIPE, NULL, &s->orig_pipe);
    signal(SIGPIPE, SIG_IGN);
    /* Our handlers must run: unblock what we handle, whatever mask we inherited. */
    sigset_t ours;
    sigemptyset(&ours);
    for (size_t i = 0; i < NSIGS; i++)
        sigaddset(&ours, handled_signals[i]);
    sigprocmask(SIG_UNBLOCK, &ours, NULL);
}

/* Release what sup_run() set up; every exit path of sup_run() goes through here. */
static void teardown(struct sup *s)
{
    if (s->ev_status)
        event_free(s->ev_status);
    for (size_t i = 0; i < NSIGS; i++)
        if (s->ev_sig[i])
            event_free(s->ev_sig[i]);
    if (s->ev_tick)
        event_free(s->ev_tick);
    if (s->ev_watchdog)
        event_free(s->ev_watchdog);
    if (s->ev_respawn)
        event_free(s->ev_respawn);
    if (s->base)
        event_base_free(s->base);
    if (s->status_rfd >= 0)
        close(s->status_rfd);
    if (s->worker_pidfd >= 0)
        close(s->worker_pidfd);
    if (s->health_fd >= 0)
        close(s->health_fd);
    notify_close(&s->notify);
    frame_reader_free(&s->fr);
    s->ev_status = s->ev_tick = s->ev_watchdog = s->ev_respawn = NULL;
    s->base = NULL;
}

int sup_run(const struct sup_options *opt)
{
    struct sup s;
    char why[256];

    memset(&s, 0, sizeof(s));
    s.opt = opt;
    s.cfg = opt->cfg;
    s.status_rfd = -1;
    s.worker_pidfd = -1;
    s.health_fd = -1;
    s.resp_backoff_ms = RESPAWN_MIN_MS;
    frame_reader_init(&s.fr, STATUS_MAX_PAYLOAD);
    notify_init(&s.notify);
    save_signal_state(&s);

    if (getpid() == 1) {
        log_event(LOG_INFO, "sup", "running as PID 1", NULL);
    } else if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
        log_event(LOG_WARN, "sup", "cannot become a child subreaper", "err=\"%s\"",
                  strerror(errno));
    }

    s.hi.stall_ns = (uint64_t)s.cfg->supervisor.stall_timeout_ms * 1000000ull;
    s.shm = health_shm_create();
    if (s.shm == NULL) {
        log_event(LOG_ERROR, "sup", "cannot map the shared health page; exiting 71",
                  "err=\"%s\"", strerror(errno));
        teardown(&s);
        return EXIT_OSERR;
    }
    publish(&s);

    if (s.cfg->health.enabled) {
        s.health_fd = responder_listen(s.cfg->health.bind, s.cfg->health.port, why, sizeof(why));
        if (s.health_fd < 0) {
            log_event(LOG_ERROR, "sup", "cannot open the health listener; exiting 71",
                      "addr=%s", log_q(why));
            teardown(&s);
            return EXIT_OSERR;
        }
        log_event(LOG_INFO, "sup", "health listener open", "bind=%s port=%u",
                  s.cfg->health.bind, s.cfg->health.port);
    } else {
        log_event(LOG_INFO, "sup", "health listener disabled (health.enabled: false)", NULL);
    }

    if (setup_events(&s) != 0) {
        log_event(LOG_ERROR, "sup", "cannot set up the event loop; exiting 71", NULL);
        teardown(&s);
        return EXIT_OSERR;
    }
    if (spawn_worker(&s) != 0) {
        log_event(LOG_ERROR, "sup", "cannot start the worker; exiting 71", NULL);
        teardown(&s);
        return EXIT_OSERR;
    }
    s.ev_status = event_new(s.base, s.status_rfd, EV_READ | EV_PERSIST, on_status_readable, &s);
    if (s.ev_status == NULL || event_add(s.ev_status, NULL) < 0) {
        log_event(LOG_ERROR, "sup", "cannot watch the status pipe; exiting 71", NULL);
        kill_worker(&s, DEATH_PROTOCOL);
        reap_everything(&s);
        teardown(&s);
        return EXIT_OSERR;
    }
    spawn_responder(&s);

    event_base_dispatch(s.base);

    if (!s.finished) {
        /* The loop ran dry, which it cannot while the worker is watched; be explicit. */
        finish(&s, EXIT_SOFTWARE, LOG_ERROR, "event loop ended unexpectedly", "internal");
    }
    teardown(&s);
    return s.exit_code;
}
