"""Accounting in PostgreSQL (issue 14): a real PostgreSQL, real replicas, real jobs.

Every test starts its own PostgreSQL (pgtest.Postgres: Debian's server, initdb as the
`postgres` user, a free 127.0.0.1 port, scram-sha-256 over TCP) and its own replicas
(spurtest.Cluster, accounting.database_url pointing at it) and, where jobs must run, spurd
agents. What holds, each against those processes:
  - the harness itself: start, query, kill -9, restart (what committed is still there);
  - jobs that complete, fail with exit 3 and are cancelled while pending are in `sacct`
    with the right fields and in the `jobs` table; job_events holds seq 1..N without a gap,
    each (job, event) once, and every replica's outbox drains to 0;
  - PostgreSQL down when the controller starts and up 60 s later: the controller keeps
    running and scheduling meanwhile (jobs run, sacct answers from its state), then every
    record arrives, once;
  - kill -9 of the postmaster in the middle of an export of 5,000 records (batches of 50),
    restart: exactly once (count == max seq, no gaps, a jobs row per job);
  - kill -9 of the leader's worker in the middle of an export; and right after the commit
    of the last batch but before its trim (followers SIGSTOPped, so the trim cannot
    commit): a new leader loses nothing, doubles nothing, re-exports nothing, and the
    outbox drains on every replica;
  - a wrong password, and a newer schema version (99): a clear log line,
    spur_acct_export_errors_total{reason=auth|schema} > 0, spur_acct_database_up 0, and
    jobs still submit and run;
  - two clusters (cluster_name alpha, beta; beta's password from accounting.password_file)
    in one database do not mix: jobs rows, job_events and sacct each only its own;
  - a connection the server ends while the exporter is idle is noticed and made again.

Every wait is bounded and says what it waited for, with the replicas', the agents' and
PostgreSQL's log tails. Timing of the timeouts: about 4 minutes on 2 cores (the 60 s
outage is most of it).
"""
import contextlib
import datetime
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import pgtest
import spurtest
from spurtest import metric_value, wait_until

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="spurd runs jobs as their users: needs root"),
    pytest.mark.skipif(pgtest.skip_reason() is not None,
                       reason=pgtest.skip_reason() or "PostgreSQL is available"),
]

AGENT_KEYS = {"heartbeat_s": 1, "node_timeout_s": 5, "kill_wait_s": 2}
FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY"}
SACCT = spurtest.BUILD / "client" / "sacct"
BENCH_SUBMIT = spurtest.BUILD / "bench" / "submit" / "bench_submit"


@pytest.fixture
def postgres():
    """A fresh PostgreSQL (role spur, database spuracct), stopped and removed after."""
    pg = pgtest.Postgres()
    yield pg
    pg.close()


@pytest.fixture
def clusters(tmp_path):
    """Make AcctClusters with clusters(pg, **kw); all are killed after the test."""
    made = []

    def make(pg, **kw):
        ac = AcctCluster(tmp_path / f"ac{len(made)}", pg, **kw)
        made.append(ac)
        return ac
    yield make
    for ac in made:
        ac.kill()


# ---- a cluster with accounting --------------------------------------------------------

