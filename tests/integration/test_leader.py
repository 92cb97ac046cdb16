"""The leader's side of running jobs (raftd/jobctl.c, raftd/agents.c) against a fake agent.

One replica (three for the failovers), and in place of spurd a fake agent written here: a
listening socket on a free port of 127.0.0.1 that speaks proto/agent.proto by field number
(framing and envelope from agentproto.py) and runs nothing; the test decides what it
answers and when jobs end. Pinned here:
a submitted job is allocated, launched on the fake agent with the replicated attempt, shown
RUNNING once the agent confirmed, and COMPLETED or FAILED from the agent's report, which is
acknowledged; a refused launch fails the job; a job the agent no longer knows after a Pong
ends NODE_FAIL; a cancel reaches the agent as a terminate and ends CANCELLED; a signal
request reaches the agent and is answered; an agent that goes silent takes its node DOWN
("Not responding") after agent.node_timeout_s, and its job with it.

Every wait is bounded; the cluster and the fake agent are stopped by the fixtures.
"""
import json
import socket
import struct
import threading
import time

import pytest

import spurtest
import chanproto
from agentproto import (ENDED, ENDED_ACK, LAUNCH, LAUNCH_REPLY, PING, PONG, SIGNAL,
                        SIGNAL_REPLY, frame, msg, sub)
from spurtest import pb_decode, pb_field, wait_until

OP_SIGNAL_JOB = 51  # Request.signal_job (proto/spur.proto)


def first(d, num, default=0):
    return d[num][0] if d.get(num) else default


