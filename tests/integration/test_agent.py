"""spurd, the node agent, against a Python "leader" that speaks agent.proto over TCP.

Each test runs the real spurd from the build tree on 127.0.0.1 ports chosen free, with a
stand-in controller (agentproto.FakeController) answering its RegisterNode. Jobs run as a
test user the fixture creates with useradd and removes after; spurd runs as root, as it
does in production. cgroups are off here (agent.cgroup: none): confinement is the
monitor's tests' subject.
"""
import os
import pwd
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import agentproto as ap
import chanproto
import spurtest
from spurtest import SPURD, free_port, wait_until, write_config

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="spurd runs jobs as other users: root only")


def run_retrying(cmd, tries=40):
    """useradd/userdel, retried while another test on the host holds /etc/passwd's lock
    (they fail at once then); raises with the tool's message when every try failed."""
    for _ in range(tries):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return
        time.sleep(0.25)
    raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")


@pytest.fixture(scope="module")
def test_user():
    """A user that exists only for these tests, and a work directory it owns."""
    name = "spurt" + uuid.uuid4().hex[:8]
    run_retrying(["useradd", "--no-create-home", "--shell", "/bin/sh", name])
    work = Path(tempfile.mkdtemp(prefix="spur-agent-work-", dir="/tmp"))
    pw = pwd.getpwnam(name)
    os.chown(work, pw.pw_uid, pw.pw_gid)
    os.chmod(work, 0o755)
    try:
        yield pw, work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        run_retrying(["userdel", name])


def cluster_key(tmp):
    """tmp/cluster.key, made on first use: what spurd and the fakes prove to each other."""
    key = tmp / "cluster.key"
    if not key.exists():
        spurtest.new_key_file(key)
    return key


class Agent:
    """One spurd process with its own spool, config and log."""

    def __init__(self, tmp, controller_port, node="n1", cpus=2, mem_mb=1024):
        self.tmp = tmp
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.node = node
        self.spool = tmp / f"spool-{node}"
        self.key = cluster_key(tmp)
        self.cfg = write_config(
            tmp / f"spur-{node}.yaml", cluster_name="test",
            controller={"hosts": [f"127.0.0.1:{controller_port}"]},
            auth={"key_file": str(self.key)},
            agent={"listen": self.addr, "spool_dir": str(self.spool), "node_name": node,
                   "cgroup": "none", "heartbeat_s": 1, "kill_wait_s": 2})
        self.args = ["--cpus", str(cpus), "--mem-mb", str(mem_mb)]
        self.log_path = tmp / f"spurd-{node}.log"
        self.proc = None

    def start(self, wait=True):
        self.logf = open(self.log_path, "ab")
        self.log_from = self.log_path.stat().st_size  # log() reads this run's lines only
        env = {k: v for k, v in os.environ.items() if k != "SPUR_CONTROLLER"}
        self.proc = subprocess.Popen([str(SPURD), "-f", str(self.cfg)] + self.args,
                                     stdout=self.logf, stderr=self.logf, env=env,
                                     start_new_session=True)
        if wait:
            try:
                try:
                    wait_until(lambda: 'msg="serving"' in self.log()
                               or self.proc.poll() is not None,
                               20, interval=0.05, what="spurd serving")
                except TimeoutError as e:
                    raise TimeoutError(f"{e}; spurd's log:\n{self.log()}") from None
                assert self.proc.poll() is None, self.log()
            except BaseException:
                self.stop(signal.SIGKILL)  # a fixture that fails leaves no spurd behind
                raise
        return self

    def log(self, whole=False):
        with open(self.log_path, "rb") as f:
            f.seek(0 if whole else getattr(self, "log_from", 0))
            return f.read().decode(errors="replace")

    def leader(self, term=1):
        """A new connection that has pinged with term; the Pong is in .pong."""
        conn = ap.Leader(self.addr, key=self.key)
        conn.pong = conn.ping(term)
        return conn

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(timeout)
        self.logf.close()
        return rc


@pytest.fixture
def controller(tmp_path):
    c = ap.FakeController(free_port(), key=cluster_key(tmp_path))
    c.start()
    yield c
    c.stop()


@pytest.fixture
def agent(tmp_path, controller):
    a = Agent(tmp_path, controller.port).start()
    yield a
    a.stop(signal.SIGKILL)


