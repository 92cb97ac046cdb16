"""The REAL worker under a spurctld that is PID 1, as in every container.

Until the worker compared its parent with the pid spurctld passes (--supervisor-pid), it
took getppid() == 1 for "my supervisor died" and exited at once whenever spurctld was PID 1,
so every container crash-looped; the PID 1 tests of test_supervisor.py did not see it because
they run the stand-in test worker. Here every replica is spurctld-raftd under spurctld in a
PID namespace of its own (`unshare --pid --fork --mount-proc`): it must become ready, serve
jobs, die and exit 70 as it should, reap orphans, stop cleanly on SIGTERM, and a 3-replica
cluster of such replicas must form and fail over.
"""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from spurtest import (Cluster, Poller, Supervisor, children_of, is_gone, proc_comm, proc_ppid,
                      proc_state, wait_until)

NS = ["unshare", "--pid", "--fork", "--mount-proc"]
LINGER_MS = 800  # supervisor.exit_linger_ms: long enough to read the probes before exit

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for unshare --pid"),
    pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("nsenter") is None,
                       reason="needs util-linux unshare and nsenter"),
]


class NsCluster(Cluster):
    """A Cluster whose every replica runs as PID 1 of its own PID namespace.

    replica(i).pid is the host pid of `unshare`; the spurctld that is PID 1 inside is its
    only child, and the worker and the responder are that one's children. The log names
    pids as the namespace sees them, so host pids are found through /proc instead.
    """

    def start(self, i, env=None):
        self.generation[i - 1] += 1
        s = Supervisor(self.tmp, cfg=self.cfgs[i - 1], env=env,
                       name=f"n{i}-{self.generation[i - 1]}", wrapper=NS)
        self.replicas[i - 1] = s
        return s

    def pid1(self, i, timeout=5):
        """Host pid of the spurctld that is PID 1 in replica i's namespace."""
        outer = self.replica(i).pid
        return wait_until(lambda: (children_of(outer) or [None])[0], timeout,
                          what="spurctld inside the namespace")

    def child_named(self, i, comm, timeout=5):
        p1 = self.pid1(i)

        def find():
            for c in children_of(p1):
                if proc_comm(c) == comm and proc_state(c) not in (None, "Z"):
                    return c
            return None
        return wait_until(find, timeout, what=f"{comm} under PID 1")

    def worker_pid(self, i):
        return self.child_named(i, "spurctld-raftd")

    def kill_worker(self, i, sig=signal.SIGKILL):
        s = self.replica(i)
        os.kill(self.worker_pid(i), sig)
        return s.wait_exit(20)

    def ready(self, i, timeout=20):
        """/readyz 200 on replica i; fails at once, with the log, if spurctld has exited."""
        s = self.replica(i)

        def check():
            if s.proc.poll() is not None:
                raise AssertionError(f"replica {i} exited {s.proc.returncode} before it was "
                                     f"ready; log:\n{s.log()}")
            try:
                return s.get("/readyz")[0] == 200
            except OSError:
                return False
        wait_until(check, timeout, interval=0.02, what=f"replica {i} /readyz 200")


@pytest.fixture
def ns_cluster(tmp_path):
    made = []

    def make(n, **over):
        c = NsCluster(tmp_path / f"c{len(made)}", n=n, **over)
        made.append(c)
        return c

    yield make
    for c in made:
        c.kill_all()


def single(ns_cluster, **over):
    """One replica as PID 1, ready, with exit_linger_ms set so a dead replica's probes can
    be read before it exits."""
    c = ns_cluster(1, supervisor={"exit_linger_ms": LINGER_MS}, **over)
    c.start(1)
    c.ready(1)
    return c


def submit(c, name, host=None):
    p = c.spur("sbatch", "--parsable", "-J", name, "--wrap=true", host=host)
    assert p.returncode == 0, f"sbatch -> {p.returncode}: {p.stderr}"
    return int(p.stdout.strip())


def jobs(c, host):
    p = c.spur("squeue", "-t", "all", "--json", host=host)
    assert p.returncode == 0, p.stderr
    return {j["job_id"]: j for j in json.loads(p.stdout)}


def zombies_under(pid):
    return [c for c in children_of(pid) if proc_state(c) == "Z"]


def test_real_worker_as_pid1_becomes_ready_and_serves_jobs(ns_cluster):
    c = single(ns_cluster)
    s = c.replica(1)
    log = s.log()
    assert "running as PID 1" in log
    assert "supervisor already gone" not in log
    # Inside the namespace the supervisor is 1 and the worker its child.
    p1, w = c.pid1(1), c.worker_pid(1)
    assert proc_ppid(w) == p1
    with open(f"/proc/{w}/status") as f:
        nspid = [l.split()[1:] for l in f if l.startswith("NSpid:")][0]
    assert nspid[-1] != "1" and len(nspid) == 2, nspid
    assert s.get("/readyz") == (200, "ok\n") and s.get("/healthz") == (200, "ok\n")
    jid = submit(c, "pid1-job")
    got = jobs(c, c.api(1))
    assert jid in got and got[jid]["name"] == "pid1-job", got
    p = c.spur("squeue", "-h", "-t", "all", "-j", jid, "-o", "%i %j")
    assert p.returncode == 0 and p.stdout.split() == [str(jid), "pid1-job"], (p.stdout, p.stderr)


