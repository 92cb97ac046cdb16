"""Name resolution never stalls a replica (raftd/resolver.c).

A 3-replica cluster where node 3's peer address is a name, "slowpeer.test", served by a
DNS server that this test runs and that answers slowly (or says NXDOMAIN for a while).
Node 2's address is "localhost" (from the hosts file: must never reach DNS), node 1's an
IP literal (never resolved at all).

Everything runs in namespaces the test makes, so the host's resolver is never touched:
  - this test's thread moves into a private network namespace holding only lo
    (spurtest.private_netns), where the DNS server binds 127.0.0.1:53;
  - a holder process (`unshare -m --propagation private sleep`) owns a private mount
    namespace in which the test's resolv.conf ("nameserver 127.0.0.1") and hosts file
    are bind-mounted over /etc/resolv.conf and /etc/hosts; every spurctld is started in
    it with `nsenter -t HOLDER -m` (same network namespace, since it is this thread's).

Checked: while the lookup for node 3 is outstanding, nodes 1 and 2 keep their status
frames fresh (their health responders say ok all along, the supervisors never see a
stall and keep the same worker), form a quorum and serve a write; once the DNS server
answers, node 3 is reached and catches up. The blocking getaddrinfo() this replaced made
both replicas stall until the supervisor killed them (exit 70) in this very test.
"""
import heapq
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

import spurtest
from spurtest import Cluster, Supervisor, http_get, wait_until, write_config

SLOW = "slowpeer.test"


def _skip_reason():
    why = spurtest.netns_skip_reason()
    if why:
        return why
    for tool in ("unshare", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return f"needs {tool} (util-linux)"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


# ---- a DNS server that answers when the test says ------------------------------------

class SlowDNS(threading.Thread):
    """UDP DNS on 127.0.0.1:53 of the current network namespace.

    policy(name, qtype, now) returns ("answer", delay_s) to answer A queries for SLOW with
    127.0.0.1 (AAAA with no records) after delay_s, ("nxdomain", delay_s), or ("drop", 0).
    Names other than SLOW get NXDOMAIN at once. Every query is recorded as
    (time, lowercased name, qtype, source port); every reply as (time, name, qtype, what).
    """

    def __init__(self, policy):
        super().__init__(daemon=True)
        self.policy = policy
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))
        self.queries = []
        self.replies = []
        self.pending = []  # heap of (due, seq, packet, addr, name, qtype, what)
        self.seq = 0
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()

    @staticmethod
    def parse(pkt):
        i, labels = 12, []
        while pkt[i] != 0:
            n = pkt[i]
            labels.append(pkt[i + 1:i + 1 + n].decode("ascii", "replace"))
            i += 1 + n
        i += 1
        qtype = struct.unpack("!H", pkt[i:i + 2])[0]
        return ".".join(labels), qtype, i + 4

    @staticmethod
    def reply(pkt, qend, qtype, what):
        hdr = bytearray(pkt[:12])
        hdr[2] = 0x81 | (pkt[2] & 0x01)
        rcode = 3 if what == "nxdomain" else 0
        hdr[3] = 0x80 | rcode
        ancount = 1 if (what == "answer" and qtype == 1) else 0
        hdr[4:12] = struct.pack("!HHHH", 1, ancount, 0, 0)
        body = bytes(hdr) + pkt[12:qend]
        if ancount:
            body += struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton("127.0.0.1")
        return body

    def run(self):
        while not self.stop_flag.is_set():
            now = time.monotonic()
            with self.lock:
                while self.pending and self.pending[0][0] <= now:
                    _, _, out, addr, name, qtype, what = heapq.heappop(self.pending)
                    self.sock.sendto(out, addr)
                    self.replies.append((time.monotonic(), name, qtype, what))
                wait = min(0.05, max(0.0, self.pending[0][0] - now)) if self.pending else 0.05
            r, _, _ = select.select([self.sock], [], [], wait)
            if not r:
                continue
            pkt, addr = self.sock.recvfrom(2048)
            try:
                name, qtype, qend = self.parse(pkt)
            except (IndexError, struct.error):
                continue
            lname = name.lower().rstrip(".")
            now = time.monotonic()
            self.queries.append((now, lname, qtype, addr[1]))
            if lname == SLOW:
                what, delay = self.policy(lname, qtype, now)
            else:
                what, delay = "nxdomain", 0.0
            if what == "drop":
                continue
            with self.lock:
                self.seq += 1
                heapq.heappush(self.pending, (now + delay, self.seq,
                                              self.reply(pkt, qend, qtype, what), addr, lname,
                                              qtype, what))

    def stop(self):
        self.stop_flag.set()
        self.join(5)
        self.sock.close()

    def first_answer_at(self):
        t = [r[0] for r in self.replies if r[1] == SLOW and r[3] == "answer"]
        return min(t) if t else None