def spec_for(test_user, script, **kw):
    pw, work = test_user
    return ap.job_spec(script, uid=pw.pw_uid, gid=pw.pw_gid, user=pw.pw_name,
                       workdir=str(work), **kw)


def run_job(conn, agent, test_user, job_id, script, attempt=1, **kw):
    body = ap.launch(job_id, attempt, spec_for(test_user, script), [agent.node], **kw)
    return conn.call(ap.LAUNCH, body)


def test_registers_then_answers_ping_with_its_node(agent, controller):
    reg = wait_until(lambda: controller.registered, 10, what="RegisterNode")
    assert reg[0] == {"name": "n1", "address": agent.addr, "cpus": 2, "mem_mb": 1024,
                      "from_agent": True}
    conn = agent.leader(term=4)
    assert conn.pong["node_name"] == "n1"
    assert (conn.pong["cpus"], conn.pong["mem_mb"]) == (2, 1024)
    assert conn.pong["running"] == []
    assert (agent.spool / "term").read_text() == "4\n"
    conn.close()
    # No leader pings for 3 x heartbeat_s (3 s here): the agent registers again.
    wait_until(lambda: len(controller.registered) >= 2, 10, interval=0.1,
               what="a second RegisterNode")
    assert controller.registered[1] == reg[0]


def test_job_runs_as_user_reports_exit_code_and_resends_until_acked(agent, test_user):
    pw, work = test_user
    out = work / "job11.out"
    script = f"#!/bin/sh\nid -un > {out}\necho \"$SLURM_JOB_ID\" >> {out}\nexit 3\n"
    conn = agent.leader()
    r = run_job(conn, agent, test_user, 11, script)
    assert r["ok"] and not r["already"], r
    e = conn.wait_ended(11, 1)
    assert (e["exit_code"], e["signal"], e["node"]) == (3, 0, "n1")
    assert out.read_text().split() == [pw.pw_name, "11"]
    assert os.stat(out).st_uid == pw.pw_uid
    conn.close()

    # Not acknowledged: a new connection gets it again, before the Pong, listed as ended.
    again = ap.Leader(agent.addr, key=agent.key)
    mid = again.send(ap.PING, ap.ping(2))
    first = again.recv()
    assert first["kind"] == "ended" and first["body"]["job_id"] == 11
    pong = again.recv()
    assert pong["kind"] == "pong" and pong["id"] == mid
    assert pong["body"]["running"][0]["job_id"] == 11 and pong["body"]["running"][0]["ended"]
    again.send(ap.ENDED_ACK, ap.ended_ack(11, 1))
    wait_until(lambda: not (agent.spool / "jobs" / "11.1").exists(), 5, what="ack applied")
    again.close()

    # Acknowledged: gone, and that attempt can never start again.
    last = agent.leader(term=2)
    assert last.pong["running"] == [] and last.ended == []
    r = run_job(last, agent, test_user, 11, script)
    assert not r["ok"] and "ended here" in r["error"] and not r["node_fault"], r
    assert "11.1" in (agent.spool / "tombstones").read_text().split()
    last.close()


def test_second_launch_of_an_attempt_is_already_and_runs_once(agent, test_user):
    _, work = test_user
    runs = work / "runs12"
    script = f"#!/bin/sh\necho run >> {runs}\nsleep 1\n"
    conn = agent.leader()
    assert run_job(conn, agent, test_user, 12, script)["ok"]
    other = agent.leader()
    r = run_job(other, agent, test_user, 12, script)
    assert r["ok"] and r["already"], r
    conn.wait_ended(12, 1)
    r = run_job(conn, agent, test_user, 12, script)  # ended, not acked: still present
    assert r["ok"] and r["already"], r
    assert runs.read_text() == "run\n"
    # A lower attempt than one present is stale, even while its own report waits.
    assert run_job(conn, agent, test_user, 12, script, attempt=2)["ok"]
    r = run_job(conn, agent, test_user, 12, script, attempt=1)
    assert not r["ok"] and "superseded" in r["error"], r
    conn.wait_ended(12, 2)
    conn.send(ap.ENDED_ACK, ap.ended_ack(12, 2))
    wait_until(lambda: not (agent.spool / "jobs" / "12.2").exists(), 5, what="ack")
    r = run_job(conn, agent, test_user, 12, script, attempt=1)
    assert not r["ok"] and "superseded" in r["error"], r
    conn.close()
    other.close()


