"""Job dependencies (issue 15): sbatch -d against real replicas and real spurd agents.

Slurm 22.05's sbatch(1), "-d, --dependency", is the reference: after, afterany, afterok,
afternotok, singleton; ',' all of, '?' any of; --kill-on-invalid-dep. What holds here,
each against three spurctld replicas and two spurd agents of 1 CPU on 127.0.0.1:
  - an afterok chain runs in order, each link after the one before ended, across kill -9
    of the leader's worker while the chain waits (the dependencies are replicated);
  - afternotok runs only after a failure; afterok of a failed job stays pending as
    DependencyNeverSatisfied, or with --kill-on-invalid-dep=yes ends CANCELLED;
  - squeue %E / %r and scontrol's Dependency= say what a job waits on, as Slurm does;
  - singleton jobs of one name never overlap;
  - bad syntax is refused with "Job dependency problem" and exit status 1.
Jobs write their start and end to a shared log with nanosecond times; order is read
from it. Every wait is bounded.
"""
import os

import pytest

from test_jobs_run import JobCluster  # noqa: F401  (the fixture's class)
from test_jobs_run import job_cluster  # noqa: F401  (pytest fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="spurd runs jobs as their users: needs root")


def step(log, name, rc=0, secs=1):
    return (f"echo {name} start $(date +%s.%N) >> {log}; sleep {secs}; "
            f"echo {name} end $(date +%s.%N) >> {log}; exit {rc}")


def row(jc, jid, host=None):
    """(state, reason, dependency) as squeue prints them."""
    p = jc.c.spur("squeue", "-h", "-t", "all", "-j", jid, "-o", "%T|%r|%E", host=host)
    assert p.returncode == 0, p.stderr
    return tuple(p.stdout.strip().split("|"))


def read_log(log):
    """{name: (start, end)} and the names in the order they started."""
    spans, order = {}, []
    for ln in log.read_text().splitlines():
        name, what, t = ln.split()
        s, e = spans.get(name, (None, None))
        if what == "start":
            assert s is None, f"{name} started twice:\n{log.read_text()}"
            spans[name] = (float(t), e)
            order.append(name)
        else:
            spans[name] = (s, float(t))
    return spans, order


def test_afterok_chain_in_order_across_a_leader_kill_afternotok_only_on_failure(job_cluster):
    jc = job_cluster(agents=2, cpus=1)
    log = jc.work / "order.log"
    a = jc.sbatch("-J", "a", "--wrap", step(log, "a", secs=2))
    b = jc.sbatch("-J", "b", "-d", f"afterok:{a}", "--wrap", step(log, "b"))
    c = jc.sbatch("-J", "c", "--dependency", f"afterok:{b}", "--wrap", step(log, "c"))
    never = jc.sbatch("-J", "never", "-d", f"afternotok:{a}", "--wrap", step(log, "never"))
    f = jc.sbatch("-J", "f", "--wrap", step(log, "f", rc=3))
    g = jc.sbatch("-J", "g", "-d", f"afternotok:{f}", "--wrap", step(log, "g"))
    h = jc.sbatch("-J", "h", "-d", f"afterok:{f}", "--kill-on-invalid-dep=yes",
                  "--wrap", step(log, "h"))
    either = jc.sbatch("-J", "either", "-d", f"afterok:{f}?afterok:{a}",
                       "--wrap", step(log, "either"))

    # sbatch(1) -d: while it waits the reason is Dependency and %E names what is awaited.
    assert row(jc, c) == ("PENDING", "Dependency", f"afterok:{b}(unfulfilled)")
    jc.wait_state(a, "RUNNING")
    assert row(jc, b) == ("PENDING", "Dependency", f"afterok:{a}(unfulfilled)")

    # The leader's worker dies while the chain waits: the new leader holds the same.
    old = jc.c.leader()
    assert jc.c.kill_worker(old) == 70
    new = jc.c.leader(among=[i for i in range(1, 4) if i != old], timeout=20)
    host = jc.c.api(new)
    for jid in (c, g, either):
        jc.wait_state(jid, "COMPLETED", timeout=60, host=host)
    jc.wait_state(h, "CANCELLED", timeout=20, host=host)
    assert row(jc, h, host)[1] == "DependencyNeverSatisfied"
    assert row(jc, never, host) == ("PENDING", "DependencyNeverSatisfied",
                                    f"afternotok:{a}(failed)")
    shown = jc.show_job(never, host=host)
    assert f"Reason=DependencyNeverSatisfied Dependency=afternotok:{a}(failed)" in shown
    assert "Dependency=(null)" in jc.show_job(c, host=host)

    spans, order = read_log(log)
    assert set(spans) == {"a", "b", "c", "f", "g", "either"}, log.read_text()
    assert spans["a"][1] <= spans["b"][0] and spans["b"][1] <= spans["c"][0], spans
    assert spans["f"][1] <= spans["g"][0], spans
    assert spans["a"][1] <= spans["either"][0], spans
    jc.c.spur("scancel", never, host=host)


def test_singletons_of_one_name_never_overlap_and_bad_syntax_is_refused(job_cluster):
    jc = job_cluster(agents=2, cpus=1)
    log = jc.work / "solo.log"
    ids = [jc.sbatch("-J", "solo", "-d", "singleton", "--wrap", step(log, f"s{i}"))
           for i in range(3)]
    # Two CPUs free, but one job of the name at a time.
    for jid in ids:
        jc.wait_state(jid, "COMPLETED", timeout=60)
    spans, order = read_log(log)
    assert order == ["s0", "s1", "s2"], log.read_text()
    for x, y in zip(order, order[1:]):
        assert spans[x][1] <= spans[y][0], spans

    # sbatch(1): a dependency the controller cannot parse: "Job dependency problem", 1.
    for bad in ("afterlunch:1", "afterok:", "afterok:1+5"):
        p = jc.run("sbatch", "-d", bad, "--wrap", "true")
        assert p.returncode == 1, (bad, p.returncode, p.stderr)
        assert p.stderr.startswith(
            "sbatch: error: Batch job submission failed: Job dependency problem"), p.stderr
    p = jc.run("sbatch", "--kill-on-invalid-dep=maybe", "--wrap", "true")
    assert p.returncode == 255 and "Invalid --kill-on-invalid-dep specification" in p.stderr
    # A job the controller does not hold meets its entry, as Slurm lifts it.
    ghost = jc.sbatch("-d", "afterok:987654", "--wrap", "true")
    jc.wait_state(ghost, "COMPLETED", timeout=30)
