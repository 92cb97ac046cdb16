"""A real PostgreSQL for the integration tests (issue 14): no mock.

Postgres(tmp) makes a fresh cluster with Debian's server binaries (/usr/lib/postgresql/N/bin,
the highest N): initdb into a private directory under /tmp as an unprivileged system user
(`postgres` when it exists, else one made here), a postmaster on a free 127.0.0.1 port
(never 5432: Debian may run its own cluster there) with its Unix socket in that directory,
fsync off (the tests crash the database on purpose; its durability is not under test),
pg_hba: `local` trust for everyone (the tests' psql), `host 127.0.0.1/32` scram-sha-256
(the controller's connections must prove a password). It holds a login role `spur` with
the password PASSWORD and a database `spuracct` owned by it.

psql -At runs the queries (no new Python dependency); parameters are passed as psql
variables and quoted by psql itself (:'p1' in the text, see query()). Every wait is
bounded; a failure says what it waited for and shows the server log's tail.

Clean-up: close() stops the server (immediate mode, then kill -9 of whatever is left of it)
and removes the directory; the fixture in conftest.py calls it.
"""
import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import spurtest

PASSWORD = "spur-test-pw"
ROLE = "spur"
DATABASE = "spuracct"
SUPERUSER = "postgres"
FALLBACK_OS_USER = "spurpgtest"

_FS = "\x1f"  # field separator of psql -A output (no value the tests use holds it)
_RS = "\x1e"  # record separator


def bin_dir():
    """The newest /usr/lib/postgresql/N/bin that has initdb, or None."""
    found = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        with contextlib.suppress(ValueError):
            if os.access(os.path.join(d, "initdb"), os.X_OK):
                found.append((int(Path(d).parent.name), d))
    return max(found)[1] if found else None


def skip_reason():
    """Why no PostgreSQL can be started here, or None."""
    if bin_dir() is None:
        return "PostgreSQL server binaries are not installed (apt-get install postgresql)"
    if shutil.which("psql") is None and not os.access(os.path.join(bin_dir(), "psql"), os.X_OK):
        return "psql is not installed"
    if os.geteuid() == 0 and shutil.which("runuser") is None and not os.path.exists(
            "/usr/sbin/runuser"):
        return "runuser (util-linux) is needed to run initdb as an unprivileged user"
    return None


