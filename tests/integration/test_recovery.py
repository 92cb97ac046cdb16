"""A damaged newest snapshot, with the real worker (docs/storage-format.md, "A damaged
newest snapshot").

The rule: the worker falls back on the older of its two snapshots only while the log still
holds every entry after it up to the damaged one's index. What holds here, against real
processes on 127.0.0.1 with free ports and raft.snapshot_entries at its minimum (100):

  (a) newest snapshot damaged, the log still covers from the older one: the replica
      starts, logs an error-level line naming the damaged file, sets it aside as *.corrupt,
      and has every acknowledged job;
  (b) newest snapshot damaged and the log's entries after the older one gone (a torn tail
      that starts before them): the worker refuses with 65, which spurctld passes through,
      in ONE line that names the damaged file, the entries the older snapshot lacks, and
      what to do. Both recoveries that line recommends are carried out and checked: a
      single replica restored from a backup, and a cluster replica whose state directory
      is moved aside - it catches up from the leader and has every job.

Every wait is bounded; the fixtures kill every process.
"""
import glob
import json
import os
import shutil
import struct
import subprocess

import spurtest
from spurtest import wait_until

SNAPSHOT_ENTRIES = 100  # the smallest raft.snapshot_entries the configuration accepts


# ---- the files on disk (formats: docs/storage-format.md) --------------------------------

def snapshots(state):
    """[(index, term, path)] of the live snapshot files, oldest first."""
    out = []
    for p in glob.glob(os.path.join(state, "snap-*.snap")):
        _, i, t = os.path.basename(p)[:-len(".snap")].split("-")
        out.append((int(i, 16), int(t, 16), p))
    return sorted(out)


def segments(state):
    return sorted(glob.glob(os.path.join(state, "wal-*.log")))


def batches(path):
    """[(offset, [entry indexes])] of the valid-looking batches of a segment, in order."""
    with open(path, "rb") as f:
        data = f.read()
    out, off = [], 64
    while off + 32 <= len(data):
        _, kind, _, _, length, count, _, _ = struct.unpack_from("<IBBHIIQQ", data, off)
        if kind != 1 or length == 0:
            break
        pos, end, idx = off + 32, off + 32 + length, []
        for _ in range(count):
            _, fkind, _, _, flen, _, index, _ = struct.unpack_from("<IBBHIIQQ", data, pos)
            if fkind == 2:
                idx.append(index)
            pos += 32 + ((flen + 7) & ~7 if fkind == 2 else 0)
        out.append((off, idx))
        off = end
    return out, off


def damage_snapshot(path):
    """Flip the last data byte: the header stays valid, the data checksum fails."""
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        b = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([b[0] ^ 0x20]))


def tear_log_after(state, index):
    """Make the log lose every entry above index the way a torn tail does: the batch that
    holds index + 1 gets a garbled header and nothing valid follows it. Returns (segment,
    offset of the tear, (first, last) entry the log still holds)."""
    segs = segments(state)
    assert len(segs) == 1, segs  # 64 MiB segments: a test log never fills one
    seg = segs[0]
    bs, end = batches(seg)
    k = next(k for k, (_, idx) in enumerate(bs) if idx and max(idx) > index)
    off = bs[k][0]
    kept = [i for _, idx in bs[:k] for i in idx]
    with open(seg, "r+b") as f:
        f.seek(off)
        f.write(b"\0" * (end - off))
        f.seek(off)
        f.write(b"\x5a" * 40)  # a batch header that fails its checksum
    return seg, off, (min(kept), max(kept))


# ---- jobs -------------------------------------------------------------------------------

def bulk_write(c, ms):
    """Submit tiny jobs back to back for ms milliseconds; returns how many were acked."""
    writer = spurtest.BUILD / "bench" / "cluster" / "bench-writer"
    out = subprocess.run([str(writer), c.hosts(), "test", str(ms)], capture_output=True,
                         text=True, timeout=ms / 1000 + 30,
                         env=dict(os.environ, SPUR_JWT=c.token())).stdout
    return sum(1 for line in out.splitlines() if line.endswith(" 1"))


