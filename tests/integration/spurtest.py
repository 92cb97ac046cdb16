"""Helpers for the integration tests: real processes on 127.0.0.1, real signals.

Everything here starts real programs from the build tree (SPUR_BUILD_DIR, default
<repo>/build) and cleans up after itself: every supervisor is started in its own session
and killed with its whole process group, and every wait is bounded.
"""
import contextlib
import errno
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SPUR_BUILD_DIR", REPO / "build")).resolve()

SPURCTLD = BUILD / "supervisor" / "spurctld"
RAFTD = BUILD / "raftd" / "spurctld-raftd"
TESTWORKER = BUILD / "tests" / "fixtures" / "testworker"
SPUR = BUILD / "client" / "spur"
SPURD = BUILD / "agent" / "spurd"


_PORTS_GIVEN = set()


# ---- authentication (issue 13) ------------------------------------------------------------
#
# Every replica of a test gets a cluster key file and a local socket of its own. The CLI
# run by the tests as root talks TCP with a token minted here from the key file (the same
# HS256 JWT `scontrol token` makes, common/token.h), so that clients keep reaching any
# replica by address and following leader hints as users do with SPUR_JWT; test_auth.py
# checks that `scontrol token` itself makes tokens the replicas take, and every other way in.

def new_key_file(path):
    """A fresh 32-byte cluster key at path, mode 0600 (what `spurctld keygen` writes)."""
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(32))
    return path


def key_id(key):
    """common/clusterkey.h: the first 8 bytes of HMAC-SHA-256(key, "spur cluster key id v1")."""
    import hashlib
    import hmac
    return hmac.new(key, b"spur cluster key id v1", hashlib.sha256).digest()[:8].hex()


def _hkdf_sha256(ikm, info, length=32, salt=b""):
    """RFC 5869 HKDF with SHA-256 (an empty salt is HashLen zero bytes)."""
    import hashlib
    import hmac
    prk = hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()
    okm, t, i = b"", b"", 1
    while len(okm) < length:
        t = hmac.new(prk, t + info + bytes([i]), hashlib.sha256).digest()
        okm += t
        i += 1
    return okm[:length]


def mint_token(key_path, user, lifespan=7200, now=None, kid=None):
    """A token as `scontrol token username=USER` makes it (common/token.h), for tests."""
    import base64
    import hashlib
    import hmac
    import json

    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=")

    key = Path(key_path).read_bytes()
    now = int(time.time()) if now is None else int(now)
    header = {"alg": "HS256", "typ": "JWT", "kid": kid or key_id(key)}
    claims = {"iat": now, "exp": now + lifespan, "sun": user}
    signing = (b64(json.dumps(header, separators=(",", ":")).encode()) + b"."
               + b64(json.dumps(claims, separators=(",", ":")).encode()))
    sig = hmac.new(_hkdf_sha256(key, b"spur token v1"), signing, hashlib.sha256).digest()
    return (signing + b"." + b64(sig)).decode()


def short_dir(prefix="spur-"):
    """A directory with a short path under /tmp, mode 0755: Unix socket paths must stay
    under 108 bytes, and users made by a test must be able to reach the sockets."""
    import tempfile
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(d, 0o755)
    return d


# The key file of each client API address a test started (Cluster, Supervisor): api_call()
# proves itself as root there with a token minted from it unless told otherwise.
_API_KEYS = {}


def register_api(addr, key_file):
    _API_KEYS[addr] = str(key_file)


def credential(token):
    """Request.credential (field 10) holding a token (Credential.token, field 2)."""
    return pb_field(10, pb_field(2, token))