# ---- the namespaces and the cluster ------------------------------------------------------

class MountNS:
    """A process holding a private mount namespace with our resolv.conf and hosts."""

    def __init__(self, tmp):
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        (self.tmp / "resolv.conf").write_text(
            "nameserver 127.0.0.1\noptions timeout:15 attempts:1\n")
        (self.tmp / "hosts").write_text("127.0.0.1 localhost\n::1 ip6-localhost\n")
        self.proc = subprocess.Popen(["unshare", "-m", "--propagation", "private",
                                      "sleep", "600"])
        mine = os.stat("/proc/self/ns/mnt").st_ino
        wait_until(lambda: os.stat(f"/proc/{self.proc.pid}/ns/mnt").st_ino != mine
                   and spurtest.proc_comm(self.proc.pid) == "sleep", 10,
                   what="mount namespace holder")
        for src, dst in (("resolv.conf", "/etc/resolv.conf"), ("hosts", "/etc/hosts")):
            subprocess.run(self.enter() + ["mount", "--bind", str(self.tmp / src), dst],
                           check=True, timeout=10, capture_output=True)
        seen = subprocess.run(self.enter() + ["cat", "/etc/resolv.conf"], check=True,
                              timeout=10, capture_output=True, text=True).stdout
        assert "nameserver 127.0.0.1" in seen

    def enter(self):
        return ["nsenter", "-t", str(self.proc.pid), "-m", "--"]

    def close(self):
        self.proc.kill()
        self.proc.wait(5)


def named_cluster(tmp):
    """3 replicas; peers: node 1 by IP, node 2 as localhost, node 3 as SLOW."""
    c = Cluster(tmp, n=3)
    peers = [f"127.0.0.1:{c.ports[0]['raft']}", f"localhost:{c.ports[1]['raft']}",
             f"{SLOW}:{c.ports[2]['raft']}"]
    # Node 3 listens on every address, so it announces its client API under its peer
    # name (slowpeer.test:PORT): writes forwarded to it go through the resolver too.
    c.cfgs[2]["controller"]["listen"] = f"0.0.0.0:{c.ports[2]['api']}"
    for cfg in c.cfgs:
        cfg["controller"]["peers"] = peers
        # A short stall limit: a lookup of several seconds on the loop would trip it.
        cfg["supervisor"].update({"stall_timeout_ms": 1500, "kill_timeout_ms": 3000})
    write_config(c.tmp / "client.yaml", **c.cfgs[0])
    return c


def start(c, i, ns):
    c.generation[i - 1] += 1
    s = Supervisor(c.tmp, cfg=c.cfgs[i - 1], name=f"n{i}-{c.generation[i - 1]}",
                   wrapper=ns.enter())
    c.replicas[i - 1] = s
    return s


@pytest.fixture
def env(tmp_path):
    """(cluster factory, started DNS servers) inside the private namespaces."""
    state = {"dns": [], "ns": None, "clusters": []}
    with spurtest.private_netns():
        ns = MountNS(tmp_path / "ns")
        state["ns"] = ns
        try:
            yield state
        finally:
            for c in state["clusters"]:
                c.kill_all()
            for d in state["dns"]:
                d.stop()
            ns.close()


class HealthPoller(threading.Thread):
    """Polls /healthz of some replicas every interval until stopped: {id: [(t, st, body)]}."""

    def __init__(self, c, ids, interval=0.05):
        super().__init__(daemon=True)
        self.c, self.ids, self.interval = c, ids, interval
        self.samples = {i: [] for i in ids}
        self.stop_flag = threading.Event()

    def run(self):
        while not self.stop_flag.is_set():
            for i in self.ids:
                try:
                    st, body = self.c.replica(i).get("/healthz")
                    self.samples[i].append((time.monotonic(), st, body.strip()))
                except OSError as e:
                    self.samples[i].append((time.monotonic(), 0, str(e)))
            time.sleep(self.interval)

    def stop(self):
        self.stop_flag.set()
        self.join(10)


