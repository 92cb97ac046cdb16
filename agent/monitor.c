/*
 * monitor.c - the per-job monitor (monitor.h has the guarantees and the files).
 *
 * Life of a monitor, after spurd's fork():
 *   1. setsid(); signal dispositions back to default, SIGCHLD/SIGTERM/SIGINT/SIGHUP taken
 *      through a signalfd; every inherited descriptor closed but the job directory, the
 *      ready pipe and stderr (the log); stdin and stdout on /dev/null; child subreaper.
 *   2. "monitor" written; the job's cgroup made; "script" written; "ctl" bound and
 *      listened on. A failure here is a node fault: its message goes back through the
 *      ready pipe, the monitor undoes what it made and exits 1 (no "ended").
 *   3. The job forked: the child enters the job cgroup, becomes a session leader, takes
 *      the user's groups, gid and uid, umask 022, the working directory (else /tmp with
 *      Slurm's error line in its stderr), opens stdout/stderr as the user, and execs the
 *      script (through /proc/self/fd/3: the user cannot reach the root-only spool, the
 *      descriptor opened before setuid() can). "job" written, "OK" to the ready pipe.
 *   4. A poll loop over the signalfd, the ctl listener and its clients, with a timeout to
 *      the next deadline: the time limit (SIGCONT, SIGTERM, timed_out) and the kill wait
 *      (SIGKILL). SIGCHLD reaps every child (orphans come back to the subreaper).
 *   5. When the script's process ends: ctl removed (callers now see "gone"), every
 *      process left SIGKILLed until none is (bounded: MON_UNKILLABLE_MS), "ended"
 *      written, the cgroup removed, exit 0.
 *
 * Signalling "the whole job" is cgroup_job_signal() when the job has a cgroup, plus the
 * script's own process and its process group while the script is unreaped (its pid
 * cannot be reused then; this also covers the instant before the child entered the
 * cgroup). Without a cgroup, the descendants of the monitor found in /proc are
 * signalled as well.
 */
#include "monitor.h"

#include "jobenv.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MON_MAX_CLIENTS   8
#define MON_READY_WAIT_MS 10000 /* monitor_spawn() waits this long for the monitor */
#define MON_REPLY_WAIT_MS 2000  /* monitor_signal() waits this long for the answer */
#define MON_UNKILLABLE_MS 60000 /* after this, "ended" is written with processes left */
#define MON_ABANDON_MS    10000 /* monitor_abandoned() waits this long for the cgroup */
#define MON_EXIT_SETUP    1     /* the job's setup failed before exec */
#define MON_EXIT_EXEC     127   /* exec failed (the shell's convention) */

/* The passwd entry of the job's user, copied (getpwuid's buffer is not ours to keep). */
struct mon_user {
    char name[256];
    char home[1024];
    char shell[256];
    uid_t uid;
    gid_t gid;
};

/* One monitor's state; lives on the monitor's stack, owns every descriptor in it. */
struct mon {
    const struct monitor_conf *c;
    const Spur__Agent__Launch *l;
    struct monitor_limits lim;
    int dirfd;
    int sfd;
    int lfd;
    int clients[MON_MAX_CLIENTS];
    struct cgroup_job cg;
    struct mon_user user;
    pid_t child;       /* the script's process; 0 once reaped */
    int status;        /* its wait status */
    uint64_t start_ms; /* wall clock */
    uint64_t term_at;  /* mono ms of the time limit, 0: none */
    uint64_t kill_at;  /* mono ms of the SIGKILL after a SIGTERM, 0: none */
    bool timed_out;
};

/* /proc/PID/stat: state (field 3) and start time (field 22). 0, or -1 (no such process). */
static int proc_stat(pid_t pid, char *state, unsigned long long *start, pid_t *ppid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    char st;
    long pp;
    unsigned long long t;
    /* After "comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt
     * cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime. */
    if (sscanf(p + 1,
               " %c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
               &st, &pp, &t) != 3)
        return -1;
    if (state)
        *state = st;
    if (start)
        *start = t;
    if (ppid)
        *ppid = (pid_t)pp;
    return 0;
}

