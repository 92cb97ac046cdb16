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
