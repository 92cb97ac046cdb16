"""Jobs, nodes and partitions through Raft (issue 5): real 3-replica clusters, the spur CLI.

What holds here, each against real processes on 127.0.0.1:
  - a write through any replica is seen at once by a read through every replica
    (linearizable reads), and survives kill -9 of the leader, twice, under 20 clients;
  - exactly once: the same (client_id, seq) is applied once, through the leader, through a
    follower, and after a failover (a tiny hand-encoded API client below);
  - the CLI's contract: Slurm's error lines and exit status 1 for unknown jobs and nodes,
    finished jobs, non-pending jobs, a missing reason, an unknown partition, a limit
    exceeded, an oversized script; #SBATCH directives end to end;
  - nodes and partitions: scontrol create / update, sinfo, the configuration's partitions;
  - with no leader, reads still answer from the replica's state and say so.

Every wait is bounded; every cluster is killed by the fixtures.
"""
import collections
import copy
import json
import os
import random
import re
import subprocess
import threading
import time

import pytest

import spurtest
from spurtest import wait_until

NOT_PENDING = "Job is no longer pending execution"
INVALID_JOB = "Invalid job id specified"
STALE_WARNING = "warning: no Raft leader is known; showing possibly stale state from node"


# ---- helpers --------------------------------------------------------------------------

SANITIZER_REPORTS = ("runtime error:", "AddressSanitizer", "LeakSanitizer")


@pytest.fixture(autouse=True)
def no_sanitizer_reports(tmp_path, monkeypatch):
    """Under a sanitizer build, any report in a replica's log fails the test."""
    monkeypatch.setenv("UBSAN_OPTIONS", os.environ.get("UBSAN_OPTIONS",
                                                       "halt_on_error=1:print_stacktrace=1"))
    yield
    for log in sorted(tmp_path.glob("**/*.log")):
        text = log.read_text(errors="replace")
        hits = [w for w in SANITIZER_REPORTS if w in text]
        assert not hits, f"{log}: {hits}\n{text[-3000:]}"


def sbatch(c, *args, host=None, input=None, env=None):
    """Submit with --parsable; returns the job id (fails the test on any error)."""
    p = c.spur("sbatch", "--parsable", *args, host=host, input=input, env=env)
    assert p.returncode == 0, f"sbatch {args} -> {p.returncode}: {p.stderr}"
    assert p.stderr == "", p.stderr
    return int(p.stdout.strip())


def jobs_json(c, *args, host=None):
    """squeue -t all --json (plus args) through host: {job_id: job}."""
    p = c.spur("squeue", "-t", "all", "--json", *args, host=host)
    assert p.returncode == 0, p.stderr
    return {j["job_id"]: j for j in json.loads(p.stdout)}


def job(c, jid, host=None):
    return jobs_json(c, "-j", str(jid), host=host)[jid]


def every_replica(c):
    return [c.api(i) for i in c.alive()]


def settle(c, timeout=30):
    """Wait for an agreed leader and every live replica applied up to the same commit."""
    lid = c.leader(timeout=timeout)

    def same():
        sts = [c.status(i, timeout=2) for i in c.alive()]
        if any(s is None for s in sts):
            return False
        marks = {(s["commit_index"], s["applied_index"]) for s in sts}
        return len(marks) == 1 and all(s["leader_id"] == lid for s in sts)
    wait_until(same, timeout, interval=0.1, what="replicas applied to one commit index")
    return lid


def rejoin_and_settle(c, i):
    """Start node i again; wait until it is ready and the replicas applied one commit."""
    c.start(i)
    c.replica(i).wait_ready(20)
    settle(c)


def spur_each_ok(c, cmds, **kw):
    """Run each command (an argv tuple) through c.spur(..., **kw); each must exit 0."""
    for cmd in cmds:
        p = c.spur(*cmd, **kw)
        assert p.returncode == 0, f"{cmd}: {p.stderr}"


def others(c, i):
    return [k for k in range(1, c.n + 1) if k != i]


def assert_error(p, line):
    """Exit status 1 and the error line on stderr."""
    assert p.returncode == 1, f"rc {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    assert line in p.stderr, f"expected {line!r} in stderr: {p.stderr!r}"


def failover(c, leader):
    """kill -9 the leader's worker (its supervisor exits 70); returns the new leader."""
    assert c.kill_worker(leader) == 70
    return c.leader(among=others(c, leader), timeout=20)


# ---- a minimal client of the API: spurtest's hand-encoded protobuf ------------------

CODE_OK, CODE_INVALID, CODE_UNAVAILABLE, CODE_TIMEOUT = (spurtest.API_OK, spurtest.API_INVALID,
                                                        spurtest.API_UNAVAILABLE,
                                                        spurtest.API_TIMEOUT)


def raw_submit(c, host, client_id, seq, name, timeout=10.0):
    """One SubmitJob with the given (client_id, seq) to one replica, no retries.

    Returns (code, error, job_id) from the Response.
    """
    spec = spurtest.job_spec(b"#!/bin/sh\ntrue\n", name=name)
    r = spurtest.api_call(host, spurtest.OP_SUBMIT_JOB, spurtest.pb_field(1, spec),
                          cluster_name=c.cfgs[0]["cluster_name"], timeout=timeout,
                          client_id=client_id, seq=seq, user="raw")
    jid = 0
    if r["result"] is not None and r["result"][0] == spurtest.OP_SUBMIT_JOB:
        sub = spurtest.pb_decode(r["result"][1])  # SubmitJobResponse
        jid = sub[1][0] if sub.get(1) else 0
    return r["code"], r["error"], jid


