#!/usr/bin/env python3
"""Benchmarks of the replicated cluster (issue 4). Prints tables; asserts nothing.

  election   kill -9 of the leader's worker -> a new leader known, and -> the first
             acknowledged write, over N trials (default Raft timeouts: heartbeat 100 ms,
             election 1000 ms)
  transfer   SIGTERM of the leader under a steady write load -> the longest time writes
             were unavailable (the largest gap between acknowledgements, less the normal
             one)
  coldstart  3 replicas with empty state -> every /readyz 200
  restart    a replica whose log holds N entries (default 1,000,000) -> RUNNING, and ->
             /readyz 200 (a leader elected; one replica)

Usage: bench/cluster/bench_cluster.py [--trials 20] [--entries 1000000] [--build DIR]
       [--only election,transfer,coldstart,restart]
Targets (issue 4): election p50 <= 1.5 s; transfer unavailability <= 100 ms; cold start
<= 2 s; restart of 1,000,000 entries to RUNNING <= 3 s.
"""
import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import add_build_option, pct, proc_status_kib, spurtest_for  # noqa: E402

DEFAULT_RAFT = {"heartbeat_ms": 100, "election_timeout_ms": 1000}


def table(title, header, rows):
    print(f"\n{title}")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("-" * (len(h) + 2) for h in header) + "|")
    for r in rows:
        print("| " + " | ".join(str(x).rjust(len(h)) for x, h in zip(r, header)) + " |")


def start_writer(spurtest, c, hosts, duration_ms, timeout_ms=5000):
    exe = spurtest.BUILD / "bench" / "cluster" / "bench-writer"
    return subprocess.Popen([str(exe), hosts, c.cfgs[0]["cluster_name"], str(duration_ms),
                             str(timeout_ms)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, SPUR_JWT=c.token()))


def writes_of(proc):
    out, _ = proc.communicate(timeout=120)
    recs = []
    for line in out.splitlines():
        t0, t1, ok = line.split()
        recs.append((float(t0) / 1000, float(t1) / 1000, ok == "1"))
    return recs


def mono():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


@contextlib.contextmanager
def ready_cluster(spurtest, path):
    """A fresh 3-replica cluster under path with the default Raft timeouts, every replica
    ready and a leader agreed: yields (cluster, leader id); killed on the way out."""
    c = spurtest.Cluster(path, n=3, raft=dict(DEFAULT_RAFT))
    try:
        c.start_all()
        c.wait_ready(timeout=30)
        yield c, c.leader(timeout=30)
    finally:
        c.kill_all()


def bench_election(spurtest, tmp, trials):
    to_leader, to_write = [], []
    for t in range(trials):
        with ready_cluster(spurtest, tmp / f"e{t}") as (c, old):
            survivors = [i for i in (1, 2, 3) if i != old]
            w = start_writer(spurtest, c, c.hosts(only=survivors), 6000)
            time.sleep(1.0)
            t0 = mono()
            os.kill(c.worker_pid(old), signal.SIGKILL)
            new = None
            while mono() - t0 < 10 and new is None:
                for i in survivors:
                    st = c.status(i, timeout=1)
                    if st and st["leader_id"] in survivors:
                        new = st["leader_id"]
                        break
            t_leader = mono()
            recs = writes_of(w)
            # The first write that started after the kill and was acknowledged.
            firsts = [r[1] for r in recs if r[2] and r[0] > t0]
            if new:
                to_leader.append(t_leader - t0)
            if firsts:
                to_write.append(min(firsts) - t0)
    table(f"Election after kill -9 of the leader ({trials} trials, heartbeat 100 ms, "
          "election timeout 1000 ms)",
          ["measure", "p50 ms", "p99 ms", "max ms", "n"],
          [[name, f"{pct(v, 50) * 1000:.0f}", f"{pct(v, 99) * 1000:.0f}",
            f"{max(v) * 1000:.0f}" if v else "-", len(v)]
           for name, v in (("new leader known", to_leader), ("first write acknowledged",
                                                              to_write))])


