"""The tick's lean load (schedule/cache_fill.py, issue 27): a quiet file gets no Entry, and the
tick decides exactly what a full load decides: duplicate ids among quiet files still stop it
(and alert), a changed or removed quiet file is seen, a task_state row or cache row that moved
between the load and observe builds every Entry first.

Real SQLite files and the real CLI; the cache is aged instead of sleeping (conftest.age_cache)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import age_cache as age

from mdcron import __version__
from mdcron.core.clock import Clock
from mdcron.run.tick import run_tick
from mdcron.schedule import cache
from mdcron.settings.config import load_config
from mdcron.state import cache_key as keys

AT = datetime(2026, 11, 28, 11, 0, tzinfo=UTC)  # a Saturday


class FrozenClock(Clock):
    def now(self) -> float:
        return self.anchor.timestamp()


def tick(home: Path, at: datetime, **kw):
    config, _ = load_config(home)
    return run_tick(config, FrozenClock(at), say=lambda _line: None,
                    environ={"PATH": "/usr/bin:/bin"}, **kw)


def db_of(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)


def warm_home(home: Path, write_task) -> None:
    """`due` every minute, `hourly` at :00, `daily` at 06:00, `paused` disabled; two ticks so
    every row is cached with its next_due, then aged (not racily clean)."""
    write_task("due", command="true")
    write_task("hourly", schedule="0 * * * *", timezone="UTC", command="true")
    write_task("daily", schedule="0 6 * * *", timezone="UTC", command="true")
    write_task("paused", schedule="0 6 * * *", enabled=False, command="true")
    for minute in (0, 1):
        tick(home, AT + timedelta(minutes=minute))
        age(home)


def lean_view(home: Path, at: datetime):
    config, _ = load_config(home)
    return cache.load(config, lean=at.timestamp())


def test_a_due_tick_builds_entries_only_for_what_may_run(home, write_task):
    warm_home(home, write_task)
    at = AT + timedelta(minutes=30)
    view = lean_view(home, at)
    try:
        assert sorted(Path(p).name for p in view.quiet) == ["daily.md", "hourly.md", "paused.md"]
        assert [e.id for e in view.entries] == ["due"]
        assert view.count() == 4 and view.duplicates() == {}
        assert view.quiet  # the check above built nothing
    finally:
        view.close()
    report = tick(home, at)
    assert report.tasks == 4 and report.exit_code == 0
    assert [(p.task.id, p.action) for p in report.planned] == [("due", "run")]
    at = AT + timedelta(hours=1)  # hourly is due: built, and runs
    assert sorted(e.id for e in lean_view(home, at).entries) == ["due", "hourly"]
    assert sorted(p.task.id for p in tick(home, at).planned) == ["due", "hourly"]


def test_a_duplicate_id_among_quiet_files_stops_the_tick_and_alerts(home, write_task, cli):
    """daily.md keeps its cached row (quiet); hourly.md is edited to claim daily's id: the
    lean load must still see the two files, refuse to run anything (even `due`), and alert."""
    warm_home(home, write_task)
    write_task("daily", filename="hourly.md", schedule="0 * * * *", timezone="UTC",
               command="true")
    age(home)
    at = AT + timedelta(minutes=30)
    view = lean_view(home, at)
    try:
        assert "daily.md" in {Path(p).name for p in view.quiet}
        assert view.duplicates() == {"daily": [home / "tasks" / "daily.md",
                                               home / "tasks" / "hourly.md"]}
    finally:
        view.close()
    db = db_of(home)
    ran = db.execute("SELECT count(*) FROM runs").fetchone()[0]
    db.close()
    out = cli("tick", "--now", at.isoformat())
    assert out.returncode == 2, out.stdout + out.stderr
    assert "duplicate id 'daily'" in out.stderr
    assert "daily.md" in out.stderr and "hourly.md" in out.stderr
    db = db_of(home)
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == ran  # nothing ran
    assert db.execute("SELECT value FROM meta WHERE key = 'duplicate_alert'").fetchone()
    db.close()


def test_a_duplicate_id_between_two_quiet_rows_is_found(home, write_task, cli):
    """Both files cached with their next_due (b.md by `list`, twin having a state row) and
    quiet: the ids alone show the duplicate."""
    write_task("twin", filename="a.md", schedule="0 6 * * *", timezone="UTC", command="true")
    warm_home(home, write_task)
    write_task("twin", filename="b.md", schedule="0 6 * * *", timezone="UTC", command="true")
    assert cli("list", "--json").returncode == 0
    age(home)
    at = AT + timedelta(minutes=30)
    view = lean_view(home, at)
    try:
        assert {"a.md", "b.md"} <= {Path(p).name for p in view.quiet}
        assert view.duplicates() == {"twin": [home / "tasks" / "a.md", home / "tasks" / "b.md"]}
    finally:
        view.close()
    report = tick(home, at)
    assert report.exit_code == 2 and report.planned == []
    assert report.duplicates == {"twin": [home / "tasks" / "a.md", home / "tasks" / "b.md"]}


def test_an_edited_or_removed_quiet_file_is_seen(home, write_task):
    warm_home(home, write_task)
    write_task("daily", filename="daily.md", command="true")  # every minute now
    (home / "tasks" / "paused.md").unlink()
    at = AT + timedelta(minutes=30)
    report = tick(home, at)
    assert sorted(p.task.id for p in report.planned) == ["daily", "due"]
    assert report.tasks == 3
    db = db_of(home)
    paths = [Path(p).name for (p,) in db.execute("SELECT path FROM task_cache ORDER BY path")]
    db.close()
    assert paths == ["daily.md", "due.md", "hourly.md"]


def test_a_state_row_moved_after_the_load_builds_every_entry(home, write_task):
    """Between the lean load and observe another process moves hourly's last_slot back (its
    11:00 slot forgotten): hourly is due again, as a full load would find."""
    warm_home(home, write_task)
    at = AT + timedelta(minutes=30)
    view = lean_view(home, at)
    assert "hourly" in {i for _, i, _ in view.quiet.values()}
    db = db_of(home)
    db.execute("UPDATE task_state SET last_slot = ? WHERE task_id = 'hourly'",
               ((AT - timedelta(hours=1)).timestamp(),))
    db.close()
    report = tick(home, at, view=view)
    assert view.quiet == {}  # built: the state no longer agreed
    assert ("hourly", AT.timestamp()) in [(p.task.id, p.slot) for p in report.planned]


def test_cache_rows_rewritten_after_the_load_build_every_entry(home, write_task):
    """Another pass saved the cache between the lean load and observe (meta cache_gen moved):
    the quiet rows read are no longer proven to be the rows there, so every Entry is built."""
    warm_home(home, write_task)
    at = AT + timedelta(minutes=30)
    view = lean_view(home, at)
    assert view.quiet
    db = db_of(home)
    db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'cache_gen'")
    db.close()
    report = tick(home, at, view=view)
    assert view.quiet == {} and report.tasks == 4
    assert [p.task.id for p in report.planned] == ["due"]


def test_every_save_moves_cache_gen(home, write_task):
    warm_home(home, write_task)
    db = db_of(home)
    before = int(db.execute("SELECT value FROM meta WHERE key = 'cache_gen'").fetchone()[0])
    tick(home, AT + timedelta(minutes=2))
    after = int(db.execute("SELECT value FROM meta WHERE key = 'cache_gen'").fetchone()[0])
    db.close()
    assert after > before


def test_the_cache_key_is_hashed_once_for_the_same_inputs(monkeypatch):
    """Issue 27: a due tick asks for the key three times with the same inputs; the digest is
    computed once (state/cache_key.cache_key), and any input that changes gives a new one."""
    text = "+timezone: UTC\n"
    key = keys.cache_key(text)
    assert keys.cache_key(text) is key  # the same inputs: the last digest, not a new one
    whole = "\n".join((str(keys.CACHE_FORMAT), __version__, str(keys.SCHEMA_VERSION),
                       keys.code_fingerprint(), os.environ.get("HOME", ""), text,
                       os.uname().nodename))
    assert key == hashlib.sha256(whole.encode()).hexdigest()
    assert keys.cache_key("+timezone: Asia/Tokyo\n") != key
    monkeypatch.setenv("HOME", "/elsewhere")
    assert keys.cache_key(text) != key
    monkeypatch.undo()
    assert keys.cache_key(text) == key
