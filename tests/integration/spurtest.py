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


def proc_state(pid):
    """'R', 'S', 'Z', 'T'... or None when the pid does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rfind(")") + 2]


def proc_ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(data[data.rfind(")") + 2:].split()[1])


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


def http_get(port, path, method="GET", host="127.0.0.1", timeout=2.0):
    """One request on a fresh connection: (status, body)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
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


def write_config(path, **sections):
    """Write a spur.yaml from nested dicts (flow style, one key per line)."""
    import yaml  # python3-yaml

    path.write_text(yaml.safe_dump(sections, sort_keys=False))
    return path


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
        },
        "raft": {"listen": raft},
        "health": {"bind": "loopback", "port": free_port()},
        "metrics": {"bind": "loopback", "port": free_port()},
        "supervisor": {"heartbeat_ms": 50, "stall_timeout_ms": 600, "kill_timeout_ms": 1500,
                       "shutdown_grace_ms": 2000},
    }
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(cfg.get(k), dict):
            cfg[k].update(v)
        else:
            cfg[k] = v
    return cfg


class Supervisor:
    """One spurctld process, its log, and the means to poke at it."""

    def __init__(self, tmp, cfg=None, worker=None, env=None, args=(), name="sup",
                 wrapper=()):
        self.tmp = Path(tmp)
        self.cfg = cfg if cfg is not None else base_config(self.tmp)
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


# ---- clusters ------------------------------------------------------------------------

def cluster_config(tmp, n, i, ports, cluster_name="test", **over):
    """Config of replica i (1-based) of an n-replica cluster on 127.0.0.1."""
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
        },
        "raft": {"listen": f"127.0.0.1:{p['raft']}", "heartbeat_ms": 50,
                 "election_timeout_ms": 500},
        "health": {"bind": "loopback", "port": p["health"]},
        "metrics": {"bind": "loopback", "port": p["metrics"]},
        "supervisor": {"heartbeat_ms": 50, "stall_timeout_ms": 1500, "kill_timeout_ms": 3000,
                       "shutdown_grace_ms": 5000},
    }
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(cfg.get(k), dict):
            cfg[k].update(v)
        else:
            cfg[k] = v
    return cfg


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
        self.cfgs = [cluster_config(self.tmp, n, i + 1, self.ports, cluster_name, **over)
                     for i in range(n)]
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

    def spur(self, *args, host=None, timeout=30, check=False, env=None, input=None):
        """Run a spur command (argv[0] picks it: sbatch, squeue, ...)."""
        e = dict(os.environ)
        e["SPUR_CONFIG"] = str(self.cfg_path)
        e["SPUR_CONTROLLER"] = host if host else self.hosts()
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

    def stop(self, i, sig=signal.SIGTERM, timeout=20):
        s = self.replica(i)
        s.signal(sig)
        return s.wait_exit(timeout)

    def kill_all(self):
        for s in self.replicas:
            if s is not None:
                s.kill()