class AcctCluster:
    """n replicas with accounting.database_url set to pg, plus `agents` spurd agents
    cn1..cnK (none: jobs stay pending, one record each), and the CLI pointed at them."""

    def __init__(self, tmp, pg, n=3, agents=0, cpus=2, cluster_name="test", accounting=None,
                 start=True, **over):
        self.tmp = Path(tmp)
        self.pg = pg
        self.name = cluster_name
        acct = {"database_url": pg.url(), "batch_size": 50, "retry_max_ms": 500}
        acct.update(accounting or {})
        over.setdefault("agent", dict(AGENT_KEYS))
        self.c = spurtest.Cluster(self.tmp, n=n, cluster_name=cluster_name, accounting=acct,
                                  **over)
        self.n = n
        self.agents = {}
        self.work = self.tmp / "work"
        self.work.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.nagents, self.cpus = agents, cpus
        if start:
            self.start()

    def start(self):
        try:
            self.c.start_all()
            self.c.wait_ready()
            self.c.leader()
            for k in range(1, self.nagents + 1):
                name = f"cn{k}"
                self.agents[name] = spurtest.Agent(
                    self.tmp, spurtest.agent_config(self.c.cfgs[0]), name, cpus=self.cpus)
            if self.agents:
                self.wait_nodes_idle()
        except BaseException:
            self.kill()
            raise
        return self

    def kill(self):
        for a in self.agents.values():
            a.kill()
        self.c.kill_all()

    # -- the CLI ------------------------------------------------------------------------
    def run(self, *args, host=None, timeout=30):
        e = {"SPUR_CONFIG": str(self.c.cfg_path), "SPUR_CONTROLLER": host or self.c.hosts(),
             "SPUR_JWT": self.c.token()}
        cmd = [str(spurtest.BUILD / "client" / args[0])] + [str(a) for a in args[1:]]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, **e), cwd=str(self.work))

    def sbatch(self, *args):
        p = self.run("sbatch", "--parsable", *args)
        assert p.returncode == 0, f"sbatch {args} -> {p.returncode}: {p.stderr}{self.diag()}"
        return int(p.stdout.strip().split(";")[0])

    def jobs(self):
        p = self.run("squeue", "-t", "all", "--json")
        assert p.returncode == 0, p.stderr
        return {j["job_id"]: j for j in json.loads(p.stdout)}

    def wait_state(self, jid, states, timeout=30):
        states = {states} if isinstance(states, str) else set(states)
        last = {}

        def reached():
            try:
                j = self.jobs()[jid]
            except (AssertionError, KeyError, json.JSONDecodeError):
                return None
            last["job"] = j
            if j["state"] in states:
                return j
            if j["state"] in FINAL:
                raise AssertionError(f"job {jid} ended {j['state']}, wanted {sorted(states)}"
                                     f"{self.diag()}")
            return None
        try:
            return wait_until(reached, timeout, interval=0.1, what=f"job {jid} {states}")
        except TimeoutError as e:
            raise AssertionError(f"{e}; last seen: {last.get('job')}{self.diag()}") from None

    def wait_nodes_idle(self, timeout=30):
        def idle():
            p = self.run("sinfo", "--json")
            if p.returncode != 0:
                return False
            with contextlib.suppress(ValueError, KeyError):
                n = {x["name"]: x for x in json.loads(p.stdout)["nodes"]}
                return all(a in n and n[a]["state"] == "idle" for a in self.agents)
            return False
        self.wait(idle, timeout, f"nodes {sorted(self.agents)} idle")

    def sacct(self, *args, host=None):
        assert SACCT.exists(), f"{SACCT} is not built (the sacct alias of spur, issue 14)"
        return self.run("sacct", *args, host=host)

    def sacct_rows(self, fields, *args, host=None):
        """sacct -n -P -o fields args: a list of {field: value} (the CLI must answer 0)."""
        p = self.sacct("-n", "-P", "-o", ",".join(fields), *args, host=host)
        assert p.returncode == 0, f"sacct {args} -> {p.returncode}: {p.stderr}{self.diag()}"
        rows = []
        for line in p.stdout.splitlines():
            if line.strip():
                vals = line.split("|")
                assert len(vals) == len(fields), f"sacct line {line!r} for {fields}"
                rows.append(dict(zip(fields, vals)))
        return rows

    def submit_many(self, count, name="acct-bulk", clients=8):
        """count jobs through build/bench/submit/bench_submit (exactly-once writes from
        several connections)."""
        assert BENCH_SUBMIT.exists(), f"{BENCH_SUBMIT} is not built"
        p = subprocess.run([str(BENCH_SUBMIT), "--hosts", self.c.hosts(), "--cluster",
                            self.name, "--clients", str(clients), "--jobs", str(count),
                            "--name", name, "--script-bytes", "64"],
                           capture_output=True, text=True, timeout=180,
                           env=dict(os.environ, SPUR_JWT=self.c.token()))
        assert p.returncode == 0, f"bench_submit -> {p.returncode}: {p.stdout}{p.stderr}"

    # -- replicas -----------------------------------------------------------------------
    def metrics(self, i):
        return self.c.metrics(i)

    def metric(self, i, name, **labels):
        return metric_value(self.metrics(i), name, **labels)

    def wait_metric(self, i, name, pred, timeout=30, **labels):
        last = {}

        def ok():
            v = self.metric(i, name, **labels)
            last["v"] = v
            return v is not None and pred(v)
        self.wait(ok, timeout, f"{name}{labels or ''} of replica {i} (last {last})",
                  interval=0.05)
        return last["v"]

    def wait_outboxes_empty(self, ids=None, timeout=30):
        for i in ids or self.c.alive():
            self.wait_metric(i, "spur_acct_outbox_records", lambda v: v == 0, timeout)

    def all_alive(self):
        return all(s is not None and s.proc.poll() is None for s in self.c.replicas)

    def log(self, i):
        return self.c.replica(i).log()

    def wait(self, pred, timeout, what, interval=0.1):
        try:
            return wait_until(pred, timeout, interval=interval, what=what)
        except TimeoutError as e:
            raise AssertionError(f"{e}{self.diag()}") from None

    def diag(self):
        out = []
        for name, a in self.agents.items():
            out.append(f"\n--- agent {name}:\n{a.log()[-2000:]}")
        for i, s in enumerate(self.c.replicas, 1):
            if s is not None:
                out.append(f"\n--- replica {i} ({s.log_path.name}):\n{s.log()[-4000:]}")
        out.append("\n" + self.pg.log_tail(20))
        return "".join(out)