def submit(c, name, ids):
    return c.spur("sbatch", "--wrap=true", "-J", name, host=c.hosts(only=ids),
                  env={"SPUR_TIMEOUT_MS": "5000"})


def start_dns_and_cluster(env, tmp_path, policy):
    """A SlowDNS answering by policy, and a named_cluster in tmp_path/c with its three
    replicas started inside env's namespaces; both are stopped by the env fixture.
    Returns (dns, cluster)."""
    (tmp_path / "c").mkdir()
    dns = SlowDNS(policy)
    dns.start()
    env["dns"].append(dns)
    c = named_cluster(tmp_path / "c")
    env["clusters"].append(c)
    for i in (1, 2, 3):
        start(c, i, env["ns"])
    return dns, c


def resolved_lines(s):
    return [l for l in s.log_lines() if 'msg="name resolved"' in l and f"name={SLOW}" in l]


# ---- tests ----------------------------------------------------------------------------

DELAY = 6.0


def test_a_slow_dns_answer_does_not_stall_the_replicas(env, tmp_path):
    """Node 3 restarts (a pod comes back) while DNS is slow: its peers look its name up
    again, and while that lookup hangs they go on serving and reporting healthy."""
    slow = threading.Event()
    dns, c = start_dns_and_cluster(
        env, tmp_path, lambda name, qtype, now: ("answer", DELAY if slow.is_set() else 0.0))
    c.wait_ready(timeout=30)
    c.leader(timeout=15)
    pids = {i: c.replica(i).worker_pid() for i in (1, 2)}
    fast_queries = len(dns.queries)
    # A connection failure re-resolves a name only once its answer is a second old
    # (RESOLVER_REFRESH_MIN_MS); a real pod restart comes much later than this.
    time.sleep(1.5)

    # From now on the answer for node 3's name takes DELAY seconds. Node 3 goes away;
    # its peers lose the connection and, the address being suspect, resolve it again.
    slow.set()
    c.replica(3).kill()
    t0 = time.monotonic()
    poller = HealthPoller(c, (1, 2))
    poller.start()
    try:
        lid = c.leader(among=[1, 2], timeout=DELAY - 1)
        p = submit(c, "during-lookup", [1, 2])
        assert p.returncode == 0, p.stderr
        assert dns.first_answer_at() is None or dns.first_answer_at() < t0, \
            "the write must come before the slow DNS answer"
        # Node 3 comes back (same state); its peers reach it once the answer arrives.
        start(c, 3, env["ns"])
        wait_until(lambda: time.monotonic() > t0 + DELAY + 1.0, DELAY + 5, interval=0.1)
    finally:
        poller.stop()

    # The replicas with a lookup outstanding stayed healthy throughout: status frames
    # kept coming, the supervisors saw no stall and kept the same workers.
    for i in (1, 2):
        samples = poller.samples[i]
        assert len(samples) >= 5 * DELAY, len(samples)
        bad = [x for x in samples if x[1:] != (200, "ok")]
        assert not bad, (i, bad[:5], c.replica(i).log())
        assert c.replica(i).proc.poll() is None, c.replica(i).log()
        assert c.replica(i).worker_pid() == pids[i]
        assert "stalled" not in c.replica(i).log()

    # The slow answer came, and node 3 followed and caught up.
    slow_answers = [r for r in dns.replies if r[0] >= t0 and r[3] == "answer"]
    assert slow_answers, dns.replies
    wait_until(lambda: (c.status(3) or {}).get("leader_id") == lid, 20,
               what="node 3 follows the leader")
    c.replica(3).wait_ready(20)
    commit = c.status(lid)["commit_index"]
    wait_until(lambda: c.applied_index(3) >= commit, 15,
               what="node 3 caught up")
    jobs = json.loads(c.spur("squeue", "-t", "all", "--json", host=c.api(3),
                             env={"SPUR_TIMEOUT_MS": "5000"}).stdout)
    assert "during-lookup" in [j["name"] for j in jobs]

    # Only the slow name was ever asked ("localhost" is in the hosts file, the rest are
    # IP literals), and while its answer was pending each replica asked once (one A and
    # one AAAA query), not once per redial.
    assert {q[1] for q in dns.queries} == {SLOW}, {q[1] for q in dns.queries}
    assert fast_queries == 4, dns.queries  # A + AAAA from each of nodes 1 and 2
    slow_a = [q for q in dns.queries if q[0] >= t0 and q[2] == 1]
    assert 1 <= len(slow_a) <= 2, slow_a
    assert len({q[3] for q in slow_a}) == len(slow_a), slow_a
    # Logged once per change: the first answer; the same address again is not news.
    for i in (1, 2):
        assert len(resolved_lines(c.replica(i))) == 1, c.replica(i).log()

    # With node 3 leading, a write sent to node 1 is forwarded to "slowpeer.test:PORT",
    # which the shared cache answers at once (the DNS server would take DELAY seconds).
    r = c.spur("scontrol", "raft", "transfer", "3", host=c.api(lid))
    assert r.returncode == 0, r.stderr
    wait_until(lambda: all((c.status(i) or {}).get("leader_id") == 3 for i in (1, 2, 3)), 15,
               what="node 3 leads")
    queries_before = len(dns.queries)
    t = time.monotonic()
    p = submit(c, "forwarded", [1])
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t < DELAY
    assert len(dns.queries) == queries_before
    st, body = http_get(c.ports[0]["metrics"], "/metrics")
    fwd = [l for l in body.splitlines() if l.startswith("spur_api_forwarded_total")]
    assert fwd and float(fwd[0].split()[-1]) >= 1, fwd

    # Shutting down with a lookup still out is clean (exit 0; under ASan, nothing leaks):
    # node 3 goes again, nodes 1 and 2 start looking its name up (slow), then stop.
    time.sleep(1.2)  # the cached answer must be over a second old to be re-resolved
    queries_before = len(dns.queries)
    c.replica(3).kill()
    t_kill = time.monotonic()
    wait_until(lambda: len(dns.queries) >= queries_before + 4, 10,
               what="nodes 1 and 2 looking the name up again")
    for i in (1, 2):
        assert c.stop(i) == 0, c.replica(i).log()
    assert not [r for r in dns.replies if r[0] >= t_kill], "the lookups were still out"


