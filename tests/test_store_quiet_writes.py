"""Issue 27: after a run that succeeded, the writes that would change nothing (failures in a
row already 0, the alerted flag already clear, no open incident) are not made: each took the
process's write turn (store._TURNS) and SQLite's write lock, which the daemon's 8 workers
queued on. What would change something is still written. Real SQLite files; another
connection holding the write lock (BEGIN IMMEDIATE) shows which calls need it."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from mdcron.state import store as store_module
from mdcron.state.store import Store
from mdcron.state.trouble import Locked

NOW = 1_800_000_030.0


@pytest.fixture
def store(tmp_path: Path):
    (tmp_path / "state").mkdir()
    with Store(tmp_path / "state" / "mdcron.db", host="alpha") as s:
        s.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
        yield s


@pytest.fixture
def writer_busy(store: Store):
    """Another writer holds the file's write lock; this process waits for it 0.3 s at most."""
    other = sqlite3.connect(store.path, isolation_level=None)
    old = store_module._lock_wait
    held = False

    def hold() -> None:
        nonlocal held
        other.execute("BEGIN IMMEDIATE")
        held = True

    store_module.limit_lock_wait(0.3)
    yield hold
    store_module.limit_lock_wait(old)
    if held:
        other.execute("ROLLBACK")
    other.close()


def test_a_success_after_a_success_needs_no_write_lock(store, writer_busy):
    writer_busy()
    # a call that took the write lock would wait 30 s for it (then fail, Locked): the bound
    # below tells that from none waiting with room for a loaded machine (0.25 s of a 0.3 s
    # wait did not)
    store_module.limit_lock_wait(30.0)
    began = time.monotonic()
    assert store.count_failure("a", False) == 0
    assert store.set_alerted("a", False) is False
    assert store.resolve_task_incidents("a", NOW, "the task succeeded") == []
    assert store.count_failure("ghost", False) == 0  # no row: nothing to reset either
    assert store.set_alerted("ghost", False) is False
    assert time.monotonic() - began < 10  # none waited out the other writer


@pytest.mark.parametrize("call", [
    lambda s: s.count_failure("a", False),
    lambda s: s.set_alerted("a", False),
    lambda s: s.resolve_task_incidents("a", NOW, "the task succeeded"),
])
def test_what_a_success_changes_still_takes_the_write_lock(store, writer_busy, call):
    store.count_failure("a", True)
    store.set_alerted("a", True)
    store.open_or_bump_incident("a", "failure", "exit 1", None, NOW)
    writer_busy()
    with pytest.raises(Locked):
        call(store)


def test_what_a_success_changes_is_written(store):
    assert store.count_failure("a", True) == 1
    assert store.set_alerted("a", True) is False
    opened, _ = store.open_or_bump_incident("a", "failure", "exit 1", None, NOW)
    store.open_or_bump_incident("b", "failure", "exit 1", None, NOW)
    assert store.count_failure("a", False) == 0
    assert store.task_state("a").consecutive_failures == 0
    assert store.set_alerted("a", False) is True
    assert store.set_alerted("a", True) is False  # it was cleared
    assert store.resolve_task_incidents("a", NOW, "the task succeeded") == [opened]
    assert [i["task_id"] for i in store.incidents() if i["status"] == "open"] == ["b"]


def test_a_run_holding_a_lease_writes_all_the_same(store):
    """Issue 11: a run's writes under a lease check it is still its own (leases.py); a
    skipped write would skip that check, so a store holding a lease writes as before."""
    store.fence = ("a", 1)
    store.fenced_off = "another host took the lease"
    for call in (lambda: store.count_failure("a", False), lambda: store.set_alerted("a", False),
                 lambda: store.resolve_task_incidents("a", NOW, "the task succeeded")):
        with pytest.raises(Exception, match="another host took the lease"):
            call()