def raw_submit_retry(c, client_id, seq, name, timeout=20):
    """raw_submit to the leader, retrying UNAVAILABLE / TIMEOUT / refused connections
    with the same (client_id, seq), as a client does across a failover."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            lid = c.leader(timeout=max(1, deadline - time.monotonic()))
            last = raw_submit(c, c.api(lid), client_id, seq, name, timeout=3)
        except (OSError, ConnectionError, TimeoutError) as e:
            last = e
            time.sleep(0.1)
            continue
        if last[0] not in (CODE_UNAVAILABLE, CODE_TIMEOUT):
            return last
        time.sleep(0.1)
    raise AssertionError(f"no answer for ({client_id}, {seq}) in {timeout}s: {last}")


# ---- reads and writes through every replica ------------------------------------------

def test_submit_through_follower_is_read_at_once_everywhere(cluster3):
    c = cluster3
    lid = c.leader()
    followers = others(c, lid)
    via = [followers[0], followers[1], lid, followers[0], followers[1], followers[0]]
    ids = []
    for k, i in enumerate(via):
        jid = sbatch(c, "-J", f"ryw-{k}", "--wrap=true", host=c.api(i))
        ids.append(jid)
        # Read-your-writes: right after the reply, every replica's squeue has the job.
        for r in range(1, 4):
            p = c.spur("squeue", "-h", "-j", jid, "-o", "%i %j %t", host=c.api(r))
            assert p.returncode == 0 and p.stderr == "", p.stderr
            assert p.stdout.split() == [str(jid), f"ryw-{k}", "PD"], (r, p.stdout)
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    # And in JSON, the same jobs with the same fields from every replica.
    views = [jobs_json(c, host=h) for h in every_replica(c)]
    assert all(v == views[0] for v in views[1:])
    assert [views[0][j]["name"] for j in ids] == [f"ryw-{k}" for k in range(len(ids))]
    assert all(views[0][j]["state"] == "PENDING" for j in ids)
    assert all(views[0][j]["user"] and views[0][j]["partition"] == "default" for j in ids)


@pytest.mark.slow
def test_twenty_clients_while_the_leader_is_killed_twice(cluster3):
    """Every acknowledged job exists exactly once with its id; nothing appears twice."""
    c = cluster3
    nclients, per_client_max = 20, 400
    results = {}  # name -> (returncode, stdout, stderr, t_start, t_done)
    lock = threading.Lock()
    stop = threading.Event()
    t0 = time.monotonic()

    def client(k):
        for n in range(per_client_max):
            if stop.is_set() or time.monotonic() - t0 > 60:
                return
            name = f"uniq-{k}-{n}"
            t_start = time.monotonic() - t0
            try:
                p = c.spur("sbatch", "-J", name, "--parsable", "--wrap=true", timeout=30)
                res = (p.returncode, p.stdout.strip(), p.stderr.strip())
            except Exception as e:  # a hung CLI is a failure of its own, not a crash here
                res = (-1, "", repr(e))
            with lock:
                results[name] = res + (t_start, time.monotonic() - t0)

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(nclients)]
    for t in threads:
        t.start()
    kills = []
    try:
        time.sleep(1.5)
        for _ in range(2):
            lid = c.leader()
            t_kill = time.monotonic() - t0
            new = failover(c, lid)
            kills.append((lid, new, t_kill))
            c.start(lid)
            c.replica(lid).wait_ready(20)
            time.sleep(2.0)  # submissions flow through the new leader, the old one catches up
    finally:
        stop.set()
        for t in threads:
            t.join(45)
    assert not any(t.is_alive() for t in threads), "a client loop did not finish"
    settle(c)

    acked = {}
    failed = {}
    for name, (rc, out, err, _, _) in results.items():
        if rc == 0:
            acked[name] = int(out)
        else:
            failed[name] = err
    # Submissions in flight at each kill (they went through a failover and a retry),
    # progress after it, and (a 10 s client deadline against ~1 s elections) every
    # submission acknowledged.
    done = [(t1, t2) for (rc, _, _, t1, t2) in results.values() if rc == 0]
    for _, _, t_kill in kills:
        assert any(t1 < t_kill < t2 for t1, t2 in done), "nothing in flight at a kill"
        assert any(t1 > t_kill + 1 for t1, _ in done), "no progress after a kill"
    slowest = max(t2 - t1 for t1, t2 in done)
    print(f"{len(results)} submissions, {len(done)} acknowledged, slowest {slowest:.2f}s, "
          f"kills (old, new, t): {kills}")
    assert not failed, f"{len(failed)} submissions failed, e.g. {list(failed.items())[:3]}"
    assert len(acked) >= 200, f"only {len(acked)} submissions in the run"
    assert len(set(acked.values())) == len(acked), "one job id acknowledged twice"

    views = [jobs_json(c, host=h) for h in every_replica(c)]
    assert len(views) == 3 and all(v == views[0] for v in views[1:]), "replicas differ"
    names = collections.Counter(j["name"] for j in views[0].values())
    twice = [n for n, k in names.items() if k > 1]
    assert not twice, f"submissions applied twice: {twice[:10]}"
    by_name = {j["name"]: jid for jid, j in views[0].items()}
    for name, jid in acked.items():
        held = by_name.get(name)
        assert held == jid, f"{name}: acknowledged as {jid}, held as {held}"
    unknown = set(by_name) - set(results)
    assert not unknown, f"jobs nobody submitted: {sorted(unknown)[:10]}"


def test_cancel_hold_release_across_failovers(cluster3):
    c = cluster3
    a, b, d, e = (sbatch(c, "-J", f"fo-{x}", "--wrap=true") for x in "abde")
    p = c.spur("scontrol", "hold", a)
    assert p.returncode == 0, p.stderr
    lid = c.leader()
    # Right after the kill, before any new leader: the CLI retries until one answers.
    assert c.kill_worker(lid) == 70
    spur_each_ok(c, (("scontrol", "release", a), ("scancel", b), ("scontrol", "hold", d)),
                 host=c.hosts())
    rejoin_and_settle(c, lid)
    for h in every_replica(c):
        jobs = jobs_json(c, host=h)
        assert (jobs[a]["state"], jobs[a]["held"]) == ("PENDING", False), h
        assert jobs[b]["state"] == "CANCELLED", h
        assert (jobs[d]["state"], jobs[d]["held"], jobs[d]["reason"]) == \
            ("PENDING", True, "JobHeldUser"), h
        assert (jobs[e]["state"], jobs[e]["held"]) == ("PENDING", False), h

    # A second failover, the other way round; the replica that was killed first now
    # answers from the state it recovered from its own disk.
    lid2 = c.leader()
    new = failover(c, lid2)
    spur_each_ok(c, (("scontrol", "release", d), ("scancel", e), ("scontrol", "hold", a)))
    p = c.spur("scancel", "-v", b)  # over already: said with -v, not an error (Slurm 22.05)
    assert p.returncode == 0 and f"Kill job error on job id {b}: Job/step already" in p.stderr
    rejoin_and_settle(c, lid2)
    for h in every_replica(c):
        jobs = jobs_json(c, host=h)
        assert (jobs[a]["state"], jobs[a]["held"]) == ("PENDING", True), h
        assert jobs[b]["state"] == "CANCELLED" and jobs[e]["state"] == "CANCELLED", h
        assert (jobs[d]["state"], jobs[d]["held"]) == ("PENDING", False), h
    assert new != lid2


# ---- exactly once -----------------------------------------------------------------------

def test_same_client_and_seq_is_applied_once(cluster3):
    c = cluster3
    lid = c.leader()
    fol = others(c, lid)[0]
    cid = random.getrandbits(63) | 1

    code, err, id1 = raw_submit(c, c.api(lid), cid, 1, "eo-1")
    assert (code, err) == (CODE_OK, "") and id1 > 0
    # The same pair again, to the leader and through a follower (forwarded): the first
    # answer, nothing applied; even when the retry carries a different job.
    assert raw_submit(c, c.api(lid), cid, 1, "eo-1") == (CODE_OK, "", id1)
    assert raw_submit(c, c.api(fol), cid, 1, "eo-1") == (CODE_OK, "", id1)
    assert raw_submit(c, c.api(fol), cid, 1, "eo-1-other") == (CODE_OK, "", id1)
    code, err, id2 = raw_submit(c, c.api(fol), cid, 2, "eo-2")
    assert code == CODE_OK and id2 > id1
    # An older seq than the last one is refused, not applied.
    code, err, _ = raw_submit(c, c.api(lid), cid, 1, "eo-1")
    assert code == CODE_INVALID and "stale request" in err, err

    # Across a failover: the new leader answers the retry from the replicated session.
    code, err, id3 = raw_submit(c, c.api(lid), cid, 3, "eo-3")
    assert code == CODE_OK
    failover(c, lid)
    assert raw_submit_retry(c, cid, 3, "eo-3") == (CODE_OK, "", id3)
    code, _, id4 = raw_submit_retry(c, cid, 4, "eo-4")
    assert code == CODE_OK and id4 > id3
    # client_id 0: no deduplication, by contract.
    z1 = raw_submit_retry(c, 0, 0, "eo-zero")[2]
    z2 = raw_submit_retry(c, 0, 0, "eo-zero")[2]
    assert z1 != z2 and 0 not in (z1, z2)

    rejoin_and_settle(c, lid)
    for h in every_replica(c):
        names = collections.Counter(j["name"] for j in jobs_json(c, host=h).values())
        assert names == {"eo-1": 1, "eo-2": 1, "eo-3": 1, "eo-4": 1, "eo-zero": 2}, (h, names)
    assert job(c, id1)["name"] == "eo-1"


# ---- the CLI's errors for jobs ------------------------------------------------------------

def test_unknown_job_errors(cluster3):
    c = cluster3
    sbatch(c, "--wrap=true")
    missing = 424242
    assert_error(c.spur("scontrol", "show", "job", missing),
                 "scontrol: error: slurm_load_jobs error: Invalid job id specified")
    # Slurm 22.05's scancel: an unknown job is not an error; -v says it (as it does).
    p = c.spur("scancel", missing)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    p = c.spur("scancel", "-v", missing)
    assert p.returncode == 0, p
    assert f"scancel: error: Kill job error on job id {missing}: {INVALID_JOB}" in p.stderr
    assert_error(c.spur("scontrol", "hold", missing),
                 f"scontrol: error: {INVALID_JOB} for job {missing}")
    assert_error(c.spur("scontrol", "release", missing),
                 f"scontrol: error: {INVALID_JOB} for job {missing}")
    assert_error(c.spur("squeue", "-j", missing),
                 "squeue: error: slurm_load_jobs error: Invalid job id specified")
    # A signal to it is an error: one line, nothing on stdout, exit 1.
    p = c.spur("scancel", "-s", "USR1", missing)
    assert p.returncode == 1 and p.stdout == "" and p.stderr.count("\n") == 1, p
    assert f"Kill job error on job id {missing}: {INVALID_JOB}" in p.stderr
    # Through a follower too (forwarded writes, reads served there).
    lid = c.leader()
    fol = c.api(others(c, lid)[0])
    p = c.spur("scancel", "-v", missing, host=fol)
    assert p.returncode == 0 and INVALID_JOB in p.stderr, p
    assert_error(c.spur("scontrol", "show", "job", missing, host=fol), INVALID_JOB)


# Headers and no-value texts of Slurm 22.05 (slurm-wlm in Debian 12), read off its squeue
# and sinfo on this kind of machine for a pending job and a node of 2 CPUs; squeue(1) and
# sinfo(1), "-o <output_format>", list the letters.
SLURM_SQUEUE_LETTERS = {
    "a": "ACCOUNT", "b": "TRES_PER_NODE", "d": "MIN_TMP_DISK", "E": "DEPENDENCY",
    "f": "FEATURES", "F": "ARRAY_JOB_ID", "g": "GROUP", "G": "GROUP", "h": "OVER_SUBSCRIBE",
    "H": "SOCKETS_PER_NODE", "I": "CORES_PER_SOCKET", "J": "THREADS_PER_CORE",
    "k": "COMMENT", "K": "ARRAY_TASK_ID", "n": "REQ_NODES", "o": "COMMAND",
    "O": "CONTIGUOUS", "p": "PRIORITY", "q": "QOS", "Q": "PRIORITY", "v": "RESERVATION",
    "w": "WCKEY", "W": "LICENSES", "x": "EXC_NODES", "X": "CORE_SPEC", "y": "NICE",
    "Y": "SCHEDNODES", "z": "S:C:T",
}


def test_every_squeue_and_sinfo_letter_of_slurm_prints_as_slurm_prints_it(cluster3):
    """squeue(1)/sinfo(1) "-o": no letter of Slurm's lists is an error; the ones spur has no
    value for print Slurm's text for none; sinfo's letters Slurm does not know are warned
    of and printed as text, rc 0, as Slurm's sinfo does."""
    c = cluster3
    jid = sbatch(c, "-J", "letters", "-A", "physics", "--hold", "--wrap=true")
    for letter, header in SLURM_SQUEUE_LETTERS.items():
        p = c.spur("squeue", "-j", jid, "-o", f"[%{letter}]")
        assert p.returncode == 0 and p.stderr == "", (letter, p.stderr)
        assert p.stdout.splitlines()[0] == f"[{header}]", (letter, p.stdout)
    p = c.spur("squeue", "-h", "-j", jid, "-o", "%a|%F|%G|%h|%H|%z|%K|%p|%q|%y|%d|%x|")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"physics|{jid}|{os.getgid()}|OK|*|*:*:*|N/A|N/A|(null)|0|0||"
    assert c.spur("scontrol", "create", "node", "NodeName=lx1", "CPUs=2",
                  "RealMemory=1000").returncode == 0
    p = c.spur("sinfo", "-h", "-n", "lx1", "-o", "%N|%A|%B|%d|%G|%h|%M|%s|%X|%Y|%Z|%z")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "lx1|0/1|UNLIMITED|0|(null)|NO|OFF|1-infinite|2|1|1|2:1:1"
    p = c.spur("sinfo", "-h", "-n", "lx1", "-o", "%N %.5q %Q")
    assert p.returncode == 0
    assert p.stdout.strip() == "lx1 %.5q %Q"
    assert p.stderr.splitlines() == ["Invalid node format specification: q",
                                     "Invalid node format specification: Q"]
    assert c.spur("scancel", jid).returncode == 0


