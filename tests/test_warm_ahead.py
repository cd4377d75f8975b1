"""The held tick's database work done before the minute (issue 27, cli/warm.py): the state
database opened ahead, its first write paid, its task_state rows read. The rows are not
trusted at the go when another process committed meanwhile (PRAGMA data_version)."""

from __future__ import annotations

import sqlite3

from conftest import age_cache as age
from conftest import run_cli
from test_daemon_warm import T0, T1, Held, _task

T1_EPOCH = 1795424460.0  # T1 (2026-11-23T09:01:00Z) as epoch seconds


def test_state_rows_another_process_changed_while_the_tick_waited_are_read_again(home):
    """Another writer moves task a's not_before past the minute while the tick waits (as a
    hold-back after a lost database does): the rows read ahead are stale, the tick reads them
    again and a does not run; b, untouched, does."""
    _task(home, "a", f"echo a > {home}/a-out")
    _task(home, "b", f"echo b > {home}/b-out")
    assert run_cli(home, "tick", "--now", T0).returncode == 0
    (home / "a-out").unlink()
    (home / "b-out").unlink()
    age(home)
    held = Held(home, "--now", T1)
    held.wait_held()
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    db.execute("UPDATE task_state SET not_before = ? WHERE task_id = 'a'", (T1_EPOCH + 1,))
    db.close()
    code, out, err = held.go()
    assert code == 0, out + err
    assert (home / "b-out").read_text() == "b\n"
    assert not (home / "a-out").exists()