class FakeAgent(threading.Thread):
    """A node agent that runs nothing. running: {(job, attempt): ended}; reports: the Ended
    reports not acknowledged yet (pushed before every Pong, as spurd does)."""

    def __init__(self, node, cluster="test", key=None):
        super().__init__(daemon=True)
        self.node = node
        self.cluster = cluster
        self.key = key  # the cluster key file the leader must prove (chanproto.py)
        self.chans = {}
        self.lock = threading.Lock()
        self.running = {}
        self.reports = {}
        self.launches, self.signals, self.acks, self.pings = [], [], [], []
        self.refuse = None  # (error, node_fault): answer launches with a refusal
        self.forget = set()  # (job, attempt) left out of the running list, unreported
        self.hold = False  # record launches without answering them
        self.end_at_once = None  # an exit code: report each job right after its reply
        self.conns = []
        self.srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.srv.settimeout(0.2)
        self.address = f"127.0.0.1:{self.srv.getsockname()[1]}"
        self.stopping = False

    def run(self):
        while not self.stopping:
            try:
                conn, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.conns.append(conn)
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def stop(self):
        """Go away for good: no listener, every connection closed."""
        self.stopping = True
        self.srv.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
            self.conns = []

    def send(self, conn, num, body, mid=0):
        payload = msg(num, body, cluster=self.cluster, mid=mid)
        with self.lock:
            ch = self.chans.get(conn)
            if ch is not None:
                payload = ch.seal(payload)  # under the lock: one sequence per connection
                conn.sendall(frame(payload))
                return
        conn.sendall(frame(payload))

    def ended_body(self, r):
        return (pb_field(1, r["job_id"]) + pb_field(2, r["attempt"]) + pb_field(3, self.node)
                + pb_field(4, r["exit_code"]) + pb_field(5, r["signal"])
                + pb_field(10, int(r["never_ran"])))

    def finish(self, job_id, attempt, exit_code=0, signal=0, never_ran=False):
        """The job ends here: its report is kept until acknowledged, pushed now."""
        r = {"job_id": job_id, "attempt": attempt, "exit_code": exit_code, "signal": signal,
             "never_ran": never_ran}
        with self.lock:
            self.running[(job_id, attempt)] = True
            self.reports[(job_id, attempt)] = r
            conns = list(self.conns)
        for c in conns:
            try:
                self.send(c, ENDED, self.ended_body(r))
            except OSError:
                pass

    def answer(self, conn, m):
        mid = first(m, 3)
        if m.get(PING):
            p = pb_decode(m[PING][0])
            with self.lock:
                self.pings.append(first(p, 2))
                reports = list(self.reports.values())
                running = [(j, a, e) for (j, a), e in self.running.items()
                           if (j, a) not in self.forget]
            for r in reports:
                self.send(conn, ENDED, self.ended_body(r))
            body = pb_field(1, self.node) + pb_field(2, 4) + pb_field(3, 4096)
            for j, a, e in running:
                body += sub(4, pb_field(1, j) + pb_field(2, a) + pb_field(4, int(e)))
            self.send(conn, PONG, body, mid)
        elif m.get(LAUNCH):
            lm = pb_decode(m[LAUNCH][0])
            launch = {"job_id": first(lm, 1), "attempt": first(lm, 2),
                      "node_list": [n.decode() for n in lm.get(4, [])],
                      "node_index": first(lm, 5), "cpus": first(lm, 6),
                      "time_limit_min": first(lm, 8), "kill_wait_s": first(lm, 9),
                      "script": pb_decode(lm[3][0]).get(12, [b""])[0] if lm.get(3) else b""}
            with self.lock:
                self.launches.append(launch)
                if self.hold:
                    return
                refuse = self.refuse
                if refuse is None:
                    self.running.setdefault((launch["job_id"], launch["attempt"]), False)
            if refuse:
                body = pb_field(3, refuse[0]) + pb_field(4, int(refuse[1]))
            else:
                body = pb_field(1, 1)
            if not refuse and self.end_at_once is not None:
                # The reply and the report in one write, as a trivial job's would come.
                r = {"job_id": launch["job_id"], "attempt": launch["attempt"],
                     "exit_code": self.end_at_once, "signal": 0, "never_ran": False}
                with self.lock:
                    self.running[(r["job_id"], r["attempt"])] = True
                    self.reports[(r["job_id"], r["attempt"])] = r
                reply = msg(LAUNCH_REPLY, body, cluster=self.cluster, mid=mid)
                ended = msg(ENDED, self.ended_body(r), cluster=self.cluster)
                with self.lock:
                    ch = self.chans.get(conn)
                    if ch is not None:
                        reply, ended = ch.seal(reply), ch.seal(ended)
                    conn.sendall(frame(reply) + frame(ended))
                return
            self.send(conn, LAUNCH_REPLY, body, mid)
        elif m.get(SIGNAL):
            s = pb_decode(m[SIGNAL][0])
            sig = {"job_id": first(s, 1), "attempt": first(s, 2), "signal": first(s, 3),
                   "terminate": bool(first(s, 4))}
            with self.lock:
                self.signals.append(sig)
                key = next((k for k in self.running if k[0] == sig["job_id"] and
                            (sig["attempt"] in (0, k[1]))), None)
            self.send(conn, SIGNAL_REPLY, pb_field(1, int(key is not None)), mid)
            if key is not None and sig["terminate"]:
                self.finish(key[0], key[1], signal=15)
        elif m.get(ENDED_ACK):
            a = pb_decode(m[ENDED_ACK][0])
            with self.lock:
                key = (first(a, 1), first(a, 2))
                self.acks.append(key)
                self.reports.pop(key, None)
                self.running.pop(key, None)

    def serve(self, conn):
        buf = b""
        ch = None
        if self.key is not None:
            conn.settimeout(5)
            try:
                ch, buf = chanproto.accept(conn, self.key, self.cluster, "agent")
            except (OSError, EOFError, chanproto.ChanError):
                return
            with self.lock:
                self.chans[conn] = ch
        conn.settimeout(0.5)
        # The handshake may have read the first message with the proof: the frames already
        # in buf are answered before waiting for more.
        while not self.stopping:
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                n = struct.unpack(">I", buf[:4])[0]
                raw, buf = buf[4:4 + n], buf[4 + n:]
                try:
                    m = pb_decode(ch.open(raw) if ch else raw)
                except chanproto.ChanError:
                    return
                try:
                    self.answer(conn, m)
                except OSError:
                    return
            try:
                chunk = conn.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not chunk:
                return
            buf += chunk


def start(tmp_path, n, agent_name="fa1"):
    """n replicas with a 1 s heartbeat and a 4 s node time-out, and node fa1 served by a
    fake agent (that calls itself agent_name); yields (cluster, agent) and stops both."""
    c = spurtest.Cluster(tmp_path, n=n, agent={"heartbeat_s": 1, "node_timeout_s": 4,
                                               "kill_wait_s": 2})
    agent = FakeAgent(agent_name, key=c.key_file)
    agent.start()
    try:
        c.start_all()
        c.wait_ready()
        p = c.spur("scontrol", "create", "node", "NodeName=fa1", "CPUs=4", "RealMemory=4096",
                   f"NodeAddr={agent.address}")
        assert p.returncode == 0, p.stderr
        wait_until(lambda: agent.pings, 10, what="the leader's first Ping")
        yield c, agent
    finally:
        agent.stop()
        c.kill_all()


@pytest.fixture
def setup(tmp_path):
    yield from start(tmp_path, 1)


@pytest.fixture
def wrong_agent(tmp_path):
    yield from start(tmp_path, 1, agent_name="fa9")


@pytest.fixture
def setup3(tmp_path):
    yield from start(tmp_path, 3)


def sbatch(c, *args):
    p = c.spur("sbatch", "--parsable", *args)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.strip())


def job(c, jid):
    p = c.spur("squeue", "-t", "all", "--json", "-j", str(jid))
    assert p.returncode == 0, p.stderr
    return {j["job_id"]: j for j in json.loads(p.stdout)}[jid]