def test_launch_on_a_connection_of_a_lower_term_is_refused(agent, test_user):
    new = agent.leader(term=7)
    old = agent.leader(term=6)
    r = run_job(old, agent, test_user, 13, "#!/bin/sh\ntrue\n")
    assert not r["ok"] and "stale leader" in r["error"] and not r["node_fault"], r
    assert not (agent.spool / "jobs" / "13.1").exists()
    # A connection that never pinged has term 0: refused too.
    bare = ap.Leader(agent.addr, key=agent.key)
    r = bare.call(ap.LAUNCH, ap.launch(13, 1, spec_for(test_user, "true"), [agent.node]))
    assert not r["ok"] and "stale leader" in r["error"], r
    # The term survives a restart of spurd.
    agent.stop()
    agent.start()
    old = agent.leader(term=6)
    assert "stale leader" in run_job(old, agent, test_user, 13, "#!/bin/sh\ntrue\n")["error"]
    new = agent.leader(term=7)
    assert run_job(new, agent, test_user, 13, "#!/bin/sh\ntrue\n")["ok"]
    new.wait_ended(13, 1)


def test_launch_for_another_node_or_unknown_user_is_refused(agent, test_user):
    conn = agent.leader()
    r = conn.call(ap.LAUNCH, ap.launch(14, 1, spec_for(test_user, "true"), ["n9"]))
    assert not r["ok"] and "node n9" in r["error"], r
    bad = ap.job_spec("true", uid=4000000, gid=4000000, user="nosuchuser", workdir="/tmp")
    r = conn.call(ap.LAUNCH, ap.launch(15, 1, bad, [agent.node]))
    assert not r["ok"] and not r["node_fault"] and r["error"], r


def test_terminate_ends_the_job_with_a_signal(agent, test_user):
    conn = agent.leader()
    assert run_job(conn, agent, test_user, 16, "#!/bin/sh\nexec sleep 100\n")["ok"]
    r = conn.call(ap.SIGNAL, ap.signal_req(16, 1, terminate=True))
    assert r["found"] and not r["ended"], r
    e = conn.wait_ended(16, 1, timeout=20)
    assert e["signal"] == signal.SIGTERM, e
    r = conn.call(ap.SIGNAL, ap.signal_req(16, 0, sig=signal.SIGUSR1))
    assert r["found"] and r["ended"], r

    # Terminate of an attempt never seen: not found, and a late Launch of it never starts.
    r = conn.call(ap.SIGNAL, ap.signal_req(17, 1, terminate=True))
    assert not r["found"], r
    r = run_job(conn, agent, test_user, 17, "#!/bin/sh\ntrue\n")
    assert not r["ok"] and "ended here" in r["error"], r


def run_then_kill_spurd(agent, test_user, job_id, rest_of_script):
    """Launch a job that writes its pid first, wait for the pid, kill -9 spurd; returns
    the job's pid."""
    pidfile = test_user[1] / f"job{job_id}.pid"
    conn = agent.leader()
    assert run_job(conn, agent, test_user, job_id,
                   f"#!/bin/sh\necho $$ > {pidfile}\n{rest_of_script}")["ok"]
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), 10, what="job pid")
    agent.proc.kill()
    agent.proc.wait(10)
    conn.close()
    return int(pidfile.read_text())


def test_job_outlives_kill_9_of_spurd_and_reports_to_the_next(agent, test_user):
    job_pid = run_then_kill_spurd(agent, test_user, 18, "sleep 3\nexit 5\n")
    os.kill(job_pid, 0)  # still running without spurd
    agent.start()
    conn = agent.leader(term=2)
    running = conn.pong["running"]
    assert [(r["job_id"], r["attempt"]) for r in running] == [(18, 1)], running
    e = conn.wait_ended(18, 1, timeout=20)
    assert e["exit_code"] == 5, e
    conn.close()


def test_monitor_killed_while_spurd_was_down_is_reported_killed(agent, test_user):
    monitor = agent.spool / "jobs" / "19.1" / "monitor"
    job_pid = run_then_kill_spurd(agent, test_user, 19, "sleep 60\n")
    monitor_pid = int(monitor.read_text().split()[0])
    os.kill(monitor_pid, signal.SIGKILL)
    agent.start()
    conn = agent.leader(term=2)
    e = conn.wait_ended(19, 1, timeout=20)
    assert e["signal"] == signal.SIGKILL, e
    # What the monitor left of the job is gone too.
    wait_until(lambda: not Path(f"/proc/{job_pid}").exists()
               or Path(f"/proc/{job_pid}/stat").read_text().split(") ")[1][0] == "Z", 10,
               what="the orphaned job killed")
    assert "monitor died without a report" in agent.log()
    conn.close()


