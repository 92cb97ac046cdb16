"""Log lines stay one event each, whatever outsiders send, and name the replica.

Values that come from outside (cluster names, user names, job names, addresses, error
strings) go through log_q() in the programs; log_event() also escapes control characters
of whatever it is given. These tests feed hostile names to a real replica through every
door a client has, then parse every line the supervisor, the responder and the worker
wrote with a strict logfmt reader: each line must parse, no key may repeat, no forged key
may appear, and every line after the configuration is loaded carries node=N.
"""
import re
import socket
import struct

import pytest

import spurtest
from spurtest import wait_until

HOSTILE = [
    'evil" level=error msg="forged" forged=1',
    "two\nts=2026-01-01T00:00:00.000Z level=error comp=sup msg=\"forged\" forged=1",
    "tab\there\r\x1b[31mred=1",
    "back\\slash\" forged=1",
]

TOKEN = re.compile(r'([A-Za-z_][A-Za-z0-9_.]*)=("(?:[^"\\]|\\.)*"|[^\s"]*)(?:\s+|$)')


def parse_logfmt(line):
    """A line as a dict; raises ValueError if any part of it is not key=value."""
    pos, out = 0, {}
    while pos < len(line):
        m = TOKEN.match(line, pos)
        if m is None:
            raise ValueError(f"unparsable at {pos}: {line[pos:pos + 40]!r} in {line!r}")
        key = m.group(1)
        if key in out:
            raise ValueError(f"key {key} twice in {line!r}")
        out[key] = m.group(2)
        pos = m.end()
    for k in ("ts", "level", "comp", "msg"):
        if k not in out:
            raise ValueError(f"no {k}= in {line!r}")
    return out


def test_parser_rejects_what_it_must():
    # The reader itself must be strict, or the test below could not fail.
    assert parse_logfmt('ts=1 level=info comp=x msg="a \\"b\\"" k=v')["k"] == "v"
    for bad in ['ts=1 level=info comp=x msg="open', 'ts=1 level=info comp=x msg="a" "x"',
                'ts=1 level=info comp=x msg="a" k=1 k=2', 'level=info comp=x msg="a"']:
        with pytest.raises(ValueError):
            parse_logfmt(bad)


def hostile_traffic(api_addr, cluster_name):
    """Send each hostile value through the client API in every field a client controls."""
    answers = []
    for h in HOSTILE:
        # Another cluster's name (refused, and logged as refused).
        answers.append(spurtest.api_call(api_addr, spurtest.OP_PING, cluster_name=h))
        # A protocol version from the future, with a hostile user name.
        answers.append(spurtest.api_call(api_addr, spurtest.OP_PING, cluster_name=cluster_name,
                                         protocol_version=99, user=h))
        # A job whose name, user and script are hostile (refused or accepted: either is fine).
        answers.append(spurtest.api_call(
            api_addr, spurtest.OP_SUBMIT_JOB,
            spurtest.job_spec("#!/bin/sh\necho '" + h.replace("'", "") + "'\n", name=h),
            cluster_name=cluster_name, user=h))
        # A job without #! (refused by the server with its reason).
        answers.append(spurtest.api_call(api_addr, spurtest.OP_SUBMIT_JOB,
                                         spurtest.job_spec("echo " + h, name=h),
                                         cluster_name=cluster_name, user=h))
    # Garbage frames: an oversized length and an undecodable body.
    host, port = api_addr.rsplit(":", 1)
    for payload in (struct.pack(">I", 0x7FFFFFFF) + b"x" * 16,
                    struct.pack(">I", 12) + b"\xff" * 12):
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(payload)
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except OSError:
                pass
    return answers


def check_lines(text, node_id):
    lines = [l for l in text.splitlines() if l.strip()]
    assert lines, "no log lines"
    tagged_from = None
    for i, line in enumerate(lines):
        kv = parse_logfmt(line)
        assert "forged" not in kv, line
        assert "red" not in kv, line
        if tagged_from is None and kv.get("node") is not None:
            tagged_from = i
        if tagged_from is not None:
            assert kv.get("node") == str(node_id), f"line without node={node_id}: {line}"
    assert tagged_from is not None, "no line carries node="
    # Only the lines before the configuration was read may lack the tag: the first line
    # of each program ("starting") already has it.
    untagged = [l for l in lines[:tagged_from]]
    assert not untagged, untagged
    return lines


