"""Jobs run (issue 12): real replicas, real spurd agents, real jobs, end to end.

Every test here runs real processes on 127.0.0.1 with free ports: three spurctld replicas
(Raft heartbeat 50 ms, election 500 ms, so failovers take about a second), two spurd
agents (agent.heartbeat_s 1, agent.node_timeout_s 5, agent.kill_wait_s 2), and the spur
CLI. What holds, each against those processes:
  - a job runs as the user who submitted it, in the submit directory, with Slurm's
    variables and the submitter's environment, writes its output files (patterns too)
    as that user, and ends COMPLETED ExitCode 0:0 (scontrol, squeue -t all);
  - each ending: COMPLETED, FAILED (exit 3 -> ExitCode 3:0), TIMEOUT, CANCELLED (the
    processes are gone from the host), OUT_OF_MEMORY (where cgroups allow), NODE_FAIL
    (the agent killed for good: node DOWN "Not responding"), and --requeue running the
    job again on the other agent; scancel -s USR1 reaches a job that traps it;
  - backfill: a short job passes a blocked 2-node job, a long one does not;
  - a job outlives kill -9 of the leader and is reported COMPLETED by the new leader;
  - a job outlives kill -9 and restart of its agent and is reported COMPLETED;
  - 200 jobs submitted while the leader is killed twice run exactly once each;
  - sinfo shows IDLE / MIXED / ALLOCATED / DOWN from the real allocation; squeue the
    node list;
  - a 2-node job sees both nodes (SLURM_JOB_NODELIST cn[1-2]) and, as under Slurm, its
    script runs once, on the batch host;
  - examples/local-cluster, on private ports, runs `sbatch --wrap hostname`.

The tests that do not disturb the cluster share one (module scope, two agents of 1 CPU);
the others make their own. Every wait is bounded; processes are killed by the fixtures,
agents' job monitors and jobs included. Logs stay in the tests' temporary directories.
"""
import collections
import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

import spurtest
from spurtest import wait_until

AGENT_KEYS = {"heartbeat_s": 1, "node_timeout_s": 5, "kill_wait_s": 2}
FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY"}


pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="spurd runs jobs as their users: needs root")


# ---- a cluster with agents --------------------------------------------------------------

