"""Catch-up, honest readiness, bounded proposals and a quiet first boot (real programs).

What holds here, each against real 3-replica clusters on 127.0.0.1:
  - a follower restarted on an idle cluster (no write after its restart) reaches the
    leader's commit index within a few heartbeats, a linearizable read through it answers
    at once, and its /readyz is not "ok" before it has caught up (watched by a poller that
    reads the worker's own metrics right after every "ok");
  - with the leader's raft.max_uncommitted_bytes full (its followers frozen), concurrent
    writes get BUSY at once instead of piling up; every write that was acknowledged is in
    the state, and none that got BUSY is;
  - a clean first boot logs no "lost its disk" warning, even for the founding member whose
    peers founded the cluster before it came up; a follower whose state dir was wiped
    still gets that warning;
  - an idle leader still puts its clock tick into the log every 30 s (slow: ~31 s).

Every wait is bounded; every cluster is killed by the fixtures.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

import spurtest
from spurtest import http_get, submit, wait_until

LOST_DISK = "lost its disk"


def metric(port, name):
    """One gauge of a replica's worker (its loopback metrics listener), or None."""
    try:
        st, body = http_get(port, "/metrics", timeout=1.0)
    except OSError:
        return None
    m = re.search(rf"^{name} (\d+)", body, re.M)
    return int(m.group(1)) if st == 200 and m else None


def readyz(sup):
    try:
        return sup.get("/readyz")
    except OSError:
        return None


def stop_a_follower_once_it_applied(c, names):
    """Submit a job per name, wait until a follower has applied the leader's commit index,
    then stop that follower cleanly. Returns (leader, follower)."""
    for name in names:
        submit(c, name)
    lid = c.leader()
    victim = c.follower(lid)
    wait_until(lambda: c.applied_index(victim) >= c.status(lid)["commit_index"], 10,
               what="victim applied before the stop")
    assert c.stop(victim) == 0
    return lid, victim


# ---- idle catch-up and readiness ------------------------------------------------------

def test_restarted_follower_catches_up_on_an_idle_cluster(cluster3):
    c = cluster3
    names = [f"idle{k}" for k in range(5)]
    lid, victim = stop_a_follower_once_it_applied(c, names)
    target = c.status(lid)["commit_index"]
    time.sleep(1.0)  # the cluster stays idle from here on: no write until the end
    s = c.start(victim)
    mport = c.ports[victim - 1]["metrics"]

    # Poll /readyz as fast as we can, and after every "ok" read the worker's applied index:
    # an "ok" from a replica that had not applied the leader's commit index is the bug.
    samples = []  # (t, word, applied read right after)
    t0 = time.monotonic()
    caught_at = None
    while time.monotonic() - t0 < 15:
        r = readyz(s)
        if r is None:
            time.sleep(0.005)
            continue
        word = r[1].strip()
        applied = metric(mport, "spur_raft_applied_index") if r[0] == 200 else None
        samples.append((time.monotonic() - t0, word, applied))
        if r[0] == 200 and caught_at is None:
            caught_at = time.monotonic() - t0
        if caught_at is not None and time.monotonic() - t0 > caught_at + 0.5:
            break
        time.sleep(0.005)
    oks = [x for x in samples if x[1] == "ok"]
    assert oks, f"never ready in 15 s: {samples[-5:]}\n{s.log()[-3000:]}"
    for t, _, applied in oks:
        assert applied is not None and applied >= target, (t, applied, target)
    first_ok = samples.index(oks[0])
    assert first_ok > 0 and samples[0][1] != "ok", samples[:3]  # it was not ready at first
    # The restarted follower took the leader's commit index without any write.
    st = c.status(victim)
    assert st["commit_index"] >= target and st["applied_index"] >= target, (st, target)
    assert st["leader_id"] == lid
    # From its first answer to caught up: a few heartbeats (50 ms here) plus start-up.
    up_at = next(t for t, w, _ in samples if w in ("noleader", "ok"))
    assert oks[0][0] - up_at < 5.0, samples[:40]
    # A linearizable read through it answers at once (it used to wait ~2.8 s and time out).
    t1 = time.monotonic()
    p = c.spur("squeue", "-t", "all", "--json", host=c.api(victim),
               env={"SPUR_TIMEOUT_MS": "5000"})
    took = time.monotonic() - t1
    assert p.returncode == 0, p.stderr
    assert "stale" not in p.stderr, p.stderr
    assert sorted(j["name"] for j in json.loads(p.stdout)) == names
    assert took < 2.0, took
    # Still idle: nobody wrote to make it catch up.
    assert c.status(lid)["commit_index"] == target


# ---- bounded proposals --------------------------------------------------------------

