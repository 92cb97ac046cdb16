"""The supervisor process pair (issue 2): spurctld, its health responder, exit 70.

Every test runs the real spurctld on 127.0.0.1 with either the real worker or the test
worker (tests/fixtures/testworker.c), which speaks the status protocol and misbehaves on
command. Faults are real: real SIGSEGV, real SIGKILL, real SIGSTOP.
"""
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from spurtest import (RAFTD, SPURCTLD, TESTWORKER, KeepAliveClient, Poller, children_of,
                      free_port, http_get, is_gone, lock_is_free, port_is_free, proc_state,
                      recv_until_closed, wait_until)

LINGER_MS = 800  # supervisor.exit_linger_ms: time to read the probes before exit


def tw_sup(sups, env=None, linger=LINGER_MS, **over):
    cfg = sups.config(**over)
    cfg["supervisor"]["exit_linger_ms"] = linger
    env = dict(env or {})
    # Under AddressSanitizer the test worker must die of its SIGSEGV like a plain build,
    # not be turned into "exit 1" by ASan's own handler.
    env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":allow_user_segv_handler=1"
    return sups.start(cfg, worker=TESTWORKER, env=env)


def wait_word(sup, route, code, word, timeout=3.0):
    def check():
        try:
            st, body = sup.get(route)
        except OSError:
            return False
        return (st, body.strip()) == (code, word)
    wait_until(check, timeout, interval=0.002, what=f"{route} -> {code} {word}")


def wait_dead(pid, timeout=5.0):
    """Block until the pid is a zombie or gone; return the monotonic time seen."""
    wait_until(lambda: is_gone(pid), timeout, interval=0.0002, what=f"pid {pid} to die")
    return time.monotonic()


def warm_poller(sup, samples):
    """A Poller on sup's /readyz, started, once it holds more than samples answers."""
    poller = Poller(sup.health_port, "/readyz")
    poller.start()
    wait_until(lambda: len(poller.samples) > samples, 5, what="poller warm-up")
    return poller


def assert_no_200_after(poller, t_fault, slack=0.0):
    late = [s for s in poller.samples if s[0] > t_fault + slack and s[2] == 200]
    assert not late, f"{len(late)} x 200 after the fault, first: {late[0]}"


