"""Chains (schedule/chains.py) as their public functions answer (issue 28: mutation survivors):
the cross-file checks people read from `validate`, which upstream slots count, which slots a
downstream claims (one upstream, fan-in windows), and what `next` says. Rows come from a real
SQLite state through the store's own writes; no function of the project is patched."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from conftest import SCHEDULER, run_cli

from mdcron.core.outcome import Outcome, RunResult
from mdcron.core.records import replace
from mdcron.run.locks import LockInfo, TaskLock, boot_id, lock_path, process_start_time
from mdcron.schedule.chains import (
    Pending,
    UpSlot,
    check_graph,
    decide_many,
    decide_one,
    explain,
    hold_back,
    next_lines,
    pending_for,
    previous_run,
    schedule_text,
    upstream_slots,
    window_of,
)
from mdcron.settings.config import load_config
from mdcron.state.runs import Owner
from mdcron.state.store import Store, TaskState
from mdcron.tasks.task import Task

UTC_ZONE = ZoneInfo("UTC")
RIGA = ZoneInfo("Europe/Riga")  # UTC+2 in November
SLOT_0900 = 1795424400.0  # 2026-11-23 09:00 UTC
HOUR = 3600.0
DAY = 86400.0
OWNER = Owner(pid=4242, start=1, boot="boot")


def task(task_id: str, *after: str, **kw: object) -> Task:
    fields: dict = {"schedule": "after " + ", ".join(after) if after else "0 9 * * *",
                    "title": task_id, "after": tuple(after)}
    fields.update(kw)
    return Task(id=task_id, path=Path(f"/home/x/tasks/{task_id}.md"), **fields)


def state(task_id: str, *, not_before: float = 0.0, last_slot: float | None = None) -> TaskState:
    return TaskState(task_id, not_before, not_before, last_slot, True, 0, None)


def up(slot: float, status: str = "success", error: str | None = None,
       task_id: str = "extract") -> UpSlot:
    return UpSlot(task_id, slot, status, error)


# --------------------------------------------------------------- check_graph (validate)


def test_an_unknown_upstream_is_an_error_with_a_did_you_mean():
    t1 = task("t1", "extrct")
    problems, broken = check_graph([task("extract"), t1], {"extract": True, "t1": True})
    assert [(p.path, p.message, p.key, p.severity) for p in problems] == [
        (t1.path, "after: unknown upstream task 'extrct'; did you mean 'extract'?", "schedule",
         "error")]
    assert broken == {"t1"}


def test_an_unknown_upstream_with_no_close_id_says_no_file_has_it():
    t1 = task("t1", "zzzzzz")
    problems, broken = check_graph([t1], {"extract": True, "t1": True})
    assert [p.message for p in problems] == [
        "after: unknown upstream task 'zzzzzz'; no task file has that id"]
    assert broken == {"t1"}


def test_a_disabled_upstream_is_a_warning_naming_its_file_and_the_task_still_may_run():
    t2 = task("t2", "extract")
    problems, broken = check_graph([t2], {"extract": False, "t2": True},
                                   {"extract": Path("/home/x/tasks/daily-extract.md")})
    assert [(p.path, p.message, p.key, p.severity) for p in problems] == [
        (t2.path, "after: upstream 'extract' (daily-extract.md) is disabled; t2 waits until it"
         " is enabled and succeeds", "schedule", "warning")]
    assert broken == set()


def test_a_disabled_upstream_whose_file_is_unknown_is_named_by_id_only():
    problems, _ = check_graph([task("t2", "extract")], {"extract": False, "t2": True})
    assert [p.message for p in problems] == [
        "after: upstream 'extract' is disabled; t2 waits until it is enabled and succeeds"]


def test_a_disabled_chained_upstream_is_named_by_its_own_file():
    """The upstream is itself a downstream: its file is known without `paths`."""
    mid = task("mid", "head")
    problems, _ = check_graph([mid, task("tail", "mid")], {"head": True, "mid": False,
                                                          "tail": True})
    assert [p.message for p in problems] == [
        "after: upstream 'mid' (mid.md) is disabled; tail waits until it is enabled and"
        " succeeds"]


def test_enabled_known_upstreams_give_no_problem():
    assert check_graph([task("a"), task("b", "a"), task("c", "a", "b")],
                       {"a": True, "b": True, "c": True}) == ([], set())


def test_a_cycle_names_every_file_once_per_task_in_the_waiting_order():
    tasks = [task("a", "c"), task("b", "a"), task("c", "b"), task("d", "a"), task("e")]
    enabled = {t.id: True for t in tasks}
    problems, broken = check_graph(tasks, enabled)
    text = ("after: chain cycle a → c → b → a (files: a.md, b.md, c.md); a chain must end:"
            " remove one after")
    assert [(p.path.name, p.message, p.key, p.severity) for p in problems] == [
        ("a.md", text, "schedule", "error"), ("b.md", text, "schedule", "error"),
        ("c.md", text, "schedule", "error")]
    assert broken == {"a", "b", "c"}  # d only waits for a: not part of the cycle


def test_two_cycles_are_both_reported():
    tasks = [task("a", "b"), task("b", "a"), task("x", "y"), task("y", "x"), task("ok", "a")]
    problems, broken = check_graph(tasks, {t.id: True for t in tasks})
    assert broken == {"a", "b", "x", "y"}
    assert sorted(p.path.name for p in problems) == ["a.md", "b.md", "x.md", "y.md"]
    assert all("chain cycle" in p.message for p in problems)


def test_a_task_after_itself_is_a_cycle_of_one():
    problems, broken = check_graph([task("z", "z")], {"z": True})
    assert [p.message for p in problems] == [
        "after: chain cycle z → z (files: z.md); a chain must end: remove one after"]
    assert broken == {"z"}


def test_the_schedule_text_lists_every_upstream():
    assert schedule_text(task("d", "b", "c")) == "after b, c"
    assert schedule_text(task("b", "a")) == "after a"


# --------------------------------------------------------------- window_of (pure)


def test_a_window_is_the_local_date_for_a_day():
    late = datetime(2026, 11, 23, 22, 30, tzinfo=UTC).timestamp()  # 00:30 on the 24th in Riga
    days = (datetime(2026, 11, 24) - datetime(1970, 1, 1)).days
    assert window_of(late, RIGA, DAY) == days
    assert window_of(late, UTC_ZONE, DAY) == days - 1


def test_windows_shorter_than_a_day_are_aligned_to_local_midnight():
    at = datetime(2026, 11, 23, 9, 59, tzinfo=UTC).timestamp()  # 11:59 in Riga
    days = (datetime(2026, 11, 23) - datetime(1970, 1, 1)).days
    assert window_of(at, RIGA, HOUR) == days * 24 + 11
    assert window_of(at, RIGA, 6 * HOUR) == days * 4 + 1


def test_windows_before_1970_count_down_not_toward_zero():
    assert window_of(-5 * HOUR, UTC_ZONE, DAY) == -1  # 1969-12-31 19:00: the day before
    assert window_of(5 * HOUR, UTC_ZONE, DAY) == 0


# --------------------------------------------------------------- decide_one (pure)


def test_one_upstream_success_gives_one_run_for_its_slot_in_the_tasks_zone():
    t = task("load", "extract")
    assert decide_one(t, state("load"), [up(SLOT_0900)], RIGA, False) == [
        Pending(t, "run", SLOT_0900, "upstream extract succeeded at 11:00")]
    assert decide_one(t, state("load"), [up(SLOT_0900, "failed", "exit 3")], RIGA, False) == [
        Pending(t, "skip", SLOT_0900, "upstream extract failed at 11:00 (exit 3)")]


def test_each_ended_upstream_slot_is_skipped_saying_how_it_ended_up_to_the_next_success():
    t = task("load", "extract")
    ups = [up(SLOT_0900, "failed", "exit 3"), up(SLOT_0900 + HOUR, "timeout"),
           up(SLOT_0900 + 2 * HOUR, "crashed", "killed by signal 9"),
           up(SLOT_0900 + 3 * HOUR, "success"), up(SLOT_0900 + 4 * HOUR, "failed", "exit 1")]
    got = decide_one(t, state("load"), ups, UTC_ZONE, False)
    assert [(p.action, p.slot, p.reason) for p in got] == [
        ("skip", SLOT_0900, "upstream extract failed at 09:00 (exit 3)"),
        ("skip", SLOT_0900 + HOUR, "upstream extract timed out at 10:00"),
        ("skip", SLOT_0900 + 2 * HOUR, "upstream extract crashed at 11:00 (killed by signal 9)"),
        ("run", SLOT_0900 + 3 * HOUR, "upstream extract succeeded at 12:00")]


def test_a_running_upstream_slot_stops_the_walk():
    t = task("load", "extract")
    ups = [up(SLOT_0900, "skipped", "quiet hours"), up(SLOT_0900 + HOUR, "running"),
           up(SLOT_0900 + 2 * HOUR)]
    assert [(p.action, p.slot) for p in decide_one(t, state("load"), ups, UTC_ZONE, False)] == [
        ("skip", SLOT_0900)]


def test_a_busy_upstream_holds_back_only_its_latest_unfinished_looking_slot():
    """The upstream's lock is held (its ladder may still rerun the last failure): the latest
    slot waits, an earlier failure is final, a success is a success."""
    t = task("load", "extract")
    failed_then_failed = [up(SLOT_0900, "failed", "exit 3"), up(SLOT_0900 + HOUR, "failed")]
    got = decide_one(t, state("load"), failed_then_failed, UTC_ZONE, True)
    assert [(p.action, p.slot) for p in got] == [("skip", SLOT_0900)]
    got = decide_one(t, state("load"), failed_then_failed, UTC_ZONE, False)
    assert [(p.action, p.slot) for p in got] == [("skip", SLOT_0900), ("skip", SLOT_0900 + HOUR)]
    got = decide_one(t, state("load"), [up(SLOT_0900)], UTC_ZONE, True)
    assert [(p.action, p.slot) for p in got] == [("run", SLOT_0900)]


def test_slots_up_to_the_last_claimed_one_are_done_and_not_before_counts_from_its_minute():
    t = task("load", "extract")
    ups = [up(SLOT_0900 - HOUR), up(SLOT_0900), up(SLOT_0900 + HOUR)]
    claimed = state("load", last_slot=SLOT_0900)
    assert [p.slot for p in decide_one(t, claimed, ups, UTC_ZONE, False)] == [SLOT_0900 + HOUR]
    fresh = state("load", not_before=SLOT_0900)  # first seen at 09:00: 09:00 counts, 08:00 not
    assert [p.slot for p in decide_one(t, fresh, ups, UTC_ZONE, False)] == [SLOT_0900]
    assert decide_one(t, claimed, ups[:2], UTC_ZONE, False) == []


def test_a_last_slot_before_not_before_does_not_reopen_older_slots():
    t = task("load", "extract")
    ups = [up(SLOT_0900 - HOUR), up(SLOT_0900)]
    enabled_again = state("load", not_before=SLOT_0900, last_slot=SLOT_0900 - 2 * HOUR)
    assert [p.slot for p in decide_one(t, enabled_again, ups, UTC_ZONE, False)] == [SLOT_0900]


# --------------------------------------------------------------- decide_many (fan-in, pure)


def join(**kw: object) -> Task:
    return task("d", "b", "c", timezone="UTC", **kw)


def test_fan_in_runs_once_all_upstreams_succeeded_in_one_window_for_the_latest_slot():
    ups = {"b": [up(SLOT_0900, task_id="b"), up(SLOT_0900 + 2 * HOUR, task_id="b")],
           "c": [up(SLOT_0900 + HOUR, task_id="c")]}
    assert decide_many(join(), state("d"), ups, UTC_ZONE) == [
        Pending(join(), "run", SLOT_0900 + 2 * HOUR, "upstreams b, c all succeeded")]


def test_fan_in_waits_while_one_upstream_has_no_success_in_the_window():
    ups = {"b": [up(SLOT_0900, task_id="b")],
           "c": [up(SLOT_0900, "failed", task_id="c"), up(SLOT_0900 + DAY, task_id="c")]}
    assert decide_many(join(), state("d"), ups, UTC_ZONE) == []
    assert decide_many(join(), state("d"), {"b": ups["b"]}, UTC_ZONE) == []


def test_fan_in_runs_once_per_window():
    ups = {"b": [up(SLOT_0900, task_id="b"), up(SLOT_0900 + DAY, task_id="b")],
           "c": [up(SLOT_0900, task_id="c"), up(SLOT_0900 + DAY + HOUR, task_id="c")]}
    ran = state("d", last_slot=SLOT_0900)
    assert [p.slot for p in decide_many(join(), ran, ups, UTC_ZONE)] == [SLOT_0900 + DAY + HOUR]
    ran_late = state("d", last_slot=SLOT_0900 + 14 * HOUR)  # 23:00: still that day's window
    assert [p.slot for p in decide_many(join(), ran_late, ups, UTC_ZONE)] == [
        SLOT_0900 + DAY + HOUR]
    ran_next = state("d", last_slot=SLOT_0900 + DAY + HOUR)
    assert decide_many(join(), ran_next, ups, UTC_ZONE) == []


def test_fan_in_takes_the_first_window_not_yet_run():
    ups = {"b": [up(SLOT_0900, task_id="b"), up(SLOT_0900 + DAY, task_id="b")],
           "c": [up(SLOT_0900 + HOUR, task_id="c"), up(SLOT_0900 + DAY, task_id="c")]}
    assert [p.slot for p in decide_many(join(), state("d"), ups, UTC_ZONE)] == [
        SLOT_0900 + HOUR]


def test_fan_in_counts_successes_from_the_minute_the_task_was_first_seen():
    ups = {"b": [up(SLOT_0900 - 60, task_id="b"), up(SLOT_0900 + 3 * HOUR, task_id="b")],
           "c": [up(SLOT_0900, task_id="c")]}
    fresh = state("d", not_before=SLOT_0900)
    assert [p.slot for p in decide_many(join(), fresh, ups, UTC_ZONE)] == [SLOT_0900 + 3 * HOUR]
    ups["b"] = ups["b"][:1] + [up(SLOT_0900, task_id="b")]
    assert [p.slot for p in decide_many(join(), fresh, ups, UTC_ZONE)] == [SLOT_0900]
    ups["b"] = ups["b"][:1]
    assert decide_many(join(), fresh, ups, UTC_ZONE) == []


def test_fan_in_counts_nothing_from_before_that_minute_not_even_a_second():
    ups = {"b": [up(SLOT_0900 - 0.5, task_id="b")], "c": [up(SLOT_0900, task_id="c")]}
    assert decide_many(join(), state("d", not_before=SLOT_0900), ups, UTC_ZONE) == []
    one = task("load", "extract")
    assert decide_one(one, state("load", not_before=SLOT_0900), [up(SLOT_0900 - 0.5)],
                      UTC_ZONE, False) == []


def test_fan_in_runs_for_the_latest_success_whatever_the_order_given():
    ups = {"b": [up(SLOT_0900 + 2 * HOUR, task_id="b"), up(SLOT_0900, task_id="b")],
           "c": [up(SLOT_0900 + HOUR, task_id="c")]}
    assert [p.slot for p in decide_many(join(), state("d"), ups, UTC_ZONE)] == [
        SLOT_0900 + 2 * HOUR]


def test_fan_in_reads_the_last_run_window_in_the_tasks_zone():
    """Ran at 00:30 Riga time (22:30 UTC the day before): that Riga day is done, though in
    UTC a new day begins 90 minutes later."""
    last = SLOT_0900 + 13.5 * HOUR  # 2026-11-23 22:30 UTC = 2026-11-24 00:30 Riga
    ups = {"b": [up(last + 2 * HOUR, task_id="b")], "c": [up(last + 2 * HOUR, task_id="c")]}
    ran = state("d", last_slot=last)
    assert decide_many(join(), ran, ups, RIGA) == []  # 02:30 Riga: the same Riga day
    assert [p.slot for p in decide_many(join(), ran, ups, UTC_ZONE)] == [last + 2 * HOUR]


def test_fan_in_windows_follow_the_zone_and_the_chain_window():
    # 21:30 and 22:30 UTC: one day in UTC, two days in Riga (23:30 and 00:30)
    b, c = SLOT_0900 + 12.5 * HOUR, SLOT_0900 + 13.5 * HOUR
    ups = {"b": [up(b, task_id="b")], "c": [up(c, task_id="c")]}
    assert [p.slot for p in decide_many(join(), state("d"), ups, UTC_ZONE)] == [c]
    assert decide_many(join(), state("d"), ups, RIGA) == []
    hourly = join(chain_window=HOUR)
    assert decide_many(hourly, state("d"), ups, UTC_ZONE) == []
    two_hours = join(chain_window=2 * HOUR)  # windows 20-22 and 22-24 UTC
    assert decide_many(two_hours, state("d"), ups, UTC_ZONE) == []
    ups["b"].append(up(c - 1, task_id="b"))
    assert [p.slot for p in decide_many(two_hours, state("d"), ups, UTC_ZONE)] == [c]


# --------------------------------------------------------------- upstream_slots (real state)


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "state" / "mdcron.db") as s:
        s.observe([("a", True, "a.md"), ("b", True, "b.md")], SLOT_0900 - DAY)
        yield s


def attempt(s: Store, task_id: str, slot: float, outcome: Outcome | None,
            error: str | None = None, attempt_no: int = 1, kind: str = "run",
            trigger: str = "schedule") -> int:
    if attempt_no == 1 and trigger == "schedule":
        run_id = s.claim_slots([(task_id, slot, None, f"{task_id}.md")], slot, OWNER)[
            (task_id, slot)]
    else:
        run_id = s.start_run(task_id, scheduled_for=slot, trigger=trigger, attempt=attempt_no,
                             kind=kind, now=slot, owner=OWNER, task_file=f"{task_id}.md")
    if outcome is not None:
        s.finish_run(run_id, RunResult(outcome, fail_reason=error), slot + 1)
    return run_id


def test_a_slot_with_any_successful_attempt_succeeded(store):
    attempt(store, "a", SLOT_0900, Outcome.FAILED, "exit 3")
    attempt(store, "a", SLOT_0900, Outcome.SUCCESS, attempt_no=2, kind="retry")
    assert upstream_slots(store, ["a"], 0.0) == {"a": [UpSlot("a", SLOT_0900, "success", None)]}


def test_a_slot_still_rerunning_is_running_and_else_its_last_attempt_tells(store):
    attempt(store, "a", SLOT_0900, Outcome.FAILED, "exit 3")
    attempt(store, "a", SLOT_0900, None, attempt_no=2, kind="retry")
    attempt(store, "a", SLOT_0900 + HOUR, Outcome.FAILED, "exit 3")
    attempt(store, "a", SLOT_0900 + HOUR, Outcome.TIMEOUT, "timeout after 600 s", attempt_no=2,
            kind="retry")
    attempt(store, "a", SLOT_0900 + HOUR, Outcome.FAILED, "heal gave up", attempt_no=3,
            kind="heal")  # heals do not count
    assert upstream_slots(store, ["a"], 0.0)["a"] == [
        UpSlot("a", SLOT_0900, "running", None),
        UpSlot("a", SLOT_0900 + HOUR, "timeout", "timeout after 600 s")]


def test_a_success_or_a_running_row_decides_its_slot_whatever_row_comes_after(store):
    """The rule as upstream_slots states it, not only "the last row": a success anywhere in
    the slot's rows makes it succeeded, else a row still running makes it running."""
    attempt(store, "a", SLOT_0900, Outcome.SUCCESS)
    attempt(store, "a", SLOT_0900, Outcome.FAILED, "exit 3", attempt_no=2, kind="retry")
    attempt(store, "a", SLOT_0900 + HOUR, None)
    attempt(store, "a", SLOT_0900 + HOUR, Outcome.CRASHED, "crashed", attempt_no=2,
            kind="retry")
    assert upstream_slots(store, ["a"], 0.0)["a"] == [
        UpSlot("a", SLOT_0900, "success", None), UpSlot("a", SLOT_0900 + HOUR, "running", None)]