def free_port(host="127.0.0.1"):
    """A port that was free a moment ago (bind to 0, read it back, release it), and that
    this test process has not handed out before: the kernel may offer a released port
    again, and two listeners of one test must never get the same one."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port
    raise RuntimeError("no fresh free port")


def wait_until(pred, timeout, interval=0.005, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def proc_stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (state first, then the ppid,
    ...), or None when the pid does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rfind(")") + 2:].split()


def proc_state(pid):
    """'R', 'S', 'Z', 'T'... or None when the pid does not exist."""
    fields = proc_stat_fields(pid)
    return fields[0] if fields else None


def proc_ppid(pid):
    fields = proc_stat_fields(pid)
    return int(fields[1]) if fields else None


def is_gone(pid):
    """Dead: exited (zombie) or already reaped."""
    return proc_state(pid) in (None, "Z", "X")


def children_of(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and proc_ppid(int(d)) == pid:
            out.append(int(d))
    return out


def proc_comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def recv_until_closed(sock, chunk_size=4096):
    """Everything the peer sends until it closes its end (the socket's own timeout bounds
    each wait)."""
    data = b""
    while True:
        chunk = sock.recv(chunk_size)
        if not chunk:
            return data
        data += chunk


def http_get(port, path, method="GET", host="127.0.0.1", timeout=2.0):
    """One request on a fresh connection: (status, body)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = recv_until_closed(s)
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, body.decode()


