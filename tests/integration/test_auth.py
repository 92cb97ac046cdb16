"""Authentication and permissions (issue 13), with real processes and real users.

Users made by the test (useradd) run the real commands; the replicas, spurd and munged are
the real programs. Each test says what a user would see.
"""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

import spurtest
from spurtest import BUILD, api_call, job_spec, pb_field, wait_until

API_UNAUTHENTICATED, API_DENIED = 10, 11
OP_SUBMIT_JOB, OP_PING, OP_CANCEL_JOB = 40, 20, 43
DENIED = "Access/permission denied"


def as_user(user, cmd, env, timeout=30, cwd=None):
    """Run cmd as user (runuser) with exactly env (plus PATH)."""
    full = ["runuser", "-u", user.name, "--", "env", "-i",
            f"PATH={os.environ.get('PATH', '/usr/bin:/bin')}"]
    full += [f"{k}={v}" for k, v in env.items()] + [str(x) for x in cmd]
    return subprocess.run(full, capture_output=True, text=True, timeout=timeout,
                          cwd=str(cwd or user.home))


def client(name):
    return BUILD / "client" / name


def user_config(c, user):
    """The cluster's client config where the user can read it."""
    cfg = user.home / "client.yaml"
    shutil.copy(c.cfg_path, cfg)
    os.chmod(cfg, 0o644)
    return cfg


def job_field(c, job_id, field):
    p = c.spur("scontrol", "show", "job", str(job_id), "--json", check=True)
    return json.loads(p.stdout)[0][field]


def up(cluster_factory, n=3, **over):
    """A cluster of n replicas, started, with a leader."""
    c = cluster_factory(n=n, **over)
    c.start_all()
    c.wait_ready()
    c.leader()
    return c


def held_job(c):
    p = c.spur("sbatch", "--parsable", "--hold", "--wrap=true", "-J", "roots", check=True)
    return int(p.stdout.strip())


# ---- users on the controller's host: the local socket ------------------------------------

def test_local_socket_works_for_a_user_with_no_setup(sups, test_user):
    """A one-replica cluster on its defaults for authentication: no key made by hand, no
    MUNGE, no token. A user on the host submits and lists through the local socket, and
    the job is theirs; the worker made the cluster key itself, mode 0600."""
    s = sups.start()
    s.wait_ready(15)
    key = Path(s.cfg["auth"]["key_file"])
    assert key.exists() and (key.stat().st_mode & 0o777) == 0o600
    assert "generated a new cluster key" in s.log()
    sock = s.cfg["controller"]["socket"]
    assert (os.stat(sock).st_mode & 0o777) == 0o666
    cfg = test_user.home / "spur.yaml"
    shutil.copy(s.cfg_path, cfg)
    os.chmod(cfg, 0o644)
    env = {"SPUR_CONFIG": str(cfg)}  # no SPUR_CONTROLLER: the CLI finds the socket itself
    p = as_user(test_user, [client("sbatch"), "--parsable", "--hold", "--wrap=true"], env)
    assert p.returncode == 0, p.stderr
    jid = int(p.stdout.strip())
    p = as_user(test_user, [client("squeue"), "-h", "-o", "%i %u"], env)
    assert p.returncode == 0, p.stderr
    assert f"{jid} {test_user.name}" in p.stdout
    # The same user over TCP with no credential at all is refused, and told so.
    p = as_user(test_user, [client("squeue"), "-h"],
                dict(env, SPUR_CONTROLLER=s.cfg["controller"]["listen"],
                     SPUR_MUNGE_SOCKET="/nonexistent/munge.socket"))
    assert p.returncode == 1
    assert "not authenticated" in p.stderr


def test_tcp_request_without_credential_is_refused(sups):
    s = sups.start()
    s.wait_ready(15)
    addr = s.cfg["controller"]["listen"]
    r = api_call(addr, OP_SUBMIT_JOB, pb_field(1, job_spec("#!/bin/sh\ntrue\n")),
                 cluster_name="test", token=False)
    assert r["code"] == API_UNAUTHENTICATED
    assert r["error"] == "not authenticated"
    # A bad token says no more than that.
    r = api_call(addr, OP_SUBMIT_JOB, pb_field(1, job_spec("#!/bin/sh\ntrue\n")),
                 cluster_name="test", token="e30.e30.AAAA")
    assert (r["code"], r["error"]) == (API_UNAUTHENTICATED, "not authenticated")
    # Ping, what a client asks first to learn the cluster, needs nothing.
    r = api_call(addr, OP_PING, token=False)
    assert r["code"] == 0 and r["cluster_name"] == "test"
    assert "authentication failed" in s.log()