def test_a_failing_name_is_retried_with_back_off_and_logged_once(env, tmp_path):
    fail_for = 5.0
    start_t = [None]

    def policy(name, qtype, now):
        if start_t[0] is None:
            start_t[0] = now
        return ("nxdomain", 0.0) if now - start_t[0] < fail_for else ("answer", 0.0)

    dns, c = start_dns_and_cluster(env, tmp_path, policy)
    lid = c.leader(among=[1, 2], timeout=15)
    wait_until(lambda: (c.status(3) or {}).get("leader_id") == lid, 25,
               what="node 3 follows the leader once its name resolves")
    # The follower redials on its own back-off; wait until it, too, has the answer.
    for i in (1, 2):
        wait_until(lambda: resolved_lines(c.replica(i)), 15, what=f"node {i} resolved {SLOW}")
    for i in (1, 2):
        s = c.replica(i)
        assert s.proc.poll() is None and "stalled" not in s.log(), s.log()
        lines = s.log_lines()
        fails = [l for l in lines if 'msg="name does not resolve' in l and f"name={SLOW}" in l]
        ok = resolved_lines(s)
        # Many attempts, one line for the failure and one for the recovery.
        assert len(fails) == 1, s.log()
        assert 'why="name does not exist"' in fails[0]
        assert len(ok) == 1, s.log()
    # Back-off: 100 ms doubling to 5 s gives at most about 8 lookups per replica in the
    # failing window (plus the one that succeeds); far fewer than one per redial or turn.
    a_queries = [q for q in dns.queries if q[2] == 1]
    per_port = {}
    for q in a_queries:
        per_port[q[3]] = per_port.get(q[3], 0) + 1
    assert len(per_port) == 2, per_port
    for port, n in per_port.items():
        assert 3 <= n <= 10, per_port