/* Write content to dirfd/name through name.tmp and rename; fsync both when durable. */
static int write_file(int dirfd, const char *name, const void *data, size_t len, bool durable)
{
    char tmp[64];
    snprintf(tmp, sizeof(tmp), "%s.tmp", name);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    if (write_all(fd, data, len) != 0 || (durable && fsync(fd) != 0)) {
        int saved = errno;
        close(fd);
        unlinkat(dirfd, tmp, 0);
        errno = saved;
        return -1;
    }
    if (close(fd) != 0 || renameat(dirfd, tmp, dirfd, name) != 0)
        return -1;
    if (durable && fsync(dirfd) != 0)
        return -1;
    return 0;
}

static ssize_t read_small(int dirfd, const char *name, char *buf, size_t len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

static int lookup_user(const Spur__Agent__Launch *l, struct mon_user *u, char *err, size_t errlen)
{
    const Spur__Api__JobSpec *s = l->spec;
    if (s == NULL) {
        snprintf(err, errlen, "launch without a job spec");
        return -1;
    }
    errno = 0;
    struct passwd *pw = getpwuid((uid_t)s->uid);
    if (pw == NULL) {
        snprintf(err, errlen, "user %s (uid %" PRIu32 ") does not exist on this node: %s",
                 s->user ? s->user : "", s->uid, errno ? strerror(errno) : "no passwd entry");
        return -1;
    }
    if (s->user && s->user[0] && strcmp(s->user, pw->pw_name) != 0) {
        snprintf(err, errlen, "uid %" PRIu32 " is %s on this node, not %s", s->uid, pw->pw_name,
                 s->user);
        return -1;
    }
    if (u != NULL) {
        snprintf(u->name, sizeof(u->name), "%s", pw->pw_name);
        snprintf(u->home, sizeof(u->home), "%s", pw->pw_dir ? pw->pw_dir : "/");
        snprintf(u->shell, sizeof(u->shell), "%s",
                 pw->pw_shell && pw->pw_shell[0] ? pw->pw_shell : "/bin/sh");
        u->uid = (uid_t)s->uid;
        u->gid = (gid_t)s->gid;
    }
    return 0;
}

int monitor_check_user(const Spur__Agent__Launch *l, char *err, size_t errlen)
{
    return lookup_user(l, NULL, err, errlen);
}

/* ---- signalling the job ---- */

/* Signal every descendant of the monitor found in /proc (the job without a cgroup). */
static void signal_descendants(int sig)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return;
    size_t n = 0, cap = 0;
    pid_t *pids = NULL, *ppids = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        pid_t pp;
        if (*end != '\0' || pid <= 0 || proc_stat((pid_t)pid, NULL, NULL, &pp) != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            pid_t *np = realloc(pids, cap * sizeof(*np));
            pid_t *npp = np ? realloc(ppids, cap * sizeof(*npp)) : NULL;
            if (np)
                pids = np;
            if (npp == NULL)
                break;
            ppids = npp;
        }
        pids[n] = (pid_t)pid;
        ppids[n++] = pp;
    }
    closedir(d);
    /* Mark descendants: repeat until no new one (the depth of the tree, bounded by n). */
    char *mark = calloc(n ? n : 1, 1);
    pid_t self = getpid();
    for (bool grew = true; mark && grew;) {
        grew = false;
        for (size_t i = 0; i < n; i++) {
            if (mark[i])
                continue;
            bool below = ppids[i] == self;
            for (size_t k = 0; !below && k < n; k++)
                below = mark[k] && pids[k] == ppids[i];
            if (below) {
                mark[i] = 1;
                grew = true;
            }
        }
    }
    for (size_t i = 0; mark && i < n; i++)
        if (mark[i])
            (void)kill(pids[i], sig);
    free(mark);
    free(pids);
    free(ppids);
}