# ---- what the database holds ----------------------------------------------------------

def event_stats(pg, cluster):
    """(rows, max seq, missing seqs in 1..max, (job, event) pairs more than once) of
    job_events for cluster."""
    if not pg.table_exists("job_events"):
        return 0, 0, [], []
    n, mx = pg.query("SELECT count(*), coalesce(max(seq), 0) FROM job_events "
                     "WHERE cluster = :'p1'", cluster)[0]
    gaps = [int(r[0]) for r in pg.query(
        "SELECT g FROM generate_series(1, (SELECT coalesce(max(seq), 0) FROM job_events "
        "WHERE cluster = :'p1')) g WHERE NOT EXISTS (SELECT 1 FROM job_events e "
        "WHERE e.cluster = :'p1' AND e.seq = g) LIMIT 20", cluster)]
    # A requeue makes a second start/end legitimately; none of these tests requeues.
    dups = pg.query("SELECT job_id, event, count(*) FROM job_events WHERE cluster = :'p1' "
                    "GROUP BY job_id, event HAVING count(*) > 1 LIMIT 20", cluster)
    return int(n), int(mx), gaps, dups


def assert_exactly_once(ac, expected_records, expected_jobs):
    """job_events of ac's cluster is seq 1..expected_records without gaps or doubles;
    jobs holds expected_jobs rows; spur_export.exported_seq is expected_records."""
    pg, name = ac.pg, ac.name
    n, mx, gaps, dups = event_stats(pg, name)
    assert (n, mx) == (expected_records, expected_records), \
        f"job_events: {n} rows, max seq {mx}, wanted {expected_records}{ac.diag()}"
    assert gaps == [] and dups == [], f"gaps {gaps}, doubles {dups}"
    assert pg.count("jobs", "cluster = :'p1'", name) == expected_jobs
    assert pg.scalar("SELECT exported_seq FROM spur_export WHERE cluster = :'p1'",
                     name) == str(expected_records)


def wait_records(ac, count, timeout=60):
    """Until job_events holds count rows for ac's cluster (fails at once on more)."""
    def arrived():
        n = event_stats(ac.pg, ac.name)[0] if ac.pg.running() else -1
        assert n <= count, f"job_events has {n} rows, more than the {count} made{ac.diag()}"
        return n == count
    ac.wait(arrived, timeout, f"{count} rows in job_events of cluster {ac.name}",
            interval=0.2)


def an_hour_ago():
    return (datetime.datetime.now() - datetime.timedelta(hours=1)).strftime(
        "%Y-%m-%dT%H:%M:%S")


def stop_cont(pid, sig):
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


# ---- the harness ----------------------------------------------------------------------