def test_upstream_slots_per_task_in_slot_order_after_the_floor(store):
    attempt(store, "b", SLOT_0900 + HOUR, Outcome.SUCCESS)
    attempt(store, "b", SLOT_0900, Outcome.FAILED, "exit 1")
    attempt(store, "a", SLOT_0900 - HOUR, Outcome.SUCCESS)
    attempt(store, "a", SLOT_0900 + 60, Outcome.SUCCESS, trigger="manual-no-chain")
    got = upstream_slots(store, ["b", "a", "b", "ghost"], SLOT_0900 - HOUR)
    assert got == {"a": [], "b": [UpSlot("b", SLOT_0900, "failed", "exit 1"),
                                  UpSlot("b", SLOT_0900 + HOUR, "success", None)],
                   "ghost": []}
    assert upstream_slots(store, [], 0.0) == {}


# --------------------------------------------------------------- next_lines (`next`)


@pytest.fixture
def config(tmp_path: Path):
    home = tmp_path / "home"
    (home / "tasks").mkdir(parents=True)
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    loaded, problems = load_config(home)
    assert not [p for p in problems if p.severity == "error"], problems
    return loaded


NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC).timestamp()


def test_next_follows_the_chain_to_its_head_and_gives_its_next_fire(config):
    tasks = [task("extract", schedule="30 6 * * *"), task("transform", "extract"),
             task("load", "transform")]
    assert next_lines(config, tasks[2], tasks, NOW) == [
        "after transform", "transform runs after extract",
        "extract next fires 2026-11-24 06:30 UTC (Tue)"]