def test_cancel_finished_job_and_hold_release_only_pending(cluster3):
    c = cluster3
    j1 = sbatch(c, "-J", "keep", "--wrap=true")
    j2 = sbatch(c, "-J", "gone", "--wrap=true")
    p = c.spur("scancel", j2)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert job(c, j2)["state"] == "CANCELLED"
    p = c.spur("scancel", j2)  # over already: exit 0, silent (Slurm 22.05); -v says it
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    p = c.spur("scancel", "-v", j2)
    assert p.returncode == 0 and \
        f"Kill job error on job id {j2}: Job/step already completing or completed" in p.stderr
    assert c.spur("scancel", "-Q", "-v", j2).stderr.count("Kill job error") == 0
    p = c.spur("scancel", "-Q", j2)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    # Hold and release only pending jobs; each failure names its job, the others happen.
    assert_error(c.spur("scontrol", "hold", j2), f"{NOT_PENDING} for job {j2}")
    assert_error(c.spur("scontrol", "release", j2), f"{NOT_PENDING} for job {j2}")
    p = c.spur("scontrol", "hold", f"{j1},{j2}")
    assert_error(p, f"{NOT_PENDING} for job {j2}")
    assert str(j1) not in p.stderr.replace(f"job {j2}", "")
    j = job(c, j1)
    assert (j["state"], j["held"], j["reason"]) == ("PENDING", True, "JobHeldUser")
    p = c.spur("squeue", "-h", "-j", j1, "-o", "%i %t %r")
    assert p.stdout.split() == [str(j1), "PD", "JobHeldUser"]
    assert c.spur("scontrol", "release", j1).returncode == 0
    j = job(c, j1)
    assert (j["state"], j["held"]) == ("PENDING", False)
    assert c.spur("scontrol", "release", j1).returncode == 0  # not held: nothing to do

    # squeue: active jobs by default, finished ones with -t all or their state.
    p = c.spur("squeue", "-h", "-o", "%i")
    assert p.returncode == 0 and p.stdout.split() == [str(j1)]
    p = c.spur("squeue", "-h", "-t", "all", "-o", "%i %t")
    assert sorted(p.stdout.strip().splitlines()) == sorted([f"{j1} PD", f"{j2} CA"])
    p = c.spur("squeue", "-h", "-t", "CA", "-o", "%i")
    assert p.stdout.split() == [str(j2)]
    # Filters on scancel: by name, only what matches.
    j3 = sbatch(c, "-J", "batch-x", "--wrap=true")
    j4 = sbatch(c, "-J", "batch-y", "--wrap=true")
    p = c.spur("scancel", "-n", "batch-x")
    assert p.returncode == 0, p.stderr
    states = {jid: j["state"] for jid, j in jobs_json(c).items()}
    assert states == {j1: "PENDING", j2: "CANCELLED", j3: "CANCELLED", j4: "PENDING"}


