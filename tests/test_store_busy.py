"""state/store.py: a busy that SQLite answers at once, without its busy handler, is retried
within the store's lock budget; only a lock held past the budget stops the tick, and the line
says how long it waited.

SQLite never waits while its connection holds a read it must upgrade to a write: the switch of
a new (rollback-mode) file to WAL reads page 1, then writes it, so another opener's write lock
on the new file made the tick stop at once with "locked (held longer than 30 s)" (seen with
four ticks on a fresh home). The same holds for BEGIN IMMEDIATE on a connection with a read
still open. Real SQLite files, real lock holders (a second connection, a second process)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import SCHEDULER

from mdcron.state import store as store_module
from mdcron.state.schema import SCHEMA_VERSION
from mdcron.state.store import Store, StoreError
from mdcron.state.trouble import Locked, describe

NOW = "2026-11-23T10:00:00+00:00"
HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")  # a new file, still in rollback mode: its RESERVED lock
print("holding", flush=True)
sys.stdin.readline()
db.execute("ROLLBACK")
"""


def new_file(tmp_path: Path) -> Path:
    """An empty state/mdcron.db, as _open creates it before SQLite touches it."""
    path = tmp_path / "state" / "mdcron.db"
    path.parent.mkdir(mode=0o700)
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return path


@pytest.fixture
def budget():
    """The lock budget made short for one test, the way the dashboard shortens it: a lock held
    past it is waited out in 2 s, and a wait counted twice (the opening's, then the write's)
    would take twice that, a margin a loaded machine's late wake-ups do not eat."""
    old = store_module._lock_wait
    store_module.limit_lock_wait(2.0)
    yield 2.0
    store_module.limit_lock_wait(old)


@pytest.fixture
def roomy():
    """The lock budget for a lock released 0.3 s in (a timer thread): the real LOCK_BUDGET,
    so a loaded machine's late timer is waited for, not told as Locked (with 1 s, a timer
    0.7 s late failed the test)."""
    old = store_module._lock_wait
    store_module.limit_lock_wait(30.0)
    yield 30.0
    store_module.limit_lock_wait(old)


def holding(path: Path) -> sqlite3.Connection:
    """Another connection's write lock on `path` (RESERVED on a rollback-mode file)."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    return other


def release_after(other: sqlite3.Connection, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, other.execute, ("ROLLBACK",))
    timer.start()
    return timer


def test_sqlite_itself_refuses_the_wal_switch_at_once(tmp_path):
    """The cause, shown on SQLite itself: with a 30 s busy timeout, the switch of a new file to
    WAL fails at once (well under the timeout, even on a loaded machine) while another
    connection holds its write lock."""
    path = new_file(tmp_path)
    other = holding(path)
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError) as caught:
        db.execute("PRAGMA journal_mode = WAL")
    assert time.monotonic() - started < 10, "SQLite waited: the premise of store._retry_busy"
    assert caught.value.sqlite_errorname == "SQLITE_BUSY"
    db.close(), other.execute("ROLLBACK"), other.close()


def test_opening_a_new_file_waits_for_another_openers_lock(tmp_path, roomy):
    path = new_file(tmp_path)
    other = holding(path)
    timer = release_after(other, 0.3)
    store = Store(path)
    try:
        db = store.connect()  # before: StoreError "locked (held longer than 30 s)" at once
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert 0.25 < store._waited < roomy, store._waited  # the wait counts in the budget
    finally:
        timer.join(), store.close(), other.close()


def test_the_wait_of_an_opening_counts_in_the_stores_budget(tmp_path, roomy):
    """A new file already in WAL, whose migration waits in SQLite's own busy handler for
    another opener's write: that wait is part of the store's bound, not on top of it."""
    path = new_file(tmp_path)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("PRAGMA journal_mode = WAL")
    other.execute("BEGIN IMMEDIATE")
    timer = release_after(other, 0.3)
    store = Store(path)
    try:
        store.connect()
        assert 0.25 < store._waited < roomy, store._waited
    finally:
        timer.join(), store.close(), other.close()


def test_opening_a_new_file_held_past_the_budget_says_how_long_it_waited(tmp_path, budget):
    path = new_file(tmp_path)
    other = holding(path)
    started = time.monotonic()
    try:
        with pytest.raises(StoreError) as caught:
            Store(path).connect()
    finally:
        other.execute("ROLLBACK"), other.close()
    took = time.monotonic() - started
    assert budget <= took < 2 * budget, took
    line = str(caught.value)
    assert f"{path} is locked by another process (waited 2 s for it); fix: find the holder" \
        in line, line


def read_left_open(store: Store) -> sqlite3.Cursor:
    """A read on the store's own connection not read to its end: its snapshot stays open."""
    with store.write() as db:
        db.executemany("INSERT INTO meta(key, value) VALUES (?, '1')", [("a",), ("b",)])
    cursor = store.connect().execute("SELECT key FROM meta")
    cursor.fetchone()
    return cursor