def test_a_leader_must_prove_the_cluster_key(agent, tmp_path):
    """A Launch from a connection that did not prove the key is never read, and a leader
    holding another key is refused with the reason, on both sides; spurd serves on."""
    with socket.create_connection(("127.0.0.1", agent.port), timeout=5) as bare:
        bare.sendall(ap.frame(ap.msg(ap.PING, ap.ping(1))))
        payload, _ = chanproto.read_frame(bare)  # the refusal, a handshake frame
        assert payload.startswith(chanproto.MAGIC)
        with pytest.raises(EOFError):
            chanproto.read_frame(bare)  # then closed
    other = tmp_path / "other.key"
    spurtest.new_key_file(other)
    with pytest.raises(chanproto.ChanError, match="no common cluster key"):
        ap.Leader(agent.addr, key=other)
    wait_until(lambda: "no common cluster key" in agent.log(), 5, what="spurd's log line")
    conn = agent.leader()
    assert conn.pong["node_name"] == "n1"


def test_bad_frames_get_an_error_and_a_close_and_spurd_serves_on(agent):
    def expect_error_then_close(conn, word):
        m = conn.recv()
        assert m["kind"] == "error" and word in m["body"]["error"], m
        with pytest.raises(ap.Closed):
            conn.recv(timeout=5)
        conn.close()

    c = ap.Leader(agent.addr, key=agent.key)
    c.send_raw(ap.frame(c.chan.seal(b"\xff\xff\xff\xff garbage")))
    expect_error_then_close(c, "decode")
    # The same bytes unsealed (or sealed under another key) are never decoded: closed.
    c = ap.Leader(agent.addr, key=agent.key)
    c.send_raw(ap.frame(b"\xff\xff\xff\xff garbage" + bytes(24)))
    with pytest.raises((ap.Closed, chanproto.ChanError, ValueError, KeyError)):
        while True:
            c.recv(timeout=5)
    c.close()
    c = ap.Leader(agent.addr, key=agent.key)
    c.send_raw(struct.pack(">I", 1 << 30))
    expect_error_then_close(c, "limit")
    c = ap.Leader(agent.addr, key=agent.key)
    c.send(ap.PING, ap.ping(1), cluster="other")
    expect_error_then_close(c, "cluster")
    c = ap.Leader(agent.addr, key=agent.key)
    c.send(ap.PING, ap.ping(1), version=9)
    expect_error_then_close(c, "version")
    c = ap.Leader(agent.addr, key=agent.key)
    c.send(ap.PONG, b"")
    expect_error_then_close(c, "type")
    with socket.create_connection(("127.0.0.1", agent.port), timeout=5) as s:
        s.sendall(b"\x00\x00")  # a torn header, then gone
    conn = agent.leader()
    assert conn.pong["node_name"] == "n1"
    assert agent.proc.poll() is None


def test_random_frames_never_crash_spurd(agent):
    """300 frames of random bytes or random bodies in well-formed envelopes (a fixed seed,
    so a failure repeats), each on a fresh connection, some after a Ping: spurd answers
    or refuses each and is still serving after all of them."""
    import random

    rnd = random.Random(12)

    def junk(n):
        return bytes(rnd.getrandbits(8) for _ in range(n))

    for i in range(300):
        # Most on a connection that proved the key (sealed frames reach the decoder),
        # some bare (refused at the handshake).
        proven = rnd.random() < 0.8
        conn = ap.Leader(agent.addr, key=agent.key if proven else None)
        seal = conn.chan.seal if proven else (lambda b: b)
        s = conn.sock
        with s:
            if rnd.random() < 0.5:
                s.sendall(ap.frame(seal(ap.msg(ap.PING, ap.ping(rnd.randint(0, 3))))))
            kind = rnd.choice([ap.PING, ap.LAUNCH, ap.SIGNAL, ap.ENDED_ACK, ap.PONG, 99])
            body = junk(rnd.randint(0, 60))
            if rnd.random() < 0.3:
                body = ap.launch(rnd.randint(0, 5), rnd.randint(0, 3), junk(rnd.randint(0, 30)),
                                 ["n1"] if rnd.random() < 0.5 else [],
                                 node_index=rnd.randint(0, 2))
            m = ap.msg(kind, body) if rnd.random() < 0.8 else junk(rnd.randint(0, 80))
            try:
                s.sendall(ap.frame(seal(m)))
            except OSError:
                pass
            s.settimeout(0.3)  # an EndedAck gets no answer
            try:
                s.recv(65536)
            except OSError:
                pass
        assert agent.proc.poll() is None, f"spurd died on frame {i}:\n{agent.log()[-2000:]}"
    conn = agent.leader(term=9)
    assert conn.pong["node_name"] == "n1"


