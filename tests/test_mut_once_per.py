"""`once_per:`'s pure rules as people read them (issue 28: mutmut survivors in once_per.py): the
skip's reason word for word for each period, where a period starts and ends in the task's zone,
and when the period's skip has already been said (recorded once, not every minute)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from mdcron.schedule.once_per import period_start, said_before, skip_reason

RIGA = ZoneInfo("Europe/Riga")


def at(*parts: int, zone=RIGA) -> float:
    return datetime(*parts, tzinfo=zone).timestamp()


@pytest.mark.parametrize(("per", "words"), [
    ("day", "today"), ("week", "this week"), ("month", "this month")])
def test_the_skip_reason_names_the_period_and_the_successful_slot(per, words):
    success = at(2026, 11, 2, 8, 5)  # a Monday, the month's second day
    slot = at(2026, 11, 2, 9, 0)
    assert skip_reason(slot, success, RIGA, per) == (
        f"already succeeded {words} (slot 2026-11-02 08:05)")


def test_the_reasons_slot_is_the_successs_local_time_in_the_tasks_zone():
    success = at(2026, 11, 24, 23, 30)  # 21:30 UTC
    reason = skip_reason(at(2026, 11, 24, 23, 45), success, RIGA, "day")
    assert reason == "already succeeded today (slot 2026-11-24 23:30)"


def test_a_success_at_the_slot_itself_makes_that_slot_a_skip():
    """The slot already succeeded (a manual run asked at that very moment): not run twice."""
    slot = at(2026, 11, 25, 6, 0)
    assert skip_reason(slot, slot, RIGA, "day") == (
        "already succeeded today (slot 2026-11-25 06:00)")
    assert skip_reason(slot, slot + 0.001, RIGA, "day") is None  # after the slot: not before it


@pytest.mark.parametrize(("per", "last_in", "first_out"), [
    # the period's last instant still skips; the next period's first instant runs
    ("day", (2026, 11, 25, 23, 59, 59), (2026, 11, 26, 0, 0, 0)),
    ("week", (2026, 11, 29, 23, 59, 59), (2026, 11, 30, 0, 0, 0)),  # Sunday -> Monday
    ("month", (2026, 11, 30, 23, 59, 59), (2026, 12, 1, 0, 0, 0)),
])
def test_period_ends_at_local_midnight(per, last_in, first_out):
    success = at(2026, 11, 25, 0, 0)  # a Wednesday, at midnight: the period's first instant
    assert skip_reason(at(*last_in), success, RIGA, per) is not None
    assert skip_reason(at(*first_out), success, RIGA, per) is None


def test_a_success_just_before_the_period_does_not_skip_it():
    before = at(2026, 11, 22, 23, 59, 59)  # Sunday night: last week, last day
    assert skip_reason(at(2026, 11, 23, 6, 0), before, RIGA, "day") is None
    assert skip_reason(at(2026, 11, 23, 6, 0), before, RIGA, "week") is None
    assert skip_reason(at(2026, 11, 23, 6, 0), before, RIGA, "month") is not None
    assert skip_reason(at(2026, 12, 1, 0, 0), at(2026, 11, 30, 23, 59), RIGA, "month") is None


def test_week_starts_on_monday_and_month_on_the_first_in_the_zone():
    sunday = at(2026, 11, 29, 12, 0)
    assert period_start(sunday, RIGA, "week") == at(2026, 11, 23)
    assert period_start(at(2026, 11, 23, 0, 0), RIGA, "week") == at(2026, 11, 23)
    assert period_start(sunday, RIGA, "month") == at(2026, 11, 1)
    assert period_start(sunday, RIGA, "day") == at(2026, 11, 29)
    utc = ZoneInfo("UTC")
    # 23:30 UTC on Sunday the 30th of November is Monday, December 1st in Riga
    late = at(2026, 11, 29, 23, 30, zone=utc)
    assert period_start(late, RIGA, "week") == at(2026, 11, 30)
    assert period_start(late, utc, "week") == at(2026, 11, 23, zone=utc)


def test_the_periods_skip_is_said_once_after_the_success():
    success, slot = 1_000.0, 5_000.0
    assert said_before(slot, success, 3_000.0)  # a skip between them: already in history
    assert not said_before(slot, success, None)  # nothing said yet
    assert not said_before(slot, None, 3_000.0)  # no success: nothing to skip for
    assert not said_before(slot, success, 500.0)  # a skip from before this success
    # boundaries: the said skip lies strictly after the success and strictly before the slot
    assert not said_before(slot, success, success)
    assert not said_before(slot, success, slot)
    assert said_before(slot, success, success + 0.001)
    assert said_before(slot, success, slot - 0.001)


def statuses(home, task_id):
    db = sqlite3.connect(home / "state" / "mdcron.db")
    got = [(row[0], row[1]) for row in db.execute(
        "SELECT status, scheduled_for FROM runs WHERE task_id = ? ORDER BY id", (task_id,))]
    db.close()
    return got


def test_only_once_per_tasks_are_skipped_after_a_success(home, write_task, cli):
    """A plain task beside a once-a-day one runs at every slot, success or not."""
    write_task("plain", schedule="* * * * *", timezone="UTC", command="true")
    write_task("daily", schedule="* * * * *", timezone="UTC", once_per="day", command="true")
    assert cli("tick", "--now", "2026-11-23T05:59:00+00:00").returncode == 0  # first seen
    for minute in range(3):
        done = cli("tick", "--now", f"2026-11-23T06:0{minute}:00+00:00")
        assert done.returncode == 0, done.stdout + done.stderr
    assert [s for s, _ in statuses(home, "plain")] == ["success"] * 4
    assert [s for s, _ in statuses(home, "daily")] == ["success", "skipped"]


def test_the_period_is_the_configs_zone_when_the_task_names_none(home, write_task, cli):
    """23:00 in Tokyo (the config's zone) succeeded; the next hour is a new day there, though
    it is the same day in UTC (and on this machine's clock)."""
    (home / "scheduler.yaml").write_text("timezone: Asia/Tokyo\n")
    write_task("fetch", schedule="0 * * * *", once_per="day", command="true")
    assert cli("tick", "--now", "2026-11-23T13:30:00+00:00").returncode == 0  # first seen
    for hour in (14, 15, 16):  # 23:00, 00:00, 01:00 in Tokyo
        done = cli("tick", "--now", f"2026-11-23T{hour}:00:00+00:00")
        assert done.returncode == 0, done.stdout + done.stderr
    assert [s for s, _ in statuses(home, "fetch")] == ["success", "success", "skipped"]