class KeepAliveClient:
    """A persistent HTTP/1.1 connection, for tight polling loops."""

    def __init__(self, port, host="127.0.0.1", timeout=2.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def get(self, path):
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        m = re.search(rb"Content-Length: (\d+)", head)
        n = int(m.group(1))
        while len(rest) < n:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed")
            rest += chunk
        self.buf = rest[n:]
        return int(head.split(b" ", 2)[1]), rest[:n].decode()

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()


class Poller(threading.Thread):
    """Polls a route as fast as it can; records (t_sent, t_received, status, body)."""

    def __init__(self, port, path="/readyz"):
        super().__init__(daemon=True)
        self.port, self.path = port, path
        self.samples = []
        self.stop_flag = threading.Event()
        self.error = None

    def run(self):
        client = None
        while not self.stop_flag.is_set():
            try:
                if client is None:
                    client = KeepAliveClient(self.port, timeout=1.0)
                t0 = time.monotonic()
                st, body = client.get(self.path)
                self.samples.append((t0, time.monotonic(), st, body.strip()))
            except (OSError, ConnectionError) as e:
                self.error = e
                if client:
                    client.close()
                client = None
                time.sleep(0.001)
        if client:
            client.close()

    def stop(self):
        self.stop_flag.set()
        self.join(5)


def parse_metrics(text):
    """Prometheus text as {series: value}: a series is its name, with its labels as
    written when it has any (`spur_acct_export_errors_total{reason="auth"}`)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        series, _, rest = line.rpartition("}") if "}" in line else line.partition(" ")
        if "}" in line:
            series += "}"
        value = rest.split()[0] if rest.split() else ""
        try:
            out[series.strip()] = float(value)
        except ValueError:
            continue
    return out


def read_metrics(port, host="127.0.0.1", timeout=2.0):
    """GET /metrics of a worker's metrics listener, parsed (parse_metrics()); None when it
    does not answer 200."""
    try:
        st, body = http_get(port, "/metrics", host=host, timeout=timeout)
    except OSError:
        return None
    return parse_metrics(body) if st == 200 else None


def metric_value(metrics, name, default=None, **labels):
    """One series of parse_metrics() output: name with labels (as keyword arguments), or
    default when it is missing (or metrics is None)."""
    if metrics is None:
        return default
    if labels:
        name += "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    return metrics.get(name, default)


def write_config(path, **sections):
    """Write a spur.yaml from nested dicts (flow style, one key per line)."""
    import yaml  # python3-yaml

    path.write_text(yaml.safe_dump(sections, sort_keys=False))
    return path


def apply_overrides(cfg, over):
    """cfg with over laid on it: a dict given for a section that is a dict updates that
    section key by key; anything else replaces the key. Changes and returns cfg."""
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(cfg.get(k), dict):
            cfg[k].update(v)
        else:
            cfg[k] = v
    return cfg


def base_config(tmp, **over):
    """A one-replica config on 127.0.0.1 with free ports and a private state dir.

    Every listener is on a port chosen free here, the Raft one too: a listener left to
    its default (6817, 6821, 6823) would collide with a spurctld running on the host.
    """
    raft = f"127.0.0.1:{free_port()}"
    cfg = {
        "cluster_name": "test",
        "controller": {
            "listen": f"127.0.0.1:{free_port()}",
            "state_dir": str(tmp / "state"),
            "peers": [raft],
            "socket": str(short_dir() / "api.sock"),
        },
        # One replica: the worker makes the key on first start (not made here).
        "auth": {"key_file": str(tmp / "spur.key")},
        "raft": {"listen": raft},
        "health": {"bind": "loopback", "port": free_port()},
        "metrics": {"bind": "loopback", "port": free_port()},
        "supervisor": {"heartbeat_ms": 50, "stall_timeout_ms": 600, "kill_timeout_ms": 1500,
                       "shutdown_grace_ms": 2000},
    }
    return apply_overrides(cfg, over)


class Supervisor:
    """One spurctld process, its log, and the means to poke at it."""

    def __init__(self, tmp, cfg=None, worker=None, env=None, args=(), name="sup",
                 wrapper=()):
        self.tmp = Path(tmp)
        self.cfg = cfg if cfg is not None else base_config(self.tmp)
        if self.cfg.get("auth", {}).get("key_file") and self.cfg.get("controller", {}).get("listen"):
            register_api(self.cfg["controller"]["listen"], self.cfg["auth"]["key_file"])
        self.cfg_path = write_config(self.tmp / f"{name}.yaml", **self.cfg)
        self.log_path = self.tmp / f"{name}.log"
        self.health_port = self.cfg.get("health", {}).get("port")
        cmd = list(wrapper) + [str(SPURCTLD), "-f", str(self.cfg_path)]
        if worker is not None:
            cmd += ["--worker", str(worker)]
        cmd += list(args)
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=full_env, start_new_session=True)
        self.pid = self.proc.pid

    # -- introspection ------------------------------------------------------------------
    def log(self):
        return self.log_path.read_text(errors="replace")

    def token(self, user="root"):
        """A token for user under this replica's key (the worker makes the key on its first
        start of a one-replica cluster, so call this once it is up)."""
        return mint_token(self.cfg["auth"]["key_file"], user)

    def socket(self):
        return "unix:" + self.cfg["controller"]["socket"]

    def log_lines(self):
        return [l for l in self.log().splitlines() if l.strip()]

    def last_sup_line(self):
        """The supervisor's own last line (comp=sup), which must explain an exit."""
        lines = [l for l in self.log_lines() if "prog=spurctld " in l and "comp=sup" in l]
        return lines[-1] if lines else ""

    def worker_pid(self, timeout=5):
        def find():
            m = re.findall(r'msg="worker started" pid=(\d+)', self.log())
            return int(m[-1]) if m else None
        return wait_until(find, timeout, what="worker start line")

    def responder_pid(self, timeout=5):
        def find():
            for c in children_of(self.pid):
                if proc_comm(c) == "spurctld-health" and proc_state(c) not in (None, "Z"):
                    return c
            return None
        return wait_until(find, timeout, what="health responder")

    def get(self, path, method="GET"):
        return http_get(self.health_port, path, method)

    def probe(self):
        return self.get("/healthz"), self.get("/readyz")

    def wait_ready(self, timeout=10):
        def ready():
            try:
                return self.get("/readyz")[0] == 200
            except OSError:
                return False
        try:
            return wait_until(ready, timeout, interval=0.02, what="/readyz 200")
        except TimeoutError:
            raise TimeoutError(f"not ready after {timeout}s; log:\n{self.log()}")

    def wait_exit(self, timeout=10):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"spurctld did not exit within {timeout}s; log:\n{self.log()}")

    def signal(self, sig):
        os.kill(self.pid, sig)

    def metrics(self, timeout=2.0):
        """The worker's /metrics (metrics.port) parsed: {series: value}, None when it does
        not answer."""
        return read_metrics(self.cfg.get("metrics", {}).get("port"), timeout=timeout)

    # -- cleanup ------------------------------------------------------------------------
    def kill(self):
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        self.logf.close()