def node(c, name):
    p = c.spur("sinfo", "--json")
    assert p.returncode == 0, p.stderr
    return {n["name"]: n for n in json.loads(p.stdout)["nodes"]}[name]


def wait_state(c, jid, state, timeout=15):
    return wait_until(lambda: job(c, jid) if job(c, jid)["state"] == state else None, timeout,
                      interval=0.05, what=f"job {jid} {state}")


def launched(agent, jid, timeout=15):
    def find():
        with agent.lock:
            return next((l for l in agent.launches if l["job_id"] == jid), None)
    return wait_until(find, timeout, interval=0.02, what=f"a Launch of job {jid}")


def test_job_runs_through_the_agent(setup):
    c, agent = setup
    assert agent.pings[0] >= 1  # the leader's term
    jid = sbatch(c, "--wrap", "echo hi", "-t", "5")
    la = launched(agent, jid)
    assert la["attempt"] == 1
    assert la["node_list"] == ["fa1"] and la["node_index"] == 0
    assert la["cpus"] == 1 and la["time_limit_min"] == 5 and la["kill_wait_s"] == 2
    assert b"echo hi" in la["script"]
    j = wait_state(c, jid, "RUNNING")
    assert j["node_list"] == ["fa1"]
    agent.finish(jid, 1, exit_code=0)
    wait_state(c, jid, "COMPLETED")
    wait_until(lambda: (jid, 1) in agent.acks, 10, what="the EndedAck")
    # A failing job: its exit code decides.
    jid2 = sbatch(c, "--wrap", "false")
    launched(agent, jid2)
    wait_state(c, jid2, "RUNNING")
    agent.finish(jid2, 1, exit_code=3)
    j2 = wait_state(c, jid2, "FAILED")
    assert j2["exit_code"] == 3, j2
    # The heartbeats reach the state: the node's last-seen time moves.
    seen = node(c, "fa1")["last_seen_ms"]
    wait_until(lambda: node(c, "fa1")["last_seen_ms"] > seen, 10, what="a newer last-seen")
    # The leader's counters on its metrics page.
    st, body = spurtest.http_get(c.ports[0]["metrics"], "/metrics")
    assert st == 200
    m = {ln.split()[0]: float(ln.split()[1]) for ln in body.splitlines()
         if ln and not ln.startswith("#")}
    assert m["spur_leader_in_office"] == 1
    assert m["spur_agents_connected"] == 1
    assert m["spur_job_launches_total"] == 2
    assert m["spur_job_reports_total"] >= 2
    assert m["spur_scheduler_passes_total"] >= 2
    assert m["spur_scheduler_allocations_total"] == 2
    assert m["spur_scheduler_pending_allocations"] == 0
    assert m["spur_job_starts_folded_total"] == 0  # both were seen RUNNING first


def metrics(c):
    st, body = spurtest.http_get(c.ports[0]["metrics"], "/metrics")
    assert st == 200
    return {ln.split()[0]: float(ln.split()[1]) for ln in body.splitlines()
            if ln and not ln.startswith("#")}


def test_trivial_job_writes_no_start_entry(setup):
    # A job that ends right after its launch is confirmed: the report within the start
    # hold counts as its start, so no JobsStarted entry is written for it.
    c, agent = setup
    agent.end_at_once = 0
    jid = sbatch(c, "--wrap", "true")
    j = wait_state(c, jid, "COMPLETED")
    assert j["start_time_ms"] > 0 and j["end_time_ms"] >= j["start_time_ms"], j
    wait_until(lambda: (jid, 1) in agent.acks, 10, what="the EndedAck")
    assert metrics(c)["spur_job_starts_folded_total"] == 1


def test_refused_launch_fails_the_job(setup):
    c, agent = setup
    agent.refuse = ("no such user", False)
    jid = sbatch(c, "--wrap", "true")
    launched(agent, jid)
    j = wait_state(c, jid, "FAILED")
    assert "JobLaunchFailure" in json.dumps(j), j


def test_job_the_agent_forgot_is_lost(setup):
    c, agent = setup
    jid = sbatch(c, "--wrap", "sleep 100")
    launched(agent, jid)
    wait_state(c, jid, "RUNNING")
    with agent.lock:
        agent.forget.add((jid, 1))
    wait_state(c, jid, "NODE_FAIL", timeout=10)


def test_cancel_reaches_the_agent(setup):
    c, agent = setup
    jid = sbatch(c, "--wrap", "sleep 100")
    launched(agent, jid)
    wait_state(c, jid, "RUNNING")
    assert c.spur("scancel", str(jid)).returncode == 0
    wait_state(c, jid, "CANCELLED")
    with agent.lock:
        assert any(s["job_id"] == jid and s["terminate"] and s["attempt"] == 1
                   for s in agent.signals), agent.signals