static void mon_signal_all(struct mon *m, int sig)
{
    if (cgroup_job_tracked(&m->cg))
        (void)cgroup_job_signal(&m->cg, sig);
    else
        signal_descendants(sig);
    if (m->child > 0) {
        (void)kill(-m->child, sig);
        (void)kill(m->child, sig);
    }
}

/* SIGCONT + SIGTERM now, SIGKILL after the kill wait. */
static void mon_terminate(struct mon *m, bool timed_out)
{
    if (timed_out)
        m->timed_out = true;
    if (m->kill_at != 0)
        return;
    log_event(LOG_INFO, "monitor", timed_out ? "time limit reached" : "terminating",
              "job=%" PRIu64 " attempt=%" PRIu32, m->l->job_id, m->l->attempt);
    mon_signal_all(m, SIGCONT);
    mon_signal_all(m, SIGTERM);
    m->kill_at = mono_ms() + m->lim.kill_wait_ms;
    if (m->kill_at == 0)
        m->kill_at = 1;
}

static void mon_reap(struct mon *m)
{
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
        if (p == m->child) {
            m->status = st;
            m->child = 0;
        }
}

/* ---- the control socket ---- */

static int ctl_path(int dirfd, struct sockaddr_un *sa, socklen_t *len)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/ctl", dirfd);
    if (n < 0 || (size_t)n >= sizeof(sa->sun_path))
        return -1;
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
    return 0;
}

static int ctl_listen(int dirfd)
{
    struct sockaddr_un sa;
    socklen_t len;
    if (ctl_path(dirfd, &sa, &len) != 0)
        return -1;
    (void)unlinkat(dirfd, "ctl", 0);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, MON_MAX_CLIENTS) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static void ctl_accept(struct mon *m)
{
    int fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    struct ucred cr;
    socklen_t crl = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0 ||
        (cr.uid != 0 && cr.uid != geteuid())) {
        close(fd);
        return;
    }
    for (int i = 0; i < MON_MAX_CLIENTS; i++)
        if (m->clients[i] < 0) {
            m->clients[i] = fd;
            return;
        }
    close(fd);
}

/* Answer one request ("SIG <n>\n" or "TERM\n") and close the connection. */
static void ctl_serve(struct mon *m, int slot)
{
    int fd = m->clients[slot];
    char req[64];
    ssize_t n = read(fd, req, sizeof(req) - 1);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    const char *answer = "ERR bad request\n";
    if (n > 0) {
        req[n] = '\0';
        int sig;
        if (strcmp(req, "TERM\n") == 0) {
            mon_terminate(m, false);
            answer = "OK\n";
        } else if (sscanf(req, "SIG %d", &sig) == 1 && sig > 0 && sig < NSIG) {
            mon_signal_all(m, sig);
            answer = "OK\n";
        }
        (void)write_all(fd, answer, strlen(answer));
    }
    close(fd);
    m->clients[slot] = -1;
}

/* ---- the job's process ---- */

/* A line on the job's stderr or the log, by plain write(2). */
static void child_say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void child_say(int fd, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0)
        (void)write_all(fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static int open_output(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOCTTY | O_CLOEXEC, 0644);
}

/* Runs in the forked job child; never returns. */
static void job_exec(struct mon *m, int script_fd, char **env, const char *out_path,
                     const char *err_path) __attribute__((noreturn));