def test_connection_proved_by_a_token_lasts_as_long_as_the_token(sups):
    """A connection proved once with a token (what the client library does) is not proved
    for good: once the token's exp has passed, the next request on it is refused."""
    s = sups.start()
    s.wait_ready(15)
    addr = s.cfg["controller"]["listen"]
    token = spurtest.mint_token(s.cfg["auth"]["key_file"], "root", lifespan=3)
    exp = time.time() + 3
    with spurtest.api_connect(addr) as conn:
        r = api_call(addr, OP_SUBMIT_JOB, pb_field(1, job_spec("#!/bin/sh\ntrue\n")),
                     cluster_name="test", token=token, conn=conn)
        assert r["code"] == 0, r
        r = api_call(addr, OP_SUBMIT_JOB, pb_field(1, job_spec("#!/bin/sh\ntrue\n")),
                     cluster_name="test", token=False, conn=conn)
        assert r["code"] == 0, r  # proved already, on this connection
        time.sleep(max(0.0, exp - time.time()) + 1.1)
        r = api_call(addr, OP_SUBMIT_JOB, pb_field(1, job_spec("#!/bin/sh\ntrue\n")),
                     cluster_name="test", token=False, conn=conn)
        assert (r["code"], r["error"]) == (API_UNAUTHENTICATED, "not authenticated")
        # The same expired token again: still no.
        r = api_call(addr, OP_SUBMIT_JOB, pb_field(1, job_spec("#!/bin/sh\ntrue\n")),
                     cluster_name="test", token=token, conn=conn)
        assert (r["code"], r["error"]) == (API_UNAUTHENTICATED, "not authenticated")
        # A fresh one on the same connection proves it again.
        r = api_call(addr, OP_SUBMIT_JOB, pb_field(1, job_spec("#!/bin/sh\ntrue\n")),
                     cluster_name="test", token=spurtest.mint_token(s.cfg["auth"]["key_file"],
                                                                    "root"), conn=conn)
        assert r["code"] == 0, r
    assert "connection's token expired" in s.log()


def test_forged_user_in_a_request_is_ignored(cluster_factory, test_user):
    """A raw request that claims to be root in every field it can (Request.user, the
    JobSpec's user/uid/gid, a Request.caller) gets the job of the token's user."""
    c = up(cluster_factory, n=1)
    forged_caller = pb_field(11, pb_field(1, "root") + pb_field(2, 0) + pb_field(3, 0)
                             + pb_field(4, 1) + pb_field(5, "replica"))
    spec = job_spec("#!/bin/sh\ntrue\n") + pb_field(14, "root")  # user again
    spec = spec + pb_field(11, 1)  # hold, so that it stays to be looked at
    r = api_call(c.api(1), OP_SUBMIT_JOB, pb_field(1, spec), cluster_name="test",
                 token=c.token(test_user.name), user="root", extra=forged_caller,
                 client_id=77, seq=1)
    assert r["code"] == 0, r
    jid = spurtest.pb_decode(r["result"][1])[1][0]
    job = json.loads(c.spur("scontrol", "show", "job", str(jid), "--json",
                            check=True).stdout)[0]
    assert job["user"] == test_user.name
    assert job["uid"] == test_user.uid
    assert job["gid"] == test_user.gid


# ---- permissions ---------------------------------------------------------------------------

