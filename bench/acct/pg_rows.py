#!/usr/bin/env python3
"""What a job's accounting row costs PostgreSQL itself: the server CPU per new job of the
exporter's own statements, and of variants of them, without a cluster.

Issue 14's submit-rate target is measured by bench/acct/run.py; on a 2-core machine the
database's CPU per record comes off the cluster's, and this tells how much of it is what.
A private server (tests/integration/pgtest.py: Debian's, initdb in a temporary directory,
fsync off, synchronous_commit on) gets the schema of raftd/acct_sql.c (migration 0 -> 1,
read from the C source so that it is the one the controller creates), then --batches
transactions of --batch-size new jobs each, as the exporter sends them for jobs that are
only submitted: BEGIN; the jobs (one statement over unnest() of 26 column arrays); the
job_events rows (one statement); the high-water mark; COMMIT. The arrays travel as text
literals in the SQL (psql -f), which costs the server about what the exporter's text
parameters do.

Variants, each on a fresh schema, best of --repeat runs of the backend's own CPU
(utime + stime from /proc/<backend pid>/stat when the session ends):
  upsert           the exporter's statements (INSERT ... ON CONFLICT DO UPDATE / NOTHING)
  plain            the same without ON CONFLICT (what a first insert of a new job could be)
  upsert-noevents  upsert, no job_events rows
  plain-noevents   plain, no job_events rows
  plain-2idx       plain-noevents without the end-time and state indexes
  plain-noidx      plain-noevents without any secondary index (the primary key only)

Prints a table of us per job; asserts nothing.

Usage: bench/acct/pg_rows.py [--batches 200] [--batch-size 500] [--repeat 3] [VARIANT ...]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import pgtest  # noqa: E402

VARIANTS = ("upsert", "plain", "upsert-noevents", "plain-noevents", "plain-2idx", "plain-noidx")
COLS = ("job_id", "array_job_id", "array_task_id", "name", "user_name", "uid", "gid",
        "account", "partition", "state", "exit_code", "exit_signal", "nnodes", "node_list",
        "cpus", "mem_mb", "time_limit_min", "submit_ms", "eligible_ms", "start_ms", "end_ms",
        "workdir", "restarts", "reason", "dependency", "last_seq")


def c_strings(body):
    """The concatenated C string literals of body, MS_TO_TS(x) expanded as acct_sql.c does."""
    body = re.sub(r'MS_TO_TS\("([^"]*)"\)',
                  lambda m: '"TIMESTAMPTZ \'epoch\' + NULLIF(%s, 0) * INTERVAL \'1 millisecond\'"'
                  % m.group(1), body)
    return "".join(s.replace('\\"', '"') for s in re.findall(r'"((?:[^"\\]|\\.)*)"', body))


def sql_from_source():
    """(schema statements, jobs upsert, events insert) as raftd/acct_sql.c has them."""
    src = (ROOT / "raftd" / "acct_sql.c").read_text()
    m = re.search(r"migrate_0_1\[\] = \{(.*?)\n\};", src, re.S)
    stmts = [c_strings(s) for s in re.findall(r'((?:"[^"\n]*"\s*)+),', m.group(1))]
    schema = [s for s in stmts if "spur_schema" not in s]

    def stmt(name):
        mm = re.search(r"const char " + name + r"\[\] =(.*?);\n", src, re.S)
        return c_strings(mm.group(1))
    return schema, stmt("ACCT_SQL_UPSERT_JOBS"), stmt("ACCT_SQL_INSERT_EVENTS")


def lit(values, text=False):
    return "'{" + ",".join(('"%s"' % v) if text else str(v) for v in values) + "}'"


def script(variant, schema, upsert, events, batches, size, stat_path):
    plain = variant.startswith("plain")
    jobs_sql = upsert[:upsert.index(" ON CONFLICT")] if plain else upsert
    ev_sql = events[:events.index(" ON CONFLICT")] if plain else events
    out = ["DROP TABLE IF EXISTS jobs, job_events, spur_export;"] + [s + ";" for s in schema]
    if variant == "plain-2idx":
        out.append("DROP INDEX jobs_end, jobs_state;")
    if variant == "plain-noidx":
        out.append("DROP INDEX jobs_user_submit, jobs_submit, jobs_end, jobs_state;")
    out.append(f"PREPARE jobs_ins AS {jobs_sql};")
    out.append(f"PREPARE ev_ins AS {ev_sql};")
    out.append("SELECT pg_backend_pid() AS bpid \\gset")
    t0, jid = 1_700_000_000_000, 1
    for _ in range(batches):
        ids = list(range(jid, jid + size))
        jid += size
        col = {
            "job_id": lit(ids), "array_job_id": lit([0] * size),
            "array_task_id": "'{" + ",".join(["NULL"] * size) + "}'",
            "name": lit([f"job{i}" for i in ids], True),
            "user_name": lit([f"user{i % 7}" for i in ids], True),
            "uid": lit([1000] * size), "gid": lit([1000] * size),
            "account": lit([""] * size, True), "partition": lit(["debug"] * size, True),
            "state": lit(["PENDING"] * size, True), "exit_code": lit([0] * size),
            "exit_signal": lit([0] * size), "nnodes": lit([1] * size),
            "node_list": lit([""] * size, True), "cpus": lit([1] * size),
            "mem_mb": lit([0] * size), "time_limit_min": lit([60] * size),
            "submit_ms": lit([t0 + i for i in ids]), "eligible_ms": lit([t0 + i for i in ids]),
            "start_ms": lit([0] * size), "end_ms": lit([0] * size),
            "workdir": lit(["/home/user"] * size, True), "restarts": lit([0] * size),
            "reason": lit(["None"] * size, True), "dependency": lit([""] * size, True),
            "last_seq": lit(ids),
        }
        out.append("BEGIN;")
        out.append("EXECUTE jobs_ins('bench', " + ",".join(col[c] for c in COLS) + ");")
        if "noevents" not in variant and "idx" not in variant:
            out.append("EXECUTE ev_ins('bench', " + ",".join([
                lit(ids), lit(ids), lit(["submit"] * size, True), lit([t0 + i for i in ids]),
                lit(["PENDING"] * size, True)]) + ");")
        out.append(f"INSERT INTO spur_export (cluster, exported_seq) VALUES ('bench', {jid - 1}) "
                   "ON CONFLICT (cluster) DO UPDATE SET exported_seq = "
                   "GREATEST(spur_export.exported_seq, EXCLUDED.exported_seq);")
        out.append("COMMIT;")
    # The backend's CPU, read by psql's shell escape while the session is still open.
    out.append("\\setenv BPID :bpid")
    out.append(f"\\! cat /proc/$BPID/stat > {stat_path}")
    return "\n".join(out) + "\n"


def backend_cpu_s(pg, path, stat_path):
    p = subprocess.run(pg._as_user([pg.bin / "psql", "-q", "-X", "-v", "ON_ERROR_STOP=1",
                                    "-h", pg.sockdir, "-p", pg.port, "-U", pgtest.SUPERUSER,
                                    "-d", pgtest.DATABASE, "-f", path]),
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"bench/acct/pg_rows: psql failed:\n{p.stderr[-2000:]}")
    st = Path(stat_path).read_text()
    f = st[st.rfind(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("variants", nargs="*", default=list(VARIANTS))
    a = ap.parse_args()
    for v in a.variants:
        if v not in VARIANTS:
            sys.exit(f"bench/acct/pg_rows: unknown variant {v!r} (have: {', '.join(VARIANTS)})")
    why = pgtest.skip_reason()
    if why:
        sys.exit(f"bench/acct/pg_rows: {why}")
    schema, upsert, events = sql_from_source()
    pg = pgtest.Postgres()
    work = Path(tempfile.mkdtemp(prefix="spur-pgrows-", dir=pg.dir))
    os.chmod(work, 0o777)  # the server's user writes the stat file through psql
    try:
        jobs = a.batches * a.batch_size
        print(f"# {a.batches} transactions of {a.batch_size} new jobs each, the backend's CPU, "
              f"best of {a.repeat}; PostgreSQL {pg.bin}")
        print(f"{'variant':18} {'us/job':>8} {'s':>7}")
        for v in a.variants:
            path, stat = work / f"{v}.sql", work / "stat"
            path.write_text(script(v, schema, upsert, events, a.batches, a.batch_size, stat))
            os.chmod(path, 0o644)
            best = min(backend_cpu_s(pg, path, stat) for _ in range(a.repeat))
            print(f"{v:18} {best * 1e6 / jobs:8.1f} {best:7.2f}", flush=True)
    finally:
        pg.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