static void job_exec(struct mon *m, int script_fd, char **env, const char *out_path,
                     const char *err_path)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    (void)setsid();
    if (cgroup_job_enter(&m->cg) != 0) {
        child_say(2, "spurd: job %" PRIu64 ": cannot enter its cgroup: %s\n", m->l->job_id,
                  strerror(errno));
        _exit(MON_EXIT_SETUP);
    }
    const struct mon_user *u = &m->user;
    if (initgroups(u->name, u->gid) != 0 || setgid(u->gid) != 0 || setuid(u->uid) != 0) {
        child_say(2, "spurd: job %" PRIu64 ": cannot become %s (uid %ld gid %ld): %s\n",
                  m->l->job_id, u->name, (long)u->uid, (long)u->gid, strerror(errno));
        _exit(MON_EXIT_SETUP);
    }
    if (u->uid != 0 && (setuid(0) == 0 || geteuid() == 0)) {
        child_say(2, "spurd: job %" PRIu64 ": root privileges could be regained\n", m->l->job_id);
        _exit(MON_EXIT_SETUP);
    }
    umask(022);
    const char *wd = m->l->spec->workdir;
    int chdir_errno = 0;
    if (wd == NULL || wd[0] == '\0' || chdir(wd) != 0) {
        chdir_errno = wd && wd[0] ? errno : ENOENT;
        (void)chdir("/tmp");
    }
    int out = open_output(out_path);
    if (out < 0) {
        child_say(2, "spurd: job %" PRIu64 ": cannot open stdout %s: %s\n", m->l->job_id, out_path,
                  strerror(errno));
        _exit(MON_EXIT_SETUP);
    }
    int errfd = strcmp(out_path, err_path) == 0 ? out : open_output(err_path);
    if (errfd < 0) {
        child_say(2, "spurd: job %" PRIu64 ": cannot open stderr %s: %s\n", m->l->job_id, err_path,
                  strerror(errno));
        _exit(MON_EXIT_SETUP);
    }
    if (chdir_errno != 0)
        child_say(errfd, "slurmstepd: error: couldn't chdir to `%s': %s: going to /tmp instead\n",
                  wd ? wd : "", strerror(chdir_errno));
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* Descriptors 0-3 from sources above 3 first, so no dup2 overwrites a source. */
    int fds[4] = {in, out, errfd, script_fd};
    for (int i = 0; i < 4; i++) {
        if (fds[i] < 0)
            _exit(MON_EXIT_SETUP);
        if (fds[i] <= 3) {
            int moved = fcntl(fds[i], F_DUPFD_CLOEXEC, 10);
            for (int k = i + 1; k < 4; k++)
                if (fds[k] == fds[i])
                    fds[k] = moved;
            fds[i] = moved;
        }
    }
    for (int i = 0; i < 4; i++)
        if (dup2(fds[i], i) != i)
            _exit(MON_EXIT_SETUP);
    int keep[] = {3};
    (void)fd_close_all_except(keep, 1);
    const ProtobufCBinaryData *s = &m->l->spec->script;
    bool shebang = s->len >= 2 && s->data[0] == '#' && s->data[1] == '!';
    char script[] = "/proc/self/fd/3";
    char sh[] = "/bin/sh";
    char *argv_direct[] = {script, NULL};
    char *argv_sh[] = {sh, script, NULL};
    if (shebang)
        execve(script, argv_direct, env);
    else
        execve(sh, argv_sh, env);
    child_say(2, "slurmstepd: error: execve(): %s: %s\n", shebang ? script : sh, strerror(errno));
    _exit(MON_EXIT_EXEC);
}

/* ---- the monitor ---- */

