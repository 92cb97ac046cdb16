"""Configuration truth: what --check-config says is what start-up does (common/cfg.c).

spurctld --check-config, spurctld's own start and the worker (spurctld-raftd) load the file
through the same call with the same rules, the host-name ones included, so a file that
passes the check starts and a file that fails it is refused at start with the same errors.
Every error is reported, each as FILE:LINE: key: reason, and the loader stays fast on
hostile nesting.
"""
import re
import socket
import subprocess
import time

from spurtest import RAFTD, SPURCTLD, free_port

THIS_HOST = socket.gethostname()
PREFIX = "spurctld: invalid configuration: "


def check(path, *extra, timeout=20):
    return subprocess.run([str(SPURCTLD), "--check-config", "-f", str(path), *extra],
                          capture_output=True, text=True, timeout=timeout)


def errors_of_check(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert all(l.startswith(PREFIX) for l in lines), r.stderr
    return [l[len(PREFIX):] for l in lines]


def logfmt_value(line, key):
    m = re.search(key + r'=("(?:[^"\\]|\\.)*"|\S+)', line)
    assert m, f"no {key}= in {line}"
    v = m.group(1)
    if v.startswith('"'):
        v = re.sub(r'\\(.)', lambda x: {"n": "\n"}.get(x.group(1), x.group(1)), v[1:-1])
    return v


def errors_of_log(text, prog):
    """The errors a program logged before exiting 78, in order."""
    return [logfmt_value(l, "error") for l in text.splitlines()
            if f"prog={prog} " in l and 'msg="configuration error"' in l]


def start_refused(path, tmp_path):
    """Start spurctld and the worker on their own with path: both must exit 78 at once."""
    sup = subprocess.run([str(SPURCTLD), "-f", str(path)], capture_output=True, text=True,
                         timeout=20)
    worker = subprocess.run([str(RAFTD), "-f", str(path), "--state-dir",
                             str(tmp_path / "state")], capture_output=True, text=True,
                            timeout=20)
    assert sup.returncode == 78, sup.stderr
    assert worker.returncode == 78, worker.stderr
    assert 'msg="invalid configuration; exiting 78"' in sup.stderr
    assert 'msg="invalid configuration; exiting 78"' in worker.stderr
    assert not (tmp_path / "state").exists(), "the worker went on past its configuration"
    return errors_of_log(sup.stderr, "spurctld"), errors_of_log(worker.stderr,
                                                                "spurctld-raftd")


def other_host():
    """A host name that is surely not this one."""
    return "not-" + THIS_HOST.split(".")[0] + "-x"


def three_peers(ports, node_id=None, peer_hosts=None):
    hosts = peer_hosts or ["ctl1.example.org", "ctl2.example.org", "ctl3.example.org"]
    lines = ["cluster_name: t", "controller:",
             f'  listen: "127.0.0.1:{ports[0]}"',
             f'  peers: [{", ".join(chr(34) + h + ":6821" + chr(34) for h in hosts)}]']
    if node_id is not None:
        lines.append(f"  node_id: {node_id}")
    lines += ["health:", "  bind: loopback", f"  port: {ports[1]}",
              "metrics:", f"  port: {ports[2]}"]
    return "\n".join(lines) + "\n"


def test_node_id_that_cannot_be_derived_is_refused_by_check_and_start(tmp_path):
    f = tmp_path / "spur.yaml"
    ports = [free_port() for _ in range(3)]
    f.write_text(three_peers(ports))
    r = check(f)
    assert r.returncode == 78
    errs = errors_of_check(r)
    assert len(errs) == 1
    assert errs[0].startswith(f"{f}:4: controller.node_id: 0 takes the id from the host name")
    assert f'host "{THIS_HOST[:64]}" is none of the 3 controller.peers' in errs[0]
    # As the replica on ctl2 would see it: valid, and the effective node_id stays 0.
    ok = check(f, "--hostname", "ctl2")
    assert ok.returncode == 0, ok.stderr
    assert "node_id: 0" in ok.stdout
    bad = check(f, "--hostname", other_host())
    assert bad.returncode == 78 and "is none of the 3" in bad.stderr
    # Start-up refuses it with the very same message, before the worker touches state.
    sup_errs, worker_errs = start_refused(f, tmp_path)
    assert sup_errs == errs
    assert worker_errs == errs


def test_a_host_that_matches_two_peers_is_refused(tmp_path):
    f = tmp_path / "spur.yaml"
    ports = [free_port() for _ in range(3)]
    f.write_text(three_peers(ports, peer_hosts=["db.a", "db.b", "c"]))
    r = check(f, "--hostname", "db")
    assert r.returncode == 78
    assert "matches both controller.peers[0] and [1]" in r.stderr


def test_start_up_rules_are_all_reported_at_once(tmp_path):
    """Two peers, one of them this replica twice, on the port of its client listener;
    an unknown key, a wrong type; every one named with its line, the file's order first."""
    client, health, metrics = free_port(), free_port(), free_port()
    f = tmp_path / "spur.yaml"
    f.write_text(
        "cluster_name: t\n"                                       # 1
        "controller:\n"                                           # 2
        f'  listen: "127.0.0.1:{client}"\n'                       # 3
        "  node_id: 1\n"                                          # 4
        f'  peers: ["127.0.0.1:{client}", "127.000.0.1:{client}"]\n'  # 5
        "  colour: red\n"                                         # 6
        "raft:\n"                                                 # 7
        '  heartbeat_ms: "100"\n'                                 # 8
        f"  listen: \"[::]:{health}\"\n"                          # 9
        "health:\n"                                               # 10
        "  bind: loopback\n"                                      # 11
        f"  port: {health}\n"                                     # 12
        "metrics:\n"                                              # 13
        f"  port: {metrics}\n")                                   # 14
    r = check(f)
    assert r.returncode == 78
    errs = errors_of_check(r)
    expect = [
        f"{f}:6: controller.colour: unknown key",
        f'{f}:8: raft.heartbeat_ms: expected an integer, got the string "100"',
        f"{f}:9: raft.listen: port {health} is also health.port",
        f"{f}:5: controller.peers: 2 peers make a cluster that stops when either",
        f"{f}:5: controller.peers[0]: \"127.0.0.1:{client}\" is this replica (node 1), but "
        f"port {client} is the port of controller.listen here",
    ]
    # 127.000.0.1 is no IPv4 literal to inet_pton, so it is a (different) host name: the
    # duplicate rule does not fire on it, which keeps this list exact.
    assert len(errs) == len(expect), "\n".join(errs)
    for got, want in zip(errs, expect):
        assert got.startswith(want), f"\n{got}\nwant\n{want}"
    sup_errs, worker_errs = start_refused(f, tmp_path)
    assert sup_errs == errs and worker_errs == errs


def test_duplicate_peers_spelt_differently_are_refused(tmp_path):
    f = tmp_path / "spur.yaml"
    f.write_text('controller:\n  node_id: 1\n'
                 '  peers: ["CTL1.example.org:6821", "[::1]:6821", "ctl1.example.org:6821",\n'
                 '          "[0:0::1]:6821", "e:6821"]\n')
    r = check(f)
    assert r.returncode == 78
    errs = errors_of_check(r)
    assert len(errs) == 2, errs
    assert errs[0].startswith(f"{f}:3: controller.peers[2]: \"ctl1.example.org:6821\" is the "
                              f"same replica as controller.peers[0]")
    assert errs[1].startswith(f"{f}:4: controller.peers[3]: \"[0:0::1]:6821\" is the same "
                              f"replica as controller.peers[1]")


def test_a_valid_file_passes_check_and_starts(sups, tmp_path):
    """The other direction: what the check accepts, start-up runs (ready on its probe)."""
    cfg = sups.config()
    from spurtest import write_config
    path = write_config(tmp_path / "ok.yaml", **cfg)
    r = check(path)
    assert r.returncode == 0, r.stderr
    s = sups.start(cfg)
    s.wait_ready(timeout=20)


def test_deep_nesting_is_refused_promptly_with_file_and_line(tmp_path):
    """100,000 levels in a 200 kB file: the old loader needed minutes (quadratic)."""
    f = tmp_path / "deep.yaml"
    f.write_text("cluster_name: t\npartitions: " + "[" * 100000 + "]" * 100000 + "\n")
    t0 = time.monotonic()
    r = check(f)
    took = time.monotonic() - t0
    assert r.returncode == 78
    (err,) = errors_of_check(r)
    assert err.startswith(f"{f}:2: (file): lists and mappings nest deeper than 32 levels")
    assert took < 5, f"--check-config took {took:.1f}s"
    # Block nesting, one level per line: the line of the first level too deep.
    g = tmp_path / "block.yaml"
    g.write_text("".join(f"{' ' * i}k{i}:\n" for i in range(40)) + " " * 40 + "1\n")
    r = check(g)
    assert r.returncode == 78
    assert errors_of_check(r)[0].startswith(f"{g}:33: (file): ")


def test_too_many_nodes_and_too_large_files_name_a_line(tmp_path):
    f = tmp_path / "wide.yaml"
    f.write_text("a: [" + "1," * 30000 + "]\n")
    r = check(f)
    assert r.returncode == 78
    (err,) = errors_of_check(r)
    assert re.match(re.escape(str(f)) + r":1: \(file\): holds more than 20000 YAML nodes", err)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (1 << 20) + "\n")
    r = check(big)
    assert r.returncode == 78
    (err,) = errors_of_check(r)
    assert err == f"{big}:1: (file): file is larger than 1048576 bytes (1 MiB)"


def test_error_list_is_capped_and_says_so(tmp_path):
    f = tmp_path / "many.yaml"
    f.write_text("".join(f"bogus{i}: 1\n" for i in range(30)))
    r = check(f)
    assert r.returncode == 78
    lines = errors_of_check(r)
    assert len(lines) == 17
    assert lines[0] == f"{f}:1: bogus0: unknown key"
    assert lines[15] == f"{f}:16: bogus15: unknown key"
    assert lines[16].startswith("and more errors")


def test_hostname_option_needs_check_config(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text("")
    r = subprocess.run([str(SPURCTLD), "-f", str(f), "--hostname", "x"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 64 and "--hostname only goes with --check-config" in r.stderr
    r = check(f, "--hostname", "")
    assert r.returncode == 64
