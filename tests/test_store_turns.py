"""state/store.py, issue 27: the writers of one process take turns on a lock of their own, so
one waiting for another thread's write goes as soon as it commits (SQLite's own wait sleeps
1, 2, 5, ... 100 ms between tries). Real SQLite file, real threads."""

from __future__ import annotations

import threading
import time

import pytest

from mdcron.state import store as store_module
from mdcron.state.store import Store
from mdcron.state.trouble import Locked

HOLD = 0.45  # seconds the first writer holds its transaction


def commit_to_begin_gap(path) -> float:
    """Seconds between one thread's commit and a waiting thread's write beginning."""
    first, second = Store(path), Store(path)
    first.connect(), second.connect()
    inside, stamps = threading.Event(), {}

    def hold() -> None:
        with first.write() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('a', '1')")
            inside.set()
            time.sleep(HOLD)
            stamps["committing"] = time.monotonic()

    def wait() -> None:
        inside.wait(10)
        with second.write() as db:
            stamps["began"] = time.monotonic()
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('b', '1')")

    threads = [threading.Thread(target=hold), threading.Thread(target=wait)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    first.close(), second.close()
    return stamps["began"] - stamps["committing"]


def test_a_writer_waiting_on_another_thread_goes_as_soon_as_it_commits(tmp_path):
    """Without the turns, the waiting write's next try after a 0.45 s hold came ~75 ms after
    the commit (SQLite's sleeps: ... 50, 50, 100, 100 ms); with them, at once."""
    path = tmp_path / "state" / "mdcron.db"
    with Store(path):
        pass  # created and migrated
    gaps = [commit_to_begin_gap(path) for _ in range(3)]
    assert min(gaps) < 0.03, gaps


def test_a_write_inside_a_write_of_the_same_thread_still_meets_sqlites_lock(tmp_path):
    """Re-entrant: a second connection's write inside the first (one thread) is not held up
    by the turn; SQLite refuses it within the budget as before (trouble.Locked)."""
    path = tmp_path / "state" / "mdcron.db"
    outer, inner = Store(path), Store(path)
    old = store_module._lock_wait
    store_module.limit_lock_wait(0.2)
    try:
        with outer.write(), pytest.raises(Locked), inner.write():
            pass
    finally:
        store_module.limit_lock_wait(old)
        outer.close(), inner.close()