static void mon_fail(struct mon *m, int ready_fd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static void mon_fail(struct mon *m, int ready_fd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char line[600];
    int n = snprintf(line, sizeof(line), "ERR %s", msg);
    (void)write_all(ready_fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
    if (m->lfd >= 0)
        (void)unlinkat(m->dirfd, "ctl", 0);
    cgroup_job_remove(&m->cg);
    (void)unlinkat(m->dirfd, "script", 0);
    (void)unlinkat(m->dirfd, "monitor", 0);
    _exit(1);
}

static void write_pid_file(int dirfd, const char *name, pid_t pid, uint64_t start_ms)
{
    unsigned long long st = 0;
    (void)proc_stat(pid, NULL, &st, NULL);
    char line[96];
    int n = start_ms
                ? snprintf(line, sizeof(line), "%ld %llu %" PRIu64 "\n", (long)pid, st, start_ms)
                : snprintf(line, sizeof(line), "%ld %llu\n", (long)pid, st);
    if (write_file(dirfd, name, line, (size_t)n, false) != 0)
        log_event(LOG_WARN, "monitor", "cannot write a pid file", "file=%s err=%s", name,
                  log_q(strerror(errno)));
}

static int write_ended(int dirfd, const Spur__Agent__Ended *e)
{
    size_t len = spur__agent__ended__get_packed_size(e);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return -1;
    spur__agent__ended__pack(e, buf);
    int rc = write_file(dirfd, "ended", buf, len, true);
    free(buf);
    return rc;
}

/* Kill what is left of the job until nothing is (or MON_UNKILLABLE_MS passed). */
static void mon_kill_rest(struct mon *m)
{
    uint64_t deadline = mono_ms() + MON_UNKILLABLE_MS;
    for (;;) {
        mon_reap(m);
        bool left = cgroup_job_tracked(&m->cg) && cgroup_job_populated(&m->cg);
        /* Every orphan of the job comes back to the subreaper, so while any process of
         * the job lives the monitor has a child; waitid() fails ECHILD when it has none. */
        siginfo_t si = {0};
        bool kids = waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
        if (!left && !kids)
            return;
        if (mono_ms() > deadline) {
            log_event(LOG_ERROR, "monitor", "job processes left that SIGKILL does not end",
                      "job=%" PRIu64 " attempt=%" PRIu32, m->l->job_id, m->l->attempt);
            return;
        }
        mon_signal_all(m, SIGKILL);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void mon_loop(struct mon *m)
{
    while (m->child > 0) {
        uint64_t now = mono_ms();
        if (m->term_at && now >= m->term_at) {
            m->term_at = 0;
            mon_terminate(m, true);
        }
        if (m->kill_at && now >= m->kill_at) {
            mon_signal_all(m, SIGKILL);
            m->kill_at = now + 1000; /* again each second until the script is reaped */
        }
        uint64_t next = 0;
        if (m->term_at)
            next = m->term_at;
        if (m->kill_at && (next == 0 || m->kill_at < next))
            next = m->kill_at;
        int timeout = -1;
        if (next)
            timeout = next > now ? (int)(next - now < 60000 ? next - now : 60000) : 0;
        struct pollfd p[2 + MON_MAX_CLIENTS];
        int np = 0;
        p[np++] = (struct pollfd){.fd = m->sfd, .events = POLLIN};
        p[np++] = (struct pollfd){.fd = m->lfd, .events = POLLIN};
        for (int i = 0; i < MON_MAX_CLIENTS; i++)
            p[np++] = (struct pollfd){.fd = m->clients[i], .events = POLLIN};
        if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR)
            return;
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(m->sfd, &si, sizeof(si)) == sizeof(si))
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP)
                    mon_terminate(m, false);
            mon_reap(m);
        }
        if (p[1].revents & POLLIN)
            ctl_accept(m);
        for (int i = 0; i < MON_MAX_CLIENTS; i++)
            if (m->clients[i] >= 0 && p[2 + i].revents)
                ctl_serve(m, i);
    }
}

static void mon_setup_process(void)
{
    (void)setsid();
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        close(null);
    }
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

/* The forked monitor; never returns. */
static void monitor_main(const struct monitor_conf *c, int dirfd, const Spur__Agent__Launch *l,
                         const struct monitor_limits *lim, int ready_fd) __attribute__((noreturn));