def test_user_cannot_touch_roots_job(cluster_factory, test_user):
    c = up(cluster_factory, n=3)
    jid = held_job(c)
    env = {"SPUR_CONFIG": str(user_config(c, test_user)), "SPUR_CONTROLLER": c.hosts(),
           "SPUR_JWT": c.token(test_user.name)}
    p = as_user(test_user, [client("scancel"), jid], env)
    assert p.returncode == 210, p  # Slurm 22.05's scancel: ESLURM_ACCESS_DENIED & 0xff
    assert DENIED in p.stderr
    for verb in ("release", "hold"):
        p = as_user(test_user, [client("scontrol"), verb, jid], env)
        assert p.returncode == 1, p
        assert DENIED in p.stderr
    p = as_user(test_user, [client("scancel"), "-u", "root"], env)
    assert p.returncode == 210 and DENIED in p.stderr, p
    assert job_field(c, jid, "state") == "PENDING"
    assert job_field(c, jid, "reason") == "JobHeldUser"
    # The owner may: the user's own job, and root on root's.
    p = as_user(test_user, [client("sbatch"), "--parsable", "--hold", "--wrap=true"], env)
    assert p.returncode == 0, p.stderr
    own = int(p.stdout.strip())
    assert as_user(test_user, [client("scancel"), own], env).returncode == 0
    wait_until(lambda: job_field(c, own, "state") == "CANCELLED", 10)
    c.spur("scancel", str(jid), check=True)
    wait_until(lambda: job_field(c, jid, "state") == "CANCELLED", 10)


def test_nobody_cannot_run_operator_commands_root_can(cluster_factory):
    c = up(cluster_factory, n=3)
    lid = c.leader()
    c.spur("scontrol", "create", "node", "NodeName=cn1", "CPUs=2", "RealMemory=1000",
           check=True)
    nobody = {"SPUR_JWT": c.token("nobody")}
    follower = c.follower(lid)
    attempts = [
        ("update", "NodeName=cn1", "State=DRAIN", "Reason=nobody"),
        ("create", "node", "NodeName=cn2", "CPUs=2", "RealMemory=1000"),
        ("raft", "transfer", str(follower)),
        ("raft", "remove", str(follower)),
    ]
    for args in attempts:
        p = c.spur("scontrol", *args, env=nobody)
        assert p.returncode == 1, (args, p.stdout, p.stderr)
        assert DENIED in p.stderr, (args, p.stderr)
    nodes = json.loads(c.spur("sinfo", "--json", check=True).stdout)
    assert "cn2" not in json.dumps(nodes)
    assert c.leader() == lid
    st = c.status(lid)
    assert len([m for m in st["members"] if m["voter"]]) == 3
    # root can do each of them.
    c.spur("scontrol", "update", "NodeName=cn1", "State=DRAIN", "Reason=root", check=True)
    c.spur("scontrol", "create", "node", "NodeName=cn2", "CPUs=2", "RealMemory=1000",
           check=True)
    c.spur("scontrol", "raft", "transfer", str(follower), check=True)
    wait_until(lambda: c.leader() == follower, 15)
    c.spur("scontrol", "raft", "remove", str(lid), check=True)


def test_admin_users_are_operators(cluster_factory, test_user):
    c = up(cluster_factory, n=1, controller={"admin_users": [test_user.name]})
    c.spur("scontrol", "create", "node", "NodeName=cn1", "CPUs=2", "RealMemory=1000",
           check=True)
    jid = held_job(c)
    env = {"SPUR_JWT": c.token(test_user.name)}
    c.spur("scontrol", "update", "NodeName=cn1", "State=DRAIN", "Reason=admin", env=env,
           check=True)
    c.spur("scancel", str(jid), env=env, check=True)


# ---- tokens --------------------------------------------------------------------------------

def test_scontrol_token(cluster_factory, test_user):
    c = up(cluster_factory, n=1)
    sock_env = {"SPUR_CONFIG": str(user_config(c, test_user)),
                "SPUR_CONTROLLER": c.socket(1)}
    p = as_user(test_user, [client("scontrol"), "token"], sock_env)
    assert p.returncode == 0, p.stderr
    line = p.stdout.strip()
    assert line.startswith("SPUR_JWT=")
    token = line.split("=", 1)[1]
    tcp_env = {"SPUR_CONFIG": sock_env["SPUR_CONFIG"], "SPUR_CONTROLLER": c.hosts(),
               "SPUR_JWT": token}
    p = as_user(test_user, [client("sbatch"), "--parsable", "--hold", "--wrap=true"], tcp_env)
    assert p.returncode == 0, p.stderr
    jid = int(p.stdout.strip())
    assert job_field(c, jid, "user") == test_user.name
    # Another user's token: operators only.
    p = as_user(test_user, [client("scontrol"), "token", "username=root"], sock_env)
    assert p.returncode == 1 and DENIED in p.stderr, p
    # root may make one for the user; a short one expires.
    p = c.spur("scontrol", "token", f"username={test_user.name}", "lifespan=2", check=True)
    short = p.stdout.strip().split("=", 1)[1]
    r = api_call(c.api(1), 41, b"", cluster_name="test", token=short)
    assert r["code"] == 0
    time.sleep(3.2)
    r = api_call(c.api(1), 41, b"", cluster_name="test", token=short)
    assert (r["code"], r["error"]) == (API_UNAUTHENTICATED, "not authenticated")
    # A token under another cluster's key is refused.
    other = c.tmp / "other.key"
    spurtest.new_key_file(other)
    r = api_call(c.api(1), 41, b"", cluster_name="test",
                 token=spurtest.mint_token(other, "root"))
    assert r["code"] == API_UNAUTHENTICATED