def test_the_harness_starts_queries_kills_9_and_restarts_a_real_postgres(postgres):
    pg = postgres
    assert pg.port != 5432 and pg.running()
    assert pg.query("SELECT 1, NULL::text, 'a|b'") == [["1", "", "a|b"]]
    assert pg.scalar("SELECT :'p1'::text", "it's") == "it's"
    # The controller's way in: TCP, scram-sha-256, as the owner of spuracct.
    psql = [str(pg.bin / "psql"), "-X", "-At", "-c", "SELECT current_user, current_database()"]
    ok = subprocess.run(psql[:1] + [pg.url()] + psql[1:], capture_output=True, text=True,
                        timeout=30)
    assert ok.returncode == 0 and ok.stdout.strip() == "spur|spuracct", ok.stderr
    bad = subprocess.run(psql[:1] + [pg.url(pw="wrong")] + psql[1:], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode != 0 and "password authentication failed" in bad.stderr
    pwfile = pg.write_password_file(pg.dir / "pgpass", pgpass=True)
    assert (os.stat(pwfile).st_mode & 0o777) == 0o600
    viafile = subprocess.run(psql[:1] + [pg.url(pw=None)] + psql[1:], capture_output=True,
                             text=True, timeout=30, env=dict(os.environ, PGPASSFILE=str(pwfile)))
    assert viafile.returncode == 0, viafile.stderr
    # What committed survives kill -9 of the postmaster; the restart is on the same port.
    pg.query("CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2)")
    pid = pg.kill9()
    assert spurtest.proc_state(pid) is None and not pg.running()
    with pytest.raises(pgtest.PostgresError):
        pg.query("SELECT 1")
    pg.start()
    assert pg.pid() != pid and pg.count("t") == 2
    pg.stop()
    assert not pg.running()
    pg.start()
    assert pg.scalar("SELECT sum(x) FROM t") == "3"


# ---- a: jobs in sacct and in the tables -----------------------------------------------

def test_finished_jobs_are_in_sacct_and_in_the_jobs_table_with_gapless_events(
        postgres, clusters):
    ac = clusters(postgres, n=3, agents=1, cpus=2)
    ok = ac.sbatch("-J", "acct-ok", "--wrap", "true")
    fail = ac.sbatch("-J", "acct-fail", "--wrap", "echo failing; exit 3")
    two = ac.sbatch("-J", "acct-two", "-c", "2", "--wrap", "sleep 0.2")
    held = ac.sbatch("-J", "acct-held", "-H", "--wrap", "true")
    ac.wait_state(held, "PENDING")
    p = ac.run("scancel", held)
    assert p.returncode == 0, p.stderr
    ac.wait_state(ok, "COMPLETED")
    ac.wait_state(fail, "FAILED")
    ac.wait_state(two, "COMPLETED")
    ac.wait_state(held, "CANCELLED")
    # submit + start + end for the three that ran, submit + end for the cancelled one.
    want = {ok: ["submit", "start", "end"], fail: ["submit", "start", "end"],
            two: ["submit", "start", "end"], held: ["submit", "end"]}
    nrec = sum(len(v) for v in want.values())
    wait_records(ac, nrec, timeout=30)
    assert_exactly_once(ac, nrec, 4)
    ev = {}
    for jid, event, state in ac.pg.query(
            "SELECT job_id, event, state FROM job_events WHERE cluster = 'test' ORDER BY seq"):
        ev.setdefault(int(jid), []).append((event, state))
    assert {j: [e for e, _ in v] for j, v in ev.items()} == want
    assert ev[ok][-1] == ("end", "COMPLETED") and ev[fail][-1] == ("end", "FAILED")
    assert ev[held][-1] == ("end", "CANCELLED") and ev[ok][0] == ("submit", "PENDING")

    cols = ["job_id", "name", "user_name", "uid", "partition", "state", "exit_code",
            "exit_signal", "nnodes", "node_list", "cpus", "submit_time IS NOT NULL",
            "start_time IS NOT NULL", "end_time IS NOT NULL", "workdir", "last_seq"]
    rows = {int(r[0]): dict(zip(cols, r)) for r in ac.pg.query(
        f"SELECT {', '.join(cols)} FROM jobs WHERE cluster = 'test'")}
    assert set(rows) == set(want)
    for jid, r in rows.items():
        assert r["user_name"] == "root" and r["uid"] == "0" and r["partition"] == "default", r
        assert r["workdir"] == str(ac.work), r
        assert r["submit_time IS NOT NULL"] == "t" and r["end_time IS NOT NULL"] == "t", r
        assert r["last_seq"] == ac.pg.scalar(
            "SELECT max(seq) FROM job_events WHERE cluster = 'test' AND job_id = :'p1'",
            jid), r
    for jid, name, state, code in ((ok, "acct-ok", "COMPLETED", "0"),
                                   (fail, "acct-fail", "FAILED", "3"),
                                   (two, "acct-two", "COMPLETED", "0")):
        r = rows[jid]
        assert (r["name"], r["state"], r["exit_code"], r["exit_signal"]) == \
            (name, state, code, "0"), r
        assert (r["nnodes"], r["node_list"], r["start_time IS NOT NULL"]) == \
            ("1", "cn1", "t"), r
    assert rows[two]["cpus"] == "2" and rows[ok]["cpus"] == "1"
    assert (rows[held]["name"], rows[held]["state"], rows[held]["start_time IS NOT NULL"]) \
        == ("acct-held", "CANCELLED", "f"), rows[held]

    # The trims committed: every replica's outbox is empty; the leader is connected.
    ac.wait_outboxes_empty()
    lid = ac.c.leader()
    m = ac.metrics(lid)
    assert metric_value(m, "spur_acct_enabled") == 1
    assert metric_value(m, "spur_acct_database_up") == 1
    assert metric_value(m, "spur_acct_exported_seq") == nrec
    assert metric_value(m, "spur_acct_last_export_timestamp_seconds", 0) > 0
    assert "database connected" in ac.log(lid)

    # sacct, through a follower (it forwards to the leader), Slurm's names and formats.
    fields = ["JobID", "JobName", "User", "State", "ExitCode", "AllocCPUS", "NodeList",
              "Partition"]
    ids = ",".join(str(j) for j in want)
    got = ac.sacct_rows(fields, "-a", "-X", "-j", ids, host=ac.c.api(ac.c.follower(lid)))
    by_id = {}
    for r in got:
        assert r["JobID"] not in by_id, f"job {r['JobID']} twice in sacct: {got}"
        by_id[r["JobID"]] = r
    assert set(by_id) == {str(j) for j in want}, got
    assert [by_id[str(ok)][k] for k in ("JobName", "User", "State", "ExitCode", "AllocCPUS",
                                        "NodeList", "Partition")] == \
        ["acct-ok", "root", "COMPLETED", "0:0", "1", "cn1", "default"]
    assert [by_id[str(fail)][k] for k in ("JobName", "State", "ExitCode")] == \
        ["acct-fail", "FAILED", "3:0"]
    assert by_id[str(two)]["AllocCPUS"] == "2"
    assert by_id[str(held)]["JobName"] == "acct-held"
    assert by_id[str(held)]["State"].startswith("CANCELLED"), by_id[str(held)]
    # Without -j: every job of the window, once.
    window = ac.sacct_rows(["JobID"], "-a", "-X", "-S", an_hour_ago())
    assert sorted(int(r["JobID"]) for r in window) == sorted(want)


# ---- b: the database down at start ------------------------------------------------------

@pytest.mark.slow
def test_a_database_down_at_start_and_up_60s_later_gets_every_record_once(
        postgres, clusters):
    pg = postgres
    pg.stop()
    t0 = time.monotonic()
    ac = clusters(pg, n=3, agents=1, cpus=2)
    lid = ac.c.leader()
    ac.wait_metric(lid, "spur_acct_export_errors_total", lambda v: v > 0, 20,
                   reason="connect")
    assert ac.metric(lid, "spur_acct_database_up") == 0
    assert ac.metric(lid, "spur_acct_enabled") == 1
    assert "export failed; retrying" in ac.log(lid)
    # It schedules meanwhile: jobs run and end, their records wait in the outbox.
    done = []
    first = ac.sbatch("-J", "down-1", "--wrap", "true")
    ac.wait_state(first, "COMPLETED")
    done.append(first)
    ac.wait_metric(lid, "spur_acct_outbox_records", lambda v: v >= 3, 10)
    # sacct answers from the replicated state, and says the database is not reachable.
    p = ac.sacct("-n", "-P", "-o", "JobID,State", "-a", "-X", "-j", first)
    assert p.returncode == 0 and p.stdout.split() == [f"{first}|COMPLETED"], \
        (p.stdout, p.stderr)
    assert p.stderr.strip(), "sacct said nothing about the database it could not reach"
    second_at = 30
    while time.monotonic() - t0 < 60:
        assert ac.all_alive(), f"a replica exited while the database was down{ac.diag()}"
        if len(done) == 1 and time.monotonic() - t0 >= second_at:
            jid = ac.sbatch("-J", "down-2", "--wrap", "exit 3")
            ac.wait_state(jid, "FAILED")
            done.append(jid)
        time.sleep(0.5)
    assert len(done) == 2
    assert ac.metric(lid, "spur_acct_outbox_records") == 6
    assert ac.metric(lid, "spur_acct_outbox_oldest_age_seconds") >= 25
    pg.start()
    wait_records(ac, 6, timeout=30)
    assert_exactly_once(ac, 6, 2)
    assert sorted(r[0] for r in pg.query("SELECT state FROM jobs WHERE cluster = 'test'")) \
        == ["COMPLETED", "FAILED"]
    ac.wait_outboxes_empty()
    assert ac.metric(lid, "spur_acct_database_up") == 1
    assert ac.metric(lid, "spur_acct_outbox_oldest_age_seconds") == 0
    assert ac.all_alive()
    time.sleep(1)  # nothing more arrives later (a replay would be a double)
    assert event_stats(pg, "test")[:2] == (6, 6)


# ---- c: kill -9 of the postmaster during an export ----------------------------------------

def kill_when_exporting(ac, lid, total, victim):
    """Poll the leader's spur_acct_exported_seq until the export has begun (> 0), then call
    victim(); returns the value seen last before it. Fails when the export finished first."""
    seen = {}

    def begun():
        v = ac.metric(lid, "spur_acct_exported_seq")
        seen["v"] = v
        return v is not None and v > 0
    ac.wait(begun, 30, "the export to begin", interval=0.002)
    victim()
    print(f"killed at exported_seq {seen['v']:.0f} of {total}")
    assert seen["v"] < total, (f"the export of {total} records finished before the kill "
                               f"(exported_seq {seen['v']})")
    return seen["v"]


def test_kill_9_of_postgres_in_the_middle_of_an_export_of_5000_records_exactly_once(
        postgres, clusters):
    pg = postgres
    pg.stop()
    ac = clusters(pg, n=1, agents=0, accounting={"batch_size": 50})
    ac.submit_many(5000)
    ac.wait_metric(1, "spur_acct_outbox_records", lambda v: v == 5000, 30)
    pg.start()
    kill_when_exporting(ac, 1, 5000, pg.kill9)
    assert ac.all_alive()
    pg.start()
    wait_records(ac, 5000, timeout=90)
    assert_exactly_once(ac, 5000, 5000)
    ac.wait_outboxes_empty()
    errs = sum(v for k, v in (ac.metrics(1) or {}).items()
               if k.startswith("spur_acct_export_errors_total"))
    assert errs > 0, "the kill -9 of the database is not counted as an export error"
    assert ac.all_alive()


# ---- d: the leader killed in the middle of an export, and between commit and trim ---------

def test_kill_9_of_the_leader_in_the_middle_of_an_export_loses_and_doubles_nothing(
        postgres, clusters):
    pg = postgres
    pg.stop()
    ac = clusters(pg, n=3, agents=0, accounting={"batch_size": 20})
    ac.submit_many(2000)
    for i in (1, 2, 3):
        ac.wait_metric(i, "spur_acct_outbox_records", lambda v: v == 2000, 30)
    lid = ac.c.leader()
    pg.start()
    worker = ac.c.worker_pid(lid)
    kill_when_exporting(ac, lid, 2000, lambda: os.kill(worker, signal.SIGKILL))
    assert ac.c.replica(lid).wait_exit(20) == 70
    new = ac.c.leader(among=[i for i in (1, 2, 3) if i != lid], timeout=20)
    assert new != lid
    ac.c.start(lid)
    ac.c.wait_ready([lid])
    wait_records(ac, 2000, timeout=60)
    assert_exactly_once(ac, 2000, 2000)
    ac.wait_outboxes_empty([1, 2, 3])
    assert ac.metric(ac.c.leader(), "spur_acct_database_up") == 1


def test_the_leader_killed_after_a_commit_before_its_trim_a_new_leader_resumes_exactly(
        postgres, clusters):
    """The leader exports while both followers are SIGSTOPped: its transactions commit in
    PostgreSQL, its AcctTrim cannot commit in Raft. A long election timeout (6 s) keeps it
    leader (check-quorum) long enough for that; the followers' supervisors are told not to
    take a stopped worker as stalled."""
    pg = postgres
    pg.stop()
    ac = clusters(pg, n=3, agents=0, accounting={"batch_size": 20},
                  raft={"heartbeat_ms": 100, "election_timeout_ms": 6000},
                  supervisor={"heartbeat_ms": 50, "stall_timeout_ms": 120000,
                              "kill_timeout_ms": 120000, "shutdown_grace_ms": 5000})
    total = 300
    ac.submit_many(total)
    for i in (1, 2, 3):
        ac.wait_metric(i, "spur_acct_outbox_records", lambda v: v == total, 30)
    lid = ac.c.leader()
    followers = [i for i in (1, 2, 3) if i != lid]
    fpids = [ac.c.worker_pid(i) for i in followers]
    for p in fpids:
        stop_cont(p, signal.SIGSTOP)
    try:
        pg.start()

        def committed():
            if not pg.table_exists("spur_export"):
                return False
            return pg.scalar("SELECT exported_seq FROM spur_export WHERE cluster = 'test'") \
                == str(total)
        ac.wait(committed, 5, f"spur_export.exported_seq {total} (the leader's commit)",
                interval=0.05)
        # Its trim cannot commit without a follower: the records are still in its outbox.
        assert ac.metric(lid, "spur_acct_outbox_records") == total
        os.kill(ac.c.worker_pid(lid), signal.SIGKILL)
    finally:
        for p in fpids:
            stop_cont(p, signal.SIGCONT)
    assert ac.c.replica(lid).wait_exit(20) == 70
    new = ac.c.leader(among=followers, timeout=40)
    ac.wait_outboxes_empty(followers, timeout=40)
    assert_exactly_once(ac, total, total)
    # It read the high-water mark and trimmed: it exported nothing again.
    assert ac.metric(new, "spur_acct_exported_records_total") == 0
    assert ac.metric(new, "spur_acct_exported_seq") == total
    ac.c.start(lid)
    ac.c.wait_ready([lid])
    ac.wait_outboxes_empty([1, 2, 3], timeout=40)
    assert event_stats(pg, "test")[:2] == (total, total)


# ---- e: refused credentials, a newer schema -----------------------------------------------

def acct_lines(log):
    return [l for l in log.splitlines() if "comp=acct" in l]


def test_a_wrong_password_is_logged_and_counted_and_jobs_still_run(postgres, clusters):
    pg = postgres
    ac = clusters(pg, n=1, agents=1, accounting={"database_url": pg.url(pw="wrong")})
    ac.wait_metric(1, "spur_acct_export_errors_total", lambda v: v > 0, 20, reason="auth")
    assert ac.metric(1, "spur_acct_database_up") == 0
    lines = [l for l in acct_lines(ac.log(1)) if "export failed; retrying" in l]
    assert lines and "password authentication failed" in lines[0], acct_lines(ac.log(1))
    assert "wrong" not in "\n".join(acct_lines(ac.log(1))), "the password is in the log"
    jid = ac.sbatch("-J", "noauth", "--wrap", "true")
    ac.wait_state(jid, "COMPLETED")
    ac.wait_metric(1, "spur_acct_outbox_records", lambda v: v == 3, 10)
    assert ac.all_alive()
    assert not pg.table_exists("jobs"), "tables made through a connection that was refused"


def test_a_password_file_others_can_read_is_not_used(postgres, clusters):
    pg = postgres
    pwfile = pg.write_password_file(pg.dir / "open.pw", owner=os.geteuid())
    os.chmod(pwfile, 0o644)
    ac = clusters(pg, n=1, accounting={"database_url": pg.url(pw=None),
                                       "password_file": str(pwfile)})
    ac.wait_metric(1, "spur_acct_export_errors_total", lambda v: v > 0, 20, reason="auth")
    lines = acct_lines(ac.log(1))
    assert any("password file is readable by others; not using it" in l and "mode=0644" in l
               for l in lines), lines
    assert pgtest.PASSWORD not in ac.log(1), "the password file's content is in the log"
    assert ac.metric(1, "spur_acct_database_up") == 0 and ac.all_alive()


def test_a_newer_schema_version_is_refused_clearly_and_jobs_still_run(postgres, clusters):
    pg = postgres
    ac = clusters(pg, n=1, agents=1)
    ac.wait_metric(1, "spur_acct_database_up", lambda v: v == 1, 20)
    assert pg.scalar("SELECT version FROM spur_schema") == "1"
    pg.query("UPDATE spur_schema SET version = 99")
    # Its connections end (as when the newer build that migrated restarted the server);
    # the next records to export make the exporter find that out, reconnect and check.
    pg.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'spur'")
    jid = ac.sbatch("-J", "newschema", "--wrap", "true")
    ac.wait_metric(1, "spur_acct_export_errors_total", lambda v: v > 0, 20, reason="schema")
    ac.wait(lambda: any("database schema version 99 is newer than this build's 1" in l
                        for l in acct_lines(ac.log(1))), 10, "the schema log line")
    assert ac.metric(1, "spur_acct_database_up") == 0
    ac.wait_state(jid, "COMPLETED")
    ac.wait_metric(1, "spur_acct_outbox_records", lambda v: v == 3, 10)
    n0 = ac.metric(1, "spur_acct_export_errors_total", reason="schema")
    ac.wait_metric(1, "spur_acct_export_errors_total", lambda v: v > n0, 10, reason="schema")
    assert pg.count("jobs") == 0 and pg.scalar("SELECT version FROM spur_schema") == "99"
    assert ac.all_alive()


def test_a_connection_the_server_ends_while_idle_is_noticed_and_made_again(
        postgres, clusters):
    """spur_acct_database_up says the exporter is connected: a backend ended by the server
    (pg_terminate_backend, a restart, a fail-over) while nothing is waiting to be exported
    must turn it 0 and bring a reconnect, not wait for the next record to find out."""
    pg = postgres
    ac = clusters(pg, n=1, agents=0)
    ac.wait_metric(1, "spur_acct_database_up", lambda v: v == 1, 20)

    def connects():
        return sum("database connected" in l for l in acct_lines(ac.log(1)))
    before = connects()
    pg.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'spur'")
    try:
        wait_until(lambda: connects() > before, 15, interval=0.1)
    except TimeoutError:
        raise AssertionError(
            "no second \"database connected\" within 15 s after the server ended the "
            "exporter's connection; spur_acct_database_up is "
            f"{ac.metric(1, 'spur_acct_database_up')}{ac.diag()}") from None
    assert ac.metric(1, "spur_acct_database_up") == 1


# ---- f: two clusters in one database -----------------------------------------------------

def test_two_clusters_in_one_database_do_not_mix(postgres, clusters):
    pg = postgres
    a = clusters(pg, n=1, cluster_name="alpha")
    # beta reads its password from accounting.password_file (mode 0600, its user's).
    pwfile = pg.write_password_file(pg.dir / "beta.pw", owner=os.geteuid())
    b = clusters(pg, n=1, cluster_name="beta",
                 accounting={"database_url": pg.url(pw=None), "password_file": str(pwfile)})
    ids = {}
    for ac in (a, b):
        ids[ac.name] = [ac.sbatch("-J", f"{ac.name}-{k}", "--wrap", "true") for k in range(3)]
    # Job ids are per cluster: both start at the same numbers, which must not collide.
    assert set(ids["alpha"]) & set(ids["beta"])
    for ac in (a, b):
        wait_records(ac, 3, timeout=30)
        assert_exactly_once(ac, 3, 3)
        names = sorted(r[0] for r in pg.query("SELECT name FROM jobs WHERE cluster = :'p1'",
                                              ac.name))
        assert names == [f"{ac.name}-{k}" for k in range(3)]
    assert sorted(r[0] for r in pg.query("SELECT cluster FROM spur_export")) == \
        ["alpha", "beta"]
    assert pgtest.PASSWORD not in b.log(1), "the password file's content is in the log"
    for ac in (a, b):
        ac.wait_outboxes_empty()
        rows = ac.sacct_rows(["JobID", "JobName"], "-a", "-X", "-S", an_hour_ago())
        assert sorted(r["JobName"] for r in rows) == [f"{ac.name}-{k}" for k in range(3)], rows