def test_next_names_each_upstream_in_its_own_zone_and_a_missing_one(config):
    tasks = [task("b", schedule="0 8 * * *", timezone="Europe/Riga"),
             task("c", schedule="15 10 * * *"), task("d", "b", "ghost", "c")]
    assert next_lines(config, tasks[2], tasks, NOW) == [
        "after b, ghost, c", "b next fires 2026-11-24 08:00 EET (Tue)", "ghost: no such task",
        "c next fires 2026-11-23 10:15 UTC (Mon)"]


def test_next_of_a_chain_whose_head_is_missing_or_circular_ends(config):
    mid = task("mid", "gone")
    tail = task("tail", "mid")
    assert next_lines(config, tail, [mid, tail], NOW) == [
        "after mid", "mid has no further fire time"]
    a, b = task("a", "b"), task("b", "a")
    assert next_lines(config, a, [a, b], NOW) == [
        "after b", "b runs after a", "a has no further fire time"]
    t = task("t", "a")  # downstream of a cycle it is not part of: the walk still ends
    assert next_lines(config, t, [a, b, t], NOW) == [
        "after a", "a runs after b", "b runs after a", "a has no further fire time"]


# --------------------------------------------------------------- the CLI: tick, why, history

BEFORE = "2026-11-23T08:59:00+00:00"
AT_0900 = "2026-11-23T09:00:00+00:00"


