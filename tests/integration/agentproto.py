"""The agent protocol (proto/agent.proto) spoken by hand, for tests that play the Raft
leader against a real spurd; and a stand-in controller that answers RegisterNode.

The encoders and decoders are written from agent.proto's field numbers, not from the C
code, so a test that passes shows the two agree with the .proto file. Every socket read
is bounded by a timeout.
"""
import socket
import struct
import threading
import time

import chanproto
from spurtest import pb_decode, pb_field, pb_varint

AGENT_PROTOCOL = 1

# Msg.body field numbers.
PING, PONG, LAUNCH, LAUNCH_REPLY, SIGNAL, SIGNAL_REPLY, ENDED, ENDED_ACK, ERROR = range(10, 19)
KINDS = {PING: "ping", PONG: "pong", LAUNCH: "launch", LAUNCH_REPLY: "launch_reply",
         SIGNAL: "signal", SIGNAL_REPLY: "signal_reply", ENDED: "ended",
         ENDED_ACK: "ended_ack", ERROR: "error"}


def sub(num, body):
    """A nested message field (kept even when empty, unlike pb_field's zero ints)."""
    return pb_varint(num << 3 | 2) + pb_varint(len(body)) + body


def msg(body_num, body, cluster="test", mid=0, version=AGENT_PROTOCOL):
    return pb_field(1, version) + pb_field(2, cluster) + pb_field(3, mid) + sub(body_num, body)


def ping(term, leader_id=1, node_name=""):
    return pb_field(1, leader_id) + pb_field(2, term) + pb_field(3, node_name)


def job_spec(script, uid, gid, user, workdir, name="job", stdout_path="", env=()):
    """A spur.api.JobSpec (proto/spur.proto) with what a launch needs."""
    if isinstance(script, str):
        script = script.encode()
    out = (pb_field(1, name) + pb_field(2, "default") + pb_field(8, stdout_path)
           + pb_field(10, workdir) + pb_field(12, script) + pb_field(14, user)
           + pb_field(15, uid) + pb_field(16, gid))
    for e in env:
        out += pb_field(13, e)
    return out


def launch(job_id, attempt, spec, node_list, node_index=0, cpus=1, mem_mb=0,
           time_limit_min=0, kill_wait_s=2, submit_time_ms=0):
    out = pb_field(1, job_id) + pb_field(2, attempt) + sub(3, spec)
    for n in node_list:
        out += pb_field(4, n)
    return (out + pb_field(5, node_index) + pb_field(6, cpus) + pb_field(7, mem_mb)
            + pb_field(8, time_limit_min) + pb_field(9, kill_wait_s)
            + pb_field(10, submit_time_ms))


def signal_req(job_id, attempt=0, sig=0, terminate=False):
    return (pb_field(1, job_id) + pb_field(2, attempt) + pb_field(3, sig)
            + pb_field(4, int(terminate)))


def ended_ack(job_id, attempt):
    return pb_field(1, job_id) + pb_field(2, attempt)