# ---- #SBATCH ------------------------------------------------------------------------------

SCRIPT_FULL = """#!/bin/bash
#SBATCH --job-name="my job"   # a comment after the options
#SBATCH -p batch
#SBATCH -N 2 -n 4
#SBATCH --cpus-per-task=3
#SBATCH --mem=2G
#SBATCH -t 1-02:03:04

#SBATCH -o out-%j.txt
#SBATCH --error=err-%j.txt
#SBATCH -D /tmp/spur-work
#SBATCH --hold
# SBATCH -J not-a-directive
  #SBATCH -J indented-is-a-comment
#SBATCHX -J not-either
echo hello
#SBATCH -J after-the-first-command
"""


def test_sbatch_directives_end_to_end(cluster_factory, tmp_path):
    c = cluster_factory(3, partitions=[{"name": "debug", "default": True, "max_time_min": 30},
                                       {"name": "batch"},
                                       {"name": "closed", "up": False}])
    c.start_all()
    c.wait_ready()
    c.leader()

    script = tmp_path / "full.sh"
    script.write_text(SCRIPT_FULL)
    j = job(c, sbatch(c, str(script)))
    assert j["name"] == "my job" and j["partition"] == "batch"
    assert (j["nodes"], j["ntasks"], j["cpus_per_task"], j["mem_mb"]) == (2, 4, 3, 2048)
    assert j["time_limit_min"] == 1440 + 2 * 60 + 3 + 1  # seconds round up
    assert (j["stdout"], j["stderr"], j["workdir"]) == ("out-%j.txt", "err-%j.txt",
                                                        "/tmp/spur-work")
    assert j["held"] is True and j["state"] == "PENDING"

    # The command line wins over the script, whatever the order; K rounds up to MB.
    j = job(c, sbatch(c, "-J", "from-cli", "-t", "5", "--mem=1536K", "-p", "debug",
                      str(script)))
    assert (j["name"], j["time_limit_min"], j["mem_mb"], j["partition"]) == \
        ("from-cli", 5, 2, "debug")
    assert j["nodes"] == 2 and j["held"] is True  # the rest still from the script

    # Defaults: name from the script's file name, the default partition and its limit,
    # the working directory of sbatch, slurm-%j.out.
    plain = tmp_path / "plain.sh"
    plain.write_text("#!/bin/sh\n\n# just a comment\ntrue\n")
    j = job(c, sbatch(c, str(plain)))
    assert (j["name"], j["partition"], j["time_limit_min"], j["held"]) == \
        ("plain.sh", "debug", 30, False)
    assert j["stdout"] == "slurm-%j.out" and j["workdir"] == os.getcwd()
    assert (j["nodes"], j["ntasks"], j["cpus_per_task"]) == (1, 1, 1)

    # Standard input, quoting with a backslash, -t UNLIMITED (the partition's limit).
    j = job(c, sbatch(c, input="#!/bin/sh\n#SBATCH -J from\\ stdin -t UNLIMITED\ntrue\n"))
    assert (j["name"], j["time_limit_min"]) == ("from stdin", 30)
    assert job(c, sbatch(c, "--wrap=sleep 1"))["name"] == "wrap"

    before = set(jobs_json(c))
    bad = {
        "#!/bin/sh\n#SBATCH --bogus=1\ntrue\n":
            "batch script line 2: unrecognized option '--bogus'",
        "#!/bin/sh\n#SBATCH -N\n": "batch script line 2: option requires an argument -- 'N'",
        "#!/bin/sh\n#SBATCH --wrap=true\n":
            "batch script line 2: option '--wrap' is not valid in a batch script",
        "#!/bin/sh\n#SBATCH -J \"open\n": "batch script line 2: unterminated quote",
        "#!/bin/sh\n#SBATCH -t 1:2:3:4\n": "invalid time limit specification: 1:2:3:4",
        "#!/bin/sh\n#SBATCH --mem=12X\n": "invalid --mem specification: 12X",
        "#!/bin/sh\n#SBATCH -N 0\n": "invalid --nodes value '0'",
        "echo no interpreter\n": "This does not look like a batch script",
        "#!/bin/sh\r\ntrue\r\n": "Batch script contains DOS line breaks",
        "": "Batch script is empty!",
        "#!/bin/sh\ntrue\0\n": "Batch script contains a NUL character at byte 14",
    }
    for k, (text, line) in enumerate(bad.items()):
        f = tmp_path / f"bad{k}.sh"
        f.write_bytes(text.encode())
        p = c.spur("sbatch", str(f))
        # A refused #SBATCH line exits 255, as Slurm's sbatch does (seen with slurm-client
        # 22.05 of Debian 12); the script checks exit 1, as Slurm's do.
        if "#SBATCH" in text:
            assert p.returncode == 255 and line in p.stderr, (p.returncode, p.stderr)
        else:
            assert_error(p, line)
    # Through the server's checks: the partition and the limits.
    assert_error(c.spur("sbatch", "-p", "closed", "--wrap=true"),
                 "Batch job submission failed: partition closed is down and takes no new jobs")
    assert_error(c.spur("sbatch", "--wrap=true", "x"),
                 "script argument not permitted with --wrap option")
    assert set(jobs_json(c)) == before, "a refused submission left a job behind"