def cli_rows(home: Path) -> list[tuple[str, float, str, str | None]]:
    rows = json.loads(run_cli(home, "history", "--json").stdout)
    return [(r["task_id"], r["scheduled_for"], r["status"], r["error"]) for r in rows]


@contextmanager
def previous_run_holds(home: Path, task_id: str) -> Iterator[None]:
    """The task's lock held by a live process (this test), as its own still-running previous
    run would hold it."""
    config, _ = load_config(home)
    lock = TaskLock(lock_path(config.locks_dir, task_id))
    assert lock.try_acquire()
    me = os.getpid()
    lock.write(LockInfo(task_id, 1, me, process_start_time(me), boot_id(), None, None,
                        SLOT_0900 - HOUR, SLOT_0900 + DAY))
    try:
        yield
    finally:
        lock.release()


def home_with(home: Path, write_task, **extra: dict) -> None:
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    write_task("extract", schedule="0 9 * * *", command="echo e")
    for task_id, fields in extra.items():
        write_task(task_id, **fields)


def why(home: Path, task_id: str, at: str = AT_0900) -> list[str]:
    done = run_cli(home, "why", task_id, "--at", at)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_why_a_downstream_waits_before_anything_ran_and_before_its_upstream_ran(home,
                                                                                 write_task):
    home_with(home, write_task, b={"schedule": "0 9 * * *", "command": "true"},
              transform={"schedule": "after extract", "command": "true"},
              join={"schedule": "after", "after": ["extract", "b"], "chain_window": "6h",
                    "command": "true"},
              paused={"schedule": "after extract", "command": "true", "enabled": False})
    header = ("transform (transform.md): runs after extract, once per successful upstream run,"
              " for the upstream's slot")
    assert why(home, "transform") == [header, "waiting for extract: nothing has run yet"]
    assert why(home, "join") == ["join (join.md): runs after extract, b (all within 21600 s"
                                 " windows)", "waiting for extract, b: nothing has run yet"]
    assert why(home, "paused")[1:] == [
        "not due: the task is disabled; `enable paused` turns it on"]
    run_cli(home, "tick", "--now", BEFORE)
    assert why(home, "transform", BEFORE) == [
        header, "waiting for extract: it has not run since transform was first seen"]
    assert why(home, "join", BEFORE)[1:] == [
        "waiting for extract: it has not run since join was first seen",
        "waiting for b: it has not run since join was first seen"]


