#!/usr/bin/env python3
"""Benchmarks for the supervisor process pair (issue 2). Prints tables; asserts nothing.

  detection   worker SIGKILL -> first /readyz 503, and -> spurctld exit (N trials)
  responder   wrk on /readyz at 1 and 32 connections (requests/s, latency percentiles)
  memory      resident memory of the supervisor and of the responder (idle, after load)

Usage: bench/supervisor/bench_supervisor.py [--trials 200] [--seconds 10] [--build DIR]
Targets (issue 2, this 2-core machine): readiness off <= 2 ms p99, exit 70 <= 20 ms p99,
>= 30,000 req/s at 32 connections with p99 <= 2 ms, <= 2 MiB RSS each.
"""
import argparse
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import add_build_option, pct, proc_status_kib, spurtest_for  # noqa: E402


def rss_kib(pid):
    return proc_status_kib(pid, "VmRSS")


def detection(spurtest, trials, tmp):
    ready_ms, exit_ms = [], []
    for i in range(trials):
        cfg = spurtest.base_config(tmp)
        cfg["controller"]["state_dir"] = str(tmp / f"state{i}")
        sup = spurtest.Supervisor(tmp, cfg=cfg, name=f"d{i}")
        try:
            sup.wait_ready(10)
            wpid = sup.worker_pid()
            client = spurtest.KeepAliveClient(sup.health_port)
            client.get("/readyz")
            pidfd = os.pidfd_open(sup.pid)
            t0 = time.perf_counter()
            os.kill(wpid, signal.SIGKILL)
            t_503 = None
            while t_503 is None:
                try:
                    st, _ = client.get("/readyz")
                except (OSError, ConnectionError):
                    break
                if st == 503:
                    t_503 = time.perf_counter()
            select.select([pidfd], [], [], 5)
            t_exit = time.perf_counter()
            os.close(pidfd)
            code = sup.proc.wait(5)
            client.close()
            if code != 70:
                print(f"trial {i}: unexpected exit {code}", file=sys.stderr)
            if t_503 is not None:
                ready_ms.append((t_503 - t0) * 1000)
            exit_ms.append((t_exit - t0) * 1000)
        finally:
            sup.kill()
    return ready_ms, exit_ms


def wrk(port, conns, seconds):
    out = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency",
                          f"http://127.0.0.1:{port}/readyz"], capture_output=True, text=True,
                         timeout=seconds + 30).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def lat(label):
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)", out, re.M)
        v = float(m.group(1))
        return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, lat("50"), lat("99"), int(non2xx.group(1)) if non2xx else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seconds", type=int, default=10)
    add_build_option(ap)
    args = ap.parse_args()
    spurtest = spurtest_for(args.build)

    tmp = Path(tempfile.mkdtemp(prefix="spurbench-"))
    try:
        ready_ms, exit_ms = detection(spurtest, args.trials, tmp)
        print(f"\nDetection: worker SIGKILL -> ... ({len(exit_ms)} trials, {os.cpu_count()} cores)")
        print(f"| {'measure':<28} | {'p50 ms':>8} | {'p99 ms':>8} | {'max ms':>8} |")
        print(f"|{'-' * 30}|{'-' * 10}|{'-' * 10}|{'-' * 10}|")
        for name, v in (("first /readyz 503", ready_ms), ("spurctld exit (70)", exit_ms)):
            print(f"| {name:<28} | {pct(v, 50):8.3f} | {pct(v, 99):8.3f} | {max(v):8.3f} |")

        if shutil.which("wrk") is None:
            print("\nwrk not installed: responder throughput skipped")
            return
        cfg = spurtest.base_config(tmp)
        cfg["controller"]["state_dir"] = str(tmp / "statew")
        sup = spurtest.Supervisor(tmp, cfg=cfg, name="wrk")
        try:
            sup.wait_ready(10)
            rpid = sup.responder_pid()
            idle_sup, idle_resp = rss_kib(sup.pid), rss_kib(rpid)
            rows = [(c,) + wrk(sup.health_port, c, args.seconds) for c in (1, 32)]
            print(f"\nResponder: wrk -t1 -d{args.seconds}s on /readyz")
            print(f"| {'connections':>11} | {'requests/s':>11} | {'p50 ms':>7} | {'p99 ms':>7} "
                  f"| {'non-200':>7} |")
            print(f"|{'-' * 13}|{'-' * 13}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
            for c, rps, p50, p99, bad in rows:
                print(f"| {c:>11} | {rps:>11,.0f} | {p50:>7.3f} | {p99:>7.3f} | {bad:>7} |")
            print("\nResident memory (VmRSS)")
            print(f"| {'process':<22} | {'idle KiB':>9} | {'after load KiB':>14} |")
            print(f"|{'-' * 24}|{'-' * 11}|{'-' * 16}|")
            print(f"| {'spurctld (supervisor)':<22} | {idle_sup:>9} | {rss_kib(sup.pid):>14} |")
            print(f"| {'health responder':<22} | {idle_resp:>9} | {rss_kib(rpid):>14} |")
        finally:
            sup.kill()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