def test_oversized_script_is_refused_and_the_cluster_is_unharmed(cluster3, tmp_path):
    c = cluster3
    first = sbatch(c, "--wrap=true")
    lid = c.leader()
    workers = {i: c.worker_pid(i) for i in range(1, 4)}

    big = tmp_path / "big.sh"
    big.write_bytes(b"#!/bin/sh\n" + b"#" * (2 << 20) + b"\ntrue\n")
    size = big.stat().st_size
    # 1. sbatch itself knows the limit (controller.max_script_bytes, 1 MiB by default).
    p = c.spur("sbatch", str(big))
    assert_error(p, f"batch script is {size} bytes, over the limit of 1048576 bytes "
                    "(controller.max_script_bytes)")
    p = c.spur("sbatch", input=big.read_text())
    assert_error(p, "batch script is larger than the limit of 1048576 bytes")

    # 2. A client configured with a larger limit: the state machine refuses it.
    cfg = copy.deepcopy(c.cfgs[0])
    cfg["controller"].update(max_script_bytes=4194304, max_frame_bytes=16 << 20)
    loose = spurtest.write_config(tmp_path / "loose.yaml", **cfg)
    env = {"SPUR_CONFIG": str(loose)}
    p = c.spur("sbatch", str(big), env=env)
    assert_error(p, f"Batch job submission failed: the job script is {size} bytes; "
                    "the limit is 1048576")

    # 3. A frame over the replicas' 4 MiB frame limit: refused before it is read, with an
    #    answer the client shows, at once (not after the client's deadline).
    huge = tmp_path / "huge.sh"
    huge.write_bytes(b"#!/bin/sh\n" + b"#" * (4194304 - 16) + b"\ntrue\n")
    t = time.monotonic()
    p = c.spur("sbatch", str(huge), env=env)
    assert_error(p, "Batch job submission failed: frame of ")
    assert "over the 4194304-byte limit" in p.stderr
    assert time.monotonic() - t < 5

    # The cluster is unharmed: same leader, same workers, every replica answers, and the
    # next job gets the next id (no refused submission took one).
    assert c.leader() == lid
    assert {i: c.worker_pid(i) for i in range(1, 4)} == workers
    assert all(c.replica(i).proc.poll() is None for i in range(1, 4))
    nxt = sbatch(c, "--wrap=true", host=c.api(others(c, lid)[0]))
    assert nxt == first + 1
    for h in every_replica(c):
        assert set(jobs_json(c, host=h)) == {first, nxt}
    assert "oversized frame" in c.replica(lid).log() or any(
        "oversized frame" in c.replica(i).log() for i in range(1, 4))


def test_job_lists_come_in_pages_and_an_oversized_answer_fails_at_once(cluster3, tmp_path):
    """A client with a small frame limit still lists every job (the replica pages the
    list to fit the client's limit); one answer that cannot fit (a single job with a big
    script) fails at once with a clear error instead of being asked of every replica."""
    c = cluster3
    out = "/tmp/" + "o" * 3990  # stdout and stderr paths: 8 KB per job
    ids = [sbatch(c, "-o", out, "--wrap=true") for _ in range(10)]
    cfg = copy.deepcopy(c.cfgs[0])
    cfg["controller"]["max_frame_bytes"] = 65536
    small = spurtest.write_config(tmp_path / "small.yaml", **cfg)
    p = c.spur("squeue", "-h", "-o", "%i", env={"SPUR_CONFIG": str(small)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(j) for j in ids]
    big = tmp_path / "big.sh"
    big.write_text("#!/bin/sh\n" + ("# padding line of a big script\n" * 3000))
    p = c.spur("sbatch", str(big))
    assert p.returncode == 0, p.stderr
    big_id = int(p.stdout.split()[-1])
    t = time.monotonic()
    p = c.spur("scontrol", "show", "job", str(big_id), env={"SPUR_CONFIG": str(small)})
    assert_error(p, "-byte limit (controller.max_frame_bytes)")
    assert "over the 65536-byte limit" in p.stderr and p.stderr.count("\n") == 1
    assert time.monotonic() - t < 1.0


def test_squeue_lists_every_job_however_large_the_answer(cluster_factory):
    """Replicas and client share one configuration: a 64 KiB frame limit, and jobs whose
    answer together is larger than that. Every job is still listed, page by page."""
    c = cluster_factory(3, controller={"max_frame_bytes": 65536, "max_script_bytes": 4096})
    c.start_all()
    c.wait_ready()
    c.leader()
    out = "/tmp/" + "o" * 3990
    ids = [sbatch(c, "-o", out, "--wrap=true") for _ in range(10)]
    p = c.spur("squeue", "-h", "-o", "%i")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(j) for j in ids]
    p = c.spur("squeue", "--json")
    assert p.returncode == 0, p.stderr
    assert [j["job_id"] for j in json.loads(p.stdout)] == ids


# ---- nodes and partitions ---------------------------------------------------------------

def nodes_json(c, host):
    p = c.spur("sinfo", "--json", host=host)
    assert p.returncode == 0, p.stderr
    return {n["name"]: n for n in json.loads(p.stdout)["nodes"]}


def test_nodes_create_drain_resume_down_on_every_replica(cluster3):
    c = cluster3
    p = c.spur("scontrol", "create", "node", "NodeName=cn1", "CPUs=8", "RealMemory=16000",
               "Features=gpu,ssd")
    assert p.returncode == 0, p.stderr
    assert c.spur("scontrol", "create", "node", "NodeName=cn2", "CPUs=4",
                  "RealMemory=8000").returncode == 0
    for h in every_replica(c):
        n = nodes_json(c, h)["cn1"]
        assert (n["state"], n["cpus"], n["mem_mb"], n["features"]) == \
            ("idle", 8, 16000, ["gpu", "ssd"]), h
        assert n["partitions"] == ["default"]

    # A reason is required to drain or down; nothing changes without one.
    for st in ("DRAIN", "DOWN"):
        assert_error(c.spur("scontrol", "update", "NodeName=cn1", f"State={st}"),
                     "You must specify a reason when DOWNING or DRAINING a node")
    assert nodes_json(c, c.api(1))["cn1"]["state"] == "idle"

    p = c.spur("scontrol", "update", "NodeName=cn[1-2]", "State=DRAIN", "Reason=disk swap")
    assert p.returncode == 0, p.stderr
    for h in every_replica(c):
        nodes = nodes_json(c, h)
        assert [(nodes[x]["state"], nodes[x]["reason"]) for x in ("cn1", "cn2")] == \
            [("drained", "disk swap")] * 2, h
        p = c.spur("scontrol", "show", "node", "cn1", host=h)
        assert "State=IDLE+DRAIN" in p.stdout and "Reason=disk swap" in p.stdout, p.stdout
        p = c.spur("sinfo", "-h", "-R", host=h)
        assert "disk swap" in p.stdout and "cn[1-2]" in p.stdout, p.stdout
        # Who set it, replicated with it (Slurm's -R USER column; -l adds the uid).
        assert p.stdout.split()[2] == "root", p.stdout
        p = c.spur("sinfo", "-R", "-l", host=h)
        lines = p.stdout.splitlines()
        assert len(lines[0].split()) == 5 and lines[0][3:4] == " ", lines  # the date line
        assert lines[1].split() == ["REASON", "USER", "TIMESTAMP", "STATE", "NODELIST"]
        assert lines[2].split()[2] == "root(0)" and lines[2].split()[4] == "drain", lines
        p = c.spur("sinfo", "-h", "-o", "%t %N", host=h)
        assert p.stdout.split() == ["drain", "cn[1-2]"], p.stdout

    assert c.spur("scontrol", "update", "NodeName=cn2", "State=RESUME").returncode == 0
    p = c.spur("scontrol", "update", "NodeName=cn1", "State=DOWN", "Reason=PSU failed")
    assert p.returncode == 0, p.stderr
    for h in every_replica(c):
        nodes = nodes_json(c, h)
        assert (nodes["cn1"]["state"], nodes["cn1"]["reason"]) == ("down", "PSU failed"), h
        assert (nodes["cn2"]["state"], nodes["cn2"]["reason"]) == ("idle", ""), h
        p = c.spur("scontrol", "show", "node", "cn1", host=h)
        assert "State=DOWN" in p.stdout, p.stdout
    assert c.spur("scontrol", "update", "NodeName=cn1", "State=RESUME").returncode == 0
    assert all(nodes_json(c, h)["cn1"]["state"] == "idle" for h in every_replica(c))

    # Errors: resume of a node that is up, unknown nodes, a bad create.
    assert_error(c.spur("scontrol", "update", "NodeName=cn1", "State=RESUME"),
                 'node "cn1" is not down, drained or draining')
    assert_error(c.spur("scontrol", "update", "NodeName=nope", "State=DRAIN", "Reason=x"),
                 "slurm_update error: Invalid node name specified: nope")
    assert_error(c.spur("scontrol", "show", "node", "nope"), "Node nope not found")
    p = c.spur("scontrol", "create", "node", "NodeName=bad name", "CPUs=1", "RealMemory=1")
    assert p.returncode == 1 and "error" in p.stderr
    assert set(nodes_json(c, c.api(1))) == {"cn1", "cn2"}