def test_why_a_downstream_says_its_upstream_still_runs_then_what_was_handled(home, write_task):
    home_with(home, write_task, b={"schedule": "0 9 * * *", "command": "true"},
              transform={"schedule": "after extract", "command": "true"},
              join={"schedule": "after", "after": ["extract", "b"], "command": "true"})
    write_task("extract", schedule="0 9 * * *",
               command=f"touch {home}/started; while [ ! -e {home}/go ]; do sleep 0.05; done")
    run_cli(home, "tick", "--now", BEFORE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    ticking = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                                "--now", AT_0900], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (home / "started").exists():
            assert time.monotonic() < deadline and ticking.poll() is None, ticking.communicate()
            time.sleep(0.05)
        assert why(home, "transform")[1:] == [
            "waiting for extract: its run for 2026-11-23 09:00 UTC is still going"]
        assert why(home, "join")[1:] == [
            "waiting for extract: its run for 2026-11-23 09:00 UTC is still going",
            "waiting for b: its last run (2026-11-23 09:00 UTC) success, already handled;"
            " waiting for its next success"]
    finally:
        (home / "go").touch()
        out, err = ticking.communicate(timeout=60)
    assert ticking.returncode == 0, out + err
    assert why(home, "transform", "2026-11-23T09:05:00+00:00")[1:] == [
        "last claimed slot: 2026-11-23 09:00 UTC",
        "waiting for extract: its last run (2026-11-23 09:00 UTC) success, already handled;"
        " waiting for its next success"]


def test_why_a_downstream_added_after_its_upstream_ran_is_not_due_for_that_run(home,
                                                                               write_task):
    """The tick counts a new downstream from the minute it first sees it: `why` says the
    same, not "due" for an upstream run the tick will never give it."""
    home_with(home, write_task, b={"schedule": "0 9 * * *", "command": "true"})
    run_cli(home, "tick", "--now", BEFORE)
    run_cli(home, "tick", "--now", AT_0900)
    write_task("late", schedule="after extract", command="true")
    write_task("latejoin", schedule="after", after=["extract", "b"], command="true")
    at = "2026-11-23T09:01:00+00:00"
    assert why(home, "late", at)[1:] == [
        "waiting for extract: its last run (2026-11-23 09:00 UTC) success, already handled;"
        " waiting for its next success"]
    assert not [line for line in why(home, "latejoin", at) if line.startswith("due")]
    run_cli(home, "tick", "--now", at)
    assert {r[0] for r in cli_rows(home)} == {"extract", "b"}


def test_why_a_downstream_enabled_again_is_not_due_for_runs_while_it_was_off(home, write_task):
    home_with(home, write_task, transform={"schedule": "after extract", "command": "true",
                                           "enabled": False})
    run_cli(home, "tick", "--now", BEFORE)
    run_cli(home, "tick", "--now", AT_0900)
    write_task("transform", schedule="after extract", command="true")
    at = "2026-11-23T09:02:00+00:00"
    assert not [line for line in why(home, "transform", at) if line.startswith("due")]
    run_cli(home, "tick", "--now", at)
    assert [r[0] for r in cli_rows(home)] == ["extract"]


WAITS = ("transform: waits for the previous run (still running on this host) before its run for"
         " 2026-11-23 09:00 UTC (upstream extract succeeded at 09:00); not claimed yet")


def test_a_downstream_whose_previous_run_still_holds_it_waits_owed_then_runs_once(home,
                                                                                  write_task):
    home_with(home, write_task, transform={"schedule": "after extract", "command": "true"})
    run_cli(home, "tick", "--now", BEFORE)
    with previous_run_holds(home, "transform"):
        done = run_cli(home, "tick", "--now", AT_0900)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count(WAITS) == 1, done.stdout  # once a tick, not once per round
        assert why(home, "transform")[1:] == [
            "waits for the previous run (still running on this host), then runs for slot"
            " 2026-11-23 09:00 UTC: upstream extract succeeded at 09:00"]
        assert [r[0] for r in cli_rows(home)] == ["extract"]
    assert why(home, "transform", "2026-11-23T09:29:00+00:00")[1:] == [
        "due: runs for slot 2026-11-23 09:00 UTC: upstream extract succeeded at 09:00"]
    done = run_cli(home, "tick", "--now", "2026-11-23T09:30:00+00:00")
    assert WAITS not in done.stdout
    assert cli_rows(home)[0] == ("transform", "2026-11-23T09:00:00+00:00", "success", None)
    assert why(home, "transform", "2026-11-23T09:31:00+00:00")[1] == (
        "last claimed slot: 2026-11-23 09:00 UTC")


def test_a_downstream_held_past_its_chain_window_is_skipped_saying_why(home, write_task,
                                                                       http_sink):
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{http_sink.json_url('/hook')}\"\n"
        f"    team: \"{http_sink.json_url('/team')}\"\n  default: ops\ntimezone: UTC\n")
    write_task("extract", schedule="0 9 * * *", command="true", notify_on="never")
    for task_id in ("transform", "publish"):
        write_task(task_id, schedule="after extract", command="true", chain_window="1h",
                   notify_on="always", notify_to="team")
    run_cli(home, "tick", "--now", BEFORE)
    with previous_run_holds(home, "transform"), previous_run_holds(home, "publish"):
        assert WAITS in run_cli(home, "tick", "--now", AT_0900).stdout
        assert WAITS in run_cli(home, "tick", "--now", "2026-11-23T09:59:00+00:00").stdout
        assert [r[0] for r in cli_rows(home)] == ["extract"]
        done = run_cli(home, "tick", "--now", "2026-11-23T10:01:00+00:00")
    reason = ("upstream extract succeeded at 09:00, but the previous run was still running on"
              " this host for longer than the chain window (3600 s)")
    assert f"publish: skipped ({reason})" in done.stdout
    assert f"transform: skipped ({reason})" in done.stdout
    assert ("transform", "2026-11-23T09:00:00+00:00", "skipped", reason) in cli_rows(home)
    alerts = {r.json["title"]: r.json for r in http_sink.requests if isinstance(r.json, dict)}
    assert [r.path for r in http_sink.requests] == ["/team", "/team"]  # one per task
    assert alerts["mdcron: transform (transform) skipped"]["message"] == (
        f"transform (transform): skipped — {reason}")
    assert set(alerts) == {"mdcron: transform (transform) skipped",
                           "mdcron: publish (publish) skipped"}
    run_cli(home, "tick", "--now", "2026-11-23T10:02:00+00:00")
    assert sorted(r[0] for r in cli_rows(home)) == ["extract", "publish", "transform"]