def submit(c, name):
    p = c.spur("sbatch", "--wrap=true", "-J", name)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.split()[-1])


def jobs(c, i):
    """{job_id: name} on replica i, read locally."""
    p = c.spur("squeue", "-t", "all", "--json", host=c.api(i), env={"SPUR_TIMEOUT_MS": "10000"})
    assert p.returncode == 0, p.stderr
    return {j["job_id"]: j["name"] for j in json.loads(p.stdout)}


def write_until_two_snapshots(c, i, state):
    """Write until replica i holds two snapshots with log entries after the newer one.
    Returns what was acknowledged: (bulk count, {job_id: name} of named jobs)."""
    acked = 0
    for _ in range(40):  # bounded: 40 x 0.5 s of writes at most
        acked += bulk_write(c, 500)
        s = snapshots(state)
        if len(s) >= 2 and s[-1][0] > s[-2][0]:
            break
    else:
        raise AssertionError(f"no two snapshots after {acked} writes: {snapshots(state)}")
    named = {}
    for k in range(3):  # acknowledged after the newest snapshot: only the log has them
        name = f"after-snapshot-{k}"
        named[submit(c, name)] = name
    return acked, named


def check_every_job(c, i, acked, named):
    have = jobs(c, i)
    for jid, name in named.items():
        assert have.get(jid) == name, (jid, name)
    # Job ids are handed out one by one: none may be missing below the highest.
    assert sorted(have) == list(range(1, max(have) + 1))
    assert len(have) >= acked + len(named)
    return have


def worker_lines(s):
    return [l for l in s.log_lines() if "prog=spurctld-raftd" in l]


def expected_refusal(state, newest, older, torn_seg, torn_off, held):
    """The message of storage_open's refusal (raftd/storage/storage.c), exactly."""
    size = os.path.getsize(newest[2])
    return (
        f"storage: corrupt snapshot {newest[2]} at offset 64: checksum mismatch in the "
        f"{size - 64} bytes of configuration and data; the older snapshot "
        f"{os.path.basename(older[2])} (index {older[0]}) cannot replace it: the log must "
        f"hold entries {older[0] + 1}..{newest[0]} but lacks {older[0] + 1}..{newest[0]} "
        f"(it holds {held[0]}..{held[1]}); the log ends in a torn tail at offset {torn_off} "
        f"of {os.path.basename(torn_seg)}. Refusing to start: this replica cannot rebuild "
        f"its state. In a cluster, and only while the other replicas form a quorum with a "
        f"leader: move the state directory {state} aside and start this replica empty; the "
        f"leader catches it up. A single replica: restore the state directory from a backup "
        f"(docs/storage-format.md)")


def check_refusal(s, state, newest, older, torn_seg, torn_off, held):
    assert s.wait_exit(30) == 65
    errors = [l for l in worker_lines(s) if "level=error" in l]
    assert len(errors) == 1, errors
    line = errors[0]
    assert 'msg="cannot start the replica; exiting" exit=65 error="' in line, line
    msg = line.split(' error="', 1)[1][:-1]
    assert msg == expected_refusal(state, newest, older, torn_seg, torn_off, held), line
    assert "exit=65" in s.last_sup_line()
    # Refusing changed nothing: no file renamed, the torn bytes still in place.
    assert [p for _, _, p in snapshots(state)][-1] == newest[2]
    assert not glob.glob(os.path.join(state, "*.corrupt"))
    with open(torn_seg, "rb") as f:
        f.seek(torn_off)
        assert f.read(40) == b"\x5a" * 40


def one_replica_stopped_with_two_snapshots(cluster_factory):
    """A one-replica cluster written to until its state dir holds two snapshots, then
    stopped cleanly. Returns (c, state dir, acked, named, the jobs it held)."""
    c = cluster_factory(1, raft={"snapshot_entries": SNAPSHOT_ENTRIES})
    c.start_all()
    c.wait_ready()
    state = c.state_dir(1)
    acked, named = write_until_two_snapshots(c, 1, state)
    before = jobs(c, 1)
    assert c.stop(1) == 0
    return c, state, acked, named, before