def test_partitions_from_the_configuration(cluster_factory):
    c = cluster_factory(3, partitions=[{"name": "short", "max_time_min": 60},
                                       {"name": "long", "default": True}])
    c.start_all()
    c.wait_ready()
    c.leader()
    for h in every_replica(c):
        p = c.spur("sinfo", "-h", "-o", "%P %a %l", host=h)
        assert p.returncode == 0, p.stderr
        assert p.stdout.split("\n")[:2] == ["short up 1:00:00", "long* up infinite"], p.stdout
        parts = json.loads(c.spur("sinfo", "--json", host=h).stdout)["partitions"]
        assert [(x["name"], x["default"], x["max_time_min"], x["state"]) for x in parts] == \
            [("short", False, 60, "UP"), ("long", True, 0, "UP")]
    p = c.spur("scontrol", "show", "partition", "long")
    assert "PartitionName=long" in p.stdout and "Default=YES" in p.stdout
    assert_error(c.spur("scontrol", "show", "partition", "nope"), "Partition nope not found")

    assert job(c, sbatch(c, "--wrap=true"))["partition"] == "long"
    j = job(c, sbatch(c, "-p", "short", "--wrap=true"))
    assert (j["partition"], j["time_limit_min"]) == ("short", 60)  # the partition's limit
    assert job(c, sbatch(c, "-p", "short", "-t", "60", "--wrap=true"))["time_limit_min"] == 60
    assert job(c, sbatch(c, "-t", "10000", "--wrap=true"))["time_limit_min"] == 10000
    assert_error(c.spur("sbatch", "-p", "nope", "--wrap=true"),
                 'sbatch: error: Batch job submission failed: partition "nope" does not exist')
    assert_error(c.spur("sbatch", "-p", "short", "-t", "61", "--wrap=true"),
                 "Batch job submission failed: time limit 61 min exceeds partition short's "
                 "max 60 min")
    assert_error(c.spur("sbatch", "-p", "short", "-t", "1:00:01", "--wrap=true"),
                 "time limit 61 min exceeds partition short's max 60 min")
    p = c.spur("squeue", "-h", "-p", "short", "-o", "%P")
    assert p.stdout.split() == ["short", "short"]
    assert len(jobs_json(c)) == 4


def test_json_output_parses_on_every_replica(cluster3):
    c = cluster3
    jid = sbatch(c, "-J", 'quote"and\\back', "--wrap=true")
    c.spur("scontrol", "create", "node", "NodeName=j1", "CPUs=2", "RealMemory=100", check=True)
    for h in every_replica(c):
        jobs = json.loads(c.spur("squeue", "--json", host=h, check=True).stdout)
        assert [(x["job_id"], x["name"]) for x in jobs] == [(jid, 'quote"and\\back')]
        info = json.loads(c.spur("sinfo", "--json", host=h, check=True).stdout)
        assert set(info) == {"partitions", "nodes"}
        assert [n["name"] for n in info["nodes"]] == ["j1"]
        shown = json.loads(c.spur("scontrol", "show", "job", jid, "--json", host=h,
                                  check=True).stdout)
        assert shown[0]["job_id"] == jid
        assert json.loads(c.spur("squeue", "--json", "-u", "nobody-at-all", host=h,
                                 check=True).stdout) == []


def test_reads_without_a_leader_are_marked_possibly_stale(cluster3):
    c = cluster3
    ids = [sbatch(c, "-J", f"st-{k}", "--wrap=true") for k in range(3)]
    lid = settle(c)
    # Stop the two followers: the leader is left alone, without a quorum, and steps down.
    for i in others(c, lid):
        assert c.stop(i) == 0
    for args in (("squeue", "-h", "-o", "%i %j"), ("squeue", "--json"),
                 ("scontrol", "show", "job", ids[0])):
        p = c.spur(*args, host=c.api(lid), timeout=30)
        assert p.returncode == 0, p.stderr
        assert f"{STALE_WARNING} {lid}" in p.stderr, p.stderr
        assert p.stderr.count("\n") == 1
    p = c.spur("squeue", "-h", "-o", "%i %j", host=c.api(lid))
    assert p.stdout.split("\n")[:3] == [f"{j} st-{k}" for k, j in enumerate(ids)]
    # A write has no quorum to go to: a clear failure, not a hang.
    p = c.spur("sbatch", "--wrap=true", host=c.api(lid), env={"SPUR_TIMEOUT_MS": "2000"})
    assert p.returncode == 1 and "Batch job submission failed" in p.stderr, p.stderr
    # Back to a quorum: no warning, and everything is there.
    for i in others(c, lid):
        c.start(i)
    c.wait_ready()
    settle(c)
    p = c.spur("squeue", "-h", "-o", "%i")
    assert p.returncode == 0 and p.stderr == "" and p.stdout.split() == [str(j) for j in ids]