def lock_is_free(path):
    """True when flock(LOCK_EX|LOCK_NB) on path succeeds (nobody holds it)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    finally:
        os.close(fd)


def port_is_free(port, host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


# ---- the client API by hand: a minimal protobuf writer and reader --------------------
#
# No Python bindings are generated; these few lines write and read the fields of
# proto/spur.proto the tests need, and keep the tests independent of the C code's view of
# the format.

def pb_varint(n):
    """n as a protobuf varint (negative numbers as their 64-bit two's complement)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_field(num, value):
    """One field: int -> varint (wire type 0; 0 is left out, as proto3 does), bytes/str ->
    length-delimited (2)."""
    if isinstance(value, int):
        return pb_varint(num << 3) + pb_varint(value) if value else b""
    if isinstance(value, str):
        value = value.encode()
    return pb_varint(num << 3 | 2) + pb_varint(len(value)) + value


def pb_read_varint(buf, i):
    shift = v = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7


def pb_decode(buf):
    """A message as {field: [values]}: varints as ints, length-delimited as bytes."""
    import collections
    import struct

    out, i = collections.defaultdict(list), 0
    while i < len(buf):
        key, i = pb_read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = pb_read_varint(buf, i)
        elif wt == 2:
            n, i = pb_read_varint(buf, i)
            v, i = bytes(buf[i:i + n]), i + n
        elif wt == 1:
            v, i = struct.unpack_from("<Q", buf, i)[0], i + 8
        elif wt == 5:
            v, i = struct.unpack_from("<I", buf, i)[0], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        out[num].append(v)
    return out


# spur.api.Code and the Request fields of the operations used here (proto/spur.proto).
API_OK, API_INVALID, API_NOT_FOUND, API_UNAVAILABLE, API_TIMEOUT, API_REFUSED = 0, 1, 2, 3, 4, 5
OP_PING, OP_SUBMIT_JOB, OP_GET_JOBS = 20, 40, 41


def api_connect(addr, timeout=10.0):
    """A connection to the client API at addr ("host:port" or "unix:/path")."""
    if addr.startswith("unix:"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout + 2)
        sock.connect(addr[5:])
        return sock
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host.strip("[]"), int(port)), timeout=timeout + 2)