def test_kill_9_of_the_worker_under_pid1_makes_it_exit_70(ns_cluster):
    c = single(ns_cluster)
    s = c.replica(1)
    w = c.worker_pid(1)
    os.kill(w, signal.SIGKILL)
    wait_until(lambda: s.get("/readyz") == (503, "dead\n"), 3, interval=0.005,
               what="/readyz 503 dead")
    assert s.get("/healthz") == (503, "dead\n")
    assert s.wait_exit(10) == 70
    last = s.last_sup_line()
    assert "exit=70" in last and "killed by SIGKILL" in last, last
    assert is_gone(w)


def test_pid1_reaps_orphans_made_inside_the_namespace(ns_cluster):
    c = single(ns_cluster)
    p1 = c.pid1(1)
    # A shell that joins the namespace and leaves orphans behind: each "(sleep 1 &)" is a
    # subshell that starts a sleep and exits at once, so the sleep's parent is gone and the
    # kernel hands it to the namespace's PID 1, our spurctld. "(true &)" leaves orphans
    # that exit at once, so they are zombies the moment they are handed over. Their output
    # goes to /dev/null, or subprocess.run would wait for them to close its pipes.
    script = ("for i in $(seq 20); do (sleep 1 </dev/null >/dev/null 2>&1 &); (true &); done")
    p = subprocess.run(["nsenter", "--target", str(p1), "--pid", "--mount", "sh", "-c", script],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    sleeps = wait_until(lambda: [k for k in children_of(p1) if proc_comm(k) == "sleep"] or None,
                        3, what="orphaned sleeps under PID 1")
    assert len(sleeps) >= 15, sleeps  # most are still asleep; all have PID 1 as parent
    wait_until(lambda: all(is_gone(k) for k in sleeps), 5, what="the orphans to exit")
    # Reaped, not left as zombies: the pids disappear altogether.
    wait_until(lambda: all(proc_state(k) is None for k in sleeps) and not zombies_under(p1), 3,
               what="every orphan reaped")
    left = children_of(p1)
    assert sorted(proc_comm(k) for k in left) == ["spurctld-health", "spurctld-raftd"], left
    s = c.replica(1)
    assert s.proc.poll() is None and s.get("/readyz") == (200, "ok\n")


def test_sigterm_to_pid1_stops_cleanly_with_exit_0(ns_cluster):
    c = single(ns_cluster)
    s = c.replica(1)
    p1, w = c.pid1(1), c.worker_pid(1)
    poller = Poller(s.health_port, "/readyz")
    poller.start()
    wait_until(lambda: len(poller.samples) > 10, 5, what="poller warm-up")
    t_term = time.monotonic()
    os.kill(p1, signal.SIGTERM)
    assert s.wait_exit(10) == 0
    poller.stop()
    # A sole voter hands nothing over, so the shutdown may be over before the poller asks
    # again. What it did see once readiness went off: "stopping" while the worker stopped,
    # then "dead" once the worker had exited (dead outranks stopping, health.h) until the
    # supervisor took the responder down; nothing else, and 200 never came back. A poll
    # that lands only after the worker exited sees "dead" first: the window for
    # "stopping" is a few milliseconds here.
    assert poller.samples and poller.samples[0][2] == 200
    off = [x for x in poller.samples if x[0] >= t_term and x[2] != 200]
    if off:
        words = [x[3] for x in off]
        assert set(words) <= {"stopping", "dead"}, off
        if "dead" in words:
            assert "stopping" not in words[words.index("dead"):], off
        assert not [x for x in poller.samples if x[0] > off[0][0] and x[2] == 200]
    assert is_gone(w)
    last = s.last_sup_line()
    assert "exit=0" in last and "shutdown by SIGTERM" in last, last


def test_three_replicas_each_pid1_form_serve_and_fail_over(ns_cluster):
    c = ns_cluster(3, supervisor={"exit_linger_ms": 300})
    c.start_all()
    for i in (1, 2, 3):
        c.ready(i)
    lead = c.leader()
    for i in (1, 2, 3):
        assert "running as PID 1" in c.replica(i).log()
        assert c.replica(i).get("/readyz") == (200, "ok\n")
    followers = [i for i in (1, 2, 3) if i != lead]
    # Submitted on one replica, seen on another.
    jid = submit(c, "acked", host=c.api(followers[0]))
    assert jobs(c, c.api(followers[1]))[jid]["name"] == "acked"
    assert jid in jobs(c, c.api(lead))

    # kill -9 of the leader's worker: that replica exits 70, the others elect and serve.
    code = c.kill_worker(lead)
    assert code == 70, c.replica(lead).log()
    last = c.replica(lead).last_sup_line()
    assert "exit=70" in last and "killed by SIGKILL" in last, last
    new = c.leader(among=followers, timeout=20)
    assert new in followers
    for i in followers:
        c.ready(i)
        assert c.replica(i).proc.poll() is None
    for i in followers:
        assert jobs(c, c.api(i))[jid]["name"] == "acked"
    after = submit(c, "after-failover", host=c.hosts(only=followers))
    assert after > jid
    other = [i for i in followers if i != new][0]
    assert after in jobs(c, c.api(other))

    # SIGTERM to the new leader's PID 1: readiness goes off first ("stopping"), it hands
    # leadership over to the other survivor, and exits 0.
    s = c.replica(new)
    poller = Poller(s.health_port, "/readyz")
    poller.start()
    wait_until(lambda: len(poller.samples) > 10, 5, what="poller warm-up")
    t_term = time.monotonic()
    os.kill(c.pid1(new), signal.SIGTERM)
    assert s.wait_exit(20) == 0, s.log()
    poller.stop()
    off = [x for x in poller.samples if x[0] >= t_term and x[2] != 200]
    assert off and off[0][3] == "stopping", off[:3]
    assert "shutdown by SIGTERM" in s.last_sup_line()

