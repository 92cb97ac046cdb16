"""What the Python benchmark drivers share: percentiles, /proc/PID/status figures, the
--build option and the spurtest module of the integration tests built for it.

The drivers (bench/*/run.py, bench/*/bench_*.py) put bench/ on sys.path and import this;
it puts tests/integration on sys.path in turn, so spurtest (real processes on 127.0.0.1,
free ports) starts the programs of the build the driver was pointed at. Nothing here
asserts: benchmarks print tables.
"""
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pct(values, p):
    """The p-th percentile of values (nearest rank), NaN for none."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]


def proc_status_kib(pid, field):
    """A KiB figure of /proc/PID/status (VmRSS, VmHWM, ...), -1 when it has no such line."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def add_build_option(ap):
    """--build DIR: the meson build directory to run (default: SPUR_BUILD_DIR, else
    <repo>/build)."""
    ap.add_argument("--build", default=None,
                    help="meson build directory (default: $SPUR_BUILD_DIR or build/)")


def spurtest_for(build):
    """tests/integration/spurtest.py, its BUILD set to build (None: as spurtest decides,
    SPUR_BUILD_DIR or <repo>/build). spurtest reads SPUR_BUILD_DIR when it is first
    imported, so this sets it before the import."""
    if build:
        os.environ["SPUR_BUILD_DIR"] = str(Path(build).resolve())
    sys.path.insert(0, str(REPO / "tests" / "integration"))
    import spurtest

    return spurtest


def start_submit_driver(ap, tmp_prefix):
    """The start of the two drivers of bench_submit (bench/submit/run.py, bench/scale/run.py):
    --build and --keep added to ap and the command line parsed; spurtest for that build;
    its build/bench/submit/bench_submit (exits saying so when it is not built); a fresh
    temporary directory named tmp_prefix*. Returns (args, spurtest, bench_submit, tmp)."""
    add_build_option(ap)
    ap.add_argument("--keep", action="store_true", help="keep the state dirs and logs")
    args = ap.parse_args()
    spurtest = spurtest_for(args.build)
    exe = spurtest.BUILD / "bench" / "submit" / "bench_submit"
    if not exe.exists():
        sys.exit(f"{exe} is missing: ninja -C {spurtest.BUILD}")
    return args, spurtest, exe, Path(tempfile.mkdtemp(prefix=tmp_prefix))
