"""Issue 22 item 7: a SQLite state database in trouble (read-only, a damaged page, locked by
another process past the bound, a full disk mid-run) stops the tick with one line naming the
file, the cause and the fix, exit 2, never a traceback, and an alert that needs no database.
A run that ended while the database refused its result keeps its real outcome (the spool) and
the next tick records it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faultlib import BEFORE, NOW, db_path, query, run_cli, wait_until

LATER = "2026-11-23T10:01:00+00:00"
HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close()
time.sleep(600)
"""


def sink_yaml(sink) -> str:
    return f"notify:\n  destinations:\n    ops: \"{sink.json_url()}\"\n"


def seeded(home: Path, write_task, sink) -> None:
    (home / "scheduler.yaml").write_text(sink_yaml(sink))
    write_task("t", schedule="0 10 * * *", command=f"touch {home}/ran")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    db = sqlite3.connect(db_path(home))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    db.close()


def assert_one_clear_line(out, home: Path, cause: str, fix: str) -> None:
    said = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    assert len(said) == 1, said
    [line] = said
    assert str(db_path(home)) in line and cause in line and "fix: " + fix in line, line
    assert "alert sent to 'ops'" in line, line


def alerted(sink) -> list[str]:
    return [b["title"] for b in sink.bodies() if isinstance(b, dict)]


def chattr(flag: str, paths: list[Path]) -> bool:
    done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True)
    return done.returncode == 0


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_database_is_one_line_and_one_alert(home, write_task, http_sink, what):
    import os

    if os.geteuid() != 0:
        pytest.skip("chattr +i needs root")
    seeded(home, write_task, http_sink)
    locked = [db_path(home)] if what == "file" else [*(home / "state").glob("mdcron.db*"),
                                                     home / "state"]
    if not chattr("+i", locked):
        pytest.skip("this filesystem has no immutable attribute")
    try:
        out = run_cli(home, "tick", "--now", NOW)
        assert_one_clear_line(out, home, "is marked immutable", "chattr -i")
        assert not (home / "ran").exists()
        assert any("state database" in t for t in alerted(http_sink))
        again = run_cli(home, "tick", "--now", LATER)  # the same trouble: collapsed
        assert again.returncode == 2 and "already sent" in again.stderr, again.stderr
        assert len(alerted(http_sink)) == 1
    finally:
        chattr("-i", locked)


def test_a_damaged_page_is_one_line_and_one_alert(home, write_task, http_sink):
    seeded(home, write_task, http_sink)
    [(root,)] = query(home, "SELECT rootpage FROM sqlite_master WHERE name = 'task_state'")
    with open(db_path(home), "r+b") as f:  # a page in the middle of the file
        f.seek((root - 1) * 4096)
        f.write(b"\xde\xad\xbe\xef" * 1024)
    out = run_cli(home, "tick", "--now", NOW)
    assert_one_clear_line(out, home, "is damaged", "stop cron")
    assert ".recover" in out.stderr
    assert any("state database" in t for t in alerted(http_sink))


def test_a_database_locked_past_the_bound_is_one_line_within_it(home, write_task, http_sink,
                                                                tmp_path):
    seeded(home, write_task, http_sink)
    ready = tmp_path / "holding"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db_path(home)), str(ready)])
    try:
        wait_until(ready.exists, "the other process holding BEGIN EXCLUSIVE")
        started = time.monotonic()
        out = run_cli(home, "tick", "--now", NOW, timeout=120)
        took = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    print(f"a tick against a database locked by another process ended in {took:.1f} s")
    assert_one_clear_line(out, home, "is locked by another process", "find the holder")
    assert "(waited 30 s for it)" in out.stderr, out.stderr  # the real wait, whole seconds
    assert took < 50, took  # 30 s of lock waits, not 60 s per statement
    assert not (home / "ran").exists()


@pytest.fixture
def small_state(home: Path):
    """state/ on a 1 MiB tmpfs made by the test (needs root, or a kernel that lets us mount)."""
    where = home / "state"
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs",
                           str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {done.stderr.decode()[:200]}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_disk_that_fills_mid_run_keeps_the_runs_real_outcome(home, write_task, http_sink,
                                                              small_state):
    (home / "scheduler.yaml").write_text(sink_yaml(http_sink))
    filler = small_state / "filler"
    write_task("fill", schedule="0 10 * * *",
               command=f"head -c 2000000 /dev/zero > {filler} 2>/dev/null; echo filled; true")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    out = run_cli(home, "tick", "--now", NOW)
    assert_one_clear_line(out, home, "its disk is full", "free space")
    assert "outcome is kept in" in out.stderr
    assert any("state database" in t for t in alerted(http_sink))
    filler.unlink()  # the person frees the space
    nxt = run_cli(home, "tick", "--now", LATER)
    assert nxt.returncode == 0 and "Traceback" not in nxt.stderr, nxt.stdout + nxt.stderr
    [(status, tail, extra)] = query(home, "SELECT status, output_tail, coalesce(extra, '')"
                                          " FROM runs WHERE task_id = 'fill'")
    assert status == "success" and "filled" in tail, (status, tail, extra)  # not crashed
    assert "from the spool" in extra
    assert not list(home.glob("*/spool.jsonl"))