# Each fault: how to trigger it, the word both probes must give, what the last log
# line must name.
FAULTS = {
    "sigsegv": ("segv", "dead", r"killed by SIGSEGV"),
    "sigabrt": ("abort", "dead", r"killed by SIGABRT"),
    "sigkill": (None, "dead", r"killed by SIGKILL"),
    "exit1": ("exit:1", "dead", r"exited with code 1"),
    "exit0": ("exit:0", "dead", r"exited with code 0 without being asked to stop"),
    "fd3closed": ("close-fd3", "dead", r"closed its status pipe"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_worker_fault_makes_probes_fail_and_exit_70(sups, fault):
    action, word, cause = FAULTS[fault]
    sup = tw_sup(sups, env={"TW_ACTION": action or "run", "TW_WHEN": "signal"})
    sup.wait_ready()
    wpid = sup.worker_pid()
    assert sup.probe() == ((200, "ok\n"), (200, "ok\n"))

    poller = warm_poller(sup, 20)
    if action is None:
        os.kill(wpid, signal.SIGKILL)
    else:
        os.kill(wpid, signal.SIGUSR2)

    if fault == "fd3closed":
        # The worker lives on; only the pipe closed. The supervisor must notice the EOF.
        wait_until(lambda: not os.path.exists(f"/proc/{wpid}/fd/3"), 5, interval=0.0005)
        t_fault = time.monotonic()
        slack = 0.05  # EOF reaches the supervisor asynchronously
    else:
        t_fault = wait_dead(wpid)
        slack = 0.0

    wait_word(sup, "/healthz", 503, word)
    wait_word(sup, "/readyz", 503, word)
    code = sup.wait_exit(10)
    poller.stop()
    assert code == 70, sup.log()
    assert_no_200_after(poller, t_fault, slack)
    assert any(s[2] == 503 for s in poller.samples if s[0] > t_fault + slack)
    last = sup.last_sup_line()
    assert "exit=70" in last and re.search(cause, last), last


def test_sigstop_stalls_then_killed_after_kill_timeout(sups):
    sup = tw_sup(sups)
    sup.wait_ready()
    wpid = sup.worker_pid()
    poller = warm_poller(sup, 20)
    t_stop = time.monotonic()
    os.kill(wpid, signal.SIGSTOP)
    stall_s = sup.cfg["supervisor"]["stall_timeout_ms"] / 1000
    kill_s = sup.cfg["supervisor"]["kill_timeout_ms"] / 1000

    wait_word(sup, "/healthz", 503, "stalled", timeout=stall_s + 2)
    wait_word(sup, "/readyz", 503, "stalled", timeout=1)
    t_stalled = time.monotonic()
    assert t_stalled - t_stop >= stall_s * 0.9
    code = sup.wait_exit(kill_s + 5)
    t_exit = time.monotonic()
    poller.stop()
    assert code == 70
    # Killed no earlier than kill_timeout_ms after the last frame.
    assert t_exit - t_stop >= kill_s * 0.9, (t_exit - t_stop, kill_s)
    assert_no_200_after(poller, t_stop + stall_s)
    last = sup.last_sup_line()
    assert "exit=70" in last and "stalled" in last, last
    assert "SIGABRT" in sup.log()


def _freeze(pids, sig):
    for p in pids:
        os.kill(p, sig)


def _start_and_freeze_the_whole_replica(sups):
    """A ready supervisor with the real worker, then a VM freeze: SIGSTOP of supervisor,
    responder and worker together, and a wait until all three are stopped. Returns (sup,
    worker pid, responder pid); the caller thaws them, in the order its test is about."""
    sup = sups.start(sups.config())
    sup.wait_ready()
    wpid, rpid = sup.worker_pid(), sup.responder_pid()
    group = [sup.pid, rpid, wpid]
    _freeze(group, signal.SIGSTOP)
    try:
        wait_until(lambda: all(proc_state(p) == "T" for p in group), 2, what="all stopped")
    except BaseException:
        _freeze(group, signal.SIGCONT)
        raise
    return sup, wpid, rpid


def test_whole_replica_pause_longer_than_kill_timeout_does_not_kill_the_worker(sups):
    # A VM freeze, as SIGSTOP of supervisor, responder and the real worker together, for
    # longer than kill_timeout_ms plus the second from SIGABRT to SIGKILL. The supervisor
    # must see that it was frozen itself and not kill a worker that was frozen with it.
    sup, wpid, rpid = _start_and_freeze_the_whole_replica(sups)
    kill_s = sup.cfg["supervisor"]["kill_timeout_ms"] / 1000
    try:
        time.sleep(kill_s + 1.2)
    finally:
        # Supervisor and responder first; the worker a moment later, so the supervisor's
        # first tick after the pause sees no fresh frame yet: the worst order for it.
        _freeze([sup.pid, rpid], signal.SIGCONT)
        time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):  # gone if it was killed meanwhile
            os.kill(wpid, signal.SIGCONT)
    t_cont = time.monotonic()
    poller = Poller(sup.health_port, "/readyz")
    poller.start()
    time.sleep(kill_s + 1.0)  # past any kill the old clock would have ordered
    poller.stop()
    assert sup.proc.poll() is None, sup.log()
    assert proc_state(wpid) not in (None, "Z", "T"), "the worker was killed or left stopped"
    assert sup.worker_pid() == wpid
    log = sup.log()
    assert "SIGABRT" not in log and "stalled" not in log, log
    assert "supervisor was not running; the pause does not count" in log, log
    assert sup.get("/readyz") == (200, "ok\n")
    # Once the supervisor has run again, the responder's view is not "stalled" either.
    late = [x for x in poller.samples if x[0] > t_cont + 0.3]
    assert late and all(x[2] == 200 for x in late), [x for x in late if x[2] != 200][:3]


def test_responder_thawed_first_does_not_report_the_freeze_as_a_stall(sups):
    # The responder applies the pause rule to itself: thawed before the supervisor has
    # run (so the shared page still holds the frame time from before the freeze), its
    # first answer must not be "stalled". Before the rule it was.
    sup, wpid, rpid = _start_and_freeze_the_whole_replica(sups)
    stall_s = sup.cfg["supervisor"]["stall_timeout_ms"] / 1000
    try:
        time.sleep(stall_s + 0.5)
        os.kill(rpid, signal.SIGCONT)
        first = sup.get("/readyz")
        health = sup.get("/healthz")
    finally:
        _freeze([sup.pid, rpid, wpid], signal.SIGCONT)
    assert first == (200, "ok\n"), first
    assert health == (200, "ok\n"), health
    sup.wait_ready(5)
    assert sup.proc.poll() is None, sup.log()


def test_worker_stopped_alone_while_the_supervisor_runs_is_still_killed(sups):
    # The counterpart of the pause rule: the supervisor ran all along, so the stop counts.
    sup = sups.start(sups.config())
    sup.wait_ready()
    wpid = sup.worker_pid()
    kill_s = sup.cfg["supervisor"]["kill_timeout_ms"] / 1000
    t_stop = time.monotonic()
    os.kill(wpid, signal.SIGSTOP)
    assert sup.wait_exit(kill_s + 5) == 70
    assert time.monotonic() - t_stop >= kill_s * 0.9
    assert "supervisor was not running" not in sup.log()
    last = sup.last_sup_line()
    assert "exit=70" in last and "stalled" in last, last


def test_ctrl_c_to_the_process_group_stops_without_losing_the_responder(sups):
    # A terminal's Ctrl-C signals the whole foreground process group. The responder must
    # not die of it: during the shutdown it is what answers "stopping". The worker here
    # ignores SIGINT, so the shutdown lasts the whole grace period.
    sup = tw_sup(sups, env={"TW_IGNORE_TERM": "1"}, linger=0,
                 supervisor={"shutdown_grace_ms": 1500})
    sup.wait_ready()
    rpid = sup.responder_pid()
    os.killpg(os.getpgid(sup.pid), signal.SIGINT)
    wait_word(sup, "/readyz", 503, "stopping", timeout=0.5)
    time.sleep(0.5)
    assert sup.get("/readyz") == (503, "stopping\n")
    assert proc_state(rpid) not in (None, "Z") and sup.responder_pid() == rpid
    assert sup.wait_exit(10) == 70  # the worker had to be killed after the grace period
    assert "health responder died" not in sup.log(), sup.log()
    assert "did not stop within shutdown_grace_ms" in sup.last_sup_line()


def test_timeout_signalling_its_group_gives_a_clean_stop(sups):
    # `timeout` sends its signal to the command and then to its whole process group.
    if shutil.which("timeout") is None:
        pytest.skip("needs coreutils timeout")
    sup = sups.start(sups.config(), wrapper=["timeout", "--preserve-status", "-s", "TERM", "3"])
    wait_until(lambda: children_of(sup.pid), 5, what="spurctld under timeout")
    sup.wait_ready()
    assert sup.wait_exit(15) == 0, sup.log()
    log = sup.log()
    assert "health responder died" not in log, log
    assert "shutdown by SIGTERM" in sup.last_sup_line()


def test_grandchild_holding_the_pipe_does_not_hide_the_death(sups, tmp_path):
    gpf = tmp_path / "grandchild.pid"
    sup = tw_sup(sups, env={"TW_GRANDCHILD": "1", "TW_GRANDCHILD_PIDFILE": str(gpf)})
    sup.wait_ready()
    wpid = sup.worker_pid()
    gpid = int(wait_until(lambda: gpf.exists() and gpf.read_text().strip(), 5))
    assert os.path.exists(f"/proc/{gpid}/fd/3"), "the grandchild should hold the pipe"
    poller = warm_poller(sup, 20)
    os.kill(wpid, signal.SIGKILL)
    t_fault = wait_dead(wpid)
    wait_word(sup, "/readyz", 503, "dead", timeout=1.0)
    t_seen = time.monotonic()
    assert t_seen - t_fault < 0.5, "detection must not wait for the pipe"
    assert sup.wait_exit(10) == 70
    poller.stop()
    assert_no_200_after(poller, t_fault)
    assert "killed by SIGKILL" in sup.last_sup_line()
    wait_until(lambda: is_gone(gpid), 3, what="grandchild killed")


def test_bad_config_exits_78_naming_file_and_line(sups, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster_name: x\nsupervisor:\n  heartbeat_ms: 100\n  stall_timout_ms: 5\n")
    p = subprocess.run([str(SPURCTLD), "-f", str(bad)], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 78
    assert f"{bad}:4: supervisor.stall_timout_ms: unknown key" in p.stderr
    p = subprocess.run([str(SPURCTLD), "-f", str(bad), "--check-config"], capture_output=True,
                       text=True, timeout=10)
    assert p.returncode == 78 and f"{bad}:4:" in p.stderr
    bad.write_text("health:\n  port: 'x'\n")
    p = subprocess.run([str(SPURCTLD), "-f", str(bad)], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 78 and f"{bad}:2: health.port:" in p.stderr


@pytest.mark.parametrize("code", [64, 65, 73, 78])
def test_worker_startup_failure_code_passes_through(sups, code):
    # Bad command line, corrupt state, locked state dir, bad config: a restart cannot help.
    sup = tw_sup(sups, env={"TW_ACTION": f"exit:{code}", "TW_WHEN": "start"}, linger=0)
    assert sup.wait_exit(10) == code
    last = sup.last_sup_line()
    assert f"exit={code}" in last and "passing the code through" in last, last
    assert f"exited with code {code}" in last, last


@pytest.mark.parametrize("code", [70, 71, 66, 77, 1])
def test_worker_startup_failure_that_a_restart_may_cure_exits_70(sups, code):
    # 70 (internal) and 71 (an OS failure such as a port still in use) may be cured by a
    # restart; codes outside the contract's four are not passed through either.
    sup = tw_sup(sups, env={"TW_ACTION": f"exit:{code}", "TW_WHEN": "start"}, linger=0)
    assert sup.wait_exit(10) == 70
    last = sup.last_sup_line()
    assert "exit=70" in last and "passing the code through" not in last, last
    assert f"worker failed during start-up: exited with code {code}" in last, last
    assert "a restart may help" in last, last


def test_exit_after_running_is_70_even_with_a_config_code(sups):
    sup = tw_sup(sups, env={"TW_ACTION": "exit:78", "TW_WHEN": "running"}, linger=0)
    assert sup.wait_exit(10) == 70
    assert "exited with code 78" in sup.last_sup_line()


def test_state_dir_locked_exits_73_naming_the_holder(sups, tmp_path):
    cfg = sups.config()
    holder_cfg = tmp_path / "holder.yaml"
    import yaml
    holder_cfg.write_text(yaml.safe_dump(cfg))
    holder = subprocess.Popen([str(RAFTD), "-f", str(holder_cfg)], stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        lock = os.path.join(cfg["controller"]["state_dir"], "LOCK")
        wait_until(lambda: os.path.exists(lock) and not lock_is_free(lock), 5)
        sup = sups.start(cfg)
        assert sup.wait_exit(10) == 73
        last = sup.last_sup_line()
        assert f"locked by pid {holder.pid}" in sup.log(), sup.log()
        assert "exit=73" in last
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(5)


def test_worker_inherits_only_fds_0_to_3_and_clean_signals(sups, tmp_path):
    fdlog = tmp_path / "fds"
    sup = tw_sup(sups, env={"TW_FDLOG": str(fdlog)})
    sup.wait_ready()
    text = fdlog.read_text()
    fds = sorted(int(m) for m in re.findall(r"^fd (\d+)$", text, re.M))
    assert fds == [0, 1, 2, 3], text
    blk = re.search(r"SigBlk:\s*([0-9a-f]+)", text).group(1)
    ign = re.search(r"SigIgn:\s*([0-9a-f]+)", text).group(1)
    assert int(blk, 16) == 0, f"worker starts with blocked signals: {blk}"
    # The supervisor gives the worker the dispositions it inherited itself (sup.c,
    # child_restore_signals): none ignored, unless the test run itself ignores some
    # (under nohup, SIGHUP), which Popen passes on (it resets only SIGPIPE and SIGXFSZ).
    with open("/proc/self/status") as f:
        ours = int(re.search(r"SigIgn:\s*([0-9a-f]+)", f.read()).group(1), 16)
    inherited = ours & ~((1 << (signal.SIGPIPE - 1)) | (1 << (signal.SIGXFSZ - 1)))
    assert int(ign, 16) == inherited, \
        f"worker starts with ignored signals {ign}, inherited {inherited:016x}"


def test_signals_are_forwarded(sups, tmp_path):
    siglog = tmp_path / "sigs"
    sup = tw_sup(sups, env={"TW_SIGLOG": str(siglog)})
    sup.wait_ready()
    for sig in (signal.SIGHUP, signal.SIGUSR1):
        sup.signal(sig)
    wait_until(lambda: siglog.exists() and
               {"SIGHUP", "SIGUSR1"} <= set(siglog.read_text().split()), 5)
    assert sup.proc.poll() is None


def test_sigterm_readiness_off_first_then_worker_stops_exit_0(sups, tmp_path):
    siglog = tmp_path / "sigs"
    # The worker takes 300 ms to stop, so "stopping" can be seen in between.
    sup = tw_sup(sups, env={"TW_SIGLOG": str(siglog), "TW_IGNORE_TERM": "1"},
                 supervisor={"shutdown_grace_ms": 3000})
    sup.wait_ready()
    client = KeepAliveClient(sup.health_port)
    assert client.get("/readyz") == (200, "ok\n")
    sup.signal(signal.SIGTERM)
    wait_word(sup, "/readyz", 503, "stopping", timeout=0.5)
    assert sup.get("/healthz") == (200, "ok\n")
    assert sup.proc.poll() is None


def test_sigterm_clean_exit_0_with_real_worker(sups):
    sup = sups.start(sups.config())
    sup.wait_ready()
    wpid = sup.worker_pid()
    poller = warm_poller(sup, 10)
    t_term = time.monotonic()
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(10) == 0
    # A sole voter has nobody to hand leadership to: it must not wait for a transfer.
    assert time.monotonic() - t_term < 1.5
    poller.stop()
    # Once readiness is off it never comes back, and it went off promptly.
    first_off = next(s for s in poller.samples if s[2] != 200)
    assert first_off[3] == "stopping", first_off
    assert first_off[0] - t_term < 0.5
    assert_no_200_after(poller, first_off[0])
    assert is_gone(wpid)
    last = sup.last_sup_line()
    assert "exit=0" in last and "shutdown by SIGTERM" in last, last
    assert 'msg="stopping" signal=SIGTERM' in sup.log()


def test_sigterm_ignored_worker_is_killed_after_grace(sups):
    sup = tw_sup(sups, env={"TW_IGNORE_TERM": "1"}, linger=0,
                 supervisor={"shutdown_grace_ms": 700})
    sup.wait_ready()
    t0 = time.monotonic()
    sup.signal(signal.SIGTERM)
    wait_word(sup, "/readyz", 503, "stopping", timeout=0.5)
    code = sup.wait_exit(10)
    elapsed = time.monotonic() - t0
    assert code == 70
    assert 0.6 <= elapsed < 5, elapsed
    assert "did not stop within shutdown_grace_ms" in sup.last_sup_line()


def test_kill_9_of_supervisor_takes_everything_down(sups):
    cfg = sups.config()
    sup = sups.start(cfg)
    sup.wait_ready()
    wpid = sup.worker_pid()
    rpid = sup.responder_pid()
    os.kill(sup.pid, signal.SIGKILL)
    sup.proc.wait(5)
    t0 = time.monotonic()
    wait_until(lambda: is_gone(wpid) and is_gone(rpid), 1.0, what="worker and responder gone")
    assert time.monotonic() - t0 <= 1.0
    lock = os.path.join(cfg["controller"]["state_dir"], "LOCK")
    wait_until(lambda: lock_is_free(lock), 1.0, what="state-dir lock released")
    wait_until(lambda: port_is_free(sup.health_port), 1.0, what="health port free")


def test_health_disabled_runs_no_listener(sups):
    cfg = sups.config(health={"enabled": False})
    sup = sups.start(cfg)
    wait_until(lambda: "worker status" in sup.log() and "phase=running" in sup.log(), 5)
    with pytest.raises(OSError):
        http_get(cfg["health"]["port"], "/readyz", timeout=0.5)
    assert "health listener disabled" in sup.log()
    assert not [c for c in children_of(sup.pid) if open(f"/proc/{c}/comm").read().strip()
                == "spurctld-health"]
    assert sup.proc.poll() is None


def test_health_port_in_use_exits_71_naming_the_address(sups):
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        sup = sups.start(sups.config(health={"bind": "127.0.0.1", "port": port}))
        assert sup.wait_exit(10) == 71
        assert f"127.0.0.1:{port}: bind: Address already in use" in sup.log()
    finally:
        busy.close()


def test_default_bind_is_all_interfaces_dual_stack(sups):
    port = free_port()
    sup = sups.start(sups.config(health={"bind": "all", "port": port}))
    sup.wait_ready()
    assert http_get(port, "/readyz", host="127.0.0.1") == (200, "ok\n")
    if socket.has_ipv6 and os.path.exists("/proc/net/if_inet6"):
        with socket.create_connection(("::1", port), timeout=2) as s:
            s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")


def test_probe_fast_while_worker_stopped_and_200_idle_connections(sups):
    sup = tw_sup(sups, supervisor={"stall_timeout_ms": 60000, "kill_timeout_ms": 60000})
    sup.wait_ready()
    idle = [socket.create_connection(("127.0.0.1", sup.health_port)) for _ in range(200)]
    wpid = sup.worker_pid()
    os.kill(wpid, signal.SIGSTOP)
    try:
        times = []
        for _ in range(30):
            t0 = time.monotonic()
            st, body = sup.get("/readyz")
            times.append(time.monotonic() - t0)
            assert (st, body) == (200, "ok\n")  # not stalled yet: stall timeout is 60 s
        times.sort()
        assert times[len(times) // 2] < 0.010, times
        assert times[int(len(times) * 0.9)] < 0.010, times
    finally:
        os.kill(wpid, signal.SIGCONT)
        for s in idle:
            s.close()


def test_http_semantics(sups):
    sup = tw_sup(sups)
    sup.wait_ready()
    st, body = sup.get("/livez")
    assert (st, body) == (200, "ok\n")
    st, body = sup.get("/readyz", method="HEAD")
    assert st == 200 and body == ""
    st, _ = sup.get("/readyz", method="POST")
    assert st == 405
    st, _ = sup.get("/metrics")
    assert st == 404
    with socket.create_connection(("127.0.0.1", sup.health_port), timeout=2) as s:
        s.sendall(b"GET /readyz HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 4000 + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431")
    with socket.create_connection(("127.0.0.1", sup.health_port), timeout=2) as s:
        s.sendall(b"\x00\x01garbage\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    # Keep-alive with pipelining: two answers on one connection.
    with socket.create_connection(("127.0.0.1", sup.health_port), timeout=2) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\n\r\nGET /readyz HTTP/1.1\r\nConnection: close\r\n\r\n")
        data = recv_until_closed(s)
        assert data.count(b"HTTP/1.1 200 OK") == 2


def test_slow_client_is_cut_off_and_does_not_block_probes(sups):
    cfg = sups.config(health={"idle_timeout_ms": 1000})
    cfg["supervisor"]["exit_linger_ms"] = 0
    sup = sups.start(cfg, worker=TESTWORKER)
    sup.wait_ready()
    slow = socket.create_connection(("127.0.0.1", sup.health_port), timeout=5)
    slow.sendall(b"GET /rea")
    t0 = time.monotonic()
    assert sup.get("/readyz") == (200, "ok\n")
    # The trickling request gets 408 about a second after its first byte.
    data = slow.recv(200)
    assert data.startswith(b"HTTP/1.1 408"), data
    assert 0.5 < time.monotonic() - t0 < 3
    slow.close()


def test_readyz_noleader_and_starting(sups):
    sup = tw_sup(sups, env={"TW_NOLEADER": "1"})
    wait_word(sup, "/readyz", 503, "noleader", timeout=5)
    assert sup.get("/healthz") == (200, "ok\n")
    sup2 = tw_sup(sups, env={"TW_STARTING_MS": "3000"})
    # Before the first frame /healthz says "starting" too; once frames flow it says "ok"
    # while /readyz keeps "starting" until the phase is RUNNING.
    wait_word(sup2, "/healthz", 200, "ok", timeout=5)
    assert sup2.get("/readyz") == (503, "starting\n")


def test_responder_death_is_respawned(sups):
    sup = tw_sup(sups)
    sup.wait_ready()
    rpid = sup.responder_pid()
    os.kill(rpid, signal.SIGKILL)
    wait_until(lambda: "health responder died; respawning" in sup.log(), 3)
    sup.wait_ready(timeout=3)
    assert sup.responder_pid() != rpid
    assert sup.proc.poll() is None


def test_subreaper_reaps_orphans(sups, tmp_path):
    opf = tmp_path / "orphans"
    sup = tw_sup(sups, env={"TW_ACTION": "orphans:100", "TW_ORPHAN_PIDFILE": str(opf),
                            "TW_ORPHAN_MS": "500"})
    sup.wait_ready()
    os.kill(sup.worker_pid(), signal.SIGUSR2)
    pids = wait_until(lambda: opf.exists() and len(opf.read_text().split()) == 100 and
                      [int(x) for x in opf.read_text().split()], 10)
    alive = [p for p in pids if proc_state(p) not in (None, "Z")]
    assert alive and all(os.path.exists(f"/proc/{p}") for p in alive)
    # While alive, the orphans belong to the supervisor (child subreaper), not init.
    parents = {open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1] for p in alive
               if os.path.exists(f"/proc/{p}")}
    assert parents <= {str(sup.pid)}, parents
    wait_until(lambda: all(proc_state(p) is None for p in pids), 5,
               what="every orphan reaped (no zombie left)")
    assert not [c for c in children_of(sup.pid) if proc_state(c) == "Z"]


def _ns_pid1(outer_pid):
    """The host pid of the spurctld that is PID 1 inside the namespace."""
    kids = children_of(outer_pid)
    return kids[0] if kids else None


def test_pid1_reaps_orphans_and_honours_sigterm(sups, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root for unshare --pid")
    opf = tmp_path / "orphans"
    cfg = sups.config()
    cfg["supervisor"]["exit_linger_ms"] = 0
    sup = sups.start(cfg, worker=TESTWORKER,
                     env={"TW_ACTION": "orphans:100", "TW_ORPHAN_PIDFILE": str(opf),
                          "TW_ORPHAN_MS": "300"},
                     wrapper=["unshare", "--pid", "--fork", "--mount-proc"])
    sup.wait_ready()
    assert "running as PID 1" in sup.log()
    pid1 = wait_until(lambda: _ns_pid1(sup.pid), 5)
    worker = [c for c in children_of(pid1) if open(f"/proc/{c}/comm").read().strip()
              == "testworker"][0]
    os.kill(worker, signal.SIGUSR2)
    wait_until(lambda: opf.exists() and len(opf.read_text().split()) == 100, 10)
    time.sleep(0.6)  # the orphans exit after 300 ms
    wait_until(lambda: not [c for c in children_of(pid1) if proc_state(c) == "Z"], 5,
               what="no zombie under PID 1")
    remaining = [c for c in children_of(pid1)]
    assert len(remaining) <= 2, remaining  # the worker and the responder
    os.kill(pid1, signal.SIGTERM)
    assert sup.wait_exit(10) == 0
    assert "shutdown by SIGTERM" in sup.last_sup_line()


def test_undecodable_frames_are_ignored_and_end_in_a_stall(sups):
    sup = tw_sup(sups, env={"TW_ACTION": "garbage", "TW_WHEN": "running"})
    code = sup.wait_exit(10)
    assert code == 70
    assert "undecodable status frame ignored" in sup.log()
    assert "stalled" in sup.last_sup_line()


def test_oversized_frame_kills_the_worker(sups):
    sup = tw_sup(sups, env={"TW_ACTION": "oversized", "TW_WHEN": "running"}, linger=0)
    assert sup.wait_exit(10) == 70
    assert "status frame over the limit" in sup.log()
    assert "broke the status protocol" in sup.last_sup_line()


def test_sd_notify_sequence(sups, tmp_path):
    import threading
    path = str(tmp_path / "notify.sock")
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind(path)
    rx.settimeout(0.05)
    msgs = []
    done = threading.Event()

    def reader():  # timestamps taken as datagrams arrive, not when the test looks
        while not done.is_set():
            try:
                data = rx.recv(4096).decode()
            except socket.timeout:
                continue
            msgs.append((time.monotonic(), data))
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        sup = tw_sup(sups, env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"}, linger=0)
        sup.wait_ready()
        time.sleep(0.8)
        texts = [m for _, m in msgs]
        assert "READY=1" in texts
        assert any(t.startswith("STATUS=running") and "role=leader" in t and "leader=1" in t
                   for t in texts), texts
        first_ready = texts.index("READY=1")
        assert any(t.startswith("STATUS=running") for t in texts[:first_ready + 2])
        assert texts.count("WATCHDOG=1") >= 4, texts
        # A stalled worker: the watchdog goes quiet once frames are stale.
        t_stop = time.monotonic()
        os.kill(sup.worker_pid(), signal.SIGSTOP)
        stall_s = sup.cfg["supervisor"]["stall_timeout_ms"] / 1000
        time.sleep(stall_s + 0.6)
        late = [m for ts, m in msgs if ts > t_stop + stall_s + 0.05 and m == "WATCHDOG=1"]
        assert not late, "WATCHDOG=1 sent while the worker was stalled"
        assert "STATUS=worker stalled" in [m for _, m in msgs]
        os.kill(sup.worker_pid(), signal.SIGCONT)
        time.sleep(0.3)
        t_term = time.monotonic()
        sup.signal(signal.SIGTERM)
        sup.wait_exit(10)
        time.sleep(0.1)
        after = [m for ts, m in msgs if ts >= t_term]
        assert after and after[0] == "STOPPING=1", after
    finally:
        done.set()
        t.join(2)
        rx.close()


def test_sd_notify_abstract_socket_and_foreign_watchdog_pid(sups, tmp_path):
    name = f"spurtest-{os.getpid()}-{time.monotonic_ns()}"
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind("\0" + name)
    rx.settimeout(1.0)
    sup = tw_sup(sups, env={"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "100000",
                            "WATCHDOG_PID": "1"}, linger=0)
    sup.wait_ready()
    got = []
    end = time.monotonic() + 0.6
    while time.monotonic() < end:
        try:
            got.append(rx.recv(4096).decode())
        except socket.timeout:
            break
    assert "READY=1" in got
    assert "WATCHDOG=1" not in got, "WATCHDOG_PID names another process"
    rx.close()


def test_check_config_prints_effective_config(tmp_path):
    p = subprocess.run([str(SPURCTLD), "--check-config", "-f", "/dev/null"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    import yaml
    eff = yaml.safe_load(p.stdout)
    assert eff["health"] == {"enabled": True, "bind": "all", "port": 6823,
                             "max_connections": 1024, "idle_timeout_ms": 10000}
    assert eff["metrics"]["bind"] == "loopback"
    again = tmp_path / "again.yaml"
    again.write_text(p.stdout)
    q = subprocess.run([str(SPURCTLD), "--check-config", "-f", str(again)],
                       capture_output=True, text=True, timeout=10)
    assert q.returncode == 0 and q.stdout.split("\n", 1)[1] == p.stdout.split("\n", 1)[1]


def test_command_line(tmp_path):
    p = subprocess.run([str(SPURCTLD), "--bogus"], capture_output=True, text=True, timeout=5)
    assert p.returncode == 64 and "unknown option --bogus" in p.stderr
    p = subprocess.run([str(SPURCTLD), "-V"], capture_output=True, text=True, timeout=5)
    assert p.returncode == 0 and p.stdout.startswith("spurctld ")
    p = subprocess.run([str(SPURCTLD), "-h"], capture_output=True, text=True, timeout=5)
    assert p.returncode == 0 and "--check-config" in p.stdout
    p = subprocess.run([str(SPURCTLD), "-f"], capture_output=True, text=True, timeout=5)
    assert p.returncode == 64
    p = subprocess.run([str(SPURCTLD), "-f", str(tmp_path / "missing.yaml")],
                       capture_output=True, text=True, timeout=5)
    assert p.returncode == 78 and "cannot open" in p.stderr


def test_state_dir_flag_overrides_config(sups, tmp_path):
    other = tmp_path / "elsewhere"
    sup = sups.start(sups.config(), args=["--state-dir", str(other)])
    sup.wait_ready()
    assert (other / "LOCK").exists()
    assert (other / "LOCK").read_text().strip() == str(sup.worker_pid())


def test_raftd_runs_by_hand_without_status_fd(tmp_path):
    import yaml
    cfg = tmp_path / "c.yaml"
    raft = f"127.0.0.1:{free_port()}"  # every listener on a free port, never a default
    cfg.write_text(yaml.safe_dump({"controller": {"state_dir": str(tmp_path / "s"),
                                                  "listen": f"127.0.0.1:{free_port()}",
                                                  "peers": [raft]},
                                   "raft": {"listen": raft},
                                   "health": {"port": free_port()},
                                   "metrics": {"port": free_port()}}))
    p = subprocess.Popen([str(RAFTD), "-f", str(cfg)], stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (tmp_path / "s" / "LOCK").exists(), 5)
        time.sleep(0.2)
        assert p.poll() is None
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(5) == 0


def test_real_worker_handles_usr1_and_usr2(sups):
    sup = sups.start(sups.config())
    sup.wait_ready()
    sup.signal(signal.SIGUSR1)
    wait_until(lambda: 'comp=raftd msg="status"' in sup.log(), 5)
    sup.signal(signal.SIGUSR2)
    wait_until(lambda: "log level changed by SIGUSR2" in sup.log() and "level=debug" in
               sup.log(), 5)
    sup.signal(signal.SIGUSR2)
    wait_until(lambda: sup.log().count("log level changed by SIGUSR2") == 2, 5)
    assert sup.proc.poll() is None
    assert sup.get("/readyz") == (200, "ok\n")


def test_sd_notify_extends_start_timeout_while_starting(sups, tmp_path):
    path = str(tmp_path / "notify.sock")
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.bind(path)
    rx.settimeout(0.2)
    sup = tw_sup(sups, env={"NOTIFY_SOCKET": path, "TW_STARTING_MS": "2500"}, linger=0)
    got = []
    end = time.monotonic() + 5
    while time.monotonic() < end and "READY=1" not in got:
        try:
            got.append(rx.recv(4096).decode())
        except socket.timeout:
            pass
    rx.close()
    assert "READY=1" in got, got
    ext = [m for m in got[:got.index("READY=1")] if m.startswith("EXTEND_TIMEOUT_USEC=")]
    assert len(ext) >= 2, got
    stall_ms = sup.cfg["supervisor"]["stall_timeout_ms"]
    assert ext[0] == f"EXTEND_TIMEOUT_USEC={stall_ms * 2000}"
    assert not [m for m in got[got.index("READY=1"):] if m.startswith("EXTEND")]
