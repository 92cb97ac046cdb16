#!/usr/bin/env python3
"""Jobs run end to end (issue 12): trivial jobs per second and submit-to-start latency.

For each agent count (default 1, then 4), starts a fresh 3-replica cluster on 127.0.0.1
(free ports, raft.fsync on, each replica under its own spurctld) and that many spurd
agents of --cpus CPUs each (agent.heartbeat_s 1), waits until every node is idle,
submits --jobs `sbatch --wrap true` jobs through a pool of --parallel sbatch processes
at a time, and waits until every job is final. Then, from `squeue -t all --json` (the
leader's log clock, the same host's wall clock as this driver):
  jobs/s      jobs / (last end_time - first submit), the first submit taken on this
              host's clock just before the first sbatch started;
  start p50/p99/max  start_time - submit_time per job (submit-to-start latency);
  submit/s    jobs / (last sbatch exit - first sbatch start), how fast the pool fed it.
A row also counts jobs not COMPLETED. Every wait is bounded (--timeout per row): a row
that times out says so and the next one runs.

Run as root (spurd runs jobs as their users). Usage:
  bench/jobs/run.py [--agents 1,4] [--cpus 2] [--jobs 1000] [--parallel 16]
                    [--submit sbatch|api] [--timeout 600] [--build DIR] [--keep]
Reference (issue 12): Slurm 22.05 on this kind of machine, 2.1 jobs/s on one node (0.7
with its defaults), 9.5 with four. Target: >= 300 jobs/s on one agent. Prints; asserts
nothing.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import add_build_option, pct, spurtest_for  # noqa: E402

FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY"}


def cli(spurtest, cluster, work, *args, timeout=60):
    env = dict(os.environ, SPUR_CONFIG=str(cluster.cfg_path), SPUR_CONTROLLER=cluster.hosts(),
               SPUR_JWT=cluster.token())
    return subprocess.run([str(spurtest.BUILD / "client" / args[0]), *map(str, args[1:])],
                          capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=str(work))


def jobs_json(spurtest, cluster, work):
    p = cli(spurtest, cluster, work, "squeue", "-t", "all", "--json")
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)


def one_row(spurtest, tmp, n_agents, a):
    """Run one configuration; returns a dict of figures (or an error string in it)."""
    row = {"agents": n_agents, "cpus": n_agents * a.cpus}
    cluster = spurtest.Cluster(tmp, n=3, raft={"fsync": True},
                               agent={"heartbeat_s": 1, "node_timeout_s": 30})
    agents = []
    work = tmp / "work"
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + a.timeout
    try:
        cluster.start_all()
        cluster.wait_ready()
        cluster.leader()
        for k in range(1, n_agents + 1):
            agents.append(spurtest.Agent(tmp, spurtest.agent_config(cluster.cfgs[0]),
                                         f"b{k}", cpus=a.cpus))
        names = {ag.name for ag in agents}
        while True:
            p = cli(spurtest, cluster, work, "sinfo", "--json")
            if p.returncode == 0:
                nodes = {n["name"]: n["state"] for n in json.loads(p.stdout)["nodes"]}
                if all(nodes.get(x) == "idle" for x in names):
                    break
            if time.monotonic() > deadline:
                row["error"] = "the agents never registered idle"
                return row
            time.sleep(0.2)

        hosts = cluster.hosts().split(",")
        spec = (spurtest.pb_field(1, "wrap") + spurtest.pb_field(10, str(work))
                + spurtest.pb_field(12, b"#!/bin/sh\ntrue\n") + spurtest.pb_field(14, "root"))
        body = spurtest.pb_field(1, spec)  # SubmitJobRequest.spec

        def submit(i):
            if a.submit == "api":
                # One Request per job straight to the client API (no CLI process): what the
                # controller and the agent sustain without the cost of starting sbatch.
                try:
                    r = spurtest.api_call(hosts[i % len(hosts)], 40, body, user="root",
                                          cluster_name=cluster.cfgs[0]["cluster_name"],
                                          client_id=(1 << 40) + i, seq=1, timeout=60)
                except OSError:
                    return False
                return r["code"] == 0
            p = cli(spurtest, cluster, work, "sbatch", "--parsable", "--wrap", "true",
                    timeout=120)
            return p.returncode == 0

        t_first = time.time() * 1000.0
        m0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(a.parallel) as pool:
            ok = sum(pool.map(submit, range(a.jobs)))
        row["submit_s"] = a.jobs / max(1e-9, time.monotonic() - m0)
        row["refused"] = a.jobs - ok
        jobs = None
        while time.monotonic() < deadline:
            jobs = jobs_json(spurtest, cluster, work)
            if jobs is not None and len(jobs) >= ok and all(j["state"] in FINAL for j in jobs):
                break
            time.sleep(0.5)
        else:
            row["error"] = f"not all final within {a.timeout}s"
        jobs = jobs or []
        done = [j for j in jobs if j["state"] == "COMPLETED"]
        row["not_completed"] = len(jobs) - len(done)
        if done:
            last_end = max(j["end_time_ms"] for j in done)
            row["jobs_s"] = len(done) / max(1e-9, (last_end - t_first) / 1000.0)
            lat = [j["start_time_ms"] - j["submit_time_ms"] for j in done]
            row["p50"], row["p99"], row["max"] = pct(lat, 50), pct(lat, 99), max(lat)
        return row
    finally:
        for ag in agents:
            ag.kill()
        cluster.kill_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="1,4", help="agent counts, one row each")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs each agent offers")
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--parallel", type=int, default=16, help="submitters at a time")
    ap.add_argument("--submit", choices=("sbatch", "api"), default="sbatch",
                    help="sbatch processes (as users do), or client API requests from this "
                         "process (no CLI start-up on the 2 shared cores)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per row, at most")
    add_build_option(ap)
    ap.add_argument("--keep", action="store_true", help="keep the state dirs and logs")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: spurd runs jobs as their users")
    spurtest = spurtest_for(a.build)
    if not spurtest.SPURD.exists():
        sys.exit(f"{spurtest.SPURD} is missing: ninja -C {spurtest.BUILD}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    print(f"# 3 replicas + N spurd agents of {a.cpus} CPUs on 127.0.0.1, fsync on; "
          f"{a.jobs} x `--wrap true` jobs through {a.submit}, {a.parallel} at a time; "
          f"state in {tmp}")
    print(f"{'agents':>6} {'cpus':>4} {'jobs/s':>8} {'submit/s':>8} {'start p50 ms':>12} "
          f"{'p99 ms':>8} {'max ms':>8} {'refused':>7} {'not CD':>6}  note")
    for n in [int(x) for x in a.agents.split(",") if x]:
        r = one_row(spurtest, tmp / f"a{n}", n, a)

        def f(k, fmt):
            return format(r[k], fmt) if k in r else "-"
        print(f"{r['agents']:>6} {r['cpus']:>4} {f('jobs_s', '8.1f')} {f('submit_s', '8.1f')} "
              f"{f('p50', '12.0f')} {f('p99', '8.0f')} {f('max', '8.0f')} "
              f"{f('refused', '7d')} {f('not_completed', '6d')}  {r.get('error', '')}",
              flush=True)
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