def test_exit_codes_and_check_config(tmp_path, controller):
    a = Agent(tmp_path, controller.port)
    r = subprocess.run([str(SPURD), "-f", str(a.cfg), "--check-config", "-N", "other"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and "node_name: other" in r.stdout.replace('"', ""), r
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent:\n  no_such_key: 1\n")
    r = subprocess.run([str(SPURD), "-f", str(bad)], capture_output=True, text=True, timeout=10)
    assert r.returncode == 78 and "no_such_key" in r.stderr, r
    r = subprocess.run([str(SPURD), "-f", str(a.cfg), "-N", "bad name"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 78, r

    # The spool below a regular file cannot be made: 71.
    (tmp_path / "file").write_text("")
    r = subprocess.run([str(SPURD), "-f", str(a.cfg), "--spool", str(tmp_path / "file" / "s")],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 71 and "spool" in r.stderr, r
    # The listen port taken: 71.
    with socket.socket() as s:
        s.bind(("127.0.0.1", a.port))
        s.listen(1)
        r = subprocess.run([str(SPURD), "-f", str(a.cfg)], capture_output=True, text=True,
                           timeout=10)
    assert r.returncode == 71 and "bind" in r.stderr, r
    # SIGTERM: 0.
    a.start()
    assert a.stop(signal.SIGTERM) == 0
    assert "exit=0" in a.log()


def test_registration_is_retried_until_a_controller_answers(tmp_path):
    port = free_port()
    a = Agent(tmp_path, port).start(wait=False)
    try:
        wait_until(lambda: a.log().count("registration failed") >= 2, 15, interval=0.1,
                   what="two failed registrations")
        assert 'msg="serving"' not in a.log()
        c = ap.FakeController(port, key=cluster_key(tmp_path))
        c.start()
        try:
            try:
                wait_until(lambda: 'msg="serving"' in a.log(), 40, interval=0.1,
                           what="serving")
            except TimeoutError as e:
                raise TimeoutError(f"{e}; spurd's log:\n{a.log()}") from None
            assert c.registered and c.registered[0]["from_agent"]
        finally:
            c.stop()
        assert a.stop(signal.SIGTERM) == 0
    finally:
        a.stop(signal.SIGKILL)


# ---- what ships with spurd: its unit and its man page ----------------------------------

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "examples" / "systemd" / "spurd.service.in"


def test_unit_passes_systemd_analyze_verify_and_leaves_jobs_running(tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / "spurd.service"
    unit.write_text(UNIT.read_text().replace("@SBINDIR@", str(SPURD.parent)))
    r = subprocess.run([tool, "verify", "--man=no", str(unit)], capture_output=True,
                       text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "spurd.service" not in out, out
    settings = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            settings.setdefault(k.strip(), []).append(v.strip())
    assert settings["KillMode"] == ["process"]  # a restart of spurd leaves the jobs
    assert settings["Delegate"] == ["yes"]      # spurd makes the jobs' cgroups
    assert "78" in settings["RestartPreventExitStatus"][0].split()
    assert settings["ExecStart"][0].split()[0] == "@SBINDIR@/spurd"


def test_man_page_documents_every_option():
    import re

    help_text = subprocess.run([str(SPURD), "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    page = (REPO / "man" / "spurd.8").read_text().replace("\\-", "-")
    opts = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", help_text))
    assert {"--check-config", "--listen", "-N"} <= opts, opts
    for opt in opts:
        assert f"Fl {opt[1:]}" in page, f"spurd.8: {opt} is not documented"
    status = page.split(".Sh EXIT STATUS", 1)[1].split(".Sh ", 1)[0]
    for code in (0, 71, 78):
        assert re.search(rf"^\.It {code}$", status, re.M), f"spurd(8): exit {code}"
