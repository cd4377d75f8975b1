"""Issue 27: a tick with more due runs than `max_parallel` claims the first round's, starts
them, and claims the others then (run/dispatch.first_round, run_all's `more`); each run
still starts only once its claim is committed, and a slot another tick claimed first is
still said and not run. In process (run_tick, an injected clock), real files, real SQLite
and real processes; on both state back ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mdcron.core.clock import Clock
from mdcron.run.attempt import current_owner
from mdcron.run.dispatch import Planned, first_round
from mdcron.run.tick import run_tick
from mdcron.settings.config import load_config
from mdcron.state.store import state_store
from mdcron.tasks.taskfile import load_task_file

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)

pytestmark = pytest.mark.usefixtures("state_url_env")


def tick(home: Path, at: datetime, said: list[str]):
    config, _ = load_config(home)
    return run_tick(config, Clock(at), say=said.append, environ={"PATH": "/usr/bin:/bin"})


def test_every_due_run_once_and_a_later_slot_claimed_elsewhere_is_said_not_run(home,
                                                                              write_task):
    (home / "scheduler.yaml").write_text("max_parallel: 2\n", encoding="utf-8")
    ids = ["a", "b", "c", "d", "e"]
    for task_id in ids:
        write_task(task_id, command=f"echo {task_id}")
    tick(home, T0, [])  # first seen
    at = T0 + timedelta(minutes=1)
    config, _ = load_config(home)
    with state_store(config) as store, store.write() as db:  # another tick claimed e's slot
        db.execute(  # first, committed after this tick read the task states (its last_slot)
            "INSERT INTO runs(task_id, scheduled_for, trigger, attempt, kind, status, started_at,"
            " owner_pid) VALUES ('e', ?, 'schedule', 1, 'run', 'running', ?, 1)",
            (at.timestamp(), at.timestamp()))
    said: list[str] = []
    report = tick(home, at, said)
    assert sorted(t.id for t, _, r in report.results if r.ok) == ["a", "b", "c", "d"]
    assert report.lost_claims == ["e"]
    assert "e: due, but another tick claimed this slot first" in said
    with state_store(config) as store:
        rows = store._rows("SELECT task_id, status, owner_pid FROM runs WHERE scheduled_for = ?",
                           (at.timestamp(),))
    assert sorted((r["task_id"], r["status"]) for r in rows) == [
        ("a", "success"), ("b", "success"), ("c", "success"), ("d", "success"),
        ("e", "running")]  # e's row is the other tick's, untouched
    assert {r["owner_pid"] for r in rows if r["task_id"] != "e"} == {current_owner().pid}


def test_first_round_is_the_skips_and_the_first_max_parallel_runs(home, write_task):
    config, _ = load_config(home)
    tasks = [load_task_file(write_task(i, command="true"), config)[0] for i in "abcde"]
    planned = [Planned(tasks[0], "skip", 60.0, "catch-up"),
               *(Planned(t, "run", 60.0, "") for t in tasks[1:])]
    first, rest = first_round(planned, 2)
    assert [(p.task.id, p.action) for p in first] == [("a", "skip"), ("b", "run"), ("c", "run")]
    assert [p.task.id for p in rest] == ["d", "e"]
    assert first_round(planned, 4) == (planned, [])  # one round: claimed at once, as before
    assert first_round(planned, 1) == (planned, [])  # one by one in the tick's thread
