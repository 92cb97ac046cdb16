"""The health responder and pipelined HTTP/1.1 (supervisor/responder.c, common/http.c).

A client may send many requests in one write without waiting for the answers (HTTP/1.1
pipelining). The responder must answer every complete request, in order, promptly, however
the bytes are split across writes, and then keep its bounds: a request left incomplete still
gets 408 after the header timeout, a client that sends but never reads is not buffered
without limit, and the other probes keep being answered meanwhile.

Every test runs the real spurctld with the test worker on 127.0.0.1 and free ports.
"""
import re
import socket
import time

import pytest

from spurtest import TESTWORKER, http_get, recv_until_closed, wait_until

# The responder's header timeout is min(health.idle_timeout_ms, 5000).
IDLE_MS = 3000


@pytest.fixture
def sup(sups):
    cfg = sups.config(health={"idle_timeout_ms": IDLE_MS})
    s = sups.start(cfg, worker=TESTWORKER, env={"TW_ACTION": "run", "TW_WHEN": "signal"})
    s.wait_ready()
    return s


def request(method, path, close=False):
    extra = "Connection: close\r\n" if close else ""
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode()


def read_responses(sock, n, head_flags, deadline_s=3.0):
    """Read exactly n responses (HEAD ones carry no body). Returns [(status, body)].

    head_flags[i] says whether response i answers a HEAD request. Fails if the
    responses do not all arrive within deadline_s: the old responder answered only the
    first few and sent 408 five seconds later.
    """
    out = []
    buf = b""
    end = time.monotonic() + deadline_s
    while len(out) < n:
        while b"\r\n\r\n" not in buf:
            left = end - time.monotonic()
            assert left > 0, f"only {len(out)} of {n} responses within {deadline_s}s"
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                chunk = None
            assert chunk, f"connection closed or silent after {len(out)} of {n} responses"
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = int(re.search(rb"\r\nContent-Length: (\d+)", head).group(1))
        body_len = 0 if head_flags[len(out)] else length
        while len(rest) < body_len:
            left = end - time.monotonic()
            assert left > 0, "body did not arrive"
            sock.settimeout(left)
            chunk = sock.recv(65536)
            assert chunk, "connection closed inside a body"
            rest += chunk
        out.append((status, rest[:body_len].decode(), head))
        buf = rest[body_len:]
    return out, buf


def mixed_requests(n):
    """n requests cycling through the routes and methods; the expected answers."""
    routes = [("GET", "/healthz", 200, "ok\n"), ("HEAD", "/readyz", 200, ""),
              ("GET", "/readyz", 200, "ok\n"), ("GET", "/nope", 404, "not found\n"),
              ("HEAD", "/livez", 200, ""), ("GET", "/livez", 200, "ok\n")]
    reqs, want = [], []
    for i in range(n):
        m, p, st, body = routes[i % len(routes)]
        # A query string makes every request distinct, so a reordering would still read
        # as the same answers only if the routes lined up, which the cycle prevents.
        reqs.append(request(m, f"{p}?i={i}"))
        want.append((st, body, m == "HEAD"))
    return reqs, want


def check(got, want):
    assert [(s, b) for s, b, _ in got] == [(s, b) for s, b, _ in want]
    for _, _, head in got:
        assert b"Connection: keep-alive" in head


@pytest.mark.parametrize("n", [10, 100])
def test_pipelined_requests_in_one_write_are_all_answered_in_order(sup, n):
    reqs, want = mixed_requests(n)
    with socket.create_connection(("127.0.0.1", sup.health_port), timeout=3) as s:
        s.sendall(b"".join(reqs))
        got, rest = read_responses(s, n, [w[2] for w in want])
        check(got, want)
        assert rest == b""
        # The connection is still usable afterwards.
        s.sendall(request("GET", "/healthz"))
        again, _ = read_responses(s, 1, [False])
        assert again[0][:2] == (200, "ok\n")


@pytest.mark.parametrize("chunk", [1, 7, 23, 61, 100, 1500])
def test_pipelined_requests_in_odd_splits(sup, chunk):
    n = 40
    reqs, want = mixed_requests(n)
    data = b"".join(reqs)
    with socket.create_connection(("127.0.0.1", sup.health_port), timeout=3) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for off in range(0, len(data), chunk):
            s.sendall(data[off:off + chunk])
            if chunk < 10 and off % 97 == 0:
                time.sleep(0.001)  # let some splits land as separate reads
        got, rest = read_responses(s, n, [w[2] for w in want], deadline_s=5.0)
        check(got, want)
        assert rest == b""