def test_long_listings_as_slurms(cluster3):
    """squeue -l, sinfo -l and sinfo -N -l as Slurm 22.05 prints them: a date line (not with
    -h), Slurm's long columns; -l with -o is refused in Slurm's words, exit 1."""
    c = cluster3
    jid = sbatch(c, "--hold", "-J", "longjob", "--wrap=true")
    assert c.spur("scontrol", "create", "node", "NodeName=ll1", "CPUs=2",
                  "RealMemory=1000").returncode == 0
    date_line = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} \d\d "
                           r"\d\d:\d\d:\d\d \d{4}$")
    p = c.spur("squeue", "-l", "-j", jid)
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and date_line.match(lines[0]), lines
    assert lines[1].split() == ["JOBID", "PARTITION", "NAME", "USER", "STATE", "TIME",
                                "TIME_LIMI", "NODES", "NODELIST(REASON)"], lines
    assert lines[2].split()[:5] == [str(jid), "default", "longjob", "root", "PENDING"], lines
    p = c.spur("squeue", "-l", "-h", "-j", jid)
    assert len(p.stdout.splitlines()) == 1 and not date_line.match(p.stdout.splitlines()[0])
    p = c.spur("sinfo", "-l")
    lines = p.stdout.splitlines()
    assert date_line.match(lines[0]), lines
    assert lines[1].split() == ["PARTITION", "AVAIL", "TIMELIMIT", "JOB_SIZE", "ROOT",
                                "OVERSUBS", "GROUPS", "NODES", "STATE", "NODELIST"], lines
    p = c.spur("sinfo", "-N", "-l", "-n", "ll1")
    lines = p.stdout.splitlines()
    assert date_line.match(lines[0]), lines
    assert lines[1].split() == ["NODELIST", "NODES", "PARTITION", "STATE", "CPUS", "S:C:T",
                                "MEMORY", "TMP_DISK", "WEIGHT", "AVAIL_FE", "REASON"], lines
    assert lines[2].split() == ["ll1", "1", "default*", "idle", "2", "2:1:1", "1000", "0", "1",
                                "(null)", "none"], lines
    # -S and SQUEUE_SORT: Slurm's sort letters, '-' descending; others refused, exit 1.
    j2 = sbatch(c, "--hold", "-J", "alpha", "--wrap=true")
    p = c.spur("squeue", "-h", "-S", "-i", "-o", "%i")
    assert p.stdout.split() == [str(j2), str(jid)], p
    p = c.spur("squeue", "-h", "-o", "%j", env={"SQUEUE_SORT": "j"})
    assert p.stdout.split() == ["alpha", "longjob"], p
    p = c.spur("squeue", "-S", "Z")
    assert (p.returncode, p.stdout) == (1, ""), p
    assert p.stderr == "squeue: error: Invalid sort specification: Z\n", p.stderr
    assert c.spur("scancel", j2).returncode == 0
    for cmd in ("squeue", "sinfo"):
        p = c.spur(cmd, "-l", "-o", "%i")
        assert p.returncode == 1 and p.stderr == (
            f"{cmd}: fatal: Options -o(--format) and -l(--long) are mutually exclusive. "
            "Please remove one and retry.\n"), p
    assert c.spur("scancel", jid).returncode == 0


def test_unknown_users_on_u_as_slurms_squeue_and_scancel(cluster3):
    """squeue -u warns of a user nobody knows and goes on (exit 0), scancel -u refuses it
    (exit 1): the texts of Slurm 22.05's, seen with slurm-client of Debian 12."""
    c = cluster3
    jid = sbatch(c, "--hold", "--wrap=true")
    ghost = "nosuchuser-spur"
    p = c.spur("squeue", "-h", "-u", f"{ghost},root", "-o", "%i")
    assert p.returncode == 0 and p.stdout.split() == [str(jid)], p
    assert p.stderr == f"squeue: error: Invalid user: {ghost}\n\n", p.stderr
    p = c.spur("squeue", "-h", "-u", ghost, "-o", "%i")
    assert (p.returncode, p.stdout) == (0, ""), p
    p = c.spur("squeue", "-h", "-u", "0", "-o", "%i")  # a uid is its user
    assert p.stdout.split() == [str(jid)], p
    p = c.spur("scancel", "-u", ghost)
    assert (p.returncode, p.stderr) == (1, f"scancel: error: Invalid user name: {ghost}\n"), p
    assert job(c, jid)["state"] == "PENDING"
    assert c.spur("scancel", "-u", "0", jid).returncode == 0  # ids restrict the filter
    assert job(c, jid)["state"] == "CANCELLED"


def test_sbatch_reads_sbatch_variables_over_the_script_under_the_command_line(cluster3,
                                                                              tmp_path):
    """sbatch(1), INPUT ENVIRONMENT VARIABLES: SBATCH_* over #SBATCH, the command line over
    both; a refused value exits 255 naming the variable."""
    c = cluster3
    f = tmp_path / "envjob.sh"
    f.write_text("#!/bin/sh\n#SBATCH -J script-name -t 5\ntrue\n")
    env = {"SBATCH_JOB_NAME": "env-name", "SBATCH_TIMELIMIT": "7", "SBATCH_ACCOUNT": "chem",
           "SBATCH_REQUEUE": "yes"}
    j = job(c, sbatch(c, "--hold", str(f), env=env))
    assert (j["name"], j["time_limit_min"], j["account"], j["requeue"]) == \
        ("env-name", 7, "chem", True)
    j = job(c, sbatch(c, "--hold", "-J", "cli-name", str(f), env=env))
    assert (j["name"], j["time_limit_min"]) == ("cli-name", 7)
    p = c.spur("sbatch", str(f), env={"SBATCH_TIMELIMIT": "soon"})
    assert p.returncode == 255 and "SBATCH_TIMELIMIT: " in p.stderr, p


def test_scontrol_show_hostnames_and_hostlist_as_slurms(tmp_path):
    """scontrol show hostnames / hostlist / hostlistsorted, with no controller needed:
    Slurm 22.05's outputs for the same lists (slurm-client of Debian 12)."""
    env = dict(os.environ, SPUR_CONTROLLER="127.0.0.1:1")
    env.pop("SPUR_CONFIG", None)
    env.pop("SLURM_JOB_NODELIST", None)

    def sc(*args, **extra):
        return subprocess.run([str(spurtest.BUILD / "client" / "scontrol"), "show"] + list(args),
                              capture_output=True, text=True, env=dict(env, **extra), timeout=10)
    p = sc("hostnames", "n[1-3],m[01-02]")
    assert (p.returncode, p.stdout) == (0, "n1\nn2\nn3\nm01\nm02\n"), p
    assert sc("hostlist", "n1,n2,n3,m01,m02").stdout == "n[1-3],m[01-02]\n"
    assert sc("hostlistsorted", "n1,n2,n3,m01,m02").stdout == "m[01-02],n[1-3]\n"
    assert sc("hostnames", SLURM_JOB_NODELIST="x[1-2]").stdout == "x1\nx2\n"
    f = tmp_path / "hosts"
    f.write_text("a1\na2\nb7\n")
    assert sc("hostlist", str(f)).stdout == "a[1-2],b7\n"
    p = sc("hostnames")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "scontrol: error: host list is empty\n")
    p = sc("hostnames", "n[1-")
    assert p.returncode == 1 and "n[1-" in p.stderr, p


