#!/usr/bin/env python3
"""Accounting benchmark (issue 14): the submit rate with and without a database, and the
export throughput into a real PostgreSQL while 64 clients submit.

Three rows, each on a fresh 3-replica cluster on 127.0.0.1 (free ports, raft.fsync on, the
heartbeat and election timeout of bench/submit), build/bench/submit/bench_submit with
--clients N for --seconds S after --warmup W:
  - without accounting.database_url;
  - with it pointing at a port where nothing listens (--no-down-row: not run): what the
    outbox itself costs, records appended in the state machine and nothing exported;
  - with it pointing at a private PostgreSQL started for the row (tests/integration/
    pgtest.py: Debian's server, initdb in a temporary directory, fsync off,
    synchronous_commit on), the exporter connected before the load starts.
During the second row a thread counts job_events rows every 0.25 s; after the load the
driver waits (at most --drain-timeout s) until the leader's outbox is empty. The jobs stay
pending (no agents): one record (submit) per job.

Prints: submit jobs/s without and with the database and the difference in %; export
records/s during the load (rows added while the clients ran / load time), the rows in the
database and the outbox depth when the load ended, the drain time after it, and the
overall export rate (all rows / first row to drained); then where the CPU went during each
row's load (the leader's worker, the followers', PostgreSQL, the driver, the rest) and how
busy the machine was. Issue 14's target: with a database
at most 10 % fewer submissions/s. Prints; asserts nothing.

Usage: bench/acct/run.py [--seconds 10] [--clients 64] [--warmup 1] [--batch-size N]
                         [--drain-timeout 300] [--build DIR] [--keep]
"""
import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import start_submit_driver  # noqa: E402