def test_signal_request_reaches_the_agent(setup):
    c, agent = setup
    jid = sbatch(c, "--wrap", "sleep 100")
    launched(agent, jid)
    wait_state(c, jid, "RUNNING")
    body = pb_field(1, jid) + pb_field(2, 10)
    r = spurtest.api_call(c.api(1), OP_SIGNAL_JOB, body, cluster_name="test")
    assert r["code"] == spurtest.API_OK, r
    with agent.lock:
        assert {"job_id": jid, "attempt": 1, "signal": 10, "terminate": False} in agent.signals
    assert job(c, jid)["state"] == "RUNNING"
    # Unknown job: NOT_FOUND; a finished one: CONFLICT (7).
    r = spurtest.api_call(c.api(1), OP_SIGNAL_JOB, pb_field(1, 9999) + pb_field(2, 10),
                          cluster_name="test")
    assert r["code"] == spurtest.API_NOT_FOUND, r
    agent.finish(jid, 1)
    wait_state(c, jid, "COMPLETED")
    r = spurtest.api_call(c.api(1), OP_SIGNAL_JOB, body, cluster_name="test")
    assert r["code"] == 7, r


def test_silent_agent_takes_its_node_down(setup):
    c, agent = setup
    jid = sbatch(c, "--wrap", "sleep 100")
    launched(agent, jid)
    wait_state(c, jid, "RUNNING")
    t0 = time.monotonic()
    agent.stop()
    wait_state(c, jid, "NODE_FAIL", timeout=20)
    assert time.monotonic() - t0 >= 3  # not before agent.node_timeout_s (4 s, less a beat)
    n = node(c, "fa1")
    assert n["reason"] == "Not responding", n
    assert n["state"] == "down", n


def launches_of(agent, jid):
    with agent.lock:
        return [l for l in agent.launches if l["job_id"] == jid]


def test_running_job_survives_a_leader_kill(setup3):
    """The new leader reconciles from the state: it never launches a RUNNING job again,
    and the agent's report completes it."""
    c, agent = setup3
    jid = sbatch(c, "--wrap", "sleep 100")
    launched(agent, jid)
    wait_state(c, jid, "RUNNING")
    old = c.leader()
    # A signal request sent to a follower is forwarded to the leader, which reaches the agent.
    follower = next(i for i in range(1, 4) if i != old)
    r = spurtest.api_call(c.api(follower), OP_SIGNAL_JOB, pb_field(1, jid) + pb_field(2, 12),
                          cluster_name="test")
    assert r["code"] == spurtest.API_OK, r
    with agent.lock:
        assert {"job_id": jid, "attempt": 1, "signal": 12, "terminate": False} in agent.signals
    term = max(agent.pings)
    assert c.kill_worker(old) == 70
    new = c.leader(among=[i for i in range(1, 4) if i != old], timeout=20)
    assert new != old
    wait_until(lambda: max(agent.pings) > term, 15, what="a Ping of the new term")
    time.sleep(2.5)  # two heartbeat rounds of the new leader: the job is listed, not lost
    assert job(c, jid)["state"] == "RUNNING"
    agent.finish(jid, 1)
    wait_state(c, jid, "COMPLETED", timeout=20)
    assert len(launches_of(agent, jid)) == 1


def test_configuring_job_is_launched_again_with_its_attempt(setup3):
    """A job whose launch was not confirmed when the leader died is launched again by the
    next one with the same attempt, and runs once confirmed."""
    c, agent = setup3
    agent.hold = True
    jid = sbatch(c, "--wrap", "sleep 100")
    launched(agent, jid)
    assert job(c, jid)["state"] == "CONFIGURING"
    old = c.leader()
    assert c.kill_worker(old) == 70
    agent.hold = False
    c.leader(among=[i for i in range(1, 4) if i != old], timeout=20)
    wait_until(lambda: len(launches_of(agent, jid)) >= 2, 20, what="a second Launch")
    assert {l["attempt"] for l in launches_of(agent, jid)} == {1}
    wait_state(c, jid, "RUNNING", timeout=20)
    agent.finish(jid, 1)
    wait_state(c, jid, "COMPLETED", timeout=20)


def test_another_nodes_agent_gets_nothing(wrong_agent):
    """fa1's address reaches an agent that answers as fa9: nothing is launched there, its
    answers do not keep fa1 up, and the job placed on fa1 ends with the node."""
    c, agent = wrong_agent
    jid = sbatch(c, "--wrap", "sleep 100")
    wait_state(c, jid, "CONFIGURING")
    wait_state(c, jid, "NODE_FAIL", timeout=20)
    assert node(c, "fa1")["reason"] == "Not responding"
    with agent.lock:
        assert agent.launches == [] and agent.signals == [], (agent.launches, agent.signals)
        assert len(agent.pings) >= 3  # it was pinged all along