# What Slurm 22.05's commands print for an option they refuse, and their exit status
# (getopt's words, then a "Try" line; sbatch exits 255, sacct prints no "Try" line), as
# read off slurm-client of Debian 12 on this kind of machine.
@pytest.mark.parametrize("cmd,rc", [("squeue", 1), ("sinfo", 1), ("scancel", 1),
                                    ("scontrol", 1), ("sbatch", 255), ("sacct", 1)])
def test_bad_options_are_worded_and_exit_as_slurms(cmd, rc, tmp_path):
    env = dict(os.environ, SPUR_CONTROLLER="127.0.0.1:1")
    env.pop("SPUR_CONFIG", None)  # embedded defaults; nothing is contacted for a bad option
    try_line = "" if cmd == "sacct" else f'Try "{cmd} --help" for more information\n'
    for args, want in ((["--bogus"], "unrecognized option '--bogus'"),
                       (["-Z"], "invalid option -- 'Z'")):
        p = subprocess.run([str(spurtest.BUILD / "client" / cmd)] + args, capture_output=True,
                           text=True, env=env, timeout=10)
        assert p.returncode == rc, p
        assert p.stderr == f"{cmd}: {want}\n{try_line}", p.stderr
    if cmd in ("squeue", "sinfo", "sacct"):
        p = subprocess.run([str(spurtest.BUILD / "client" / cmd), "-o"], capture_output=True,
                           text=True, env=env, timeout=10)
        assert p.returncode == 1, p
        assert p.stderr == f"{cmd}: option requires an argument -- 'o'\n{try_line}", p.stderr
    if cmd == "sbatch":
        p = subprocess.run([str(spurtest.BUILD / "client" / cmd), "-J"], capture_output=True,
                           text=True, env=env, timeout=10)
        assert p.returncode == 255, p
        assert p.stderr == f"sbatch: option requires an argument -- 'J'\n{try_line}", p.stderr


# ---- rules the server keeps for every client (issue: one rule, in the server) ---------

NO_SHEBANG = ("This does not look like a batch script. The first line must start with #! "
              "followed by the path to an interpreter. For instance: #!/bin/sh")


def raw_submit_script(c, host, script):
    """A SubmitJob of script to host, through a hand-made frame (not the CLI)."""
    return spurtest.api_call(host, spurtest.OP_SUBMIT_JOB,
                             spurtest.pb_field(1, spurtest.job_spec(script)),
                             cluster_name=c.cfgs[0]["cluster_name"], user="raw")


def test_a_raw_submission_breaking_the_script_rule_gets_sbatchs_message(cluster3):
    c = cluster3
    lid = c.leader()
    follower = others(c, lid)[0]
    bad = [("echo no interpreter\n", NO_SHEBANG),
           ("\n#!/bin/sh\ntrue\n", NO_SHEBANG),
           ("#!/bin/sh\r\ntrue\r\n", "Batch script contains DOS line breaks (\\r\\n) instead "
                                     "of expected UNIX line breaks (\\n)"),
           (b"#!/bin/sh\necho\0x\n", "Batch script contains a NUL character at byte 14"),
           ("  \n\t\n", "Batch script contains only whitespace!"),
           ("", "Batch script is empty!")]
    for script, msg in bad:
        for host in (c.api(lid), c.api(follower)):
            r = raw_submit_script(c, host, script)
            assert (r["code"], r["error"]) == (spurtest.API_INVALID, msg), (host, script, r)
            assert r["result"] is None
    # The CLI refuses the same scripts with the same line (it calls the same rule).
    for script, msg in bad[:3]:
        p = c.spur("sbatch", input=script)
        assert p.returncode == 1 and p.stderr == f"sbatch: error: {msg}\n", (script, p.stderr)
    # Nothing was created; a script that keeps the rule is still taken from a raw client.
    assert jobs_json(c) == {}
    r = raw_submit_script(c, c.api(follower), "#!/bin/sh\ntrue\n")
    assert r["code"] == spurtest.API_OK, r
    jid = spurtest.pb_decode(r["result"][1])[1][0]
    assert list(jobs_json(c)) == [jid]


def test_get_jobs_with_an_unknown_state_filter_is_invalid(cluster3):
    c = cluster3
    jid = sbatch(c, "-J", "filtered", "--wrap=true")
    name = c.cfgs[0]["cluster_name"]

    def get_jobs(host, states, local=False):
        body = b"".join(spurtest.pb_field(3, s) for s in states)
        return spurtest.api_call(host, spurtest.OP_GET_JOBS, body, cluster_name=name,
                                 local_read=local)

    for host in every_replica(c):
        for local in (False, True):
            for states in ([42], [1, 42], [11]):
                r = get_jobs(host, states, local)
                bad = [s for s in states if not 1 <= s <= 10][0]
                assert r["code"] == spurtest.API_INVALID, (host, states, r)
                assert r["error"] == f"unknown job state {bad} in the filter", r
                assert r["result"] is None
            # A known state still filters: PENDING (1) finds the job, RUNNING (2) not.
            r = get_jobs(host, [1], local)
            assert r["code"] == spurtest.API_OK, r
            found = spurtest.pb_decode(r["result"][1])[1]
            assert [spurtest.pb_decode(j)[1][0] for j in found] == [jid]
            r = get_jobs(host, [2], local)
            assert r["code"] == spurtest.API_OK and not spurtest.pb_decode(r["result"][1])[1]
    # squeue refuses an unknown state name before asking anyone.
    p = c.spur("squeue", "-t", "bogus")
    assert p.returncode == 1 and "Invalid job state specified: bogus" in p.stderr, p.stderr


def test_sbatch_requeue_and_account_reach_scontrol_and_json(cluster_factory, tmp_path):
    """--requeue / --no-requeue and -A, from the command line and #SBATCH lines, are
    recorded: scontrol show job says Requeue= and Account=, --json requeue and account;
    scancel -s with an unknown signal is refused and leaves the job alone."""
    c = cluster_factory(1)
    c.start_all()
    c.wait_ready()
    c.leader()
    a = sbatch(c, "--requeue", "-A", "physics", "--wrap=true")
    b = sbatch(c, "--wrap=true")
    script = tmp_path / "rq.sh"
    script.write_text("#!/bin/sh\n#SBATCH --requeue\n#SBATCH --account=chem\ntrue\n")
    d = sbatch(c, "--no-requeue", str(script))
    shown = {}
    for jid in (a, b, d):
        p = c.spur("scontrol", "show", "job", jid)
        assert p.returncode == 0, p.stderr
        shown[jid] = p.stdout
    assert "Requeue=1 " in shown[a] and "Account=physics " in shown[a], shown[a]
    assert "Requeue=0 " in shown[b] and "Account=(null) " in shown[b], shown[b]
    assert "Requeue=0 " in shown[d] and "Account=chem " in shown[d], shown[d]
    js = jobs_json(c)
    assert (js[a]["requeue"], js[a]["account"]) == (True, "physics")
    assert (js[b]["requeue"], js[b]["account"]) == (False, "")
    assert (js[d]["requeue"], js[d]["account"]) == (False, "chem")
    assert_error(c.spur("scancel", "-s", "BOGUS", a), "scancel: error: Unknown job signal: BOGUS")
    assert job(c, a)["state"] == "PENDING"
