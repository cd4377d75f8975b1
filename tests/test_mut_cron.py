"""Schedule maths at its edges (issue 28: tests that catch a wrong operator or a dropped check).

What a person sees: when a task fires (`next`, `list`), whether a tick runs, skips or waits and
the words `why` prints for it, and the one-line message for a schedule that cannot be used.
Plain values through the public names of mdcron.core.cron; no clock, no patching."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from mdcron.core.cron import (
    Decision,
    ScheduleError,
    decide,
    fires_between,
    next_fire,
    parse_schedule,
    resolve_zone,
    schedule_of,
)
from mdcron.core.limits import LATEST
from mdcron.settings.config import Config
from mdcron.tasks.task import Task

RIGA = ZoneInfo("Europe/Riga")
NY = ZoneInfo("America/New_York")
JNB = ZoneInfo("Africa/Johannesburg")
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
TINY = timedelta(microseconds=1)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def error(expr: str, zone: ZoneInfo = JNB) -> str:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(expr, zone)
    return str(info.value)


def task(schedule: str, **fields: object) -> Task:
    return Task(id="t", path=Path("/tmp/t.md"), schedule=schedule, title="t", **fields)


# ---------------------------------------------------------------- messages people read


@pytest.mark.parametrize(("expr", "message"), [
    ("", "empty schedule; expected five cron fields like '0 6 * * 1-5', a macro like @daily, "
         "'@every 15m' or '@at 2026-12-01T09:00'"),
    ("   ", "empty schedule; expected five cron fields like '0 6 * * 1-5', a macro like "
            "@daily, '@every 15m' or '@at 2026-12-01T09:00'"),
    ("@REBOOT", "@reboot is not supported: mdcron runs from a tick every minute and cannot tell "
                "when the machine started; use a cron time or @at"),
    ("@often", "unknown schedule '@often'; known forms: @hourly, @daily, @midnight, @weekly, "
               "@monthly, @yearly, @annually, @every, @at"),
    ("@every 59s", "bad schedule '@every 59s': the interval must be at least 1m and at most "
                   "366d, e.g. @every 15m or @every 7d"),
    ("@every 367d", "bad schedule '@every 367d': the interval must be at least 1m and at most "
                    "366d, e.g. @every 15m or @every 7d"),
    ("@every 60.5s", "bad schedule '@every 60.5s': the interval must be a whole number of "
                     "seconds"),
    ("@at 2026-12-01", "bad schedule '@at 2026-12-01': expected an ISO date-time like "
                       "'@at 2026-12-01T09:00' (optionally with an offset like +02:00)"),
    ("@at 1999-12-31T23:59", "bad schedule '@at 1999-12-31T23:59': the date must be from "
                             "2000-01-01 to 8999-12-31"),
    ("@at 9000-01-01T00:00", "bad schedule '@at 9000-01-01T00:00': the date must be from "
                             "2000-01-01 to 8999-12-31"),
    ("@at 8999-12-31T23:30-05:00", "bad schedule '@at 8999-12-31T23:30-05:00': the date must "
                                   "be from 2000-01-01 to 8999-12-31"),
    ("* * * *", "bad cron expression '* * * *': expected five fields (minute hour "
                "day-of-month month day-of-week), got 4"),
    ("* * * * * *", "bad cron expression '* * * * * *': expected five fields (minute hour "
                    "day-of-month month day-of-week), got 6; seconds and years are not "
                    "supported"),
    ("0 0 1 1 * 2026 x", "got 7; seconds and years are not supported"),
    ("0 0 1 1 * 2026 x y", "got 8"),
    ("60 * * * *", "bad cron expression '60 * * * *': minute must be 0-59"),
    ("* 24 * * *", "bad cron expression '* 24 * * *': hour must be 0-23"),
    ("* * 32 * *", "bad cron expression '* * 32 * *': day-of-month must be 1-31"),
    ("* * * 0 *", "bad cron expression '* * * 0 *': month must be 1-12 or jan-dec"),
    ("* * * * 8", "bad cron expression '* * * * 8': day-of-week must be 0-7 or sun-sat"),
    ("* * * foo *", "bad cron expression '* * * foo *': unknown month name 'foo'; use jan, feb, "
                    "mar, apr, may, jun, jul, aug, sep, oct, nov, dec"),
    ("* * * * foo", "bad cron expression '* * * * foo': unknown day-of-week name 'foo'; use "
                    "sun, mon, tue, wed, thu, fri, sat"),
    ("x * * * *", "bad cron expression 'x * * * *': minute 'x' is not a number; minute must "
                  "be 0-59"),
    ("* * x * *", "bad cron expression '* * x * *': day-of-month 'x' is not a number; "
                  "day-of-month must be 1-31"),
    ("*-5 * * * *", "bad cron expression '*-5 * * * *': cannot read minute '*-5'; use numbers, "
                    "ranges (1-5), steps (*/15) and lists (1,15)"),
    ("* * * * 1#2", "bad cron expression '* * * * 1#2': cannot read day-of-week '1#2'; use "
                    "numbers or names, ranges (1-5), steps (*/15) and lists (1,15)"),
    ("*/0 * * * *", "bad cron expression '*/0 * * * *': minute step must be at least 1"),
    ("* 1-5/0 * * *", "bad cron expression '* 1-5/0 * * *': hour step must be at least 1"),
    ("* 5-1 * * *", "bad cron expression '* 5-1 * * *': hour range 5-1 runs backwards; put the "
                    "smaller first"),
    ("* * * dec-jan *", "month range dec-jan runs backwards; put the smaller first"),
    ("0 0 31 4 *", "bad cron expression '0 0 31 4 *': it never fires (no such date in any "
                   "year)"),
])
def test_a_bad_schedule_gets_one_message_with_the_fix(expr: str, message: str) -> None:
    got = error(expr)
    assert got == message if message.startswith(("empty", "@", "unknown", "bad")) else (
        message in got)


def test_an_unknown_zone_is_named_with_an_example() -> None:
    with pytest.raises(ScheduleError) as info:
        resolve_zone("Mars/Olympus")
    assert str(info.value) == ("unknown time zone 'Mars/Olympus'; use an IANA name like "
                               "Europe/Riga")
    assert resolve_zone("Europe/Riga") == ZoneInfo("Europe/Riga")
    assert str(resolve_zone("UTC")) == "UTC"  # datetime's own (test_schedule.py)
    assert resolve_zone("Asia/Tokyo") is resolve_zone("Asia/Tokyo")  # cached: read once


# ---------------------------------------------------------------- forms at their bounds


def test_every_accepts_exactly_one_minute_to_366_days() -> None:
    for text, seconds in (("@every 1m", 60), ("@every 60s", 60), ("@every 366d", 366 * 86400),
                          ("@EVERY 2h", 7200)):
        s = parse_schedule(text, JNB)
        assert s.every == timedelta(seconds=seconds), text
        assert s.expression == text
    yearly = parse_schedule("@every 366d", JNB)
    start = utc(2026, 1, 1)
    first = yearly.next_after(start)
    assert yearly.next_after(first) - first == timedelta(days=366)


def test_every_minute_on_the_epoch_and_at_its_fires() -> None:
    s = parse_schedule("@every 1m", JNB)
    assert s.next_after(utc(2026, 5, 4, 10, 7)) == utc(2026, 5, 4, 10, 8)
    assert s.next_after(utc(2026, 5, 4, 10, 7) - TINY) == utc(2026, 5, 4, 10, 7)
    assert s.latest_at_or_before(utc(2026, 5, 4, 10, 7)) == utc(2026, 5, 4, 10, 7)
    assert s.latest_at_or_before(utc(2026, 5, 4, 10, 8) - TINY) == utc(2026, 5, 4, 10, 7)
    # the epoch itself is a fire; the zone plays no part
    assert parse_schedule("@every 7d", NY).latest_at_or_before(utc(1970, 1, 7)) == utc(1970, 1, 1)


def test_at_the_end_of_time_nothing_fires_and_nothing_overflows() -> None:
    end = LATEST
    for expr in ("0 0 * * *", "@every 1h", "* * * * *", "@every 366d"):
        s = parse_schedule(expr, RIGA)
        assert s.next_after(end) is None, expr
        assert s.next_after(end + timedelta(days=300)) is None, expr
        last = s.latest_at_or_before(end + timedelta(days=300))
        assert last is not None and last < end, expr
        assert s.next_after(end - TINY) is None or s.next_after(end - TINY) < end
    assert parse_schedule("@every 1h", RIGA).latest_at_or_before(end) == end - HOUR
    assert parse_schedule("@every 1h", RIGA).next_after(end - HOUR - TINY) == end - HOUR
    assert parse_schedule("@every 1h", RIGA).next_after(end - HOUR) is None
    daily = parse_schedule("0 0 * * *", ZoneInfo("UTC"))
    assert daily.next_after(end - timedelta(days=1)) is None
    assert daily.next_after(end - timedelta(days=1, seconds=1)) == end - timedelta(days=1)
    assert daily.latest_at_or_before(end) == end - timedelta(days=1)


def test_at_accepts_the_first_and_last_days_of_the_range() -> None:
    first = parse_schedule("@at 2000-01-01T00:00Z", RIGA)
    assert first.latest_at_or_before(utc(2000, 1, 1)) == utc(2000, 1, 1)
    last = parse_schedule("@at 8999-12-31T23:59", ZoneInfo("UTC"))
    assert last.next_after(utc(2026, 1, 1)) == utc(8999, 12, 31, 23, 59)
    spaced = parse_schedule("@at 2026-07-01 12:00", JNB)
    assert spaced.next_after(utc(2026, 1, 1)) == utc(2026, 7, 1, 10)
    assert spaced.expression == "@at 2026-07-01 12:00" and spaced.zone is JNB
    assert spaced.next_after(utc(2026, 7, 1, 10) - TINY) == utc(2026, 7, 1, 10)
    assert spaced.latest_at_or_before(utc(2026, 7, 1, 10) - TINY) is None


def test_fires_between_stops_at_the_limit_and_includes_until() -> None:
    s = parse_schedule("0 * * * *", JNB)
    start = utc(2026, 1, 1)
    assert fires_between(s, start, start + 5 * HOUR) == [start + n * HOUR for n in range(1, 6)]
    assert fires_between(s, start, start + 5 * HOUR, limit=3) == [start + n * HOUR
                                                                  for n in (1, 2, 3)]
    assert len(fires_between(s, start, start + 100 * HOUR)) == 20
    assert fires_between(s, start, start + HOUR - TINY) == []
    assert fires_between(s, start, start, limit=0) == []


# ---------------------------------------------------------------- fields


def test_sunday_is_0_or_7_and_a_full_week_is_every_day() -> None:
    span = (utc(2026, 6, 1), utc(2026, 7, 1))

    def days(expr: str) -> list[int]:
        return [f.astimezone(JNB).day for f in fires_between(parse_schedule(expr, JNB), *span,
                                                             limit=100)]

    assert days("0 12 * * 7") == days("0 12 * * 0") == [7, 14, 21, 28]
    assert days("0 12 * * 5-7") == [5, 6, 7, 12, 13, 14, 19, 20, 21, 26, 27, 28]
    # both day fields restricted, one of them to the whole week: every day matches
    assert days("0 12 15 * 0-6") == list(range(1, 31))
    assert days("0 12 15 * 1-7") == list(range(1, 31))
    assert days("0 12 15 * mon-sat") == [d for d in range(1, 31) if d not in (7, 14, 21, 28)]
    # a full day-of-month list with a weekday: every day too
    assert days("0 12 1-31 * 3") == list(range(1, 31))
    # a star with a step is still "starts with *": both must match
    assert days("0 12 */1 * 3") == [3, 10, 17, 24]
    assert days("0 12 * * */2") == [2, 4, 6, 7, 9, 11, 13, 14, 16, 18, 20, 21, 23, 25, 27, 28,
                                    30]


@pytest.mark.parametrize(("expr", "minutes"), [
    ("59 * * * *", [59]),
    ("0-3 * * * *", [0, 1, 2, 3]),
    ("*/20 * * * *", [0, 20, 40]),
    ("10/20 * * * *", [10, 30, 50]),
    ("57-59/1 * * * *", [57, 58, 59]),
    ("5,5,6 * * * *", [5, 6]),
    ("0-59/30 * * * *", [0, 30]),
])
def test_minute_fields(expr: str, minutes: list[int]) -> None:
    got = fires_between(parse_schedule(expr, JNB), utc(2026, 1, 1) - TINY,
                        utc(2026, 1, 1, 0, 59, 59), limit=100)
    assert [f.minute for f in got] == minutes


@pytest.mark.parametrize(("expr", "hours"), [
    ("0 23 * * *", [23]),
    ("0 0-2 * * *", [0, 1, 2]),
    ("0 */8 * * *", [0, 8, 16]),
    ("0 20/2 * * *", [20, 22]),
])
def test_hour_fields(expr: str, hours: list[int]) -> None:
    z = ZoneInfo("UTC")
    got = fires_between(parse_schedule(expr, z), utc(2026, 1, 1) - TINY, utc(2026, 1, 1, 23, 59),
                        limit=100)
    assert [f.hour for f in got] == hours


@pytest.mark.parametrize(("expr", "months"), [
    ("0 0 1 12 *", [12]),
    ("0 0 1 nov-dec *", [11, 12]),
    ("0 0 1 */5 *", [1, 6, 11]),
    ("0 0 1 JAN,mar *", [1, 3]),
    ("0 0 31 * *", [1, 3, 5, 7, 8, 10, 12]),
    ("0 0 1 * *", list(range(1, 13))),
])
def test_month_fields(expr: str, months: list[int]) -> None:
    z = ZoneInfo("UTC")
    got = fires_between(parse_schedule(expr, z), utc(2026, 1, 1) - TINY, utc(2026, 12, 31, 23),
                        limit=100)
    assert [f.month for f in got] == months


def test_extra_blanks_between_fields_and_around_are_fine() -> None:
    s = parse_schedule("  0   6\t* *  1-5 ", JNB)
    assert s.expression == "0   6\t* *  1-5"
    assert s.next_after(utc(2026, 1, 2)) == utc(2026, 1, 2, 4)


# ---------------------------------------------------------------- DST edges


def test_a_gap_fire_lands_on_the_exact_second_of_the_jump() -> None:
    # Lord Howe moves by 30 minutes: 02:00 -> 02:30 on 2026-10-04 (15:30 UTC the day before)
    lhi = ZoneInfo("Australia/Lord_Howe")
    jump = utc(2026, 10, 3, 15, 30)
    assert (jump - TINY).astimezone(lhi).utcoffset() == timedelta(hours=10, minutes=30)
    assert jump.astimezone(lhi).utcoffset() == timedelta(hours=11)
    s = parse_schedule("15 2 * * *", lhi)
    assert s.next_after(utc(2026, 10, 3)) == jump
    assert s.latest_at_or_before(jump) == jump
    assert s.latest_at_or_before(jump - TINY) == utc(2026, 10, 2, 15, 45)
    assert s.next_after(jump) == utc(2026, 10, 4, 15, 15)
    # a one-shot in that gap fires at the jump too
    at = parse_schedule("@at 2026-10-04T02:10", lhi)
    assert at.next_after(utc(2026, 1, 1)) == jump


def test_a_non_fixed_job_skips_the_gap_and_repeats_the_fold() -> None:
    every_minute_at_3 = parse_schedule("* 3 * * *", RIGA)
    spring = fires_between(every_minute_at_3, utc(2026, 3, 28, 12), utc(2026, 3, 29, 12),
                           limit=500)
    assert spring == []  # 03:xx does not exist that night
    fall = fires_between(every_minute_at_3, utc(2026, 10, 24, 12), utc(2026, 10, 25, 12),
                         limit=500)
    assert len(fall) == 120 and fall[0] == utc(2026, 10, 25, 0) and fall[-1] == utc(
        2026, 10, 25, 1, 59)
    assert parse_schedule("* 3 * * *", RIGA).fixed_time is False
    # from inside the second pass, the next fire is the next minute of that pass
    s = parse_schedule("*/10 3 * * *", RIGA)
    assert s.next_after(utc(2026, 10, 25, 1, 5)) == utc(2026, 10, 25, 1, 10)
    assert s.latest_at_or_before(utc(2026, 10, 25, 1, 5)) == utc(2026, 10, 25, 1, 0)
    assert s.next_after(utc(2026, 10, 25, 0, 55)) == utc(2026, 10, 25, 1, 0)
    assert s.latest_at_or_before(utc(2026, 10, 25, 0, 55)) == utc(2026, 10, 25, 0, 50)


def test_a_fixed_job_in_the_repeated_hour_runs_once() -> None:
    s = parse_schedule("10,50 3 * * *", RIGA)
    assert fires_between(s, utc(2026, 10, 24, 12), utc(2026, 10, 25, 12)) == [
        utc(2026, 10, 25, 0, 10), utc(2026, 10, 25, 0, 50)]
    # asked from inside the second pass: the first pass's fires are behind
    assert s.next_after(utc(2026, 10, 25, 1, 20)) == utc(2026, 10, 26, 1, 10)
    assert s.latest_at_or_before(utc(2026, 10, 25, 1, 55)) == utc(2026, 10, 25, 0, 50)
    assert s.latest_at_or_before(utc(2026, 10, 25, 0, 49)) == utc(2026, 10, 25, 0, 10)


def test_hourly_from_just_before_a_fall_back() -> None:
    s = parse_schedule("30 * * * *", NY)
    # 00:45 EDT (04:45Z): next 01:30 EDT, then 01:30 EST, then 02:30 EST
    assert fires_between(s, utc(2026, 11, 1, 4, 45), utc(2026, 11, 1, 7, 45)) == [
        utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 30), utc(2026, 11, 1, 7, 30)]
    assert s.next_after(utc(2026, 11, 1, 5, 30)) == utc(2026, 11, 1, 6, 30)
    assert s.latest_at_or_before(utc(2026, 11, 1, 6, 29)) == utc(2026, 11, 1, 5, 30)
    # two hours before the change: still the plain next hour
    assert s.next_after(utc(2026, 11, 1, 3, 40)) == utc(2026, 11, 1, 4, 30)
    assert s.next_after(utc(2026, 11, 1, 2, 40)) == utc(2026, 11, 1, 3, 30)


# ---------------------------------------------------------------- tasks


def test_schedule_of_uses_the_tasks_zone_before_the_configs() -> None:
    config = Config(home=Path("/tmp"), timezone="Africa/Johannesburg")
    own = schedule_of(task("0 6 * * *", timezone="America/New_York"), config)
    # a spelling no earlier call in this process has parsed (the cache is per process): the
    # same schedule with its own trailing blanks, which parsing strips
    blanks = "".join(" \t"[int(bit)] for bit in f"{uuid.uuid4().int:0128b}")
    fresh = schedule_of(task("17 6 * * *" + blanks), config)
    assert fresh.expression == "17 6 * * *" and fresh.zone == JNB
    assert fresh.next_after(utc(2026, 1, 5)) == utc(2026, 1, 5, 4, 17)
    assert own.zone == NY and own.next_after(utc(2026, 1, 5)) == utc(2026, 1, 5, 11)
    inherited = schedule_of(task("0 6 * * *"), config)
    assert inherited.zone == JNB and inherited.next_after(utc(2026, 1, 5)) == utc(2026, 1, 5, 4)
    assert schedule_of(task("0 6 * * *"), config) is inherited  # parsed once per process
    riga = schedule_of(task("0 6 * * *"), Config(home=Path("/tmp"), timezone="Europe/Riga"))
    assert riga.zone == RIGA and riga is not inherited
    with pytest.raises(ScheduleError, match="unknown time zone 'Nowhere/Land'"):
        schedule_of(task("0 6 * * *", timezone="Nowhere/Land"), config)


def test_next_fire_of_a_task() -> None:
    config = Config(home=Path("/tmp"), timezone="Africa/Johannesburg")
    now = utc(2026, 1, 5, 1).timestamp()
    assert next_fire(task("0 6 * * *"), config, now) == utc(2026, 1, 5, 4)
    assert next_fire(task("0 6 * * *"), config, utc(2026, 1, 5, 4).timestamp()) == utc(
        2026, 1, 6, 4)
    assert next_fire(task("0 6 * * *", enabled=False), config, now) is None
    assert next_fire(task("after build", after=("build",)), config, now) is None


def test_next_fire_trusts_the_cached_due_only_inside_its_window() -> None:
    config = Config(home=Path("/tmp"), timezone="Africa/Johannesburg")
    t = task("0 6 * * *")
    floor, cached = utc(2026, 1, 5).timestamp(), utc(2030, 1, 1).timestamp()  # a marked value
    inside = utc(2026, 1, 5, 1).timestamp()
    assert next_fire(t, config, inside, (floor, cached)) == utc(2030, 1, 1)
    assert next_fire(t, config, floor, (floor, cached)) == utc(2030, 1, 1)  # floor itself
    assert next_fire(t, config, inside, (floor, None)) is None  # cached: never again
    # outside the window the schedule decides
    assert next_fire(t, config, floor - 1, (floor, cached)) == utc(2026, 1, 5, 4)
    assert next_fire(t, config, cached, (floor, cached)) == utc(2030, 1, 1, 4)
    assert next_fire(t, config, cached - 1e-7, (floor, cached)) == utc(2030, 1, 1, 4)
    assert next_fire(t, config, cached - 1e-3, (floor, cached)) == utc(2030, 1, 1)
    # a disabled task has no fire whatever the cache says
    assert next_fire(task("0 6 * * *", enabled=False), config, inside, (floor, cached)) is None


# ---------------------------------------------------------------- decide: words and bounds


DAILY = parse_schedule("0 6 * * *", JNB)  # 06:00 SAST = 04:00 UTC
SLOT = utc(2026, 5, 4, 4)
YESTERDAY = utc(2026, 5, 3, 4)


def test_decide_refuses_a_bad_catchup() -> None:
    for bad in (-1.0, -1e-9, math.nan, -math.inf):
        with pytest.raises(ValueError) as info:
            decide(DAILY, now=SLOT, last_slot=None, not_before=None, catchup=bad)
        assert str(info.value) == f"catchup must be >= 0 seconds or math.inf, got {bad!r}"
    assert decide(DAILY, now=SLOT, last_slot=None, not_before=None, catchup=0).action == "run"


def test_decide_wait_says_the_last_slot_and_the_next_fire() -> None:
    d = decide(DAILY, now=SLOT + HOUR, last_slot=SLOT, not_before=None, catchup=3600)
    assert d == Decision("wait", None, "not due: last slot 2026-05-04 06:00 SAST, next fire "
                         "2026-05-05 06:00 SAST", utc(2026, 5, 5, 4), 0)
    never = parse_schedule("@at 2026-05-04T06:00:30", JNB)
    d = decide(never, now=SLOT + HOUR, last_slot=SLOT + timedelta(seconds=30), not_before=None,
               catchup=3600)
    assert d.reason == "not due: last slot 2026-05-04 06:00:30 SAST, next fire none"
    assert d.next_fire is None
    d = decide(never, now=SLOT, last_slot=None, not_before=None, catchup=3600)
    assert d.reason == "not due: last slot none, next fire 2026-05-04 06:00:30 SAST"


def test_decide_before_not_before_names_both_times() -> None:
    seen = SLOT + timedelta(minutes=30, seconds=5)
    d = decide(DAILY, now=SLOT + HOUR, last_slot=None, not_before=seen, catchup=math.inf)
    assert d == Decision(
        "wait", None, "not due: the fire at 2026-05-04 06:00 SAST is before 2026-05-04 06:30:05 "
        "SAST, when the task was first seen or re-enabled; next fire 2026-05-05 06:00 SAST",
        utc(2026, 5, 5, 4))
    # seen exactly at the fire: it runs
    d = decide(DAILY, now=SLOT + MINUTE, last_slot=None, not_before=SLOT, catchup=math.inf)
    assert (d.action, d.slot, d.missed) == ("run", SLOT, 0)
    # seen a microsecond after it: it does not
    d = decide(DAILY, now=SLOT + MINUTE, last_slot=None, not_before=SLOT + TINY,
               catchup=math.inf)
    assert d.action == "wait"


def test_decide_run_words() -> None:
    d = decide(DAILY, now=SLOT + timedelta(seconds=59), last_slot=YESTERDAY, not_before=None,
               catchup=0)
    assert d == Decision("run", SLOT, "due: fire at 2026-05-04 06:00 SAST", utc(2026, 5, 5, 4))
    d = decide(DAILY, now=SLOT + timedelta(seconds=60), last_slot=YESTERDAY, not_before=None,
               catchup=60)
    assert d.reason == "due: fire at 2026-05-04 06:00 SAST, 1m late"
    d = decide(DAILY, now=SLOT + 2 * HOUR, last_slot=utc(2026, 5, 1, 4), not_before=None,
               catchup=math.inf)
    assert d.reason == "due: fire at 2026-05-04 06:00 SAST, 2h late; 2 earlier fire(s) coalesced"
    assert d.missed == 2


@pytest.mark.parametrize(("late", "catchup", "action"), [
    (timedelta(seconds=59), 0, "run"),  # under a minute: on time
    (timedelta(seconds=59, microseconds=999999), 0, "run"),
    (timedelta(seconds=60), 0, "skip"),
    (timedelta(seconds=60), 59, "skip"),
    (timedelta(seconds=60), 60, "run"),
    (timedelta(minutes=10, seconds=59), 600, "run"),  # the whole tenth minute still runs
    (timedelta(minutes=11), 600, "skip"),
    (timedelta(minutes=11), 659, "skip"),
    (timedelta(minutes=11), 660, "run"),
    (timedelta(days=30), math.inf, "run"),
])
def test_decide_catchup_is_judged_in_whole_minutes(late: timedelta, catchup: float,
                                                   action: str) -> None:
    d = decide(DAILY, now=SLOT + late, last_slot=YESTERDAY, not_before=None, catchup=catchup)
    assert (d.action, d.slot) == (action, SLOT if late < timedelta(days=1) else d.slot)


def test_decide_skip_words() -> None:
    d = decide(DAILY, now=SLOT + timedelta(minutes=1, seconds=1), last_slot=YESTERDAY,
               not_before=None, catchup=0)
    assert d == Decision("skip", SLOT, "missed by 1m 1s; catchup allows no catch-up (on time "
                         "only, under 1m); next fire 2026-05-05 06:00 SAST", utc(2026, 5, 5, 4))
    d = decide(DAILY, now=SLOT + timedelta(minutes=40), last_slot=YESTERDAY, not_before=None,
               catchup=900)
    assert d.reason == "missed by 40m; catchup allows 15m; next fire 2026-05-05 06:00 SAST"
    assert d.missed == 0


def test_decide_counts_missed_fires_after_the_last_slot_and_not_before() -> None:
    hourly = parse_schedule("0 * * * *", JNB)
    now = utc(2026, 5, 4, 14, 0, 30)
    d = decide(hourly, now=now, last_slot=utc(2026, 5, 4, 13), not_before=None, catchup=math.inf)
    assert (d.slot, d.missed) == (utc(2026, 5, 4, 14), 0)
    d = decide(hourly, now=now, last_slot=utc(2026, 5, 4, 12), not_before=None, catchup=math.inf)
    assert d.missed == 1
    # not_before later than last_slot: only fires at or after it count
    d = decide(hourly, now=now, last_slot=utc(2026, 5, 4, 8), not_before=utc(2026, 5, 4, 12),
               catchup=math.inf)
    assert d.missed == 2
    d = decide(hourly, now=now, last_slot=utc(2026, 5, 4, 8),
               not_before=utc(2026, 5, 4, 12) + TINY, catchup=math.inf)
    assert d.missed == 1
    # last_slot later than not_before: counted from the last slot
    d = decide(hourly, now=now, last_slot=utc(2026, 5, 4, 11), not_before=utc(2026, 5, 4, 8),
               catchup=math.inf)
    assert d.missed == 2
    # neither: nothing to count from
    d = decide(hourly, now=now, last_slot=None, not_before=None, catchup=math.inf)
    assert (d.action, d.missed) == ("run", 0)


def test_decide_caps_missed_at_a_thousand() -> None:
    every = parse_schedule("* * * * *", JNB)
    now = utc(2026, 5, 4)
    d = decide(every, now=now, last_slot=now - 1001 * MINUTE, not_before=None, catchup=math.inf)
    assert d.missed == 1000 and "1000 earlier fire(s) coalesced" in d.reason
    d = decide(every, now=now, last_slot=now - 1000 * MINUTE, not_before=None, catchup=math.inf)
    assert d.missed == 999
    d = decide(every, now=now, last_slot=now - 1002 * MINUTE, not_before=None, catchup=math.inf)
    assert d.missed == 1000


def test_decide_on_a_one_shot() -> None:
    once = parse_schedule("@at 2026-05-04T06:00", JNB)
    d = decide(once, now=SLOT + timedelta(seconds=5), last_slot=None, not_before=None,
               catchup=0)
    assert (d.action, d.slot, d.next_fire) == ("run", SLOT, None)
    assert d.reason == "due: fire at 2026-05-04 06:00 SAST"
    d = decide(once, now=SLOT + HOUR, last_slot=SLOT, not_before=None, catchup=math.inf)
    assert d.action == "wait"


# ---------------------------------------------------------------- found by the mutation run


def test_asked_from_inside_the_second_pass_the_first_pass_fire_is_the_latest() -> None:
    s = parse_schedule("50 3 * * *", RIGA)  # fixed time: the first pass only
    second_pass_0320 = utc(2026, 10, 25, 1, 20)  # 03:20 EET, after 03:50 EEST (00:50Z)
    assert second_pass_0320.astimezone(RIGA).fold == 1
    assert s.latest_at_or_before(second_pass_0320) == utc(2026, 10, 25, 0, 50)
    assert s.next_after(second_pass_0320) == utc(2026, 10, 26, 1, 50)


def test_a_date_that_does_not_exist_is_a_bad_at() -> None:
    for expr in ("@at 2026-13-01T09:00", "@at 2026-02-30 09:00", "@at 2026-12-01T25:00"):
        assert error(expr) == (f"bad schedule {expr!r}: expected an ISO date-time like "
                               "'@at 2026-12-01T09:00' (optionally with an offset like +02:00)")


def test_fires_come_out_in_utc_whatever_the_form() -> None:
    start = utc(2026, 1, 1)
    for expr in ("@at 2026-12-01T09:00+05:00", "@at 2026-12-01T09:00", "0 6 * * *",
                 "@every 1h"):
        s = parse_schedule(expr, RIGA)
        for fire in (s.next_after(start), s.latest_at_or_before(utc(2027, 1, 1))):
            assert fire is not None and fire.tzinfo is UTC, expr


@pytest.mark.parametrize("system_zone", ["Africa/Lagos", "UTC", "America/New_York"])
def test_schedule_maths_does_not_depend_on_the_machines_zone(monkeypatch: pytest.MonkeyPatch,
                                                             system_zone: str) -> None:
    import time

    monkeypatch.setenv("TZ", system_zone)
    time.tzset()
    try:
        london = ZoneInfo("Europe/London")  # back from BST (+1) to GMT at 01:00Z 2026-10-25
        s = parse_schedule("*/30 1 * * *", london)
        inside_first_pass = utc(2026, 10, 25, 0, 40)  # 01:40 BST
        assert s.next_after(inside_first_pass) == utc(2026, 10, 25, 1, 0)  # 01:00 GMT
        assert s.latest_at_or_before(inside_first_pass) == utc(2026, 10, 25, 0, 30)
        d = decide(parse_schedule("0 6 * * *", JNB), now=SLOT + HOUR, last_slot=SLOT,
                   not_before=None, catchup=0)
        assert d.reason == ("not due: last slot 2026-05-04 06:00 SAST, next fire 2026-05-05 "
                            "06:00 SAST")
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_field_covering_part_of_its_range_is_not_every_value() -> None:
    z = ZoneInfo("UTC")
    day = (utc(2026, 1, 1) - TINY, utc(2026, 1, 1, 23, 59))
    assert [f.hour for f in fires_between(parse_schedule("0 0-6 * * *", z), *day)] == list(
        range(7))
    hour = (utc(2026, 1, 1) - TINY, utc(2026, 1, 1, 0, 59))
    got = fires_between(parse_schedule("0-57 * * * *", z), *hour, limit=100)
    assert [f.minute for f in got] == list(range(58))
    year = (utc(2026, 1, 1) - TINY, utc(2026, 12, 31))
    assert [f.month for f in fires_between(parse_schedule("0 0 1 1-6 *", z), *year)] == [
        1, 2, 3, 4, 5, 6]


def test_a_day_of_month_that_never_comes_is_fine_when_the_weekday_may_match() -> None:
    s = parse_schedule("0 0 30 2 mon", ZoneInfo("UTC"))  # Feb 30 or any Monday in February
    assert fires_between(s, utc(2026, 1, 1), utc(2026, 3, 1)) == [
        utc(2026, 2, d) for d in (2, 9, 16, 23)]


def test_a_bad_range_end_names_the_expression() -> None:
    assert error("5-x * * * *") == ("bad cron expression '5-x * * * *': minute 'x' is not a "
                                    "number; minute must be 0-59")


def test_next_fire_at_the_cached_due_itself_asks_the_schedule() -> None:
    config = Config(home=Path("/tmp"), timezone="Africa/Johannesburg")
    now = utc(2026, 1, 5, 1).timestamp()
    first = now + 1e-6  # the cached next fire a microsecond ahead: it is not "after now"
    assert next_fire(task("0 6 * * *"), config, now, (now - 60, first)) == utc(2026, 1, 5, 4)


def test_an_interval_schedule_speaks_in_its_zone() -> None:
    s = parse_schedule("@every 1h", JNB)
    assert s.zone is JNB
    d = decide(s, now=utc(2026, 5, 4, 4, 30), last_slot=utc(2026, 5, 4, 4), not_before=None,
               catchup=0)
    assert d.reason == "not due: last slot 2026-05-04 06:00 SAST, next fire 2026-05-04 07:00 SAST"


def test_a_zone_without_an_offset_is_not_aware() -> None:
    from datetime import tzinfo

    class NoOffset(tzinfo):
        def utcoffset(self, dt: datetime | None) -> None:
            return None

    t = datetime(2026, 1, 1, tzinfo=NoOffset())
    for expr in ("0 6 * * *", "@every 1h", "@at 2026-12-01T09:00"):
        with pytest.raises(ValueError, match="expected a timezone-aware datetime, got naive"):
            parse_schedule(expr, JNB).next_after(t)


@pytest.mark.parametrize("year", [2026, 2400, 8999])
def test_a_microsecond_before_midnight_still_gives_that_midnight(year):
    """croniter keeps times as floats: in far years 23:59:59.999999 rounded up to the next
    minute, and next_after skipped the midnight a microsecond away."""
    schedule = parse_schedule("0 0 * * *", ZoneInfo("UTC"))
    t = datetime(year, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)
    assert schedule.next_after(t) == datetime(year, 12, 31, tzinfo=UTC)