def api_call(addr, op, body=b"", cluster_name="", protocol_version=1, timeout=10.0,
             token=None, extra=b"", conn=None, **envelope):
    """Send one Request (op: its oneof field number, body: the operation's bytes) to the
    client API at addr "host:port" (or "unix:/path") and return the Response as a dict:
    code, error, cluster_name, leader_id, leader_hint, served_by, and result (the oneof
    field number and its bytes, or None). envelope: client_id, seq, user, local_read, as
    ints/strs. token: sent as the request's credential (a TCP connection needs one for
    anything but a Ping); None: root's, when a test started the replica at addr; False:
    none. extra: raw fields appended to the envelope (e.g. a forged
    Request.caller). conn: a connection from api_connect() to send on and leave open
    (default: one of its own for this call)."""
    import random
    import struct

    rid = random.getrandbits(48) + 1
    req = (pb_field(1, protocol_version) + pb_field(2, cluster_name) + pb_field(3, rid)
           + pb_field(4, int(bool(envelope.get("local_read", False))))
           + pb_field(5, envelope.get("client_id", 0)) + pb_field(6, envelope.get("seq", 0))
           + pb_field(8, envelope.get("user", "tester"))
           + pb_field(9, int(timeout * 1000)))
    if token is None and addr in _API_KEYS and Path(_API_KEYS[addr]).exists():
        token = mint_token(_API_KEYS[addr], "root")
    if token:
        req += credential(token)
    req += extra
    req += pb_varint(op << 3 | 2) + pb_varint(len(body)) + body

    def recv_exact(sock, n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    sock = conn if conn is not None else api_connect(addr, timeout)
    with contextlib.nullcontext(sock) if conn is not None else sock:
        sock.sendall(struct.pack(">I", len(req)) + req)
        while True:
            n = struct.unpack(">I", recv_exact(sock, 4))[0]
            r = pb_decode(recv_exact(sock, n))
            if r[2] and r[2][0] != rid:
                continue
            result = None
            for num in range(20, 64):
                if r.get(num):
                    result = (num, r[num][0])
            return {
                "code": r[3][0] if r[3] else 0,
                "error": r[4][0].decode() if r[4] else "",
                "leader_id": r[5][0] if r[5] else 0,
                "leader_hint": r[6][0].decode() if r[6] else "",
                "served_by": r[8][0] if r[8] else 0,
                "cluster_name": r[9][0].decode() if r[9] else "",
                "result": result,
            }


def job_spec(script, name="raw", workdir="/tmp"):
    """A JobSpec with the fields a submission needs (script: bytes or str)."""
    if isinstance(script, str):
        script = script.encode()
    return (pb_field(1, name) + pb_field(8, "slurm-%j.out") + pb_field(9, "slurm-%j.out")
            + pb_field(10, workdir) + pb_field(12, script) + pb_field(14, "raw"))


# ---- commands without a configuration file ---------------------------------------------

def default_config_path():
    """The file the programs read when neither -f nor SPUR_CONFIG names one (the build's
    sysconfdir/spur/spur.yaml)."""
    text = (BUILD / "spur_build.h").read_text()
    m = re.search(r'#define SPUR_DEFAULT_CONFIG "([^"]+)"', text)
    if m is None:
        raise RuntimeError(f"no SPUR_DEFAULT_CONFIG in {BUILD / 'spur_build.h'}")
    return m.group(1)


def without_config(cmd):
    """cmd (an argv list) wrapped so that it cannot read any configuration file: when the
    build's default file exists on this host, the command runs in a mount namespace of
    its own with an empty tmpfs over that file's directory. Raises RuntimeError when that
    is needed and cannot be done (not root). Use with bare_env(), which drops SPUR_CONFIG."""
    path = default_config_path()
    if not os.path.lexists(path):
        return list(cmd)
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise RuntimeError(f"{path} exists and hiding it needs root and unshare")
    return (["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs spur-no-config "$0" && exec "$@"', os.path.dirname(path)]
            + list(cmd))


def bare_env(**extra):
    """os.environ without any SPUR_* variable, plus extra (str values)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPUR_")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def spur_without_config(*args, env=None, timeout=30, input=None):
    """Run a spur command (argv[0] picks it) with no configuration file reachable and no
    SPUR_* variable but those in env, and SPUR_JWT: root's token when SPUR_CONTROLLER
    names a replica a test started and env gives none (no file: no local socket to find)."""
    cmd = [str(BUILD / "client" / args[0])] + [str(a) for a in args[1:]]
    env = dict(env or {})
    first = env.get("SPUR_CONTROLLER", "").split(",")[0]
    if "SPUR_JWT" not in env and first in _API_KEYS and Path(_API_KEYS[first]).exists():
        env["SPUR_JWT"] = mint_token(_API_KEYS[first], "root")
    return subprocess.run(without_config(cmd), capture_output=True, text=True,
                          env=bare_env(**env), timeout=timeout, input=input)


# ---- network namespaces ----------------------------------------------------------------

CLONE_NEWNET = 0x40000000


def netns_skip_reason():
    """Why private_netns() cannot work here, or None."""
    if os.geteuid() != 0:
        return "needs root for a network namespace"
    if not os.path.exists("/proc/thread-self/ns/net"):
        return "no /proc/thread-self/ns/net"
    if shutil.which("ip") is None:
        return "needs iproute2 (ip) to bring lo up"
    return None


@contextlib.contextmanager
def private_netns():
    """Run the with-body in a network namespace of its own holding only `lo`, up.

    For tests that must use the embedded default ports (6817, 6821, 6822, 6823): there
    they cannot collide with a spurctld on the host, nor the host's tests with them.
    Namespaces are per thread on Linux: this thread moves into a new one (unshare), so
    the sockets it opens and the processes it starts from now on live there, and moves
    back to the host's at the end (setns). Processes started inside stay in it until
    they exit; the namespace goes away with the last of them. Threads started inside
    are inside too.
    """
    import ctypes

    why = netns_skip_reason()
    if why is not None:
        raise RuntimeError(why)
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.unshare(CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"unshare(CLONE_NEWNET): {os.strerror(e)}")
        try:
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10,
                           capture_output=True)
            yield
        finally:
            if libc.setns(home, CLONE_NEWNET) != 0:
                # Every later test would run in the wrong namespace: stop here.
                e = ctypes.get_errno()
                os.write(2, f"private_netns: setns back failed: {os.strerror(e)}\n".encode())
                os._exit(3)
    finally:
        os.close(home)


def netns_inode(pid="thread-self"):
    """The inode of a task's network namespace (tells two namespaces apart)."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino


# ---- clusters ------------------------------------------------------------------------

def submit(c, name, host=None, **kw):
    """sbatch --wrap=true -J name through the cluster c (or host); asserts it succeeded
    and returns the job id."""
    p = c.spur("sbatch", "--wrap=true", "-J", name, host=host, **kw)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.split()[-1])


def cluster_config(tmp, n, i, ports, cluster_name="test", sockdir=None, key_file=None,
                   **over):
    """Config of replica i (1-based) of an n-replica cluster on 127.0.0.1. Its local
    socket is sockdir/n<i>.sock; its cluster key key_file (default tmp/cluster.key, which
    the caller makes: a cluster of several replicas does not make one itself)."""
    peers = [f"127.0.0.1:{ports[k]['raft']}" for k in range(n)]
    hosts = [f"127.0.0.1:{ports[k]['api']}" for k in range(n)]
    p = ports[i - 1]
    cfg = {
        "cluster_name": cluster_name,
        "controller": {
            "listen": f"127.0.0.1:{p['api']}",
            "state_dir": str(tmp / f"state{i}"),
            "node_id": i,
            "peers": peers,
            "hosts": hosts,
            "socket": str(Path(sockdir or tmp) / f"n{i}.sock"),
        },
        "auth": {"key_file": str(key_file or (tmp / "cluster.key"))},
        "raft": {"listen": f"127.0.0.1:{p['raft']}", "heartbeat_ms": 50,
                 "election_timeout_ms": 500},
        "health": {"bind": "loopback", "port": p["health"]},
        "metrics": {"bind": "loopback", "port": p["metrics"]},
        "supervisor": {"heartbeat_ms": 50, "stall_timeout_ms": 1500, "kill_timeout_ms": 3000,
                       "shutdown_grace_ms": 5000},
    }
    return apply_overrides(cfg, over)


class Cluster:
    """n replicas, each under its own spurctld, on 127.0.0.1 with free ports.

    replicas[i] is the Supervisor of node i+1 (or None while stopped). Use start(i) to
    (re)start node i with the same config and state dir; client(...) runs a spur command
    against the cluster (or one replica).
    """

    def __init__(self, tmp, n=3, build=None, cluster_name="test", **over):
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.n = n
        self.ports = [{k: free_port() for k in ("api", "raft", "health", "metrics")}
                      for _ in range(n)]
        self.sockdir = short_dir()
        self.key_file = self.tmp / "cluster.key"
        if not self.key_file.exists():
            new_key_file(self.key_file)
        self.cfgs = [cluster_config(self.tmp, n, i + 1, self.ports, cluster_name,
                                    sockdir=self.sockdir, key_file=self.key_file, **over)
                     for i in range(n)]
        self._tokens = {}
        for i, cfg in enumerate(self.cfgs):
            register_api(cfg["controller"]["listen"], cfg["auth"]["key_file"])
        self.replicas = [None] * n
        self.generation = [0] * n
        self.cfg_path = write_config(self.tmp / "client.yaml", **self.cfgs[0])

    def start(self, i, env=None):
        """Start node i (1-based)."""
        self.generation[i - 1] += 1
        s = Supervisor(self.tmp, cfg=self.cfgs[i - 1], env=env,
                       name=f"n{i}-{self.generation[i - 1]}")
        self.replicas[i - 1] = s
        return s

    def start_all(self):
        for i in range(1, self.n + 1):
            self.start(i)
        return self

    def replica(self, i):
        return self.replicas[i - 1]

    def alive(self):
        return [i for i in range(1, self.n + 1)
                if self.replicas[i - 1] is not None and self.replicas[i - 1].proc.poll() is None]

    def api(self, i):
        return f"127.0.0.1:{self.ports[i - 1]['api']}"

    def hosts(self, only=None):
        ids = only if only is not None else range(1, self.n + 1)
        return ",".join(self.api(i) for i in ids)

    def socket(self, i):
        """Node i's local client API socket, as a host for SPUR_CONTROLLER."""
        return "unix:" + self.cfgs[i - 1]["controller"]["socket"]

    def token(self, user="root"):
        """A token for user (default root) under the cluster's key, for SPUR_JWT."""
        key_file = self.cfgs[0].get("auth", {}).get("key_file", str(self.key_file))
        if user not in self._tokens:
            self._tokens[user] = mint_token(key_file, user)
        return self._tokens[user]

    def spur(self, *args, host=None, timeout=30, check=False, env=None, input=None):
        """Run a spur command (argv[0] picks it: sbatch, squeue, ...)."""
        e = dict(os.environ)
        e["SPUR_CONFIG"] = str(self.cfg_path)
        e["SPUR_CONTROLLER"] = host if host else self.hosts()
        e["SPUR_JWT"] = self.token()
        e.update(env or {})
        cmd = [str(BUILD / "client" / args[0])] + [str(a) for a in args[1:]]
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout,
                           input=input)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
        return p

    def status(self, i, timeout=5):
        """scontrol raft status --json of node i, or None when it does not answer."""
        import json
        p = self.spur("scontrol", "raft", "status", "--json", host=self.api(i),
                      env={"SPUR_TIMEOUT_MS": str(int(timeout * 1000))}, timeout=timeout + 5)
        if p.returncode != 0:
            return None
        return json.loads(p.stdout)

    def leader(self, among=None, timeout=15):
        """Wait until the given (default: alive) replicas agree on one leader among them."""
        def agreed():
            ids = among if among is not None else self.alive()
            seen = set()
            for i in ids:
                st = self.status(i, timeout=2)
                if st is None or st["leader_id"] == 0:
                    return None
                seen.add(st["leader_id"])
            if len(seen) == 1:
                lid = seen.pop()
                return lid if lid in ids else None
            return None
        return wait_until(agreed, timeout, interval=0.05, what="an agreed leader")

    def wait_ready(self, ids=None, timeout=20):
        for i in (ids or self.alive()):
            self.replica(i).wait_ready(timeout)

    def worker_pid(self, i):
        return self.replica(i).worker_pid()

    def kill_worker(self, i, sig=signal.SIGKILL):
        """Kill node i's worker; its supervisor then exits 70. Returns that exit code."""
        s = self.replica(i)
        os.kill(s.worker_pid(), sig)
        return s.wait_exit(20)

    def state_dir(self, i):
        """Node i's state directory (controller.state_dir)."""
        return self.cfgs[i - 1]["controller"]["state_dir"]

    def follower(self, leader):
        """The lowest-numbered replica other than leader: one of its followers."""
        return next(i for i in range(1, self.n + 1) if i != leader)

    def applied_index(self, i):
        """Node i's applied index, 0 while it does not answer."""
        return (self.status(i) or {}).get("applied_index", 0)

    def stop(self, i, sig=signal.SIGTERM, timeout=20):
        s = self.replica(i)
        s.signal(sig)
        return s.wait_exit(timeout)

    def metrics(self, i, timeout=2.0):
        """Node i's worker /metrics parsed ({series: value}), None when it does not answer."""
        return read_metrics(self.ports[i - 1]["metrics"], timeout=timeout)

    def kill_all(self):
        for s in self.replicas:
            if s is not None:
                s.kill()


