"""`once_per:` over a simulated day, through the real CLI (`tick --now`): real files, SQLite and
processes. The task fails until a marker file exists, then succeeds."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from mdcron.schedule.once_per import period_start, skip_reason


def rows(home, task_id):
    db = sqlite3.connect(home / "state" / "mdcron.db")
    db.row_factory = sqlite3.Row
    out = [dict(r) for r in db.execute(
        "SELECT * FROM runs WHERE task_id = ? ORDER BY id", (task_id,))]
    db.close()
    return out


def test_once_per_day_tries_hourly_until_first_success_then_skips(home, write_task, cli):
    marker = home / "works"
    write_task("fetch", schedule="0 6-23 * * *", timezone="Europe/Riga", once_per="day",
               command=f"test -e {marker}", notify_on="failure")
    assert cli("tick", "--now", "2026-11-23T05:30:00+02:00").returncode == 0  # first seen
    # 06:00 and 07:00 fail (and escalate as usual)
    assert cli("tick", "--now", "2026-11-23T06:00:00+02:00").returncode == 1
    assert cli("tick", "--now", "2026-11-23T07:00:00+02:00").returncode == 1
    marker.write_text("")
    assert cli("tick", "--now", "2026-11-23T08:00:00+02:00").returncode == 0
    marker.unlink()  # would fail again: it must not run at all
    for hour in (9, 10, 23):
        done = cli("tick", "--now", f"2026-11-23T{hour:02d}:00:00+02:00")
        assert done.returncode == 0, done.stdout + done.stderr
    why = cli("why", "fetch", "--at", "2026-11-23T12:00:00+02:00").stdout
    assert ("once_per: day: already succeeded today (slot 2026-11-23 08:00): slots until the"
            " day ends are skipped") in why
    got = [(r["status"], r["error"]) for r in rows(home, "fetch") if r["kind"] == "run"]
    # issue 25: the period's skip is recorded once, not for every later slot
    assert [s for s, _ in got] == ["failed", "failed", "success", "skipped"]
    assert got[3][1] == "already succeeded today (slot 2026-11-23 08:00)"
    # the next day (in Riga) tries again
    assert cli("tick", "--now", "2026-11-24T06:00:00+02:00").returncode == 1
    assert rows(home, "fetch")[-1]["status"] == "failed"
    # no alert, no incident for the skips: only failures were counted
    db = sqlite3.connect(home / "state" / "mdcron.db")
    kinds = [r[0] for r in db.execute("SELECT kind FROM outbox WHERE task_id = 'fetch'")]
    db.close()
    assert "skipped" not in kinds


def test_period_boundaries_in_the_tasks_zone():
    riga = ZoneInfo("Europe/Riga")
    at = datetime(2026, 11, 25, 1, 30, tzinfo=riga).timestamp()  # a Wednesday
    assert period_start(at, riga, "day") == datetime(2026, 11, 25, tzinfo=riga).timestamp()
    assert period_start(at, riga, "week") == datetime(2026, 11, 23, tzinfo=riga).timestamp()
    assert period_start(at, riga, "month") == datetime(2026, 11, 1, tzinfo=riga).timestamp()
    # 22:30 UTC on the 24th is already the 25th in Riga
    at = datetime(2026, 11, 25, 8, 0, tzinfo=riga).timestamp()
    late = datetime(2026, 11, 24, 22, 30, tzinfo=UTC).timestamp()
    assert skip_reason(at, late, riga, "day") is not None
    assert skip_reason(at, late, ZoneInfo("UTC"), "day") is None
    assert skip_reason(at, None, riga, "week") is None
    assert skip_reason(late, at, riga, "day") is None  # a success after the slot: not before it


def test_frequent_once_per_day_skip_is_said_once_and_dry_run_and_why_agree(home, write_task,
                                                                          cli):
    """Issue 25: every minute, once a day: one skipped row and one log line for the day, not
    1,440; `tick --dry-run` and `why` say "skip" where the tick skips."""
    write_task("daily", schedule="* * * * *", timezone="UTC", once_per="day", command="true")
    assert cli("tick", "--now", "2026-11-23T05:59:00+00:00").returncode == 0  # first seen
    lines = []
    for minute in range(6):
        done = cli("tick", "--now", f"2026-11-23T06:0{minute}:00+00:00")
        assert done.returncode == 0, done.stderr
        lines.append(done.stdout + done.stderr)
    got = [(r["status"], r["scheduled_for"]) for r in rows(home, "daily")]
    assert [s for s, _ in got] == ["success", "skipped"], got  # 05:59, then 06:00
    assert "already succeeded today" in lines[0]
    assert not any("daily" in text for text in lines[1:]), lines
    at = "2026-11-23T06:07:00+00:00"
    dry = cli("tick", "--dry-run", "--now", at).stdout
    assert "daily: would skip" in dry and "already succeeded today" in dry, dry
    why = cli("why", "daily", "--at", at).stdout
    assert "decision: skipped — already succeeded today" in why, why
    assert cli("tick", "--now", at).returncode == 0
    assert len(rows(home, "daily")) == 2  # the tick agreed: passed quietly
    # the next day runs once again, then is skipped once again
    for minute in range(3):
        cli("tick", "--now", f"2026-11-24T00:0{minute}:00+00:00")
    assert [r["status"] for r in rows(home, "daily")][2:] == ["success", "skipped"]


@pytest.fixture
def store(tmp_path, state_url):  # both back ends (issue 11)
    from mdcron.state.store import Store

    with Store(tmp_path / "state" / "mdcron.db", url=state_url) as s:
        yield s


def test_a_quiet_pass_advances_the_slot_once_and_the_said_skip_is_found(store):
    """The store's two steps behind issue 25's once-per-period skip, on SQLite and PostgreSQL:
    `pass_slots` is a check-and-set on last_slot (of two passes one wins), `last_skipped` finds
    the skip already recorded."""
    from mdcron.state.runs import Owner

    owner = Owner(pid=4242, start=1, boot="boot")
    t0 = 1_795_000_000.0
    store.observe([("daily", True, "/t/daily.md")], t0)
    store.claim_slots([("daily", t0, "already succeeded today (slot x)", "/t/daily.md"),
                       ("daily", t0 - 60, "previous run still running", "/t/daily.md")],
                      t0, owner)
    assert store.last_skipped(["daily", "other"], "already succeeded ") == {"daily": t0}
    assert store.pass_slots([("daily", t0 + 60)]) == {("daily", t0 + 60)}
    assert store.pass_slots([("daily", t0 + 60)]) == set()  # already passed: not again
    assert store.task_state("daily").last_slot == t0 + 60
    assert len(store.history(10, "daily")) == 2  # no row for the pass