class JobCluster:
    """A Cluster of n replicas plus spurd agents cn1..cnK, and the CLI pointed at it."""

    def __init__(self, tmp, agents=2, cpus=1, agent_env=None, **over):
        if not spurtest.SPURD.exists():
            pytest.skip(f"{spurtest.SPURD} is not built")
        self.tmp = Path(tmp)
        over.setdefault("agent", dict(AGENT_KEYS))
        self.c = spurtest.Cluster(self.tmp, n=3, **over)
        self.agents = {}
        self.work = self.tmp / "work"
        self.work.mkdir(mode=0o755, parents=True, exist_ok=True)
        try:
            self.c.start_all()
            self.c.wait_ready()
            self.c.leader()
            for k in range(1, agents + 1):
                name = f"cn{k}"
                self.agents[name] = spurtest.Agent(
                    self.tmp, spurtest.agent_config(self.c.cfgs[0]), name, cpus=cpus,
                    env=agent_env)
            self.wait_nodes_idle()
        except BaseException:
            self.kill()
            raise

    def kill(self):
        for a in self.agents.values():
            a.kill()
        self.c.kill_all()

    # -- the CLI ------------------------------------------------------------------------
    def run(self, *args, user=None, cwd=None, env=None, timeout=30):
        """Run a spur command (argv[0] picks it), as user (a test_user) when given, in cwd."""
        e = {"SPUR_CONFIG": str(self.c.cfg_path), "SPUR_CONTROLLER": self.c.hosts(),
             "SPUR_JWT": self.c.token(user.name if user is not None else "root")}
        e.update(env or {})
        cmd = [str(spurtest.BUILD / "client" / args[0])] + [str(a) for a in args[1:]]
        if user is not None:
            # The user cannot read the test's private directory: a copy of the config.
            cfg = user.home / "client.yaml"
            if not cfg.exists():
                shutil.copy(self.c.cfg_path, cfg)
                os.chmod(cfg, 0o644)
            e["SPUR_CONFIG"] = str(cfg)
            cmd = (["runuser", "-u", user.name, "--", "env"]
                   + [f"{k}={v}" for k, v in e.items()] + cmd)
            full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        else:
            full = dict(os.environ)
            full.update(e)
        return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=timeout,
                              cwd=str(cwd or self.work))

    def sbatch(self, *args, **kw):
        p = self.run("sbatch", "--parsable", *args, **kw)
        assert p.returncode == 0, f"sbatch {args} -> {p.returncode}: {p.stderr}{self.diag()}"
        return int(p.stdout.strip())

    def jobs(self, host=None):
        """squeue -t all --json: {job_id: job}."""
        p = self.c.spur("squeue", "-t", "all", "--json", host=host)
        assert p.returncode == 0, p.stderr
        return {j["job_id"]: j for j in json.loads(p.stdout)}

    def job(self, jid, host=None):
        return self.jobs(host)[jid]

    def nodes(self, host=None):
        p = self.c.spur("sinfo", "--json", host=host)
        assert p.returncode == 0, p.stderr
        return {n["name"]: n for n in json.loads(p.stdout)["nodes"]}

    def wait_state(self, jid, states, timeout=30, host=None):
        """Wait until job jid is in one of states; returns its JSON object. A final state
        not asked for fails at once."""
        states = {states} if isinstance(states, str) else set(states)
        last = {}

        def reached():
            try:
                j = self.job(jid, host)
            except (AssertionError, KeyError, json.JSONDecodeError):
                return None
            last["job"] = j
            if j["state"] in states:
                return j
            if j["state"] in FINAL:
                raise AssertionError(f"job {jid} ended {j['state']} ({j['reason']}), "
                                     f"wanted {sorted(states)}{self.diag()}")
            return None
        try:
            return wait_until(reached, timeout, interval=0.1, what=f"job {jid} {states}")
        except TimeoutError as e:
            raise AssertionError(f"{e}; last seen: {last.get('job')}{self.diag()}") from None

    def wait_nodes_idle(self, timeout=30):
        names = set(self.agents)

        def idle():
            try:
                n = self.nodes()
            except (AssertionError, json.JSONDecodeError):
                return False
            return all(x in n and n[x]["state"] == "idle" for x in names)
        try:
            wait_until(idle, timeout, interval=0.1, what=f"nodes {sorted(names)} idle")
        except TimeoutError as e:
            raise AssertionError(f"{e}{self.diag()}") from None

    def show_job(self, jid, host=None):
        p = self.c.spur("scontrol", "show", "job", jid, host=host)
        assert p.returncode == 0, p.stderr
        return p.stdout

    def cancel_everything(self):
        """scancel every job not final and wait until the nodes are idle again."""
        live = [j for j, x in self.jobs().items() if x["state"] not in FINAL]
        if live:
            self.c.spur("scancel", *live)
            for j in live:
                self.wait_state(j, FINAL, timeout=30)
        self.wait_nodes_idle()

    def diag(self):
        """The tail of every log, for an assertion message."""
        out = []
        for name, a in self.agents.items():
            out.append(f"\n--- agent {name}:\n{a.log()[-3000:]}")
        for i, s in enumerate(self.c.replicas, 1):
            if s is not None:
                out.append(f"\n--- replica {i} ({s.log_path.name}):\n{s.log()[-3000:]}")
        return "".join(out)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One cluster for the tests that leave it as they found it: 2 agents x 1 CPU."""
    jc = JobCluster(tmp_path_factory.mktemp("jobs-run"), agents=2, cpus=1)
    yield jc
    jc.kill()


@pytest.fixture
def jc1(shared):
    """The shared cluster, idle at the start of the test."""
    shared.cancel_everything()
    yield shared


@pytest.fixture
def job_cluster(tmp_path):
    """Make a private JobCluster(**kw); killed after the test."""
    made = []

    def make(**kw):
        jc = JobCluster(tmp_path / f"jc{len(made)}", **kw)
        made.append(jc)
        return jc
    yield make
    for jc in made:
        jc.kill()


def read_pid(path, timeout=20):
    def get():
        try:
            t = Path(path).read_text().strip()
            return int(t) if t else None
        except (OSError, ValueError):
            return None
    return wait_until(get, timeout, interval=0.05, what=f"a pid in {path}")


def wait_file_text(path, needle, timeout=20):
    def has():
        try:
            return needle in Path(path).read_text()
        except OSError:
            return False
    wait_until(has, timeout, interval=0.05, what=f"{needle!r} in {path}")


def sinfo_states(jc):
    """sinfo -h -o "%t %N": [[state, nodes]] per line."""
    p = jc.c.spur("sinfo", "-h", "-o", "%t %N")
    assert p.returncode == 0, p.stderr
    return [l.split() for l in p.stdout.splitlines() if l.strip()]


def squeue_lines(jc, *args):
    p = jc.c.spur("squeue", "-h", *args)
    assert p.returncode == 0, p.stderr
    return [l.split() for l in p.stdout.splitlines() if l.strip()]


# ---- one job, as its user ---------------------------------------------------------------

ENV_SCRIPT = """#!/bin/sh
#SBATCH -J envjob
echo "who=$(id -un) uid=$(id -u) gid=$(id -g) pwd=$(pwd)"
env | grep -E '^(SLURM_[A-Z_]*|SPURT_MARK)=' | sort
exit 0
"""


def test_a_job_runs_as_its_user_with_slurms_environment_and_output(jc1, test_user):
    jc = jc1
    u = test_user
    work = u.home / "work"
    work.mkdir()
    os.chown(work, u.uid, u.gid)
    script = work / "env.sh"
    script.write_text(ENV_SCRIPT)
    os.chown(script, u.uid, u.gid)

    jid = jc.sbatch("env.sh", user=u, cwd=work, env={"SPURT_MARK": "from-the-submitter"})
    j = jc.wait_state(jid, "COMPLETED")
    assert (j["user"], j["uid"], j["gid"]) == (u.name, u.uid, u.gid)
    out = work / f"slurm-{jid}.out"
    st = out.stat()
    assert (st.st_uid, st.st_gid) == (u.uid, u.gid), "the output file is the user's"
    lines = out.read_text().splitlines()
    assert lines[0] == f"who={u.name} uid={u.uid} gid={u.gid} pwd={work}", lines
    env = dict(l.split("=", 1) for l in lines[1:] if "=" in l)
    (node,) = j["node_list"]
    want = {
        "SLURM_JOB_ID": str(jid),
        "SLURM_JOB_NAME": "envjob",
        "SLURM_JOB_NODELIST": node,
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_NTASKS": "1",
        "SLURM_CPUS_PER_TASK": "1",
        "SLURM_SUBMIT_DIR": str(work),
        "SLURM_JOB_PARTITION": j["partition"],
        "SLURM_JOB_USER": u.name,
        "SLURM_CLUSTER_NAME": "test",
        "SPURT_MARK": "from-the-submitter",
    }
    assert {k: env.get(k) for k in want} == want, out.read_text()

    shown = jc.show_job(jid)
    assert "JobState=COMPLETED" in shown and "ExitCode=0:0" in shown, shown
    assert [str(jid), "COMPLETED"] in squeue_lines(jc, "-t", "all", "-o", "%i %T")

    # -o / -e with patterns, the files created as the user.
    jid2 = jc.sbatch("-J", "pat", "-o", "%x-%j-%u-%N-%%.out", "-e", "err-%j.txt",
                     "--wrap", "echo to-out; echo to-err >&2", user=u, cwd=work)
    j2 = jc.wait_state(jid2, "COMPLETED")
    (node2,) = j2["node_list"]
    outp = work / f"pat-{jid2}-{u.name}-{node2}-%.out"
    errp = work / f"err-{jid2}.txt"
    assert outp.read_text() == "to-out\n", sorted(os.listdir(work))
    assert errp.read_text() == "to-err\n"
    assert {outp.stat().st_uid, errp.stat().st_uid} == {u.uid}
    assert not (work / f"slurm-{jid2}.out").exists()


def test_a_multi_node_job_sees_its_nodes_and_runs_its_script_once_on_the_batch_host(jc1):
    jc = jc1
    script = "env | grep -E '^(SLURM_JOB_NODELIST|SLURM_JOB_NUM_NODES|SLURMD_NODENAME)=' | sort"
    jid = jc.sbatch("-N", "2", "--wrap", script)
    j = jc.wait_state(jid, "COMPLETED")
    assert sorted(j["node_list"]) == ["cn1", "cn2"]
    text = (jc.work / f"slurm-{jid}.out").read_text()
    assert "SLURM_JOB_NODELIST=cn[1-2]\n" in text and "SLURM_JOB_NUM_NODES=2\n" in text, text
    assert "BatchHost=cn1" in jc.show_job(jid)
    # As under Slurm: the batch script runs once, on the batch host (the first node).
    assert text == "SLURMD_NODENAME=cn1\nSLURM_JOB_NODELIST=cn[1-2]\nSLURM_JOB_NUM_NODES=2\n", text


def test_squeue_shows_a_running_job_then_it_leaves(jc1):
    jc = jc1
    jid = jc.sbatch("--wrap", "sleep 3")
    wait_until(lambda: [str(jid), "R"] in [l[:2] for l in squeue_lines(jc, "-o", "%i %t %N")],
               20, interval=0.1, what="squeue R")
    (line,) = [l for l in squeue_lines(jc, "-o", "%i %t %N") if l[0] == str(jid)]
    assert line[2] in jc.agents, line  # the node it runs on
    jc.wait_state(jid, "COMPLETED", timeout=30)
    assert str(jid) not in [l[0] for l in squeue_lines(jc, "-o", "%i")]
    assert [str(jid), "CD"] in squeue_lines(jc, "-t", "all", "-o", "%i %t")


def test_exit_3_is_failed_with_exitcode_3(jc1):
    jc = jc1
    jid = jc.sbatch("--wrap", "echo before; exit 3")
    j = jc.wait_state(jid, "FAILED")
    assert j["exit_code"] == 3
    shown = jc.show_job(jid)
    assert "JobState=FAILED" in shown and "ExitCode=3:0" in shown, shown
    assert [str(jid), "F"] in squeue_lines(jc, "-t", "all", "-o", "%i %t")
    assert (jc.work / f"slurm-{jid}.out").read_text() == "before\n"


def test_scancel_of_a_running_job_ends_it_cancelled_and_its_processes_are_gone(jc1):
    jc = jc1
    pidf = jc.work / "cancel.pids"
    jid = jc.sbatch("--wrap", f"sleep 300 & echo $$ $! > {pidf}; wait")
    jc.wait_state(jid, "RUNNING")
    wait_until(lambda: len(pidf.read_text().split()) == 2 if pidf.exists() else False, 20,
               what="the job's pids")
    pids = [int(x) for x in pidf.read_text().split()]
    assert all(not spurtest.is_gone(p) for p in pids)
    p = jc.c.spur("scancel", jid)
    assert p.returncode == 0, p.stderr
    j = jc.wait_state(jid, "CANCELLED", timeout=20)
    assert j["end_time_ms"] >= j["start_time_ms"] > 0
    wait_until(lambda: all(spurtest.is_gone(p) for p in pids), 10,
               what="the job's processes gone")
    assert "JobState=CANCELLED" in jc.show_job(jid)
    jc.wait_nodes_idle(10)


def test_scancel_signal_usr1_reaches_a_job_that_traps_it(jc1):
    jc = jc1
    out = jc.work / "usr1.out"
    script = (f"trap 'echo got-usr1 >> {out}' USR1\n"
              f"echo ready >> {out}\n"
              "i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n")
    jid = jc.sbatch("--wrap", script)
    jc.wait_state(jid, "RUNNING")
    wait_file_text(out, "ready")
    p = jc.c.spur("scancel", "-s", "USR1", jid)
    assert p.returncode == 0, p.stderr
    wait_file_text(out, "got-usr1", timeout=10)
    # A signal is not a cancel: the job runs on.
    time.sleep(1.5)
    assert jc.job(jid)["state"] == "RUNNING"
    jc.c.spur("scancel", jid, check=True)
    jc.wait_state(jid, "CANCELLED", timeout=20)


def memory_cgroup_skip_reason():
    """Why --mem cannot be enforced here (the monitor's cgroup v2 memory controller or the
    v1 memory hierarchy), or None."""
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        ctl = Path(root) / "cgroup.controllers"
        if ctl.exists() and "memory" in ctl.read_text().split():
            return None
    v1 = Path("/sys/fs/cgroup/memory")
    if (v1 / "memory.limit_in_bytes").exists() and os.access(v1, os.W_OK):
        return None
    return "no cgroup memory controller (v2 or v1) here"


def test_a_job_over_its_memory_ends_out_of_memory(jc1):
    why = memory_cgroup_skip_reason()
    if why:
        pytest.skip(why)
    jc = jc1
    # tail keeps a line that never ends in memory: 400 MB of zeroes against 32 MB.
    jid = jc.sbatch("--mem", "32M", "--wrap", "head -c 400M /dev/zero | tail > /dev/null")
    j = jc.wait_state(jid, "OUT_OF_MEMORY", timeout=60)
    assert j["state_code"] == "OOM"
    assert [str(jid), "OUT_OF_MEMORY"] in squeue_lines(jc, "-t", "all", "-o", "%i %T")


@pytest.mark.slow
def test_a_job_past_its_time_limit_ends_timeout(jc1):
    """-t 1 (a minute, Slurm's smallest limit): about 65 s."""
    jc = jc1
    pidf = jc.work / "timeout.pid"
    jid = jc.sbatch("-t", "1", "--wrap", f"echo $$ > {pidf}; exec sleep 600")
    j = jc.wait_state(jid, "RUNNING")
    pid = read_pid(pidf)
    j = jc.wait_state(jid, "TIMEOUT", timeout=100)
    ran_ms = j["end_time_ms"] - j["start_time_ms"]
    assert 59_000 <= ran_ms <= 60_000 + AGENT_KEYS["kill_wait_s"] * 1000 + 5_000, ran_ms
    assert spurtest.is_gone(pid)
    shown = jc.show_job(jid)
    assert "JobState=TIMEOUT" in shown, shown
    assert [str(jid), "TO"] in squeue_lines(jc, "-t", "all", "-o", "%i %t")


# ---- the scheduler ----------------------------------------------------------------------

def test_backfill_lets_a_short_job_pass_a_blocked_one_but_not_a_long_one(jc1):
    jc = jc1
    long_run = jc.sbatch("-t", "10", "--wrap", "sleep 600")
    jc.wait_state(long_run, "RUNNING")
    # Needs both nodes: blocked until long_run ends (in at most 10 minutes).
    wide = jc.sbatch("-N", "2", "-t", "5", "--wrap", "true")
    # Older than `short`, fits the free node now, but would end after the reservation.
    too_long = jc.sbatch("-t", "30", "--wrap", "sleep 600")
    short = jc.sbatch("-t", "2", "--wrap", "sleep 600")
    jc.wait_state(short, "RUNNING", timeout=20)
    time.sleep(2.5)  # a few scheduler passes
    jobs = jc.jobs()
    assert jobs[wide]["state"] == "PENDING", jobs[wide]
    assert jobs[too_long]["state"] == "PENDING", jobs[too_long]
    assert jobs[short]["state"] == "RUNNING"
    assert set(jobs[short]["node_list"]) | set(jobs[long_run]["node_list"]) == set(jc.agents)
    reasons = {l[0]: l[2] for l in squeue_lines(jc, "-t", "PD", "-o", "%i %t %r")}
    assert reasons.get(str(wide)) == "Resources", reasons
    jc.c.spur("scancel", long_run, short, too_long, wide, check=True)


# ---- failures ---------------------------------------------------------------------------

def test_agent_lost_for_good_node_down_job_node_fail_requeued_job_runs_elsewhere(job_cluster):
    jc = job_cluster(agents=2, cpus=2)
    for n in jc.nodes().values():
        assert n["state"] == "idle"
    # Both 1-CPU jobs on cn1 (lowest name first): cn1 MIXED, then ALLOCATED; then cn2
    # taken whole.
    plain = jc.sbatch("--wrap", "sleep 600")
    jc.wait_state(plain, "RUNNING")
    nodes = jc.nodes()
    assert (nodes["cn1"]["state"], nodes["cn2"]["state"]) == ("mixed", "idle"), nodes
    assert sorted(sinfo_states(jc)) == [["idle", "cn2"], ["mix", "cn1"]]
    marks = jc.work / "requeue.log"
    again = jc.sbatch("--requeue", "--wrap",
                      f"echo $SLURMD_NODENAME >> {marks}; "
                      f"[ -e {marks}.first ] && exit 0; touch {marks}.first; sleep 600")
    jc.wait_state(again, "RUNNING")
    jobs = jc.jobs()
    assert jobs[plain]["node_list"] == jobs[again]["node_list"] == ["cn1"], jobs
    nodes = jc.nodes()
    assert (nodes["cn1"]["state"], nodes["cn2"]["state"]) == ("allocated", "idle"), nodes
    whole = jc.sbatch("-c", "2", "--wrap", "sleep 600")
    jc.wait_state(whole, "RUNNING")
    assert jc.job(whole)["node_list"] == ["cn2"]
    assert sinfo_states(jc) == [["alloc", "cn[1-2]"]]
    nodes = jc.nodes()
    assert (nodes["cn1"]["state"], nodes["cn2"]["state"]) == ("allocated", "allocated"), nodes
    lines = {l[0]: l[1:] for l in squeue_lines(jc, "-o", "%i %t %N")}
    assert lines[str(whole)] == ["R", "cn2"] and lines[str(plain)] == ["R", "cn1"], lines

    # cn1's host is lost: spurd and every job process on it.
    jc.agents["cn1"].kill()
    t0 = time.monotonic()
    j = jc.wait_state(plain, "NODE_FAIL", timeout=AGENT_KEYS["node_timeout_s"] + 15)
    assert time.monotonic() - t0 >= AGENT_KEYS["node_timeout_s"] - 1.5
    assert j["state_code"] == "NF"
    n = jc.nodes()["cn1"]
    assert (n["state"], n["reason"]) == ("down", "Not responding"), n
    assert ["down", "cn1"] in sinfo_states(jc)
    # The requeued job runs again, on cn2 once `whole` leaves it room.
    jc.c.spur("scancel", whole, check=True)
    jc.wait_state(whole, "CANCELLED", timeout=20)
    j = jc.wait_state(again, "COMPLETED", timeout=40)
    assert j["node_list"] == ["cn2"]
    assert marks.read_text().split() == ["cn1", "cn2"]
    assert "Restarts=1" in jc.show_job(again)
    assert jc.nodes()["cn2"]["state"] == "idle"


def test_a_job_outlives_kill_9_of_the_leader_and_the_new_leader_reports_it(job_cluster):
    jc = job_cluster(agents=2, cpus=1)
    out = jc.work / "survivor.out"
    jid = jc.sbatch("-o", str(out), "--wrap", "sleep 5; echo finished")
    jc.wait_state(jid, "RUNNING")
    old = jc.c.leader()
    assert jc.c.kill_worker(old) == 70
    new = jc.c.leader(among=[i for i in range(1, 4) if i != old], timeout=20)
    assert new != old
    j = jc.wait_state(jid, "COMPLETED", timeout=40, host=jc.c.api(new))
    assert j["exit_code"] == 0
    assert out.read_text() == "finished\n", "ran once, to its end"
    shown = jc.show_job(jid, host=jc.c.api(new))
    assert "JobState=COMPLETED" in shown and "ExitCode=0:0" in shown
    # The old leader comes back as a follower and agrees.
    jc.c.start(old)
    jc.c.replica(old).wait_ready(20)
    jc.wait_state(jid, "COMPLETED", timeout=20, host=jc.c.api(old))


def test_a_job_outlives_kill_9_and_restart_of_its_agent(job_cluster):
    jc = job_cluster(agents=2, cpus=1)
    pidf = jc.work / "agentrestart.pid"
    out = jc.work / "agentrestart.out"
    jid = jc.sbatch("-o", str(out), "--wrap", f"echo $$ > {pidf}; sleep 6; echo finished")
    (node,) = jc.wait_state(jid, "RUNNING")["node_list"]
    pid = read_pid(pidf)
    a = jc.agents[node]
    a.kill9()
    time.sleep(1)
    assert not spurtest.is_gone(pid), "the job must outlive its agent"
    assert jc.job(jid)["state"] == "RUNNING"
    a.restart()
    j = jc.wait_state(jid, "COMPLETED", timeout=40)
    assert j["node_list"] == [node] and j["exit_code"] == 0
    assert out.read_text() == "finished\n"
    assert jc.nodes()[node]["state"] == "idle"


def test_200_jobs_while_the_leader_is_killed_twice_each_run_exactly_once(job_cluster):
    jc = job_cluster(agents=2, cpus=2)
    ids_file = jc.work / "ids"
    ids_file.touch()
    os.chmod(ids_file, 0o666)
    n_jobs, n_threads = 200, 8
    submitted, errors = [], []
    lock = threading.Lock()
    counter = iter(range(n_jobs))
    # The second third waits for the first kill, the last for the second: each kill
    # comes with submissions in flight and more after it.
    gates = [threading.Event(), threading.Event()]

    def submitter():
        while True:
            with lock:
                k = next(counter, None)
            if k is None:
                return
            for g, gate in enumerate(gates):
                if k >= (g + 1) * n_jobs // 3:
                    gate.wait(120)
            # sh's >> opens with O_APPEND: each short line lands whole.
            p = jc.run("sbatch", "--parsable", "-J", f"once{k}", "--wrap",
                       f'echo "$SLURM_JOB_ID" >> {ids_file}', timeout=120)
            with lock:
                if p.returncode == 0:
                    submitted.append(int(p.stdout.strip()))
                else:
                    errors.append(p.stderr)

    threads = [threading.Thread(target=submitter, daemon=True) for _ in range(n_threads)]
    for t in threads:
        t.start()
    try:
        for round_, gate in enumerate(gates, 1):
            wait_until(lambda: len(submitted) + len(errors) >= round_ * n_jobs // 3 - n_threads,
                       120, interval=0.02, what="submissions before the next failover")
            old = jc.c.leader(timeout=20)
            assert jc.c.kill_worker(old) == 70
            jc.c.leader(among=[i for i in range(1, 4) if i != old], timeout=20)
            gate.set()
            jc.c.start(old)
            jc.c.replica(old).wait_ready(20)
    finally:
        for gate in gates:
            gate.set()
    for t in threads:
        t.join(180)
    assert not errors, errors[:3]
    assert len(submitted) == n_jobs == len(set(submitted))

    def all_final():
        jobs = jc.jobs()
        return all(jobs.get(j, {}).get("state") in FINAL for j in submitted) and jobs
    try:
        jobs = wait_until(all_final, 180, interval=0.5, what="all 200 jobs final")
    except TimeoutError as e:
        jobs = jc.jobs()
        left = collections.Counter(jobs[j]["state"] for j in submitted if j in jobs)
        raise AssertionError(f"{e}: {left}{jc.diag()}") from None
    states = collections.Counter(jobs[j]["state"] for j in submitted)
    assert states == {"COMPLETED": n_jobs}, states
    assert set(jobs) == set(submitted), "no job the submitters do not know of"
    ran = collections.Counter(int(x) for x in ids_file.read_text().split())
    assert [j for j, k in ran.items() if k > 1] == [], "a job ran twice"
    assert set(ran) == set(submitted), sorted(set(submitted) - set(ran))[:10]


# ---- the example ------------------------------------------------------------------------

def test_the_local_cluster_example_runs_a_job(tmp_path):
    """examples/local-cluster as its README says (three replicas, spurd from n1.yaml and
    n2.yaml), moved to private ports and directories: `sbatch --wrap hostname` writes
    slurm-<id>.out with this host's name."""
    import socket

    import yaml

    if not spurtest.SPURD.exists():
        pytest.skip(f"{spurtest.SPURD} is not built")
    ex = spurtest.REPO / "examples" / "local-cluster"
    cfgs = [yaml.safe_load((ex / f"n{k}.yaml").read_text()) for k in (1, 2, 3)]
    key = tmp_path / "spur.key"  # step 0 of the README: spurctld keygen
    subprocess.run([str(spurtest.SPURCTLD), "keygen", str(key)], check=True,
                   capture_output=True, timeout=30)
    sockdir = spurtest.short_dir()
    assert [c["agent"]["node_name"] for c in cfgs[:2]] == ["cn1", "cn2"]
    assert len({(c["agent"]["heartbeat_s"], c["agent"]["node_timeout_s"]) for c in cfgs}) == 1
    ports = [{k: spurtest.free_port() for k in ("api", "raft", "health", "metrics", "agent")}
             for _ in range(3)]
    raft = [f"127.0.0.1:{p['raft']}" for p in ports]
    api = [f"127.0.0.1:{p['api']}" for p in ports]
    paths = []
    for k, cfg in enumerate(cfgs):
        cfg["controller"].update(listen=api[k], peers=raft, hosts=api,
                                 state_dir=str(tmp_path / f"n{k + 1}"),
                                 socket=str(sockdir / f"n{k + 1}.sock"))
        cfg["auth"]["key_file"] = str(key)
        cfg["raft"]["listen"] = raft[k]
        cfg["health"]["port"] = ports[k]["health"]
        cfg["metrics"]["port"] = ports[k]["metrics"]
        cfg["agent"].update(listen=f"127.0.0.1:{ports[k]['agent']}",
                            spool_dir=str(tmp_path / f"cn{k + 1}"))
        paths.append(spurtest.write_config(tmp_path / f"n{k + 1}.yaml", **cfg))
    procs, agents = [], []
    try:
        for k, path in enumerate(paths):
            procs.append(spurtest.Supervisor(tmp_path, cfg=cfgs[k], name=f"n{k + 1}"))
        for s in procs:
            s.wait_ready(20)
        for k in (0, 1):
            log = open(tmp_path / f"cn{k + 1}.log", "wb")
            agents.append(subprocess.Popen([str(spurtest.SPURD), "-f", str(paths[k])],
                                           stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))
        env = dict(os.environ, SPUR_CONFIG=str(paths[0]))
        env.pop("SPUR_CONTROLLER", None)

        def cli(*args):
            return subprocess.run([str(spurtest.BUILD / "client" / args[0]), *args[1:]],
                                  capture_output=True, text=True, env=env, timeout=30,
                                  cwd=str(tmp_path))

        def idle():
            p = cli("sinfo", "-h", "-p", "debug", "-o", "%t %N")
            return p.stdout.split() == ["idle", "cn[1-2]"]
        wait_until(idle, 30, interval=0.2, what="cn[1-2] idle")
        p = cli("sbatch", "--wrap", "hostname")
        assert p.returncode == 0, p.stderr
        jid = int(p.stdout.split()[-1])
        assert p.stdout.strip() == f"Submitted batch job {jid}"
        out = tmp_path / f"slurm-{jid}.out"

        def done():
            p = cli("squeue", "-h", "-t", "all", "-j", str(jid), "-o", "%T")
            return p.stdout.strip() in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL") \
                and p.stdout.strip()
        assert wait_until(done, 30, interval=0.2, what=f"job {jid} final") == "COMPLETED"
        assert out.read_text() == socket.gethostname() + "\n"
    finally:
        for a in agents:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(a.pid, 9)
            a.wait(10)
        for k in (1, 2):
            spurtest.kill_spool_jobs(tmp_path / f"cn{k}")
        for s in procs:
            s.kill()