# ---- node agents (spurd) ---------------------------------------------------------------

def proc_session(pid):
    """The session id of pid (stat field 6), or None when the pid does not exist."""
    fields = proc_stat_fields(pid)
    return int(fields[3]) if fields else None


def agent_config(replica_cfg, **agent):
    """A spurd configuration: a replica's (its cluster_name and controller.hosts are what
    spurd needs) with agent: keys laid on the agent: section it already has, if any."""
    import copy

    cfg = copy.deepcopy(replica_cfg)
    section = dict(cfg.get("agent") or {})
    section.update(agent)
    cfg["agent"] = section
    return cfg


def spool_monitor_pids(spool):
    """The pids a spurd spool's attempts name in their monitor files ("PID STARTTIME")
    that are still those monitors (same start time, /proc/PID/stat field 22)."""
    out = []
    for f in (Path(spool) / "jobs").glob("*/monitor"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid, start = (int(x) for x in f.read_text().split()[:2])
            fields = proc_stat_fields(pid)
            if fields and int(fields[19]) == start:
                out.append(pid)
    return out


def kill_spool_jobs(spool):
    """SIGKILL every live job monitor a spurd spool names and every process of its
    session (the monitor setsid()s: its job runs in that session), as the loss of the
    host would."""
    for mpid in spool_monitor_pids(spool):
        victims = [int(d) for d in os.listdir("/proc")
                   if d.isdigit() and proc_session(int(d)) == mpid]
        for pid in victims + [mpid]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


class Agent:
    """One spurd (a node agent) on 127.0.0.1, its spool and its logs.

    The spool and the listen port stay the same for the Agent's life, so start() after
    kill9() or stop() is a restart of the same node on the same spool. Each start writes
    its own log (agent-NAME-GEN.log in tmp); all of them stay for a failed test. spurd
    runs in a session of its own; the job monitors it forks run in sessions of theirs
    (they outlive spurd by design), so kill() ends those too, found through the spool.
    """

    def __init__(self, tmp, cfg, name, cpus=2, mem_mb=None, spool=None, port=None, env=None,
                 args=(), start=True):
        self.tmp = Path(tmp)
        self.name = name
        self.cpus = cpus
        self.mem_mb = mem_mb
        self.port = port or free_port()
        self.spool = Path(spool) if spool else self.tmp / f"spool-{name}"
        self.cfg = cfg
        self.cfg_path = write_config(self.tmp / f"agent-{name}.yaml", **cfg)
        self.env = dict(env or {})
        self.args = list(args)
        self.generation = 0
        self.proc = None
        self.logf = None
        self.log_path = None
        if start:
            self.start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def command(self):
        cmd = [str(SPURD), "-f", str(self.cfg_path), "-N", self.name, "--listen", self.address,
               "--spool", str(self.spool), "--cpus", str(self.cpus)]
        if self.mem_mb is not None:
            cmd += ["--mem-mb", str(self.mem_mb)]
        return cmd + self.args

    def start(self, env=None):
        """Start spurd (again: same spool, same port). env: extra variables this time."""
        if self.alive():
            raise RuntimeError(f"agent {self.name} is already running")
        self.generation += 1
        if self.logf is not None:
            self.logf.close()
        self.log_path = self.tmp / f"agent-{self.name}-{self.generation}.log"
        self.logf = open(self.log_path, "wb")
        full_env = dict(os.environ)
        full_env.update(self.env)
        full_env.update(env or {})
        self.proc = subprocess.Popen(self.command(), stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=full_env, start_new_session=True)
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        """Every start's log, oldest first."""
        parts = []
        for g in range(1, self.generation + 1):
            p = self.tmp / f"agent-{self.name}-{g}.log"
            if p.exists():
                parts.append(f"--- {p.name}\n" + p.read_text(errors="replace"))
        return "\n".join(parts)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        """Signal spurd and wait for its exit; returns the exit status."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"spurd {self.name} did not exit within {timeout}s; log:\n"
                               f"{self.log()}")

    def kill9(self):
        """kill -9 spurd alone (its job monitors keep running, as after a crash)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        return self.proc.wait(10)

    def restart(self, env=None, hard=True):
        """kill -9 (hard) or SIGTERM spurd if it runs, then start it again on the same
        spool and port; the jobs' monitors run on throughout."""
        if self.alive():
            if hard:
                self.kill9()
            else:
                self.stop()
        return self.start(env)

    def monitor_pids(self):
        """The live monitors of the spool's attempts."""
        return spool_monitor_pids(self.spool)

    def kill_jobs(self):
        """SIGKILL every monitor of the spool and every process of their sessions, as the
        loss of the host would."""
        kill_spool_jobs(self.spool)

    def kill(self):
        """Clean-up: spurd, its monitors and their jobs, gone."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        self.kill_jobs()
        if self.logf is not None:
            self.logf.close()
            self.logf = None