def test_pipelined_stream_ending_with_a_partial_request(sup):
    """The complete requests are answered at once; the partial one waits for its end,
    and is answered when the rest comes; left incomplete, it gets 408 and the close."""
    reqs, want = mixed_requests(10)
    partial = b"GET /readyz HTTP/1.1\r\nHost:"
    with socket.create_connection(("127.0.0.1", sup.health_port), timeout=3) as s:
        t0 = time.monotonic()
        s.sendall(b"".join(reqs) + partial)
        got, rest = read_responses(s, 10, [w[2] for w in want], deadline_s=2.0)
        check(got, want)
        assert rest == b""
        assert time.monotonic() - t0 < 2.0
        # Nothing more comes for the partial request until it is complete.
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(100)
        s.sendall(b" x\r\n\r\n" + partial)
        got, _ = read_responses(s, 1, [False])
        assert got[0][:2] == (200, "ok\n")
        # The second partial request never completes: 408 after the header timeout.
        t1 = time.monotonic()
        s.settimeout(IDLE_MS / 1000 + 3)
        data = recv_until_closed(s)
        waited = time.monotonic() - t1
        assert data.startswith(b"HTTP/1.1 408 "), data
        assert b"Connection: close" in data
        assert waited >= IDLE_MS / 1000 * 0.8


def test_pipelined_requests_then_half_close_are_answered_then_closed(sup):
    reqs, want = mixed_requests(12)
    with socket.create_connection(("127.0.0.1", sup.health_port), timeout=3) as s:
        s.sendall(b"".join(reqs) + b"GET /healthz HTTP/1.1\r\n")  # ends mid-request
        s.shutdown(socket.SHUT_WR)
        got, rest = read_responses(s, 12, [w[2] for w in want])
        check(got, want)
        s.settimeout(2)
        while rest := s.recv(4096):
            assert False, f"nothing may follow the answers, got {rest!r}"


def test_connection_close_in_a_pipeline_ends_it_there(sup):
    data = request("GET", "/healthz") + request("GET", "/readyz", close=True) + \
        request("GET", "/livez")
    with socket.create_connection(("127.0.0.1", sup.health_port), timeout=3) as s:
        s.sendall(data)
        got, rest = read_responses(s, 2, [False, False])
        assert [g[:2] for g in got] == [(200, "ok\n"), (200, "ok\n")]
        assert b"Connection: close" in got[1][2]
        s.settimeout(2)
        assert rest + s.recv(4096) == b"", "the request after Connection: close was answered"


def test_a_client_that_never_reads_is_bounded_and_others_are_still_answered(sup):
    """Pipelined requests from a client that does not read its answers: the responder
    stops reading once its output is stuck (it buffers a bounded amount, it does not spin),
    other probes are answered meanwhile, and the stuck connection is closed after the
    idle timeout."""
    one = request("GET", "/healthz")
    s = socket.create_connection(("127.0.0.1", sup.health_port), timeout=3)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    sent = 0
    t_end = time.monotonic() + 5
    stuck_since = None
    # Send until the responder stops taking bytes for a while: it no longer reads.
    while time.monotonic() < t_end:
        try:
            sent += s.send(one * 64)
            stuck_since = None
        except BlockingIOError:
            if stuck_since is None:
                stuck_since = time.monotonic()
            elif time.monotonic() - stuck_since > 0.5:
                break
            time.sleep(0.01)
    assert stuck_since is not None, f"the responder kept reading ({sent} bytes)"
    # What it swallowed is bounded by the socket buffers plus its own small buffers:
    # far below what an unbounded reader would take in five seconds.
    assert sent < 64 << 20
    rpid = sup.responder_pid()
    cpu0 = proc_cpu_ticks(rpid)
    for _ in range(20):
        assert http_get(sup.health_port, "/healthz") == (200, "ok\n")
    time.sleep(0.5)
    # The stuck connection must not make the responder spin (level-triggered EPOLLIN on
    # a full buffer did): well under half a CPU over this half second plus 20 probes.
    assert proc_cpu_ticks(rpid) - cpu0 < 40
    # After the idle timeout the responder closes it: reading then reaches EOF or reset.
    wait_until(lambda: connection_dropped(s), IDLE_MS / 1000 + 5, interval=0.05,
               what="the stuck connection to be closed")
    s.close()


def proc_cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def connection_dropped(s):
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                return True
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