def test_a_full_uncommitted_window_answers_busy_and_loses_no_acknowledged_job(cluster_factory):
    # Long election timeout, so that the leader keeps leading while its followers are
    # frozen (check-quorum would make it step down after one election timeout).
    c = cluster_factory(3, raft={"heartbeat_ms": 100, "election_timeout_ms": 4000,
                                 "max_uncommitted_bytes": 1024})
    c.start_all()
    c.wait_ready()
    lid = c.leader()
    submit(c, "warm-up", host=c.api(lid))
    followers = [i for i in (1, 2, 3) if i != lid]
    # Freeze both followers whole (supervisor, responder, worker: a VM pause, which the
    # supervisor tells from a stalled worker): nothing can commit, so after the first
    # batch the leader's uncommitted bytes stay above the cap.
    frozen = []
    for i in followers:
        sup = c.replica(i)
        frozen += [sup.pid, sup.responder_pid(), sup.worker_pid()]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    procs = []
    try:
        env = dict(os.environ, SPUR_CONFIG=str(c.cfg_path), SPUR_CONTROLLER=c.api(lid),
                   SPUR_TIMEOUT_MS="15000", SPUR_JWT=c.token())
        sbatch = str(spurtest.BUILD / "client" / "sbatch")
        for k in range(24):
            procs.append(subprocess.Popen([sbatch, "--wrap=true", "-J", f"cap{k}"], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
            time.sleep(0.01)
        time.sleep(1.0)
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    ok, busy = {}, {}
    for k, p in enumerate(procs):
        out, err = p.communicate(timeout=30)
        if p.returncode == 0:
            ok[f"cap{k}"] = int(out.split()[-1])
        else:
            busy[f"cap{k}"] = (p.returncode, err.strip())
    assert ok, busy
    assert busy, "the cap never refused a write"
    for name, (code, err) in busy.items():
        assert "busy" in err.lower() or "max_uncommitted_bytes" in err, (name, code, err)
    # Every acknowledged write is in the state, with its id; no refused one is.
    lid2 = c.leader()
    p = c.spur("squeue", "-t", "all", "--json", host=c.api(lid2))
    jobs = {j["name"]: j["job_id"] for j in json.loads(p.stdout)}
    for name, jid in ok.items():
        assert jobs.get(name) == jid, (name, jid, jobs.get(name))
    for name in busy:
        assert name not in jobs, name
    # And the cluster takes writes again once the window has drained.
    submit(c, "after-busy")
    for i in (1, 2, 3):
        assert "AddressSanitizer" not in c.replica(i).log()


# ---- first boot and a lost disk -------------------------------------------------------

def test_a_clean_first_boot_logs_no_lost_disk_warning(cluster_factory):
    c = cluster_factory(3)
    # Node 3 comes up after nodes 1 and 2 founded the cluster: the path that used to warn.
    c.start(1)
    c.start(2)
    c.leader(among=[1, 2], timeout=20)
    c.start(3)
    c.wait_ready()
    c.leader()
    log3 = c.replica(3).log()
    assert "peers run a cluster that lists this node" in log3, log3
    for i in (1, 2, 3):
        log = c.replica(i).log()
        assert LOST_DISK not in log, (i, log)
        assert not [l for l in log.splitlines() if "level=warn" in l and "lost" in l], (i, log)
    # and all three take part
    submit(c, "first-boot")
    lst = c.status(c.leader())
    wait_until(lambda: all(c.applied_index(i) >= lst["commit_index"] for i in (1, 2, 3)), 10,
               what="all applied")


def test_a_follower_whose_state_dir_was_wiped_is_warned_about(cluster3):
    c = cluster3
    lid, victim = stop_a_follower_once_it_applied(c, [f"wiped{k}" for k in range(3)])
    shutil.rmtree(c.state_dir(victim))
    s = c.start(victim)
    wait_until(lambda: LOST_DISK in s.log(), 15, what="the lost-disk warning")
    line = next(l for l in s.log().splitlines() if LOST_DISK in l)
    assert "level=warn" in line, line
    assert "founding the cluster" not in s.log()
    # It is caught up all the same, and says ready only then.
    s.wait_ready(20)
    lst = c.status(lid)
    wait_until(lambda: c.applied_index(victim) >= lst["commit_index"], 15, what="caught up")


# ---- the idle log clock ---------------------------------------------------------------

@pytest.mark.slow
def test_an_idle_leader_ticks_the_log_clock(sups):
    # One replica, no client at all: the leader's clock tick (every 30 s, docs/worker.md)
    # must still reach the log. It used to be checked only after a commit, so an idle
    # cluster never ticked and retention and session expiry stood still.
    sup = sups.start(sups.config())
    sup.wait_ready()
    mport = sup.cfg["metrics"]["port"]
    wait_until(lambda: metric(mport, "spur_raft_last_index") is not None, 5, what="metrics")
    # The start-up proposals (partitions, settings) are in once the log stops moving.
    seen = []

    def settled():
        seen.append(metric(mport, "spur_raft_last_index"))
        return len(seen) >= 8 and len(set(seen[-8:])) == 1

    wait_until(settled, 10, interval=0.25, what="a settled log")
    before = seen[-1]
    t0 = time.monotonic()
    wait_until(lambda: (metric(mport, "spur_raft_last_index") or 0) > before, 40, interval=0.5,
               what="a clock tick entry on an idle leader")
    assert time.monotonic() - t0 > 15  # the tick, not something else right away
    assert metric(mport, "spur_raft_commit_index") > before