def _os_user():
    """The unprivileged user that owns and runs the server: `postgres`, else one made here
    (useradd --system), else (not root) the current user."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    for name in ("postgres", FALLBACK_OS_USER):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh",
                    FALLBACK_OS_USER], check=True, capture_output=True, timeout=30)
    return pwd.getpwnam(FALLBACK_OS_USER)


def _pid_alive(pid):
    return not spurtest.is_gone(pid)


class PostgresError(RuntimeError):
    pass


class Postgres:
    """One private PostgreSQL server. start=False: initdb only (start it with start())."""

    def __init__(self, tmp=None, start=True, port=None, base_dir="/tmp"):
        why = skip_reason()
        if why:
            raise PostgresError(why)
        self.bin = Path(bin_dir())
        self.user = _os_user()
        # A directory of its own under /tmp (a pytest tmp_path is root's, 0700: the
        # server's user could not reach it), with a short path for the socket.
        self.dir = Path(tempfile.mkdtemp(prefix="spur-pg-", dir=base_dir))
        os.chmod(self.dir, 0o755)
        self.data = self.dir / "data"
        self.sockdir = self.dir
        self.log_path = self.dir / "server.log"
        self.tmp = Path(tmp) if tmp else self.dir
        self.port = port or spurtest.free_port()
        if self.port == 5432:
            self.port = spurtest.free_port()
        os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self._pid = None
        self._initdb()
        if start:
            self.start()
            self._bootstrap()

    # ---- running things ------------------------------------------------------------------
    def _as_user(self, argv):
        if os.geteuid() == 0 and self.user.pw_uid != 0:
            return ["runuser", "-u", self.user.pw_name, "--"] + [str(a) for a in argv]
        return [str(a) for a in argv]

    def _run(self, argv, timeout=60, check=True):
        p = subprocess.run(self._as_user(argv), capture_output=True, text=True, timeout=timeout,
                           cwd=str(self.dir))
        if check and p.returncode != 0:
            raise PostgresError(f"{' '.join(map(str, argv))} -> {p.returncode}\n{p.stdout}\n"
                                f"{p.stderr}\n{self.log_tail()}")
        return p

    def log_tail(self, n=30):
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return "--- postgres log tail:\n" + "\n".join(lines[-n:])

    def _initdb(self):
        self._run([self.bin / "initdb", "-D", self.data, "-U", SUPERUSER, "-E", "UTF8",
                   "--locale=C", "--no-sync", "--auth-local=trust",
                   "--auth-host=scram-sha-256"], timeout=120)
        (self.data / "pg_hba.conf").write_text(
            "# spur tests: psql over the socket as anyone; TCP only with a password\n"
            "local all all trust\n"
            "host all all 127.0.0.1/32 scram-sha-256\n")
        with open(self.data / "postgresql.conf", "a") as f:
            f.write("\n# spur tests (pgtest.py)\n"
                    "listen_addresses = '127.0.0.1'\n"
                    f"port = {self.port}\n"
                    f"unix_socket_directories = '{self.sockdir}'\n"
                    "password_encryption = 'scram-sha-256'\n"
                    "fsync = off\n"
                    "full_page_writes = off\n"
                    "max_connections = 40\n"
                    "shared_buffers = 32MB\n"
                    "log_min_messages = warning\n"
                    "log_connections = off\n")

    def _bootstrap(self):
        self.query(f"CREATE ROLE {ROLE} LOGIN PASSWORD :'p1'", PASSWORD, db="postgres")
        self.query(f"CREATE DATABASE {DATABASE} OWNER {ROLE}", db="postgres")

    # ---- life cycle ----------------------------------------------------------------------
    def pid(self):
        """The postmaster's pid from postmaster.pid, or None (no file, or no such process)."""
        try:
            first = (self.data / "postmaster.pid").read_text().split("\n", 1)[0]
            pid = int(first)
        except (OSError, ValueError):
            return None
        return pid if _pid_alive(pid) else None

    def running(self):
        return self.pid() is not None

    def start(self, timeout=30):
        """Start the server (again), also after kill9(): waits for the dead postmaster's
        children to go (they notice its death; stragglers after 10 s get SIGKILL), removes
        the stale postmaster.pid, starts, waits until it takes connections."""
        if self.running():
            return self
        self._reap_orphans()
        for stale in (self.data / "postmaster.pid", self.sockdir / f".s.PGSQL.{self.port}.lock",
                      self.sockdir / f".s.PGSQL.{self.port}"):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        self._run([self.bin / "pg_ctl", "-D", self.data, "-l", self.log_path, "-w",
                   "-t", str(int(timeout)), "-o", f"-p {self.port}", "start"],
                  timeout=timeout + 15)
        self._pid = self.pid()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            p = subprocess.run([str(self.bin / "pg_isready"), "-q", "-h", str(self.sockdir),
                                "-p", str(self.port), "-d", "postgres", "-U", SUPERUSER],
                               capture_output=True, text=True, timeout=10)
            if p.returncode == 0:
                return True
            last = p.stdout + p.stderr
            time.sleep(0.05)
        raise TimeoutError(f"PostgreSQL on port {self.port} not ready after {timeout}s "
                           f"({last.strip()})\n{self.log_tail()}")

    def stop(self, mode="fast", timeout=30):
        """pg_ctl stop (mode fast: disconnect clients, clean shut-down)."""
        if not self.running():
            return
        self._run([self.bin / "pg_ctl", "-D", self.data, "-m", mode, "-w", "-t",
                   str(int(timeout)), "stop"], timeout=timeout + 15, check=False)
        spurtest.wait_until(lambda: not self.running(), 10, interval=0.05,
                            what="the postmaster to exit")

    def kill9(self):
        """kill -9 of the postmaster (the pid in postmaster.pid), as a crash would. Its
        children (backends, checkpointer, ...) notice and exit; start() deals with them."""
        pid = self.pid()
        if pid is None:
            raise PostgresError("kill9: the server is not running")
        self._children = spurtest.children_of(pid)
        os.kill(pid, signal.SIGKILL)
        # Gone from /proc, not only a zombie: a new postmaster takes a pid that still
        # exists (kill(pid, 0)) for a live one, and refuses to start.
        spurtest.wait_until(lambda: spurtest.proc_state(pid) is None, 10, interval=0.01,
                            what=f"postmaster {pid} to die and be reaped")
        return pid

    def _reap_orphans(self):
        kids = getattr(self, "_children", [])
        try:
            spurtest.wait_until(lambda: all(spurtest.is_gone(k) for k in kids), 10,
                                interval=0.05, what="the dead postmaster's children to exit")
        except TimeoutError:
            for k in kids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(k, signal.SIGKILL)
            spurtest.wait_until(lambda: all(spurtest.is_gone(k) for k in kids), 10,
                                interval=0.05, what="killed postgres children to exit")
        self._children = []

    def close(self):
        """Stop (immediate), kill whatever is left, remove the directory."""
        with contextlib.suppress(Exception):
            self.stop(mode="immediate", timeout=10)
        pid = self.pid()
        if pid is not None:
            kids = spurtest.children_of(pid)
            for k in [pid] + kids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(k, signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- what the controller gets --------------------------------------------------------
    def url(self, user=ROLE, pw=PASSWORD, db=DATABASE, **extra):
        """A libpq conninfo string for TCP on 127.0.0.1 (pw None: none in it, libpq finds
        it in a password file)."""
        parts = {"host": "127.0.0.1", "port": str(self.port), "dbname": db, "user": user,
                 "connect_timeout": "5"}
        if pw is not None:
            parts["password"] = pw
        parts.update({k: str(v) for k, v in extra.items()})

        def q(v):
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return " ".join(f"{k}={q(v)}" for k, v in parts.items())

    def write_password_file(self, path, owner=None, pw=PASSWORD, pgpass=False, user=ROLE,
                            db=DATABASE):
        """A password file at path, mode 0600, owned by owner (a uid, or (uid, gid); default
        the current user). pgpass False: the password alone on one line; True: libpq's
        host:port:db:user:password line (PGPASSFILE's format)."""
        path = Path(path)
        text = f"127.0.0.1:{self.port}:{db}:{user}:{pw}\n" if pgpass else pw + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)
        if owner is not None:
            uid, gid = owner if isinstance(owner, tuple) else (owner, -1)
            os.chown(path, uid, gid)
        return path

    # ---- queries -------------------------------------------------------------------------
    def query(self, sql, *params, db=DATABASE, timeout=30):
        """Run sql as the superuser over the socket with psql -At; returns the rows as lists
        of strings (NULL as ""). params are bound as psql variables p1, p2, ...: write
        :'p1' for a quoted literal (psql quotes it). Raises PostgresError on any error."""
        argv = [str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-F", _FS, "-R", _RS,
                "-v", "ON_ERROR_STOP=1", "-h", str(self.sockdir), "-p", str(self.port),
                "-U", SUPERUSER, "-d", db]
        if not sql.rstrip().endswith(";"):
            sql = sql.rstrip() + ";"
        for i, v in enumerate(params, 1):
            argv += ["-v", f"p{i}={v}"]
        p = subprocess.run(argv, input=sql + "\n", capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            raise PostgresError(f"psql: {sql!r} -> {p.returncode}: {p.stderr.strip()}")
        out = p.stdout
        if out.endswith("\n"):
            out = out[:-1]
        if not out:
            return []
        return [r.split(_FS) for r in out.split(_RS) if r != ""]

    def scalar(self, sql, *params, db=DATABASE, default=None):
        """The first column of the first row (a string), or default when there is none."""
        rows = self.query(sql, *params, db=db)
        return rows[0][0] if rows and rows[0] else default

    def table_exists(self, name, db=DATABASE):
        return self.scalar("SELECT to_regclass(:'p1') IS NOT NULL", name, db=db) == "t"

    def count(self, table, where="true", *params):
        """SELECT count(*) FROM table WHERE where (0 when the table does not exist yet)."""
        if not self.table_exists(table):
            return 0
        return int(self.scalar(f"SELECT count(*) FROM {table} WHERE {where}", *params))
