#!/usr/bin/env python3
"""Memory and time at scale (issue 5): 100,000 jobs in a 3-replica cluster's state.

Starts a 3-replica cluster on 127.0.0.1 (raft.fsync on, the default heartbeat and
election timeout, raft.snapshot_entries just above the job count so that the first
snapshot holds them all), fills it with build/bench/submit/bench_submit --jobs N (256-byte
scripts, 64 clients), and prints:

  fill      time to submit the N jobs (exactly-once writes, 64 clients)
  memory    VmRSS (and VmHWM, the peak) of each replica's worker, spurctld-raftd: idle
            before the fill, after the fill, after the snapshot, after the squeue runs
  snapshot  the "snapshot saved ... bytes= ms=" line of each worker: ms is the time to
            write and fsync the snapshot file (off the event loop); the state machine's
            serialisation before it is not in it (bench/fsm measures that)
  squeue    wall time of `squeue -h -t all | wc -l` (a shell pipeline, as an operator
            runs it; linearizable read), through the leader and through a follower

The answer for 100,000 jobs (about 10 MB) is larger than the default frame limit
(controller.max_frame_bytes, 4 MiB): it comes in pages. The rows "via the leader" and "via
the follower" use a client configuration with 64 MiB frames (one page); the row "default
client config" shows the same listing in 4 MiB pages.

Usage: bench/scale/run.py [--jobs 100000] [--clients 64] [--squeue-runs 3] [--build DIR]
                          [--keep]
Targets (issue 5): worker RSS <= 200 MiB; snapshot written in <= 1 s; squeue of all jobs
in <= 1 s. Prints; asserts nothing.
"""
import argparse
import copy
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import proc_status_kib, start_submit_driver  # noqa: E402


def memory_row(cluster, what):
    cells = []
    for i in range(1, cluster.n + 1):
        pid = cluster.worker_pid(i)
        rss, peak = proc_status_kib(pid, "VmRSS") / 1024, proc_status_kib(pid, "VmHWM") / 1024
        cells.append(f"{rss:7.1f} ({peak:5.1f})")
    print(f"{what:<22} " + "  ".join(cells))


def snapshot_lines(cluster):
    out = {}
    for i in range(1, cluster.n + 1):
        m = re.findall(r'msg="snapshot saved" index=(\d+) term=\d+ bytes=(\d+) ms=(\d+)',
                       cluster.replica(i).log())
        if m:
            out[i] = tuple(int(x) for x in m[-1])
    return out


def squeue_wall(build, host, env_cfg, token):
    """Wall time and line count of `squeue -h -t all | wc -l` through one replica."""
    env = dict(os.environ, SPUR_CONFIG=str(env_cfg), SPUR_CONTROLLER=host,
               SPUR_JWT=token)
    squeue = build / "client" / "squeue"
    t = time.perf_counter()
    p = subprocess.run(f"{squeue} -h -t all | wc -l", shell=True, capture_output=True,
                       text=True, env=env, timeout=120)
    dt = time.perf_counter() - t
    return dt, int(p.stdout.strip() or 0), p.stderr.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100000)
    ap.add_argument("--clients", default="64")
    ap.add_argument("--squeue-runs", type=int, default=3)
    a, spurtest, bench, tmp = start_submit_driver(ap, "bench-scale-")
    # The first snapshot comes once snapshot_entries entries are applied: a few entries
    # of configuration, then the jobs; 100 more are submitted below to cross the line.
    snap_entries = a.jobs + 100
    cluster = spurtest.Cluster(tmp, n=3, raft={"heartbeat_ms": 100, "election_timeout_ms": 1000,
                                               "fsync": True, "snapshot_entries": snap_entries})
    cfg = copy.deepcopy(cluster.cfgs[0])
    cfg["controller"]["max_frame_bytes"] = 64 << 20
    big_client = spurtest.write_config(tmp / "client-64m.yaml", **cfg)
    try:
        cluster.start_all()
        cluster.wait_ready()
        leader = cluster.leader()
        follower = [i for i in range(1, 4) if i != leader][0]
        print(f"# 3 replicas on 127.0.0.1, fsync on, leader node {leader}, "
              f"raft.snapshot_entries {snap_entries}; state in {tmp}")
        print(f"{'worker RSS MiB (peak)':<22} " + "  ".join(f"{'node ' + str(i):>15}"
                                                          for i in range(1, 4)))
        memory_row(cluster, "idle")

        t = time.perf_counter()
        p = subprocess.run([str(bench), "--hosts", cluster.hosts(), "--cluster", "test",
                            "--clients", a.clients, "--jobs", str(a.jobs), "--name", "scale"],
                           capture_output=True, text=True,
                           env=dict(os.environ, SPUR_JWT=cluster.token()))
        fill_s = time.perf_counter() - t
        if p.returncode != 0:
            print(p.stdout, p.stderr)
            return 1
        memory_row(cluster, f"{a.jobs} jobs")

        # Cross the snapshot line with a few more jobs, then wait for every replica's.
        extra = 0
        deadline = time.monotonic() + 60
        while len(snapshot_lines(cluster)) < 3 and time.monotonic() < deadline:
            if extra < 200:
                subprocess.run([str(bench), "--hosts", cluster.hosts(), "--cluster", "test",
                                "--clients", "1", "--jobs", "20", "--name", "scale"],
                               capture_output=True, text=True, check=True,
                               env=dict(os.environ, SPUR_JWT=cluster.token()))
                extra += 20
            time.sleep(0.2)
        snaps = snapshot_lines(cluster)
        memory_row(cluster, "after the snapshot")

        rows = []
        for who, i in (("leader", leader), ("follower", follower)):
            for _ in range(a.squeue_runs):
                rows.append((who, i) + squeue_wall(spurtest.BUILD, cluster.api(i), big_client, cluster.token()))
        default_try = squeue_wall(spurtest.BUILD, cluster.api(leader), cluster.cfg_path,
                                  cluster.token())
        memory_row(cluster, "after squeue")

        print()
        print(f"fill: {a.jobs} jobs in {fill_s:.2f} s ({a.jobs / fill_s:.0f} jobs/s), "
              f"then {extra} more to cross raft.snapshot_entries")
        print(p.stdout.strip())
        print()
        print(f"{'snapshot':<10} {'node':>4} {'index':>8} {'MiB':>7} {'ms':>6}")
        for i in range(1, 4):
            if i in snaps:
                idx, size, ms = snaps[i]
                print(f"{'saved':<10} {i:>4} {idx:>8} {size / 1048576:7.1f} {ms:>6}")
            else:
                print(f"{'none':<10} {i:>4}   (no \"snapshot saved\" line within 60 s)")
        print()
        print(f"{'squeue -h -t all | wc -l':<26} {'node':>4} {'lines':>7} {'wall_s':>7}")
        for who, i, dt, lines, err in rows:
            tail = f"  {err}" if err else ""
            print(f"{'via the ' + who:<26} {i:>4} {lines:>7} {dt:7.3f}{tail}")
        dt, lines, err = default_try
        print(f"{'default client config':<26} {leader:>4} {lines:>7} {dt:7.3f}  {err}")
        return 0
    finally:
        cluster.kill_all()
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
