#!/usr/bin/env python3
"""Submission benchmark (issue 5): jobs/s and latency at 1, 16 and 64 clients.

For each client count, starts a fresh 3-replica cluster on 127.0.0.1 (free ports, each
replica under its own spurctld, raft.fsync on, the default heartbeat, election timeout and
raft.snapshot_entries, state dirs under a temporary directory on the disk that holds
/tmp), waits for a leader, runs build/bench/submit/bench_submit against it, and stops the
cluster; then prints one table. A fresh cluster per row keeps a row's figures from
depending on how many jobs the rows before it left in the state (snapshots cost more as
the state grows).

Usage: bench/submit/run.py [--clients 1,16,64] [--seconds 10] [--warmup 1]
                           [--script-bytes 256] [--snapshot-entries N] [--build DIR]
                           [--keep]
Targets (issue 5, this 2-core machine): >= 20,000 jobs/s at 64 clients; p50 <= 1 ms at
1 client. Prints; asserts nothing.
"""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import start_submit_driver  # noqa: E402


def one_row(spurtest, bench, tmp, clients, a):
    raft = {"heartbeat_ms": 100, "election_timeout_ms": 1000, "fsync": True}
    if a.snapshot_entries:
        raft["snapshot_entries"] = a.snapshot_entries
    cluster = spurtest.Cluster(tmp / f"c{clients}", n=3, raft=raft)
    try:
        cluster.start_all()
        cluster.wait_ready()
        leader = cluster.leader()
        p = subprocess.run([str(bench), "--hosts", cluster.hosts(), "--cluster", "test",
                            "--clients", str(clients), "--seconds", a.seconds,
                            "--warmup", a.warmup, "--script-bytes", a.script_bytes],
                           capture_output=True, text=True,
                           env=dict(__import__("os").environ, SPUR_JWT=cluster.token()))
        died = [i for i in range(1, 4) if cluster.replica(i).proc.poll() is not None]
        return leader, p, died
    finally:
        cluster.kill_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="1,16,64")
    ap.add_argument("--seconds", default="10")
    ap.add_argument("--warmup", default="1")
    ap.add_argument("--script-bytes", default="256")
    ap.add_argument("--snapshot-entries", type=int, default=0,
                    help="raft.snapshot_entries (default: the configuration's default)")
    a, spurtest, bench, tmp = start_submit_driver(ap, "bench-submit-")
    snap = a.snapshot_entries or "default"
    print(f"# 3 replicas on 127.0.0.1, fsync on, raft.snapshot_entries {snap}, "
          f"a fresh cluster per row; state in {tmp}")
    rc = 0
    header_done = False
    try:
        for clients in (int(x) for x in a.clients.split(",")):
            leader, p, died = one_row(spurtest, bench, tmp, clients, a)
            lines = p.stdout.strip().splitlines()
            if not header_done:
                print("\n".join(lines[:-1]))
                header_done = True
            print(lines[-1] if lines else f"{clients:7}  (no output)")
            sys.stdout.flush()
            if p.returncode != 0 or died:
                rc = 1
                sys.stderr.write(p.stderr)
                for i in died:
                    print(f"# replica {i} exited during the run")
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