static void monitor_main(const struct monitor_conf *c, int dirfd, const Spur__Agent__Launch *l,
                         const struct monitor_limits *lim, int ready_fd)
{
    int keep[] = {dirfd, ready_fd};
    (void)fd_close_all_except(keep, 2);
    mon_setup_process();
    struct mon m = {.c = c, .l = l, .lim = *lim, .dirfd = dirfd, .sfd = -1, .lfd = -1};
    for (int i = 0; i < MON_MAX_CLIENTS; i++)
        m.clients[i] = -1;
    cgroup_job_none(&m.cg);
    write_pid_file(dirfd, "monitor", getpid(), 0);

    char err[512];
    if (lookup_user(l, &m.user, err, sizeof(err)) != 0)
        mon_fail(&m, ready_fd, "%s", err);
    if (m.user.uid == 0 && l->spec->uid != 0)
        mon_fail(&m, ready_fd, "refusing to run a job as root that root did not submit");
    if (cgroup_job_create(c->cg, l->job_id, l->attempt, l->cpus, l->mem_mb, &m.cg, err,
                          sizeof(err)) != 0)
        mon_fail(&m, ready_fd, "%s", err);
    const ProtobufCBinaryData *sc = &l->spec->script;
    if (write_file(dirfd, "script", sc->data, sc->len, false) != 0 ||
        fchownat(dirfd, "script", m.user.uid, m.user.gid, 0) != 0 ||
        fchmodat(dirfd, "script", 0500, 0) != 0)
        mon_fail(&m, ready_fd, "job script: %s", strerror(errno));
    int script_fd = openat(dirfd, "script", O_RDONLY | O_CLOEXEC);
    if (script_fd < 0)
        mon_fail(&m, ready_fd, "job script: %s", strerror(errno));
    m.lfd = ctl_listen(dirfd);
    if (m.lfd < 0)
        mon_fail(&m, ready_fd, "control socket: %s", strerror(errno));
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    m.sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (m.sfd < 0)
        mon_fail(&m, ready_fd, "signalfd: %s", strerror(errno));

    struct jobenv_user ju = {m.user.name, m.user.home, m.user.shell, m.user.uid, m.user.gid};
    char **env = jobenv_build(l, &ju, c->node_name, c->cluster_name);
    const char *user = m.user.name;
    char *out = jobenv_expand(l->spec->stdout_path, l, user, c->node_name);
    char *errp = l->spec->stderr_path && l->spec->stderr_path[0]
                     ? jobenv_expand(l->spec->stderr_path, l, user, c->node_name)
                     : (out ? strdup(out) : NULL);
    if (env == NULL || out == NULL || errp == NULL)
        mon_fail(&m, ready_fd, "out of memory");

    m.start_ms = wall_ms();
    pid_t child = fork();
    if (child < 0)
        mon_fail(&m, ready_fd, "fork: %s", strerror(errno));
    if (child == 0)
        job_exec(&m, script_fd, env, out, errp);
    m.child = child;
    close(script_fd);
    jobenv_free(env);
    free(out);
    free(errp);
    write_pid_file(dirfd, "job", child, m.start_ms);
    if (lim->time_limit_ms)
        m.term_at = mono_ms() + lim->time_limit_ms;
    (void)write_all(ready_fd, "OK\n", 3);
    close(ready_fd);

    mon_loop(&m);
    /* The script ended: nobody may ask for it any more; then nothing of it may stay. */
    close(m.lfd);
    (void)unlinkat(dirfd, "ctl", 0);
    for (int i = 0; i < MON_MAX_CLIENTS; i++)
        if (m.clients[i] >= 0)
            close(m.clients[i]);
    mon_kill_rest(&m);
    Spur__Agent__Ended e = SPUR__AGENT__ENDED__INIT;
    e.job_id = l->job_id;
    e.attempt = l->attempt;
    e.node = (char *)(c->node_name ? c->node_name : "");
    e.exit_code = WIFEXITED(m.status) ? WEXITSTATUS(m.status) : 0;
    e.signal = WIFSIGNALED(m.status) ? WTERMSIG(m.status) : 0;
    e.oom = cgroup_job_oom(&m.cg);
    e.timed_out = m.timed_out;
    e.start_time_ms = m.start_ms;
    e.end_time_ms = wall_ms();
    int rc = write_ended(dirfd, &e);
    if (rc != 0)
        log_event(LOG_ERROR, "monitor", "cannot write the Ended report",
                  "job=%" PRIu64 " attempt=%" PRIu32 " err=%s", l->job_id, l->attempt,
                  log_q(strerror(errno)));
    cgroup_job_remove(&m.cg);
    log_event(LOG_INFO, "monitor", "job ended",
              "job=%" PRIu64 " attempt=%" PRIu32 " exit=%d signal=%d oom=%d timed_out=%d",
              l->job_id, l->attempt, e.exit_code, e.signal, e.oom, e.timed_out);
    _exit(rc == 0 ? 0 : 1);
}