def proc_cpu():
    """{pid: (comm, CPU ticks used: utime + stime)} of every process now."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        r = st.rfind(")")
        fields = st[r + 2:].split()  # from field 3 (state) on: utime is 14, stime 15
        out[int(d)] = (st[st.find("(") + 1:r], int(fields[11]) + int(fields[12]))
    return out


def machine_ticks():
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    return sum(v) - idle, sum(v)


class CpuSplit:
    """Where the CPU went during a load: the leader's worker, the followers' workers,
    PostgreSQL (every process named postgres), the submit driver (the children this
    process reaped meanwhile) and everything else, in CPU seconds; and how busy the whole
    machine was."""

    def __init__(self, cluster, leader):
        w = {i: cluster.worker_pid(i) for i in range(1, 4)}
        self.leader, self.followers = w[leader], {p for i, p in w.items() if i != leader}
        self.hz = os.sysconf("SC_CLK_TCK")

    def __enter__(self):
        import resource
        self.p0, self.m0 = proc_cpu(), machine_ticks()
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.c0 = ru.ru_utime + ru.ru_stime
        return self

    def __exit__(self, *exc):
        import resource
        p1, m1 = proc_cpu(), machine_ticks()
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        groups = {"leader": 0, "followers": 0, "postgres": 0, "other": 0}
        for pid, (comm, t) in p1.items():
            before = self.p0.get(pid)
            d = t - (before[1] if before and before[0] == comm else 0)
            if pid == self.leader:
                groups["leader"] += d
            elif pid in self.followers:
                groups["followers"] += d
            elif comm.startswith("postgres"):
                groups["postgres"] += d
            elif pid != os.getpid():
                groups["other"] += d
        self.cpu = {k: v / self.hz for k, v in groups.items()}
        self.cpu["driver"] = ru.ru_utime + ru.ru_stime - self.c0
        busy, total = m1[0] - self.m0[0], m1[1] - self.m0[1]
        self.busy_pct = 100.0 * busy / total if total else float("nan")
        return False

    def row(self, label, jobs_per_s, seconds):
        jobs = jobs_per_s * seconds
        per = {k: (v / jobs * 1e6 if jobs else float("nan")) for k, v in self.cpu.items()}
        return (f"{label:24} " + " ".join(f"{self.cpu[k]:6.2f}/{per[k]:5.0f}"
                                           for k in CPU_GROUPS) + f" {self.busy_pct:6.0f}")


CPU_GROUPS = ("leader", "followers", "postgres", "driver", "other")


def submit_load(spurtest, bench, cluster, a):
    """bench_submit against cluster: (jobs/s, the row as printed, the process)."""
    p = subprocess.run([str(bench), "--hosts", cluster.hosts(), "--cluster", "test",
                        "--clients", str(a.clients), "--seconds", str(a.seconds),
                        "--warmup", str(a.warmup), "--script-bytes", "256"],
                       capture_output=True, text=True, timeout=a.seconds + a.warmup + 120,
                       env=dict(os.environ, SPUR_JWT=cluster.token()))
    lines = [l for l in p.stdout.splitlines() if l.strip() and not l.startswith("#")]
    row = lines[-1] if lines else ""
    try:
        rate = float(row.split()[3])
    except (IndexError, ValueError):
        rate = float("nan")
    return rate, row, p


def new_cluster(spurtest, tmp, name, accounting=None):
    over = {"raft": {"heartbeat_ms": 100, "election_timeout_ms": 1000, "fsync": True}}
    if accounting:
        over["accounting"] = accounting
    c = spurtest.Cluster(tmp / name, n=3, **over)
    c.start_all()
    c.wait_ready()
    return c, c.leader()


class RowCounter(threading.Thread):
    """Counts job_events rows every `every` seconds: samples of (monotonic time, rows)."""

    def __init__(self, pg, every=0.25):
        super().__init__(daemon=True)
        self.pg, self.every = pg, every
        self.samples = []
        self.stop_flag = threading.Event()

    def count(self):
        try:
            return self.pg.count("job_events")
        except Exception:  # noqa: BLE001 - a sample lost is a sample lost
            return None

    def run(self):
        while not self.stop_flag.is_set():
            n = self.count()
            if n is not None:
                self.samples.append((time.monotonic(), n))
            self.stop_flag.wait(self.every)

    def at(self, t):
        """The last sample taken at or before t (its row count), 0 for none."""
        best = 0
        for ts, n in self.samples:
            if ts <= t:
                best = n
        return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--batch-size", type=int, default=0,
                    help="accounting.batch_size (default: the configuration's, 500)")
    ap.add_argument("--drain-timeout", type=float, default=300)
    ap.add_argument("--no-down-row", action="store_true",
                    help="skip the row with accounting on and the database unreachable")
    a, spurtest, bench, tmp = start_submit_driver(ap, "bench-acct-")
    import pgtest  # tests/integration, put on sys.path by spurtest_for()

    why = pgtest.skip_reason()
    if why:
        sys.exit(f"bench/acct: {why}")
    print(f"# 3 replicas on 127.0.0.1, fsync on, {a.clients} clients, {a.seconds:g} s after "
          f"{a.warmup:g} s warm-up, a fresh cluster per row; state in {tmp}")
    rc = 0
    pg = cluster = None
    try:
        # ---- without a database
        cluster, lid = new_cluster(spurtest, tmp, "nodb")
        with CpuSplit(cluster, lid) as cpu_base:
            base, base_row, p = submit_load(spurtest, bench, cluster, a)
        if p.returncode != 0:
            rc = 1
            sys.stderr.write(p.stderr)
        cluster.kill_all()
        cluster = None

        # ---- accounting on, the database unreachable: the outbox's own cost (records
        # appended in the state machine, nothing exported, nothing trimmed)
        down_row, cpu_down = "", None
        if not a.no_down_row:
            cluster, lid = new_cluster(spurtest, tmp, "dbdown", {
                "database_url": f"host=127.0.0.1 port={spurtest.free_port()} dbname=x user=x"})
            with CpuSplit(cluster, lid) as cpu_down:
                down, down_row, p = submit_load(spurtest, bench, cluster, a)
            if p.returncode != 0:
                rc = 1
                sys.stderr.write(p.stderr)
            cluster.kill_all()
            cluster = None

        # ---- with a database
        pg = pgtest.Postgres()
        acct = {"database_url": pg.url()}
        if a.batch_size:
            acct["batch_size"] = a.batch_size
        cluster, lid = new_cluster(spurtest, tmp, "db", acct)
        spurtest.wait_until(lambda: spurtest.metric_value(
            cluster.metrics(lid), "spur_acct_database_up") == 1, 30, interval=0.1,
            what="the exporter to connect")
        counter = RowCounter(pg)
        counter.start()
        t_load0 = time.monotonic()
        with CpuSplit(cluster, lid) as cpu_db:
            with_db, db_row, p = submit_load(spurtest, bench, cluster, a)
        t_load1 = time.monotonic()
        if p.returncode != 0:
            rc = 1
            sys.stderr.write(p.stderr)
        m = cluster.metrics(lid) or {}
        outbox_at_end = spurtest.metric_value(m, "spur_acct_outbox_records", -1)
        drained = None
        deadline = t_load1 + a.drain_timeout
        while time.monotonic() < deadline:
            v = spurtest.metric_value(cluster.metrics(lid), "spur_acct_outbox_records")
            if v == 0:
                drained = time.monotonic()
                break
            time.sleep(0.05)
        counter.stop_flag.set()
        counter.join(5)
        total = pg.count("job_events")
        rows_end = counter.at(t_load1)
        # The load phase: warm-up included (bench_submit submits during it too).
        load_rate = (rows_end - counter.at(t_load0)) / max(t_load1 - t_load0, 1e-9)
        first = next((ts for ts, n in counter.samples if n > 0), None)
        died = [i for i in range(1, 4) if cluster.replica(i).proc.poll() is not None]

        print(f"{'':24} {'clients':>7} {'jobs':>10} {'seconds':>8} {'jobs/s':>10} "
              f"{'p50_ms':>9} {'p99_ms':>9} {'p999_ms':>9} {'max_ms':>9} {'errors':>7}")
        print(f"{'submit, no database':24} {base_row}")
        if down_row:
            print(f"{'submit, database down':24} {down_row}")
        print(f"{'submit, with database':24} {db_row}")
        diff = (with_db - base) / base * 100 if base else float("nan")
        print(f"submit jobs/s: without {base:.0f}, with {with_db:.0f}: {diff:+.1f} % "
              f"(target: no worse than -10 %)")
        print(f"export during the load: {load_rate:.0f} records/s "
              f"({rows_end} rows in job_events when the load ended, outbox "
              f"{outbox_at_end:.0f} on the leader)")
        if outbox_at_end == 0:
            print("# the outbox was empty when the load ended: the export kept up, so its "
                  "rate is the submit rate, not its ceiling")
        if drained is not None:
            overall = total / max(drained - first, 1e-9) if first is not None else 0.0
            print(f"drain after the load: {drained - t_load1:.2f} s; {total} rows in all; "
                  f"overall {overall:.0f} records/s (first row to outbox empty)")
        else:
            rc = 1
            print(f"drain after the load: not done in {a.drain_timeout:g} s ({total} rows)")
        secs = a.seconds + a.warmup
        print(f"\nCPU during the load (warm-up included), seconds/us per job (jobs: the "
              f"row's jobs/s x {secs:g} s)")
        print(f"{'':24} " + " ".join(f"{k:>12}" for k in CPU_GROUPS) + f" {'busy_%':>6}")
        print(cpu_base.row("no database", base, secs))
        if cpu_down is not None:
            print(cpu_down.row("database down", down, secs))
        print(cpu_db.row("with database", with_db, secs))
        for i in died:
            rc = 1
            print(f"# replica {i} exited during the run")
    finally:
        if cluster is not None:
            cluster.kill_all()
        if pg is not None:
            pg.close()
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