def test_hostile_names_cannot_break_or_forge_log_lines(tmp_path):
    sup = spurtest.Supervisor(tmp_path)
    try:
        sup.wait_ready()
        api = sup.cfg["controller"]["listen"]
        answers = hostile_traffic(api, sup.cfg["cluster_name"])
        assert any(a["code"] != spurtest.API_OK for a in answers), answers
        # The replica is still up and serving after all of it.
        r = spurtest.api_call(api, spurtest.OP_PING, cluster_name=sup.cfg["cluster_name"])
        assert r["code"] == spurtest.API_OK, r
        sup.signal(15)
        assert sup.wait_exit(15) == 0
    finally:
        sup.kill()
    lines = check_lines(sup.log(), 1)
    progs = {parse_logfmt(l).get("prog") for l in lines}
    assert {"spurctld", "spurctld-raftd"} <= progs, progs
    # The refusals were logged, each as one parsable line with the name quoted inside.
    refused = [l for l in lines if "refused" in parse_logfmt(l)["msg"]]
    assert refused, "no refusal was logged"


def test_every_line_of_a_cluster_names_its_replica(tmp_path):
    c = spurtest.Cluster(tmp_path, n=3).start_all()
    try:
        c.leader()
        p = c.spur("sbatch", "--wrap", "true", "-J", HOSTILE[0])
        assert p.returncode == 0, p.stderr
        for i in range(1, 4):
            c.replica(i).signal(15)
        for i in range(1, 4):
            assert c.replica(i).wait_exit(20) == 0
    finally:
        for i in range(1, 4):
            if c.replica(i) is not None:
                c.replica(i).kill()
    for i in range(1, 4):
        check_lines(c.replica(i).log(), i)


def test_libevent_messages_are_logfmt_lines(tmp_path):
    # evdns (libevent) reports a nameserver that fails on its own; it used to print raw
    # "[msg] Nameserver ... has failed" lines on stderr. A replica whose peer is a name,
    # in a private mount and network namespace whose resolv.conf names a nameserver where
    # nothing listens: evdns's lines must be ours, comp=libevent, with node=1.
    import os
    import select
    import shutil
    import subprocess
    import time

    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip")
    why = spurtest.netns_skip_reason()
    if why:
        pytest.skip(why)
    (tmp_path / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    ports = [spurtest.free_port() for _ in range(5)]
    spurtest.write_config(
        tmp_path / "spur.yaml",
        cluster_name="evtest",
        controller={"listen": f"127.0.0.1:{ports[0]}", "state_dir": str(tmp_path / "state"),
                    "node_id": 1, "hosts": [f"127.0.0.1:{ports[0]}"],
                    "peers": [f"127.0.0.1:{ports[1]}", f"nosuch.invalid.test:{ports[2]}",
                              f"127.0.0.1:{ports[3]}"]},
        raft={"listen": f"127.0.0.1:{ports[1]}"},
        health={"enabled": True, "bind": "loopback", "port": ports[4]},
        metrics={"enabled": False},
    )
    script = (f"ip link set lo up && mount --bind {tmp_path / 'resolv.conf'} /etc/resolv.conf"
              f" && exec {spurtest.BUILD / 'supervisor' / 'spurctld'} -f {tmp_path / 'spur.yaml'}")
    p = subprocess.Popen(["unshare", "-m", "--net", "sh", "-c", script],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    buf = b""
    try:
        # Bounded: read what is there for at most 20 s, never block on a silent replica.
        while time.monotonic() < deadline:
            ready, _, _ = select.select([p.stdout], [], [], 0.2)
            if not ready:
                continue
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            if b"comp=libevent" in buf and b"has failed" in buf:
                break
    finally:
        p.terminate()
        try:
            rest, _ = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            rest, _ = p.communicate()
        buf += rest or b""
    text = buf.decode("utf-8", "replace")
    lines = check_lines(text, 1)
    evdns = [parse_logfmt(l) for l in lines if "comp=libevent" in l]
    assert evdns, text
    assert any("Nameserver 127.0.0.1:53 has failed" in kv["msg"] for kv in evdns), text
    assert all(kv["node"] == "1" and kv["prog"] == "spurctld-raftd" for kv in evdns), evdns
    assert "[msg]" not in text and "[warn]" not in text, text