def test_a_write_over_an_open_read_waits_for_another_writer(tmp_path, roomy):
    path = tmp_path / "state" / "mdcron.db"
    store = Store(path)
    cursor = read_left_open(store)
    other = holding(path)
    timer = release_after(other, 0.3)
    try:
        with store.write() as db:  # before: trouble.Locked at once (waited 0 s)
            db.execute("INSERT INTO meta(key, value) VALUES ('c', '1')")
        assert store.get_meta("c") == "1"
    finally:
        timer.join(), cursor.close(), store.close(), other.close()


def test_a_write_over_an_open_read_held_past_the_budget_is_locked(tmp_path, budget):
    path = tmp_path / "state" / "mdcron.db"
    store = Store(path)
    cursor = read_left_open(store)
    other = holding(path)
    left = budget - store._waited  # the opening's time counts in the bound
    started = time.monotonic()
    try:
        with pytest.raises(Locked) as caught, store.write():
            pass
    finally:
        cursor.close(), store.close(), other.execute("ROLLBACK"), other.close()
    assert left <= time.monotonic() - started < left + budget
    assert budget <= caught.value.waited < 2 * budget
    assert "waited 2 s" in describe(path, caught.value)


def test_a_busy_sqlite_did_not_wait_on_is_not_told_as_a_long_held_lock(tmp_path):
    exc = sqlite3.OperationalError("database is locked")
    line = describe(tmp_path / "mdcron.db", exc)
    assert "held longer" not in line and "waited" not in line, line
    assert "gave up without waiting" in line, line


def fd_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path)
                   for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_a_tick_on_a_fresh_home_waits_for_another_openers_lock(home, write_task):
    """The failure seen: a tick meeting another opener's write lock on the new database file
    stopped at once (exit 2, "locked ... held longer than 30 s"). Now it waits, and runs."""
    write_task("job", command=f"echo x >> {home}/ran")
    path = new_file(home)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout.readline() == "holding\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    tick = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                             "--now", NOW], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        deadline = time.monotonic() + 30
        while not fd_open(tick.pid, path) and tick.poll() is None:
            assert time.monotonic() < deadline, "the tick never opened its database"
            time.sleep(0.01)
        time.sleep(0.5)  # long past the at-once refusal of SQLite
        still_waiting = tick.poll() is None
        holder.stdin.write("go\n"), holder.stdin.flush()
        out, err = tick.communicate(timeout=60)
    finally:
        holder.kill(), holder.wait()
        if tick.poll() is None:
            tick.kill(), tick.wait()
    assert still_waiting, err
    assert tick.returncode == 0, out + err
    assert (home / "ran").read_text() == "x\n"


def test_the_locked_line_is_the_same_words_whatever_the_overshoot(tmp_path):
    """The direct alert collapses on the line's exact words: a wait past the bound by a
    fraction (a loaded machine's late wake-ups) is shown as the bound."""
    path = tmp_path / "mdcron.db"
    lines = {describe(path, Locked(waited, 30.0)) for waited in (30.0, 30.4, 31.7)}
    assert len(lines) == 1, lines
    assert "is locked by another process (waited 30 s for it)" in lines.pop()
    assert "(waited 2 s for it)" in describe(path, Locked(2.3, 2.0))  # the dashboard's bound