# ---- MUNGE ---------------------------------------------------------------------------------

@pytest.fixture
def munged(tmp_path):
    if shutil.which("munged") is None:
        pytest.skip("munged is not installed (scripts/deps.sh --test installs munge)")
    d = spurtest.short_dir("munge-")
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o600)
    sock = d / "munge.sock"
    log = open(tmp_path / "munged.log", "wb")
    p = subprocess.Popen(["munged", "-F", "-f", f"--socket={sock}", f"--key-file={key}",
                          f"--pid-file={d / 'pid'}", f"--seed-file={d / 'seed'}",
                          f"--log-file={d / 'log'}"], stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        wait_until(lambda: sock.exists(), 10, what="munged's socket")
        yield sock
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


def test_munge_end_to_end(cluster_factory, test_user, munged):
    c = up(cluster_factory, n=1, auth={"munge": "on", "munge_socket": str(munged)})
    env = {"SPUR_CONFIG": str(user_config(c, test_user)), "SPUR_CONTROLLER": c.hosts(),
           "SPUR_MUNGE_SOCKET": str(munged)}
    p = as_user(test_user, [client("sbatch"), "--parsable", "--hold", "--wrap=true"], env)
    assert p.returncode == 0, p.stderr
    jid = int(p.stdout.strip())
    assert job_field(c, jid, "user") == test_user.name
    # A credential is single use: the same one on a second connection is refused.
    cred = subprocess.run(["munge", "-n", f"--socket={munged}", "-s", "spur:test"],
                          capture_output=True, text=True, check=True).stdout.strip()
    mcred = pb_field(10, pb_field(1, cred))
    assert api_call(c.api(1), 41, b"", cluster_name="test", extra=mcred,
                    token=False)["code"] == 0
    r = api_call(c.api(1), 41, b"", cluster_name="test", extra=mcred, token=False)
    assert (r["code"], r["error"]) == (API_UNAUTHENTICATED, "not authenticated")
    # One made for another service (another payload) is refused too.
    cred = subprocess.run(["munge", "-n", f"--socket={munged}", "-s", "slurm"],
                          capture_output=True, text=True, check=True).stdout.strip()
    r = api_call(c.api(1), 41, b"", cluster_name="test", extra=pb_field(10, pb_field(1, cred)),
                 token=False)
    assert r["code"] == API_UNAUTHENTICATED


# ---- cluster members -------------------------------------------------------------------------

def test_replica_with_another_key_is_refused(cluster_factory):
    c = up(cluster_factory, n=3)
    lid = c.leader()
    victim = 3 if lid != 3 else 2
    c.stop(victim)
    other = c.tmp / "wrong.key"
    spurtest.new_key_file(other)
    c.cfgs[victim - 1]["auth"]["key_file"] = str(other)
    c.start(victim)
    s = c.replica(victim)
    wait_until(lambda: "no common cluster key" in s.log(), 15, what="the refusal in its log")
    others = [i for i in (1, 2, 3) if i != victim]
    wait_until(lambda: any("no common cluster key" in c.replica(i).log() for i in others), 15,
               what="the refusal in the others' logs")
    # The two with the right key keep serving writes.
    for k in range(5):
        spurtest.submit(c, f"after-{k}", host=c.hosts(others))
    assert c.leader(among=others) in others
    st = c.status(victim)
    assert st is None or st["leader_id"] == 0 or st["leader_id"] == victim


class FrameProxy(threading.Thread):
    """A TCP proxy in front of a replica's peer listener. It keeps every frame each
    dialler sent (one list per connection) and sends frame number duplicate_at a second
    time, right after the first, on the first connection that gets that far."""

    def __init__(self, listen_port, target_port, duplicate_at=None):
        super().__init__(daemon=True)
        self.target = target_port
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", listen_port))
        self.lsock.listen(8)
        self.conns = []  # per connection: the frames the dialler sent, header included
        self.duplicate_at = duplicate_at
        self.duplicated = threading.Event()
        self.stopped = False

    def run(self):
        self.lsock.settimeout(0.2)
        while not self.stopped:
            try:
                a, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return  # close() closed the listener
            try:
                b = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                a.close()
                continue
            frames = []
            self.conns.append(frames)
            dup = self.duplicate_at
            threading.Thread(target=self.pump_raw, args=(b, a), daemon=True).start()
            threading.Thread(target=self.pump_frames, args=(a, b, frames, dup),
                             daemon=True).start()

    def close(self):
        self.stopped = True
        self.lsock.close()

    @staticmethod
    def pump_raw(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def pump_frames(self, src, dst, frames, dup):
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                buf += data
                while len(buf) >= 4:
                    n = struct.unpack(">I", buf[:4])[0]
                    if len(buf) < 4 + n:
                        break
                    frame, buf = buf[:4 + n], buf[4 + n:]
                    frames.append(frame)
                    dst.sendall(frame)
                    if (dup is not None and len(frames) == dup + 1
                            and not self.duplicated.is_set()):
                        self.duplicated.set()  # once, on the first connection this long
                        dst.sendall(frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def test_replayed_peer_frames_are_refused(tmp_path):
    """Everyone reaches node 2's peer port through a recording proxy (the address the
    cluster knows for node 2 is the proxy's; node 2 listens behind it). A frame sent twice
    on a live connection, and a recorded conversation played again on a new connection,
    are both refused by node 2, which says why; the cluster goes on serving."""
    c = spurtest.Cluster(tmp_path, n=3)
    real = spurtest.free_port()
    c.cfgs[1]["raft"]["listen"] = f"127.0.0.1:{real}"
    # Frame 0 is the chan hello, 1 the proof; 5 is well into the sealed frames.
    proxy = FrameProxy(c.ports[1]["raft"], real, duplicate_at=5)
    proxy.start()
    try:
        c.start_all()
        c.wait_ready()
        c.leader()
        assert proxy.duplicated.wait(20), "no connection through the proxy carried 6 frames"
        s2 = c.replica(2)
        wait_until(lambda: "replayed" in s2.log(), 15, what="node 2 refusing the duplicate")
        # A whole recorded conversation, replayed on a connection of its own.
        recorded = next(f for f in proxy.conns if len(f) >= 4)
        before = s2.log().count("did not prove")
        with socket.create_connection(("127.0.0.1", real), timeout=5) as raw:
            for frame in recorded[:6]:
                try:
                    raw.sendall(frame)
                except OSError:
                    break
            raw.settimeout(5)
            try:
                while raw.recv(65536):
                    pass
            except OSError:
                pass
        wait_until(lambda: s2.log().count("did not prove") > before, 15,
                   what="node 2 refusing the replayed handshake")
        for k in range(3):
            spurtest.submit(c, f"after-replay-{k}")
    finally:
        c.kill_all()
        proxy.close()


def test_agent_with_another_key_is_refused(cluster_factory):
    c = up(cluster_factory, n=1)
    other = c.tmp / "agent-wrong.key"
    spurtest.new_key_file(other)
    cfg = spurtest.agent_config(c.cfgs[0])
    cfg["auth"] = {"key_file": str(other)}
    a = spurtest.Agent(c.tmp, cfg, "cn9")
    try:
        wait_until(lambda: "no common cluster key" in a.log(), 15,
                   what="the agent's refusal in its log")
        wait_until(lambda: "no common cluster key" in c.replica(1).log(), 15,
                   what="the controller's refusal in its log")
        nodes = c.spur("sinfo", "-h", "-N", "-o", "%N", check=True).stdout
        assert "cn9" not in nodes
    finally:
        a.kill()


def test_rolling_key_rotation(cluster_factory):
    """docs/deployment/key-rotation.md, done as an operator would: three replicas and an
    agent on key A go to key B in three rolling restarts (next key B, then B current with
    A next, then B alone), one member at a time. After every restart the cluster takes a
    write and every member is connected; no log ever says "no common cluster key"; the
    agent runs a job at the end; a token signed under A stops working once A is gone."""
    c = up(cluster_factory, n=3)
    key_a = Path(c.cfgs[0]["auth"]["key_file"])
    key_b = spurtest.new_key_file(c.tmp / "next.key")
    id_a, id_b = spurtest.key_id(key_a.read_bytes()), spurtest.key_id(key_b.read_bytes())
    agent = spurtest.Agent(c.tmp, spurtest.agent_config(c.cfgs[0]), "cn1", cpus=1)
    token = {id_a: spurtest.mint_token(key_a, "root"), id_b: spurtest.mint_token(key_b, "root")}

    def nodes(tok):
        p = c.spur("sinfo", "--json", env={"SPUR_JWT": tok})
        return {n["name"]: n["state"] for n in json.loads(p.stdout)["nodes"]} \
            if p.returncode == 0 else {}

    try:
        wait_until(lambda: nodes(token[id_a]).get("cn1") == "idle", 30, interval=0.1,
                   what="cn1 idle")
        writes = 0
        for step, (cur, nxt) in enumerate([(key_a, key_b), (key_b, key_a), (key_b, None)], 1):
            tok = token[id_b] if step == 3 else token[id_a]  # held by everyone throughout
            want = ",".join(spurtest.key_id(k.read_bytes()) for k in (cur, nxt) if k)
            for i in (1, 2, 3):
                c.stop(i)
                c.cfgs[i - 1]["auth"] = {"key_file": str(cur), "next_key_file": str(nxt or "")}
                c.start(i)
                c.wait_ready([i])
                assert f"key_ids={want}" in c.replica(i).log()

                def all_connected():
                    for j in (1, 2, 3):
                        p = c.spur("scontrol", "raft", "status", "--json", host=c.api(j),
                                   env={"SPUR_JWT": tok})
                        if p.returncode != 0:
                            return False
                        st = json.loads(p.stdout)
                        if st["leader_id"] == 0 or not all(m["connected"]
                                                           for m in st["members"]):
                            return False
                    return True
                wait_until(all_connected, 20, interval=0.1,
                           what=f"step {step}, node {i}: a leader and every member connected")
                spurtest.submit(c, f"step{step}-n{i}", env={"SPUR_JWT": tok})
                writes += 1
            cfg = dict(agent.cfg, auth={"key_file": str(cur), "next_key_file": str(nxt or "")})
            agent.cfg = cfg
            spurtest.write_config(agent.cfg_path, **cfg)
            agent.restart(hard=False)
            wait_until(lambda: f"key_ids={want}" in agent.log_path.read_text(errors="replace"), 10,
                       what=f"step {step}: the agent's keys")
            wait_until(lambda: nodes(tok).get("cn1") == "idle", 30, interval=0.1,
                       what=f"step {step}: cn1 back")
        logs = [c.replica(i).log() for i in (1, 2, 3)] + [agent.log()]
        assert not any("no common cluster key" in lg for lg in logs)
        # The agent runs a job under the new key alone.
        p = c.spur("sbatch", "--parsable", "--wrap=true", "-J", "rotated",
                   env={"SPUR_JWT": token[id_b]}, check=True)
        jid = int(p.stdout.strip())

        def state():
            q = c.spur("squeue", "-t", "all", "--json", env={"SPUR_JWT": token[id_b]})
            return {j["job_id"]: j["state"] for j in json.loads(q.stdout)}.get(jid) \
                if q.returncode == 0 else None
        wait_until(lambda: state() == "COMPLETED", 30, interval=0.1, what="the job completed")
        # Every acknowledged write is there.
        q = c.spur("squeue", "-t", "all", "-h", "-o", "%j", env={"SPUR_JWT": token[id_b]},
                   check=True)
        assert len([n for n in q.stdout.split() if n.startswith("step")]) == writes == 9
        # Tokens under the retired key no longer prove anything.
        old = c.spur("squeue", env={"SPUR_JWT": token[id_a]})
        assert old.returncode == 1 and "not authenticated" in old.stderr
    finally:
        agent.kill()