def _int32(v):
    """A proto int32 read as a varint: negative values come as 64-bit two's complement."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _first(d, num, default=0):
    return d[num][0] if d.get(num) else default


def _str(d, num):
    return d[num][0].decode() if d.get(num) else ""


def decode_body(kind, raw):
    d = pb_decode(raw)
    if kind == "pong":
        running = []
        for r in d.get(4, []):
            rd = pb_decode(r)
            running.append({"job_id": _first(rd, 1), "attempt": _first(rd, 2),
                            "start_time_ms": _first(rd, 3), "ended": bool(_first(rd, 4))})
        return {"node_name": _str(d, 1), "cpus": _first(d, 2), "mem_mb": _first(d, 3),
                "running": running, "version": _str(d, 5)}
    if kind == "launch_reply":
        return {"ok": bool(_first(d, 1)), "already": bool(_first(d, 2)), "error": _str(d, 3),
                "node_fault": bool(_first(d, 4)), "start_time_ms": _first(d, 5)}
    if kind == "signal_reply":
        return {"found": bool(_first(d, 1)), "ended": bool(_first(d, 2)), "error": _str(d, 3)}
    if kind == "ended":
        return {"job_id": _first(d, 1), "attempt": _first(d, 2), "node": _str(d, 3),
                "exit_code": _int32(_first(d, 4)), "signal": _int32(_first(d, 5)),
                "oom": bool(_first(d, 6)), "timed_out": bool(_first(d, 7)),
                "start_time_ms": _first(d, 8), "end_time_ms": _first(d, 9),
                "never_ran": bool(_first(d, 10))}
    if kind == "error":
        return {"error": _str(d, 1)}
    return dict(d)


def decode_msg(raw):
    d = pb_decode(raw)
    for num, kind in KINDS.items():
        if d.get(num):
            return {"version": _first(d, 1), "cluster": _str(d, 2), "id": _first(d, 3),
                    "kind": kind, "body": decode_body(kind, d[num][0])}
    return {"version": _first(d, 1), "cluster": _str(d, 2), "id": _first(d, 3),
            "kind": None, "body": {}}


class Closed(Exception):
    pass


class Leader:
    """One connection to a spurd, as a leader keeps it. Pushed Ended reports are kept in
    self.ended (in arrival order) whatever call is waiting."""

    def __init__(self, addr, cluster="test", timeout=10.0, key=None):
        """key: the cluster key file; the connection first proves it (chanproto.py) and
        every frame after is sealed. None: a bare connection, for tests of what spurd
        does with a peer that does not prove the key."""
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.cluster = cluster
        self.timeout = timeout
        self.next_id = 1
        self.ended = []
        self.buf = b""
        self.chan = None
        if key is not None:
            self.chan, self.buf = chanproto.connect(self.sock, key, cluster, "controller")

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, body_num, body, **kw):
        mid = self.next_id
        self.next_id += 1
        payload = msg(body_num, body, cluster=kw.pop("cluster", self.cluster), mid=mid, **kw)
        self.send_raw(frame(self.chan.seal(payload) if self.chan else payload))
        return mid

    def recv(self, timeout=None):
        """The next message; raises Closed at EOF, TimeoutError past the timeout."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack(">I", self.buf[:4])[0]
                if len(self.buf) >= 4 + n:
                    raw, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                    if self.chan is not None and not raw.startswith(chanproto.MAGIC):
                        raw = self.chan.open(raw)
                    m = decode_msg(raw)
                    if m["kind"] == "ended":
                        self.ended.append(m["body"])
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no message from spurd")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError("no message from spurd") from None
            except ConnectionResetError:
                raise Closed() from None
            if not chunk:
                raise Closed()
            self.buf += chunk

    def call(self, body_num, body, timeout=None, **kw):
        """Send a request and return the answer's body (Ended pushes seen meanwhile land in
        self.ended). An Error answer is returned as {"error": ...} with kind "error"."""
        mid = self.send(body_num, body, **kw)
        while True:
            m = self.recv(timeout)
            if m["kind"] == "ended":
                continue
            if m["kind"] == "error":
                return m
            assert m["id"] == mid, m
            return m["body"]

    def ping(self, term, **kw):
        return self.call(PING, ping(term, **kw))

    def wait_ended(self, job_id, attempt, timeout=30.0):
        """Read until a report of (job_id, attempt) has come; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self.ended:
                if e["job_id"] == job_id and e["attempt"] == attempt:
                    return e
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no Ended report of {job_id}.{attempt}")
            try:
                self.recv(timeout=min(left, 1.0))
            except TimeoutError:
                pass


def frame(payload):
    return struct.pack(">I", len(payload)) + payload


class FakeController(threading.Thread):
    """Answers every client API request with OK (spur.api.Response), recording the
    RegisterNode requests it got as dicts. Binds 127.0.0.1 on a port the caller chose."""

    def __init__(self, port, cluster="test", key=None):
        """key: the cluster key file spurd must prove (it always does)."""
        super().__init__(daemon=True)
        self.port = port
        self.cluster = cluster
        self.key = key
        self.registered = []
        self.lock = threading.Lock()
        self.srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", port))
        self.srv.listen(16)
        self.srv.settimeout(0.2)
        self.stopping = False

    def run(self):
        while not self.stopping:
            try:
                conn, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        conn.settimeout(30)
        buf = b""
        chan = None
        with conn:
            if self.key is not None:
                try:
                    chan, buf = chanproto.accept(conn, self.key, self.cluster, "controller")
                except (OSError, EOFError, chanproto.ChanError):
                    return
            # The handshake may have read the first request with the proof: the frames
            # already in buf are answered before waiting for more.
            while not self.stopping:
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                    n = struct.unpack(">I", buf[:4])[0]
                    raw, buf = buf[4:4 + n], buf[4 + n:]
                    req = pb_decode(chan.open(raw) if chan else raw)
                    if req.get(50):
                        rn = pb_decode(req[50][0])
                        with self.lock:
                            self.registered.append({
                                "name": _str(rn, 1), "address": _str(rn, 2),
                                "cpus": _first(rn, 3), "mem_mb": _first(rn, 4),
                                "from_agent": bool(_first(rn, 6))})
                    resp = (pb_field(1, 1) + pb_field(2, _first(req, 3)) + pb_field(8, 1)
                            + pb_field(9, self.cluster))
                    conn.sendall(frame(chan.seal(resp) if chan else resp))
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk

    def stop(self):
        self.stopping = True
        self.srv.close()