def bench_transfer(spurtest, tmp, trials):
    gaps, normal = [], []
    for t in range(trials):
        with ready_cluster(spurtest, tmp / f"t{t}") as (c, old):
            w = start_writer(spurtest, c, c.hosts(), 4000)
            time.sleep(1.5)
            t0 = mono()
            c.replica(old).signal(signal.SIGTERM)
            recs = writes_of(w)
            c.replica(old).wait_exit(20)
            acks = sorted(r[1] for r in recs if r[2])
            before = [b - a for a, b in zip(acks, acks[1:]) if b < t0]
            around = [b - a for a, b in zip(acks, acks[1:]) if b >= t0 and a <= t0 + 3]
            if before and around:
                normal.append(pct(before, 50))
                gaps.append(max(around) - pct(before, 50))
    table(f"Graceful transfer on SIGTERM of the leader ({trials} trials, one writer)",
          ["measure", "p50 ms", "max ms", "n"],
          [["write unavailability", f"{pct(gaps, 50) * 1000:.1f}",
            f"{max(gaps) * 1000:.1f}" if gaps else "-", len(gaps)],
           ["normal write latency", f"{pct(normal, 50) * 1000:.2f}",
            f"{max(normal) * 1000:.2f}" if normal else "-", len(normal)]])


def bench_coldstart(spurtest, tmp, trials):
    times = []
    for t in range(trials):
        c = spurtest.Cluster(tmp / f"s{t}", n=3, raft=dict(DEFAULT_RAFT))
        try:
            t0 = mono()
            c.start_all()
            for i in (1, 2, 3):
                c.replica(i).wait_ready(30)
            times.append(mono() - t0)
        finally:
            c.kill_all()
    table(f"Cold start of 3 empty replicas to every /readyz 200 ({trials} trials, defaults)",
          ["p50 ms", "p99 ms", "max ms"],
          [[f"{pct(times, 50) * 1000:.0f}", f"{pct(times, 99) * 1000:.0f}",
            f"{max(times) * 1000:.0f}"]])


def bench_restart(spurtest, tmp, entries, kind):
    c = spurtest.Cluster(tmp / f"r-{kind}", n=1,
                         raft=dict(DEFAULT_RAFT, snapshot_entries=100000000))
    state = Path(c.cfgs[0]["controller"]["state_dir"])
    mk = spurtest.BUILD / "bench" / "cluster" / "bench-mklog"
    out = subprocess.run([str(mk), str(state), str(entries), c.cfgs[0]["controller"]["peers"][0],
                          kind], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        print("bench-mklog failed:", out.stderr)
        return
    size = sum(f.stat().st_size for f in state.glob("wal-*.log"))
    try:
        t0 = mono()
        s = c.start(1)
        spurtest.wait_until(lambda: "phase=running" in s.log(), 60, interval=0.005)
        t_run = mono()
        s.wait_ready(120)
        t_ready = mono()
        log = s.log()
        m = re.search(r'msg="state recovered".* ms=(\d+)', log)
        rss = max(0, proc_status_kib(s.worker_pid(), "VmRSS")) // 1024
    finally:
        c.kill_all()
    what = "clock ticks, ~30 B" if kind == "tick" else "job submissions, ~330 B"
    table(f"Restart of a replica with {entries:,} log entries ({what}; {size / 2**20:.0f} MiB "
          "of segments, preallocated)",
          ["to RUNNING ms", "storage recovery ms", "to /readyz 200 ms", "worker RSS MiB"],
          [[f"{(t_run - t0) * 1000:.0f}", m.group(1) if m else "?",
            f"{(t_ready - t0) * 1000:.0f}", rss]])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--entries", type=int, default=1000000)
    add_build_option(ap)
    ap.add_argument("--only", default="election,transfer,coldstart,restart")
    args = ap.parse_args()
    spurtest = spurtest_for(args.build)

    only = set(args.only.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="spurbench-cluster-"))
    try:
        if "coldstart" in only:
            bench_coldstart(spurtest, tmp, max(5, args.trials // 2))
        if "election" in only:
            bench_election(spurtest, tmp, args.trials)
        if "transfer" in only:
            bench_transfer(spurtest, tmp, max(5, args.trials // 2))
        if "restart" in only:
            bench_restart(spurtest, tmp, args.entries, "tick")
            bench_restart(spurtest, tmp, args.entries, "submit")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