def test_a_failed_upstream_is_recorded_skipped_even_while_the_downstream_is_held(home,
                                                                                 write_task):
    home_with(home, write_task, transform={"schedule": "after extract", "command": "true"})
    write_task("extract", schedule="0 9 * * *", command="exit 3", self_heal=False)
    run_cli(home, "tick", "--now", BEFORE)
    assert run_cli(home, "run", "extract").returncode != 0  # a manual run: its chain waits
    [(_, slot, status, _)] = cli_rows(home)
    hhmm = datetime.fromisoformat(slot).strftime("%H:%M")
    with previous_run_holds(home, "transform"):
        lines = why(home, "transform", slot)
        assert lines[1:] == [f"the next tick records it skipped for slot"
                             f" {datetime.fromisoformat(slot):%Y-%m-%d %H:%M} UTC: upstream"
                             f" extract failed at {hhmm} (exit 3)"], lines
        run_cli(home, "tick", "--now", slot)
    assert cli_rows(home)[0] == ("transform", slot, "skipped",
                                 f"upstream extract failed at {hhmm} (exit 3)")


def test_run_of_a_chain_head_numbers_its_downstreams_lines_only(home, write_task):
    """`run extract`: each downstream run's line carries its run number, even when the line
    goes on (a suspension); what is not a run's line (a downstream that waits, an alert that
    could not be sent) is printed as said."""
    (home / "scheduler.yaml").write_text(
        "timezone: UTC\nmax_consecutive_failures: 1\nnotify:\n  destinations:\n"
        "    ops: \"http://127.0.0.1:9/hook\"\n  default: ops\n")
    write_task("extract", schedule="0 9 * * *", command="echo e")
    write_task("transform", schedule="after extract", command="exit 4", self_heal=False)
    write_task("held", schedule="after extract", command="true")
    with previous_run_holds(home, "held"):
        done = run_cli(home, "run", "extract")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("run 1: extract: success in "), lines
    [failed] = [line for line in lines if "transform" in line]
    assert re.fullmatch(r"run 2: transform: failed in [0-9.]+s \(exit 4\); suspended: failed 1"
                        r" ticks in a row", failed), lines
    [waits] = [line for line in lines if line.startswith("held: ")]
    assert waits.startswith("held: waits for the previous run (still running on this host)"
                            " before its run for "), waits
    assert [line for line in lines if "notification" in line][0].startswith(
        "mdcron: notification: notification #1 to 'ops'"), lines
    assert [(r[0], r[2]) for r in cli_rows(home)] == [("transform", "failed"),
                                                      ("extract", "success")]
    shown = json.loads(run_cli(home, "show", "held", "--json").stdout)
    assert shown["state"]["path"] == str(home / "tasks" / "held.md")  # as the run saw it


