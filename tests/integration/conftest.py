"""pytest fixtures shared by the integration tests; the helpers live in spurtest.py."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import spurtest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


@pytest.fixture
def sups(tmp_path):
    """Start supervisors with sups.start(...); all are killed at the end of the test."""
    started = []

    class Factory:
        def start(self, cfg=None, **kw):
            kw.setdefault("name", f"sup{len(started)}")
            s = spurtest.Supervisor(tmp_path, cfg=cfg, **kw)
            started.append(s)
            return s

        def config(self, **over):
            return spurtest.base_config(tmp_path, **over)

    yield Factory()
    for s in started:
        s.kill()


@pytest.fixture(scope="session", autouse=True)
def built_programs():
    missing = [p for p in (spurtest.SPURCTLD, spurtest.RAFTD, spurtest.TESTWORKER)
               if not p.exists()]
    if missing:
        pytest.exit(f"build the project first (missing: {', '.join(map(str, missing))}); "
                    f"SPUR_BUILD_DIR={spurtest.BUILD}", returncode=2)


@pytest.fixture
def cluster_factory(tmp_path):
    """Make clusters with cluster_factory(n, **config_overrides); all are killed after."""
    made = []

    def make(n=3, **over):
        c = spurtest.Cluster(tmp_path / f"c{len(made)}", n=n, **over)
        made.append(c)
        return c

    yield make
    for c in made:
        c.kill_all()


@pytest.fixture
def cluster3(cluster_factory):
    """A running 3-replica cluster with a leader."""
    c = cluster_factory(3)
    c.start_all()
    c.wait_ready()
    c.leader()
    return c


@pytest.fixture
def test_user():
    """A real user made for this test (useradd -m -U spurtXXXXXX) and removed after with
    its home (userdel -r), its processes killed first. Skips, saying why, when not root or
    without useradd. Yields a namespace: name, uid, gid, home (a Path)."""
    import pwd
    import random
    import shutil
    import signal
    import subprocess
    import types

    if os.geteuid() != 0:
        pytest.skip("creating a test user needs root")
    for tool in ("useradd", "userdel", "runuser"):
        if shutil.which(tool) is None and shutil.which(tool, path="/usr/sbin:/sbin") is None:
            pytest.skip(f"{tool} is not installed")
    name = f"spurt{random.randrange(16 ** 6):06x}"
    r = subprocess.run(["useradd", "-m", "-U", "-s", "/bin/sh", name], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"useradd {name} failed: {r.stderr.strip()}")
    pw = pwd.getpwnam(name)
    try:
        yield types.SimpleNamespace(name=name, uid=pw.pw_uid, gid=pw.pw_gid,
                                    home=Path(pw.pw_dir))
    finally:
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/status") as f:
                    uid = next(int(l.split()[1]) for l in f if l.startswith("Uid:"))
            except (OSError, StopIteration, ValueError):
                continue
            if uid == pw.pw_uid:
                try:
                    os.kill(int(d), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        import time
        for _ in range(20):  # userdel refuses (8) while a killed process still exits
            r = subprocess.run(["userdel", "-r", name], capture_output=True, timeout=30)
            if r.returncode in (0, 6):
                break
            time.sleep(0.2)