# ---- (a) the log covers: fall back -------------------------------------------------------

def test_damaged_newest_snapshot_falls_back_when_the_log_covers(cluster_factory):
    c, state, acked, named, before = one_replica_stopped_with_two_snapshots(cluster_factory)
    older, newest = snapshots(state)[-2:]
    damage_snapshot(newest[2])

    s = c.start(1)
    s.wait_ready(30)
    lines = [l for l in worker_lines(s) if "newest snapshot is damaged" in l]
    assert len(lines) == 1, s.log()
    assert "level=error" in lines[0]
    assert f"damaged={os.path.basename(newest[2])}" in lines[0]
    assert f"using={os.path.basename(older[2])}" in lines[0]
    assert f"from_log={older[0] + 1}..{newest[0]}" in lines[0]
    assert os.path.exists(newest[2] + ".corrupt")
    assert f"snapshot={older[0]} " in next(l for l in worker_lines(s) if "state recovered" in l)
    assert check_every_job(c, 1, acked, named) == before
    # And it goes on taking writes.
    jid = submit(c, "after-fallback")
    assert jid == max(before) + 1


# ---- (b) the log does not cover: refuse with 65, say what to do, and it works ------------

def test_single_replica_refuses_65_and_a_restored_backup_starts(cluster_factory, tmp_path):
    c, state, acked, named, before = one_replica_stopped_with_two_snapshots(cluster_factory)
    backup = tmp_path / "backup"
    shutil.copytree(state, backup)
    older, newest = snapshots(state)[-2:]
    damage_snapshot(newest[2])
    seg, off, held = tear_log_after(state, older[0])

    s = c.start(1)
    check_refusal(s, state, newest, older, seg, off, held)
    # It keeps refusing (no restart loop would help, and nothing was half-repaired).
    assert c.start(1).wait_exit(30) == 65

    # What the line says for a single replica: restore the state directory from a backup.
    os.rename(state, state + ".damaged")
    shutil.copytree(backup, state)
    c.start(1).wait_ready(30)
    assert check_every_job(c, 1, acked, named) == before


def test_cluster_replica_refuses_65_and_moving_its_state_aside_recovers(cluster_factory):
    c = cluster_factory(3, raft={"snapshot_entries": SNAPSHOT_ENTRIES})
    c.start_all()
    c.wait_ready()
    lid = c.leader()
    victim = c.follower(lid)
    state = c.state_dir(victim)
    acked, named = write_until_two_snapshots(c, victim, state)
    commit = c.status(lid)["commit_index"]
    wait_until(lambda: c.applied_index(victim) >= commit, 15,
               what="victim applied everything")
    assert c.stop(victim) == 0
    older, newest = snapshots(state)[-2:]
    damage_snapshot(newest[2])
    seg, off, held = tear_log_after(state, older[0])

    s = c.start(victim)
    check_refusal(s, state, newest, older, seg, off, held)

    # The other two hold a quorum with a leader, and keep taking writes meanwhile.
    survivors = [i for i in (1, 2, 3) if i != victim]
    lid = c.leader(among=survivors)
    named[submit(c, "while-refused")] = "while-refused"

    # What the line says for a cluster: move the state directory aside, start empty.
    os.rename(state, state + ".damaged")
    s = c.start(victim)
    s.wait_ready(30)
    assert "founding the cluster" not in s.log()
    commit = c.status(lid)["commit_index"]
    wait_until(lambda: c.applied_index(victim) >= commit, 20,
               what="the rebuilt replica caught up")
    have = check_every_job(c, victim, acked, named)
    assert have == jobs(c, lid)
    # A full member again: it takes part in the next write.
    named[submit(c, "after-rebuild")] = "after-rebuild"
    wait_until(lambda: "after-rebuild" in jobs(c, victim).values(), 15)