int monitor_spawn_limits(const struct monitor_conf *c, int job_dirfd, const Spur__Agent__Launch *l,
                         const struct monitor_limits *lim, pid_t *pid, char *err, size_t errlen)
{
    if (l->spec == NULL) {
        snprintf(err, errlen, "monitor: launch without a job spec");
        return -1;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "monitor: pipe: %s", strerror(errno));
        return -1;
    }
    pid_t m = fork();
    if (m < 0) {
        snprintf(err, errlen, "monitor: fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (m == 0) {
        close(p[0]);
        monitor_main(c, job_dirfd, l, lim, p[1]);
    }
    close(p[1]);
    char msg[600];
    size_t got = 0;
    uint64_t deadline = mono_ms() + MON_READY_WAIT_MS;
    while (got + 1 < sizeof(msg)) {
        uint64_t now = mono_ms();
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) == 0)
            break;
        ssize_t r = read(p[0], msg + got, sizeof(msg) - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
        if (memchr(msg, '\n', got) != NULL)
            break;
    }
    close(p[0]);
    msg[got] = '\0';
    if (strncmp(msg, "OK\n", 3) == 0) {
        *pid = m;
        return 0;
    }
    if (got == 0) {
        (void)kill(m, SIGKILL);
        snprintf(err, errlen, "monitor: no word from the monitor (died or stuck)");
    } else {
        snprintf(err, errlen, "monitor: %s", strncmp(msg, "ERR ", 4) == 0 ? msg + 4 : msg);
    }
    while (waitpid(m, NULL, 0) < 0 && errno == EINTR)
        ;
    return -1;
}

int monitor_spawn(const struct monitor_conf *c, int job_dirfd, const Spur__Agent__Launch *l,
                  pid_t *pid, char *err, size_t errlen)
{
    struct monitor_limits lim = {
        .time_limit_ms = (uint64_t)l->time_limit_min * 60000u,
        .kill_wait_ms = (uint64_t)l->kill_wait_s * 1000u,
    };
    return monitor_spawn_limits(c, job_dirfd, l, &lim, pid, err, errlen);
}

int monitor_signal(int job_dirfd, int sig, bool terminate, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    socklen_t len;
    if (ctl_path(job_dirfd, &sa, &len) != 0) {
        snprintf(err, errlen, "monitor: control socket path too long");
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "monitor: socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;
        close(fd);
        if (e == ENOENT || e == ECONNREFUSED)
            return 1;
        snprintf(err, errlen, "monitor: connect: %s", strerror(e));
        return -1;
    }
    char req[32];
    int n = terminate ? snprintf(req, sizeof(req), "TERM\n")
                      : snprintf(req, sizeof(req), "SIG %d\n", sig);
    if (write_all(fd, req, (size_t)n) != 0) {
        int e = errno;
        close(fd);
        if (e == EPIPE || e == ECONNRESET)
            return 1;
        snprintf(err, errlen, "monitor: write: %s", strerror(e));
        return -1;
    }
    char reply[64];
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ssize_t r = -1;
    if (poll(&pf, 1, MON_REPLY_WAIT_MS) == 1)
        r = read(fd, reply, sizeof(reply) - 1);
    close(fd);
    if (r == 0 || (r < 0 && errno == ECONNRESET))
        return 1; /* the monitor closed without answering: the job is ending */
    if (r < 0) {
        snprintf(err, errlen, "monitor: no answer on the control socket");
        return -1;
    }
    reply[r] = '\0';
    if (strcmp(reply, "OK\n") == 0)
        return 0;
    if (strcmp(reply, "ENDED\n") == 0)
        return 1;
    snprintf(err, errlen, "monitor: refused: %.*s", (int)strcspn(reply, "\n"), reply);
    return -1;
}

