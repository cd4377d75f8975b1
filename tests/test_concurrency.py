"""Exactly once per slot, locks, crashes and stale holders: real ticks in real processes."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from conftest import SCHEDULER, overdue_lock, run_cli

from mdcron.run.locks import read_info
from mdcron.run.process import group_alive

NOW = "2026-11-23T10:00:00+00:00"
BEFORE = "2026-11-23T09:59:00+00:00"


def statuses(home: Path, task_id: str) -> list[tuple[str, str]]:
    db = sqlite3.connect(home / "state" / "mdcron.db")
    rows = db.execute(
        "SELECT status, coalesce(error, '') FROM runs WHERE task_id = ? ORDER BY id", (task_id,)
    ).fetchall()
    db.close()
    return rows


def wait_for(path: Path, timeout: float = 30.0) -> None:
    """Wait for an event (a file the task writes), not for the clock."""
    give_up = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < give_up, f"{path} never appeared"
        time.sleep(0.01)


def _recorded_pgid(lock: Path, timeout: float = 30.0) -> int:
    """The task's process group once its tick has written it into the lock (an event)."""
    give_up = time.monotonic() + timeout
    while True:
        info = read_info(lock)
        if info is not None and info.pgid is not None:
            return info.pgid
        assert time.monotonic() < give_up, f"{lock} never named the task's process group"
        time.sleep(0.01)


def start_tick(home: Path, now: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCHEDULER), "--home", str(home), "tick", "--now", now],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def group_gone(pgid: int) -> bool:
    # zombies count as gone: this machine's PID 1 does not reap orphans
    return not group_alive(pgid)


def test_ten_simultaneous_ticks_run_each_due_task_once(home, write_task):
    marks = home / "marks"
    marks.mkdir()
    for i in range(12):
        write_task(f"t{i:02d}", schedule="0 10 * * *",
                   command=f"echo $MDCRON_RUN_ID >> {marks}/t{i:02d}")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0  # first seen
    ticks = [start_tick(home, NOW) for _ in range(10)]
    outs = [t.communicate(timeout=120) for t in ticks]
    assert all(t.returncode == 0 for t in ticks), outs
    assert not any("database is locked" in err for _, err in outs)
    for i in range(12):
        assert len((marks / f"t{i:02d}").read_text().split()) == 1
        assert statuses(home, f"t{i:02d}") == [("success", "")]


def test_running_task_makes_the_next_slot_skip_not_queue(home, write_task):
    started, release = home / "started", home / "release"
    wait = f"while [ ! -e {release} ]; do sleep 0.02; done"
    write_task("long", schedule="0,1 10 * * *", command=f"touch {started}; {wait}", timeout=120)
    run_cli(home, "tick", "--now", BEFORE)
    first = start_tick(home, NOW)
    wait_for(started)
    second = run_cli(home, "tick", "--now", "2026-11-23T10:01:00+00:00")
    assert "still running" in second.stdout
    release.touch()
    first.communicate(timeout=60)
    assert [s for s, _ in statuses(home, "long")] == ["success", "skipped"]


def test_killed_tick_leaves_crashed_row_and_no_double_run(home, write_task):
    started, release, count = home / "started", home / "release", home / "count"
    write_task("victim", schedule="0 10 * * *", timeout=300, command=(
        f"echo x >> {count}; touch {started}; while [ ! -e {release} ]; do sleep 0.02; done"))
    run_cli(home, "tick", "--now", BEFORE)
    proc = start_tick(home, NOW)
    wait_for(started)
    # killed once the tick recorded the task's group: a tick killed before that is the spawn
    # gap, whose task the next tick ends (tests/faults/test_fault_spawn_gap.py)
    _recorded_pgid(home / "state" / "locks" / "victim.lock")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the orphaned task still holds the lock: a tick now must neither run it again nor
    # declare it crashed while it is alive
    run_cli(home, "tick", "--now", "2026-11-23T10:00:30+00:00")
    assert statuses(home, "victim") == [("running", "")]
    release.touch()
    give_up = time.monotonic() + 20
    while True:  # wait until the orphan has exited and released its lock
        out = run_cli(home, "tick", "--now", "2026-11-23T10:02:00+00:00")
        if statuses(home, "victim")[0][0] != "running":
            break
        assert time.monotonic() < give_up, out.stdout + out.stderr
        time.sleep(0.05)
    [(status, error)] = statuses(home, "victim")
    assert status == "crashed" and "died" in error
    assert count.read_text().count("x") == 1
    assert not list((home / "state" / "locks").glob("*.lock")) or all(
        p.read_text() == "" for p in (home / "state" / "locks").glob("*.lock"))


def test_stale_lock_holder_is_killed_and_recorded_as_timeout(home, write_task):
    started = home / "started"
    (home / "scheduler.yaml").write_text("kill_grace: 0.5\n")
    write_task("hung", schedule="0 10 * * *", timeout=5, command=(
        f"sh -c 'trap \"\" TERM; echo $$ > {home}/grandchild; sleep 300' & touch {started}; wait"))
    run_cli(home, "tick", "--now", BEFORE)
    proc = start_tick(home, NOW)
    wait_for(started)
    wait_for(home / "grandchild")
    # the task may get this far before its tick records the process group in the lock
    pgid = _recorded_pgid(home / "state" / "locks" / "hung.lock")
    proc.send_signal(signal.SIGKILL)  # the tick dies; its task keeps the lock, hung
    proc.wait()
    lock = (home / "state" / "locks" / "hung.lock").read_text()
    pgid = int(lock.split('"pgid": ')[1].split(",")[0])
    # 10 minutes later (well past timeout + 60 s on the monotonic clock the lock records), the
    # next tick kills the whole group
    overdue_lock(home, "hung")
    out = run_cli(home, "tick", "--now", "2026-11-23T10:10:00+00:00")
    assert "timeout" in out.stdout, out.stdout + out.stderr
    [(status, error)] = statuses(home, "hung")
    assert status == "timeout" and "stale lock" in error
    assert group_gone(pgid)