def test_a_downstream_seen_with_its_upstream_runs_in_that_tick_unless_it_is_disabled(
        home, write_task):
    """First tick ever, at the upstream's minute: the upstream runs its 09:00 slot and so does
    its downstream (seen from 09:00 too); a disabled downstream does not, and another chain
    with nothing to do yet (listed after) holds nothing back."""
    home_with(home, write_task,
              load={"schedule": "after extract", "command": "true"},
              never={"schedule": "0 9 1 1 *", "command": "true"},
              paused={"schedule": "after extract", "command": "true", "enabled": False},
              waits={"schedule": "after never", "command": "true"})
    done = run_cli(home, "tick", "--now", AT_0900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted((r[0], r[1], r[2]) for r in cli_rows(home)) == [
        ("extract", "2026-11-23T09:00:00+00:00", "success"),
        ("load", "2026-11-23T09:00:00+00:00", "success")]


def test_run_of_a_chain_head_gives_its_downstreams_the_same_self_heal(home, write_task):
    """With a key, a downstream's failure after `run extract` goes through the same self-heal
    rules as in a tick (here a budget of 0 heals, so no request is made), a resource user's
    too; its row says why it was not healed."""
    (home / "scheduler.yaml").write_text(
        "timezone: UTC\nresources: {gpu: 1}\nclaude:\n  max_heals_per_day: 0\n")
    write_task("extract", schedule="0 9 * * *", command="echo e")
    write_task("transform", schedule="after extract", command="exit 4")
    write_task("render", schedule="after extract", uses=["gpu"], command="exit 5")
    key = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    done = run_cli(home, "run", "extract", env=key)
    assert done.returncode == 0, done.stdout + done.stderr
    notes = {r["task_id"]: r["note"] for r in json.loads(run_cli(home, "history",
                                                                 "--json").stdout)}
    for task_id in ("transform", "render"):
        assert notes[task_id].startswith(
            f"self-heal not attempted: {task_id} was healed 0 time(s) in the last 24 h"), notes
        assert notes[task_id].endswith("; started by manual run 1"), notes
    assert notes["extract"] is None


# --------------------------------------------------------------- why, in-process (explain)
# The same answers as `why <downstream>` above, from explain() on a real SQLite state: quick,
# so a wrong line is caught without starting the CLI.

AT = SLOT_0900 + 60  # `why --at 09:01`


def in_home(config, *tasks: Task) -> list[Task]:
    """The tasks as files of the config's home (explain names the file)."""
    return [replace(t, path=config.tasks_dir / f"{t.id}.md") for t in tasks]


def seen(config, *tasks: Task, at: float = SLOT_0900 - 60) -> Store:
    """A state in which a tick at `at` saw these tasks."""
    store = Store(config.db_path)
    store.observe([(t.id, t.enabled, str(t.path)) for t in tasks], at)
    return store


def test_why_in_process_before_any_state_and_for_a_disabled_task(config):
    one, join, off = in_home(config, task("load", "extract"),
                             task("join", "extract", "b", chain_window=21600.0),
                             task("off", "extract", enabled=False))
    assert explain(config, one, AT) == [
        "load (load.md): runs after extract, once per successful upstream run, for the"
        " upstream's slot", "waiting for extract: nothing has run yet"]
    assert explain(config, join, AT) == [
        "join (join.md): runs after extract, b (all within 21600 s windows)",
        "waiting for extract, b: nothing has run yet"]
    assert explain(config, off, AT)[1:] == [
        "not due: the task is disabled; `enable off` turns it on"]


def test_why_in_process_names_upstreams_not_run_running_and_handled(config):
    load, join = in_home(config, task("load", "extract"), task("join", "extract", "b"))
    with seen(config, load, join) as s:
        assert explain(config, load, AT)[1:] == [
            "waiting for extract: it has not run since load was first seen"]
        attempt(s, "extract", SLOT_0900 - HOUR, Outcome.FAILED, "exit 3")
        attempt(s, "extract", SLOT_0900, None)
        attempt(s, "b", SLOT_0900, Outcome.SUCCESS)
        s.observe([(join.id, True, str(join.path))], AT)
        assert explain(config, join, AT)[1:] == [
            "waiting for extract: its run for 2026-11-23 09:00 UTC is still going",
            "waiting for b: its last run (2026-11-23 09:00 UTC) success, already handled;"
            " waiting for its next success"]


def test_why_in_process_says_due_or_skipped_with_the_slot_in_the_tasks_zone(config):
    load, = in_home(config, task("load", "extract", timezone="Europe/Riga"))
    with seen(config, load) as s:
        attempt(s, "extract", SLOT_0900, Outcome.FAILED, "exit 3")
        attempt(s, "extract", SLOT_0900 + HOUR, Outcome.SUCCESS)
        assert explain(config, load, AT + HOUR)[1:] == [
            "the next tick records it skipped for slot 2026-11-23 11:00 EET: upstream extract"
            " failed at 11:00 (exit 3)",
            "due: runs for slot 2026-11-23 12:00 EET: upstream extract succeeded at 12:00"]


def test_why_in_process_after_a_claim_names_it_and_the_last_upstream_run(config):
    load, = in_home(config, task("load", "extract"))
    with seen(config, load, at=SLOT_0900 - 2 * HOUR) as s:
        attempt(s, "extract", SLOT_0900 - HOUR, Outcome.FAILED, "exit 3")
        attempt(s, "load", SLOT_0900 - HOUR, Outcome.SKIPPED, "upstream extract failed")
        attempt(s, "extract", SLOT_0900, Outcome.SUCCESS)
        attempt(s, "load", SLOT_0900, Outcome.SUCCESS)
        assert explain(config, load, AT)[1:] == [
            "last claimed slot: 2026-11-23 09:00 UTC",
            "waiting for extract: its last run (2026-11-23 09:00 UTC) success, already handled;"
            " waiting for its next success"]


def test_why_in_process_counts_a_fan_in_from_its_first_minute(config):
    """Added at 09:01 after both upstreams ran at 09:00 (within its window): not due, and
    their runs are named as handled, not as never run."""
    join, = in_home(config, task("join", "extract", "b", chain_window=6 * HOUR))
    with Store(config.db_path) as s:
        s.observe([("extract", True, "extract.md"), ("b", True, "b.md")], SLOT_0900 - 60)
        attempt(s, "extract", SLOT_0900, Outcome.SUCCESS)
        attempt(s, "b", SLOT_0900, Outcome.SUCCESS)
        s.observe([(join.id, True, str(join.path))], AT)
        assert explain(config, join, AT)[1:] == [
            "waiting for extract: its last run (2026-11-23 09:00 UTC) success, already handled;"
            " waiting for its next success",
            "waiting for b: its last run (2026-11-23 09:00 UTC) success, already handled;"
            " waiting for its next success"]
        attempt(s, "extract", SLOT_0900 + HOUR, Outcome.SUCCESS)
        attempt(s, "b", SLOT_0900 + 2 * HOUR, Outcome.SUCCESS)
        assert explain(config, join, SLOT_0900 + 3 * HOUR)[1:] == [
            "due: runs for slot 2026-11-23 11:00 UTC: upstreams extract, b all succeeded"]


def test_why_in_process_says_a_held_downstream_waits_for_its_previous_run(config):
    load, = in_home(config, task("load", "extract"))
    with seen(config, load) as s:
        attempt(s, "extract", SLOT_0900, Outcome.SUCCESS)
        with previous_run_holds(config.home, "load"):
            assert explain(config, load, AT)[1:] == [
                "waits for the previous run (still running on this host), then runs for slot"
                " 2026-11-23 09:00 UTC: upstream extract succeeded at 09:00"]
        assert explain(config, load, AT)[1:] == [
            "due: runs for slot 2026-11-23 09:00 UTC: upstream extract succeeded at 09:00"]


# --------------------------------------------------------------- the tick's choice, in-process


def test_pending_for_counts_each_chained_enabled_task_from_its_first_minute(config):
    load, late, off, other, plain = in_home(
        config, task("load", "extract"), task("late", "extract"),
        task("off", "extract", enabled=False), task("other", "extract"), task("plain"))
    with seen(config, load, off, other, plain, at=SLOT_0900) as s:
        s.observe([(late.id, True, str(late.path))], SLOT_0900 + 60)
        attempt(s, "extract", SLOT_0900 - HOUR, Outcome.SUCCESS)  # before any was seen
        attempt(s, "extract", SLOT_0900, Outcome.SUCCESS)  # the minute they were first seen
        got = pending_for(s, config, [load, late, off, other, plain], skip_ids={"other"})
        assert got == [Pending(load, "run", SLOT_0900, "upstream extract succeeded at 09:00")]
        assert pending_for(s, config, [off, plain]) == []
        s.claim_slots([("load", SLOT_0900, None, "load.md")], SLOT_0900, OWNER)
        attempt(s, "extract", SLOT_0900 + HOUR, Outcome.FAILED, "exit 2")
        assert pending_for(s, config, [load]) == [
            Pending(load, "skip", SLOT_0900 + HOUR, "upstream extract failed at 10:00 (exit 2)")]


def test_pending_for_a_task_the_state_has_not_seen_counts_every_upstream_run(config):
    """The tick observes a new task before it asks (its first minute is then now); without
    a recorded state every recorded upstream run counts."""
    load, = in_home(config, task("load", "extract"))
    with seen(config) as s:
        attempt(s, "extract", SLOT_0900, Outcome.SUCCESS)
        assert pending_for(s, config, [load]) == [
            Pending(load, "run", SLOT_0900, "upstream extract succeeded at 09:00")]


def test_pending_for_a_fan_in_sees_successes_from_its_first_minute_on(config):
    join, = in_home(config, task("join", "extract", "b", chain_window=HOUR))
    with seen(config, join, at=SLOT_0900) as s:
        attempt(s, "extract", SLOT_0900, Outcome.SUCCESS)
        attempt(s, "b", SLOT_0900 + 1800, Outcome.SUCCESS)
        assert pending_for(s, config, [join]) == [
            Pending(join, "run", SLOT_0900 + 1800, "upstreams extract, b all succeeded")]
        own = {"join": state("join", not_before=SLOT_0900 + 60)}  # as `why` observes it
        assert pending_for(s, config, [join], states=own) == []


def test_a_held_downstream_waits_said_once_then_is_skipped_past_its_window(config):
    load = task("load", "extract", chain_window=HOUR)
    owed = Pending(load, "run", SLOT_0900, "upstream extract succeeded at 09:00")
    failed = Pending(load, "skip", SLOT_0900 + 60, "upstream extract failed at 09:01")
    said: list[str] = []
    told: set[tuple[str, float]] = set()
    with seen(config) as s:
        assert previous_run(s, config, "load") is None
        with previous_run_holds(config.home, "load"):
            assert previous_run(s, config, "load") == "still running on this host"
            assert hold_back(s, config, [owed, failed], SLOT_0900 + 5, told, said.append) == [
                failed]
            assert hold_back(s, config, [owed], SLOT_0900 + HOUR, told, said.append) == []
            assert said == [
                "load: waits for the previous run (still running on this host) before its run"
                " for 2026-11-23 09:00 UTC (upstream extract succeeded at 09:00); not claimed"
                " yet"]
            assert hold_back(s, config, [owed], SLOT_0900 + HOUR + 1, told, said.append) == [
                Pending(load, "skip", SLOT_0900, "upstream extract succeeded at 09:00, but the"
                        " previous run was still running on this host for longer than the"
                        " chain window (3600 s)")]
        assert hold_back(s, config, [owed], SLOT_0900 + 5, told, said.append) == [owed]


def test_why_in_process_for_a_downstream_no_tick_has_seen_counts_from_the_asked_minute(config):
    """`why` before the first tick that sees the file: that tick will count it from its own
    minute, so an upstream run before is handled already, not due."""
    load, = in_home(config, task("load", "extract"))
    with seen(config) as s:
        attempt(s, "extract", SLOT_0900, Outcome.SUCCESS)
        assert explain(config, load, AT)[1:] == [
            "waiting for extract: its last run (2026-11-23 09:00 UTC) success, already handled;"
            " waiting for its next success"]


def test_why_in_process_names_upstream_runs_from_one_chain_window_before_its_first_minute(
        config):
    load, = in_home(config, task("load", "extract", chain_window=HOUR))
    with seen(config, load, at=SLOT_0900) as s:
        attempt(s, "extract", SLOT_0900 - HOUR - 0.5, Outcome.SUCCESS, trigger="manual")
        assert explain(config, load, AT)[1:] == [
            "waiting for extract: it has not run since load was first seen"]
        attempt(s, "extract", SLOT_0900 - HOUR, Outcome.FAILED, "exit 3")
        assert explain(config, load, AT)[1:] == [
            "waiting for extract: its last run (2026-11-23 08:00 UTC) failed, already handled;"
            " waiting for its next success"]


def test_why_in_process_a_held_downstream_still_records_a_failed_upstream_skipped_first(config):
    load, = in_home(config, task("load", "extract"))
    with seen(config, load, at=SLOT_0900 - 2 * HOUR) as s:
        attempt(s, "extract", SLOT_0900 - HOUR, Outcome.FAILED, "exit 3")
        attempt(s, "extract", SLOT_0900, Outcome.SUCCESS)
        with previous_run_holds(config.home, "load"):
            assert explain(config, load, AT)[1:] == [
                "the next tick records it skipped for slot 2026-11-23 08:00 UTC: upstream"
                " extract failed at 08:00 (exit 3)",
                "waits for the previous run (still running on this host), then runs for slot"
                " 2026-11-23 09:00 UTC: upstream extract succeeded at 09:00"]


FALL_BACK = datetime(2026, 10, 25, 0, 0, tzinfo=UTC).timestamp()  # 03:00 EEST in Riga


def test_pending_for_a_fan_in_runs_a_window_not_yet_run_even_if_its_successes_are_older(config):
    """Riga's clocks go back at 04:00 EEST to 03:00 EET: the half-hour window 03:30-04:00 of
    the first pass comes BEFORE the window 03:00-03:30 of the second. A tick that finds both
    (after a pause) runs the first window by wall time, then the other: it reads the
    upstreams' successes from the chain window before its first minute, not from the last
    run's slot."""
    join, = in_home(config, task("join", "x", "y", timezone="Europe/Riga",
                                 chain_window=1800.0))
    with seen(config, join, at=FALL_BACK) as s:
        for task_id, minute in (("x", 45), ("y", 50), ("x", 65), ("y", 70)):
            attempt(s, task_id, FALL_BACK + minute * 60, Outcome.SUCCESS)
        reason = "upstreams x, y all succeeded"
        assert pending_for(s, config, [join]) == [
            Pending(join, "run", FALL_BACK + 70 * 60, reason)]  # 03:10 EET
        s.claim_slots([("join", FALL_BACK + 70 * 60, None, "join.md")], FALL_BACK, OWNER)
        assert pending_for(s, config, [join]) == [
            Pending(join, "run", FALL_BACK + 50 * 60, reason)]  # 03:50 EEST


def test_pending_for_waits_on_a_failed_upstream_slot_while_its_ladder_still_goes(config):
    """The upstream's attempt failed but its lock is still held (a retry or heal to come):
    the downstream is not skipped yet; once the lock is free the slot is skipped."""
    load, = in_home(config, task("load", "extract"))
    with seen(config, load, at=SLOT_0900) as s:
        attempt(s, "extract", SLOT_0900, Outcome.FAILED, "exit 3")
        with previous_run_holds(config.home, "extract"):
            assert pending_for(s, config, [load]) == []
            assert explain(config, load, AT)[1:] == [
                "waiting for extract: its run for 2026-11-23 09:00 UTC failed, and its retry or"
                " self-heal is still running on this host"]
        assert pending_for(s, config, [load]) == [
            Pending(load, "skip", SLOT_0900, "upstream extract failed at 09:00 (exit 3)")]