/* Parse "PID STARTTIME [START_MS]\n" from dirfd/name. */
static int read_pid_file(int dirfd, const char *name, pid_t *pid, unsigned long long *start,
                         uint64_t *start_ms)
{
    char buf[128];
    if (read_small(dirfd, name, buf, sizeof(buf)) <= 0)
        return -1;
    long p;
    unsigned long long st, ms = 0;
    int n = sscanf(buf, "%ld %llu %llu", &p, &st, &ms);
    if (n < 2 || p <= 0)
        return -1;
    *pid = (pid_t)p;
    *start = st;
    if (start_ms)
        *start_ms = ms;
    return 0;
}

/* The process pid with start time start runs (a zombie does not). */
static bool same_process_alive(pid_t pid, unsigned long long start)
{
    char state;
    unsigned long long st;
    return proc_stat(pid, &state, &st, NULL) == 0 && st == start && state != 'Z' && state != 'X';
}

bool monitor_alive(int job_dirfd)
{
    pid_t pid;
    unsigned long long start;
    return read_pid_file(job_dirfd, "monitor", &pid, &start, NULL) == 0 &&
           same_process_alive(pid, start);
}

int monitor_abandoned(const struct monitor_conf *c, int job_dirfd, const Spur__Agent__Launch *l,
                      char *err, size_t errlen)
{
    if (faccessat(job_dirfd, "ended", F_OK, 0) == 0)
        return 0;
    pid_t jpid = 0;
    unsigned long long jstart = 0;
    uint64_t start_ms = 0;
    bool have_job = read_pid_file(job_dirfd, "job", &jpid, &jstart, &start_ms) == 0;
    struct cgroup_job cg;
    cgroup_job_open(c->cg, l->job_id, l->attempt, &cg);
    if (cgroup_job_tracked(&cg)) {
        uint64_t deadline = mono_ms() + MON_ABANDON_MS;
        while (cgroup_job_populated(&cg) && mono_ms() < deadline) {
            (void)cgroup_job_signal(&cg, SIGKILL);
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    /* The job's process group: ours while its leader runs with the recorded start time,
     * or while no process has the leader's pid (a group keeps its id from reuse). */
    if (have_job) {
        unsigned long long st;
        bool exists = proc_stat(jpid, NULL, &st, NULL) == 0;
        if (!exists || st == jstart)
            (void)kill(-jpid, SIGKILL);
    }
    Spur__Agent__Ended e = SPUR__AGENT__ENDED__INIT;
    e.job_id = l->job_id;
    e.attempt = l->attempt;
    e.node = (char *)(c->node_name ? c->node_name : "");
    e.signal = SIGKILL;
    e.oom = cgroup_job_oom(&cg);
    e.end_time_ms = wall_ms();
    e.start_time_ms = start_ms ? start_ms : e.end_time_ms;
    (void)unlinkat(job_dirfd, "ctl", 0);
    if (write_ended(job_dirfd, &e) != 0) {
        snprintf(err, errlen, "monitor: writing ended: %s", strerror(errno));
        cgroup_job_close(&cg);
        return -1;
    }
    cgroup_job_remove(&cg);
    return 0;
}
