"""Schedule maths: forms, errors, DST policy, due-ness. Plain values; no clock, no patching.

Real transitions (tzdata; checked in test_transition_dates_are_real):
  Europe/Riga       spring 2026-03-29 03:00 -> 04:00 EEST at 01:00 UTC
                    fall   2026-10-25 04:00 -> 03:00 EET  at 01:00 UTC
  America/New_York  spring 2026-03-08 02:00 -> 03:00 EDT  at 07:00 UTC
                    fall   2026-11-01 02:00 -> 01:00 EST  at 06:00 UTC
  Africa/Johannesburg has no DST (+02:00 all year).
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from mdcron.core.cron import (
    Decision,
    ScheduleError,
    decide,
    fires_between,
    parse_schedule,
    resolve_zone,
)

RIGA = ZoneInfo("Europe/Riga")
NY = ZoneInfo("America/New_York")
JNB = ZoneInfo("Africa/Johannesburg")
ROOT = Path(__file__).resolve().parent.parent
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
TINY = timedelta(microseconds=1)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def wall(zone: ZoneInfo, *args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=zone, fold=fold).astimezone(UTC)


def fires(expr: str, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    return fires_between(parse_schedule(expr, zone), start, end, limit=10_000)


def test_transition_dates_are_real() -> None:
    for zone, at, before, after in [
        (RIGA, utc(2026, 3, 29, 1), 2, 3),
        (RIGA, utc(2026, 10, 25, 1), 3, 2),
        (NY, utc(2026, 3, 8, 7), -5, -4),
        (NY, utc(2026, 11, 1, 6), -4, -5),
    ]:
        assert (at - timedelta(seconds=1)).astimezone(zone).utcoffset() == timedelta(hours=before)
        assert at.astimezone(zone).utcoffset() == timedelta(hours=after)
    assert {utc(2026, m, 1).astimezone(JNB).utcoffset() for m in range(1, 13)} == {2 * HOUR}


# ---------------------------------------------------------------- forms


def test_weekday_cron_in_johannesburg() -> None:
    s = parse_schedule("0 6 * * 1-5", JNB)
    assert s.expression == "0 6 * * 1-5" and s.zone is JNB and s.fixed_time
    # Friday 2026-01-02, then Monday 2026-01-05; 06:00 SAST is 04:00 UTC.
    assert fires_between(s, utc(2026, 1, 2), utc(2026, 1, 6)) == [
        utc(2026, 1, 2, 4), utc(2026, 1, 5, 4)]
    assert s.next_after(utc(2026, 1, 2, 4)).tzinfo is UTC


def test_names_are_case_insensitive_and_equal_numbers() -> None:
    span = (utc(2026, 1, 1), utc(2027, 1, 1))
    assert fires("0 6 * * MON-fri", JNB, *span) == fires("0 6 * * 1-5", JNB, *span)
    assert fires("0 0 1 Jan,JUL *", JNB, *span) == fires("0 0 1 1,7 *", JNB, *span)
    assert fires("0 0 * * sun", JNB, *span) == fires("0 0 * * 7", JNB, *span)
    assert len(fires("0 0 * * 0", JNB, *span)) == 52


def test_ranges_steps_lists() -> None:
    got = fires("5-20/5,50 */6 * * *", JNB, utc(2026, 1, 1, 22), utc(2026, 1, 2, 4, 30))
    # 00:xx and 06:xx SAST = 22:xx and 04:xx UTC
    assert [f.minute for f in got] == [5, 10, 15, 20, 50, 5, 10, 15, 20]
    assert fires("0 0 10/10 * *", JNB, utc(2026, 1, 1), utc(2026, 2, 1)) == [
        wall(JNB, 2026, 1, d) for d in (10, 20, 30)]


def test_day_fields_follow_vixie_cron() -> None:
    span = (utc(2026, 6, 1), utc(2026, 7, 1))
    # both restricted: either matches (1st of the month or any Monday)
    either = fires("0 12 1 * mon", JNB, *span)
    assert [f.day for f in either] == [1, 8, 15, 22, 29]
    either = fires("0 12 2 * mon", JNB, *span)
    assert [f.day for f in either] == [1, 2, 8, 15, 22, 29]
    # one side starts with '*': both must match (odd days that are Mondays)
    assert [f.day for f in fires("0 12 */2 * mon", JNB, *span)] == [1, 15, 29]
    # an explicit full range is still a restriction: every day
    assert len(fires("0 12 1-31 * mon", JNB, *span)) == 30


@pytest.mark.parametrize(("macro", "cron"), [
    ("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"),
    ("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"), ("@DAILY", "0 0 * * *"),
])
def test_macros(macro: str, cron: str) -> None:
    a, b = parse_schedule(macro, RIGA), parse_schedule(cron, RIGA)
    span = (utc(2025, 12, 1), utc(2027, 2, 1))
    assert fires_between(a, *span, limit=300) == fires_between(b, *span, limit=300)
    assert parse_schedule(macro, RIGA).expression == macro
    assert parse_schedule(macro, RIGA).fixed_time == (macro != "@hourly")


@pytest.mark.parametrize(("expr", "fixed"), [
    ("30 3 * * *", True), ("0 0 * * *", True), ("0,30 1-5 * * *", True), ("0-59 3 * * *", True),
    ("* 3 * * *", False), ("*/15 * * * *", False), ("0 * * * *", False), ("0 */2 * * *", False),
    ("@hourly", False), ("@daily", True), ("@weekly", True), ("@every 1h", False),
    ("@at 2026-12-01T09:00", True),
])
def test_fixed_time_classification(expr: str, fixed: bool) -> None:
    assert parse_schedule(expr, RIGA).fixed_time is fixed


@pytest.mark.parametrize(("expr", "words"), [
    ("61 * * * *", "bad cron expression '61 * * * *': minute must be 0-59"),
    ("* 24 * * *", "hour must be 0-23"),
    ("* * 0 * *", "day-of-month must be 1-31"),
    ("* * * 13 *", "month must be 1-12 or jan-dec"),
    ("* * * * 8", "day-of-week must be 0-7 or sun-sat"),
    ("* * * * Funday", "unknown day-of-week name 'Funday'"),
    ("* * * smarch *", "unknown month name 'smarch'"),
    ("0 0 6 * * 1", "expected five fields"),
    ("0 0 6 * * 1 2026", "seconds and years are not supported"),
    ("0 6 * *", "expected five fields (minute hour day-of-month month day-of-week), got 4"),
    ("*/0 * * * *", "minute step must be at least 1"),
    ("5-2 * * * *", "minute range 5-2 runs backwards"),
    ("0 0 L * *", "day-of-month 'L' is not a number"),
    ("0 0 * * 1#2", "cannot read day-of-week '1#2'"),
    ("H * * * *", "minute 'H' is not a number"),
    ("1,,2 * * * *", "cannot read minute ''"),
    ("0 0 30 2 *", "never fires"),
    ("", "empty schedule"),
    ("@reboot", "@reboot is not supported"),
    ("@fortnightly", "unknown schedule '@fortnightly'"),
    ("@daily 5", "unknown schedule"),
    ("@every 30s", "at least 1m"),
    ("@every 90.5s", "whole number of seconds"),
    ("@every soon", "expected a duration like 90s"),
    ("@at 2026-12-01", "expected an ISO date-time"),
    ("@at next tuesday", "expected an ISO date-time"),
])
def test_bad_expressions_say_what_is_wrong(expr: str, words: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(expr, RIGA)
    assert words in str(info.value)
    assert isinstance(info.value, ValueError)


def test_naive_datetimes_are_refused() -> None:
    for expr in ("0 6 * * *", "@every 1h", "@at 2026-12-01T09:00"):
        s = parse_schedule(expr, RIGA)
        with pytest.raises(ValueError, match="timezone-aware"):
            s.next_after(datetime(2026, 1, 1))
        with pytest.raises(ValueError, match="timezone-aware"):
            s.latest_at_or_before(datetime(2026, 1, 1))


# ---------------------------------------------------------------- DST


def test_riga_fixed_job_spring_forward_runs_right_after_the_jump() -> None:
    got = fires("30 3 * * *", RIGA, utc(2026, 3, 27), utc(2026, 3, 31))
    assert got == [wall(RIGA, 2026, 3, 27, 3, 30), wall(RIGA, 2026, 3, 28, 3, 30),
                   utc(2026, 3, 29, 1, 0), wall(RIGA, 2026, 3, 30, 3, 30)]
    assert utc(2026, 3, 29, 1).astimezone(RIGA).hour == 4  # 04:00 EEST


def test_riga_fixed_job_fall_back_runs_once_in_the_first_pass() -> None:
    got = fires("30 3 * * *", RIGA, utc(2026, 10, 24), utc(2026, 10, 27))
    assert got == [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_several_fixed_fires_in_one_gap_coalesce() -> None:
    got = fires("0,20,40 3 * * *", RIGA, utc(2026, 3, 28, 12), utc(2026, 3, 30, 12))
    assert got == [utc(2026, 3, 29, 1), *(wall(RIGA, 2026, 3, 30, 3, m) for m in (0, 20, 40))]
    # a gap fire and a real 04:00 fire are the same instant, listed once
    got = fires("0 3,4 * * *", RIGA, utc(2026, 3, 28, 12), utc(2026, 3, 29, 12))
    assert got == [utc(2026, 3, 29, 1)]


def test_riga_non_fixed_job_both_passes_and_not_in_gap() -> None:
    fall = fires("*/15 * * * *", RIGA, utc(2026, 10, 24, 23, 59), utc(2026, 10, 25, 2, 0))
    repeated = [f for f in fall if f.astimezone(RIGA).hour == 3]
    assert len(repeated) == 8
    assert fall == [utc(2026, 10, 25, 0, 0) + n * 15 * MINUTE for n in range(9)]
    spring = fires("*/15 * * * *", RIGA, utc(2026, 3, 28, 23, 59), utc(2026, 3, 29, 2))
    assert not any(f.astimezone(RIGA).hour == 3 for f in spring)
    assert spring == [utc(2026, 3, 29, 0) + n * 15 * MINUTE for n in range(9)]


def test_new_york_fixed_job() -> None:
    # 02:30 does not exist on 2026-03-08: fire at 03:00 EDT = 07:00 UTC
    got = fires("30 2 * * *", NY, utc(2026, 3, 7), utc(2026, 3, 10))
    assert got == [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)]
    # 02:30 happens once on 2026-11-01 (EST), 01:30 twice: first pass (EDT) only
    got = fires("30 2 * * *", NY, utc(2026, 10, 31), utc(2026, 11, 3))
    assert got == [utc(2026, 10, 31, 6, 30), utc(2026, 11, 1, 7, 30), utc(2026, 11, 2, 7, 30)]
    got = fires("30 1 * * *", NY, utc(2026, 10, 31), utc(2026, 11, 3))
    assert got == [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]


def test_new_york_hourly_job() -> None:
    got = fires("0 * * * *", NY, utc(2026, 11, 1, 3, 30), utc(2026, 11, 1, 8))
    # 00:00 EDT, 01:00 EDT, 01:00 EST, 02:00 EST, 03:00 EST
    assert got == [utc(2026, 11, 1, h) for h in (4, 5, 6, 7, 8)]
    assert [f.astimezone(NY).hour for f in got] == [0, 1, 1, 2, 3]
    got = fires("0 * * * *", NY, utc(2026, 3, 8, 5, 30), utc(2026, 3, 8, 8))
    assert [f.astimezone(NY).hour for f in got] == [1, 3, 4]  # no 02:00


def test_johannesburg_has_no_surprises() -> None:
    for expr in ("30 3 * * *", "*/15 * * * *"):
        s = parse_schedule(expr, JNB)
        got = fires_between(s, utc(2026, 3, 28), utc(2026, 3, 30), limit=1000)
        step = 15 * MINUTE if expr.startswith("*") else 24 * HOUR
        assert all(b - a == step for a, b in zip(got, got[1:], strict=False))


def _reference(expr: str, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """The policy by definition: look at every minute of [start, end]."""
    fixed = parse_schedule(expr, zone).fixed_time
    out: set[datetime] = set()
    t = start
    while t <= end:
        local, before = t.astimezone(zone), (t - MINUTE).astimezone(zone)
        if croniter.match(expr, local.replace(tzinfo=None)) and not (fixed and local.fold):
            out.add(t)
        jump = local.utcoffset() - before.utcoffset()
        if fixed and jump > timedelta(0):  # a gap: the skipped walls fire now, once
            skipped = local.replace(tzinfo=None) - jump
            while skipped < local.replace(tzinfo=None):
                if croniter.match(expr, skipped):
                    out.add(t)
                skipped += MINUTE
        t += MINUTE
    return sorted(out)


@pytest.mark.parametrize("expr", [
    "30 3 * * *", "*/15 * * * *", "0 * * * *", "0-59/7 3 * * *", "15,45 1-4 * * *",
    "* 2-3 * * *", "59 2,3 * * *", "0 4 * * *",
])
@pytest.mark.parametrize(("zone", "day"), [
    (RIGA, utc(2026, 3, 29)), (RIGA, utc(2026, 10, 25)),
    (NY, utc(2026, 3, 8, 5)), (NY, utc(2026, 11, 1, 5)),
])
def test_matches_the_policy_minute_by_minute(expr: str, zone: ZoneInfo, day: datetime) -> None:
    start, end = day - 5 * HOUR, day + 7 * HOUR
    expected = _reference(expr, zone, start, end)
    s = parse_schedule(expr, zone)
    assert fires_between(s, start - TINY, end, limit=10_000) == expected
    backwards, t = [], end
    while (t := s.latest_at_or_before(t)) is not None and t >= start:
        backwards.append(t)
        t -= TINY
    assert backwards[::-1] == expected
    # from inside the transition window, at odd seconds, both directions agree
    for probe in (day - 30 * MINUTE, day + 17 * MINUTE + 13 * TINY, day + 59 * MINUTE):
        later = [f for f in expected if f > probe]
        earlier = [f for f in expected if f <= probe]
        if later:
            assert s.next_after(probe) == later[0]
        if earlier:
            assert s.latest_at_or_before(probe) == earlier[-1]


def test_fire_exactly_at_t_counts_as_latest_and_not_next() -> None:
    s = parse_schedule("30 3 * * *", RIGA)
    fire = utc(2026, 3, 29, 1)  # the spring-forward fire
    assert s.latest_at_or_before(fire) == fire
    assert s.latest_at_or_before(fire - TINY) == utc(2026, 3, 28, 1, 30)
    assert s.next_after(fire) == utc(2026, 3, 30, 0, 30)
    assert s.next_after(fire - TINY) == fire
    hourly = parse_schedule("0 * * * *", RIGA)
    second_pass = utc(2026, 10, 25, 1)  # 03:00 EET, the second 03:00
    assert hourly.latest_at_or_before(second_pass) == second_pass
    assert hourly.next_after(second_pass - TINY) == second_pass


def test_yearly_a_year_back_and_ahead() -> None:
    s = parse_schedule("@yearly", RIGA)
    new_year_2026 = utc(2025, 12, 31, 22)  # 00:00 EET
    assert s.latest_at_or_before(utc(2026, 12, 31, 21, 59)) == new_year_2026
    assert s.next_after(new_year_2026) == utc(2026, 12, 31, 22)
    leap = parse_schedule("0 12 29 2 *", RIGA)
    assert leap.latest_at_or_before(utc(2027, 6, 1)) == utc(2024, 2, 29, 10)
    assert leap.next_after(utc(2027, 6, 1)) == utc(2028, 2, 29, 10)


def test_yearly_landing_in_a_gap_and_a_fold() -> None:
    gap = parse_schedule("30 3 29 3 *", RIGA)
    assert gap.next_after(utc(2026, 1, 1)) == utc(2026, 3, 29, 1)
    assert gap.latest_at_or_before(utc(2026, 12, 1)) == utc(2026, 3, 29, 1)
    fold = parse_schedule("*/30 3 25 10 *", RIGA)  # not fixed: both passes
    assert fold.latest_at_or_before(utc(2026, 12, 1)) == utc(2026, 10, 25, 1, 30)
    assert fires_between(fold, utc(2026, 10, 1), utc(2026, 11, 1)) == [
        utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 25, 1, 0), utc(2026, 10, 25, 1, 30)]


# ---------------------------------------------------------------- @every, @at


def test_every_is_anchored_at_the_unix_epoch() -> None:
    s = parse_schedule("@every 15m", RIGA)
    assert not s.fixed_time
    assert s.next_after(utc(2026, 5, 4, 10, 7, 12)) == utc(2026, 5, 4, 10, 15)
    assert s.latest_at_or_before(utc(2026, 5, 4, 10, 15)) == utc(2026, 5, 4, 10, 15)
    assert s.next_after(utc(2026, 5, 4, 10, 15)) == utc(2026, 5, 4, 10, 30)
    odd = parse_schedule("@every 7m", NY)
    fire = odd.next_after(utc(2026, 5, 4, 10, 7, 12))
    assert (fire - utc(1970, 1, 1)).total_seconds() % 420 == 0
    assert fire - odd.latest_at_or_before(fire - TINY) == 7 * MINUTE
    # elapsed time: across a fall-back the spacing stays 90 minutes
    got = fires("@every 90m", RIGA, utc(2026, 10, 24, 20), utc(2026, 10, 25, 6))
    assert all(b - a == 90 * MINUTE for a, b in zip(got, got[1:], strict=False))
    assert got == fires("@every 90m", JNB, utc(2026, 10, 24, 20), utc(2026, 10, 25, 6))


def test_at_fires_once() -> None:
    s = parse_schedule("@at 2026-12-01T09:00", RIGA)
    fire = utc(2026, 12, 1, 7)  # 09:00 EET
    assert s.next_after(utc(2026, 1, 1)) == fire
    assert s.next_after(fire) is None
    assert s.latest_at_or_before(fire - TINY) is None
    assert s.latest_at_or_before(fire) == fire
    assert s.latest_at_or_before(utc(2030, 1, 1)) == fire
    with_offset = parse_schedule("@at 2026-12-01T09:00+05:00", RIGA)
    assert with_offset.next_after(utc(2026, 1, 1)) == utc(2026, 12, 1, 4)
    assert parse_schedule("@at 2026-12-01 09:00:30Z", RIGA).next_after(
        utc(2026, 1, 1)) == utc(2026, 12, 1, 9, 0, 30)


def test_at_in_a_gap_or_fold() -> None:
    gap = parse_schedule("@at 2026-03-29T03:30", RIGA)
    assert gap.next_after(utc(2026, 1, 1)) == utc(2026, 3, 29, 1)
    fold = parse_schedule("@at 2026-10-25T03:30", RIGA)
    assert fold.next_after(utc(2026, 1, 1)) == utc(2026, 10, 25, 0, 30)


# ---------------------------------------------------------------- zones, imports


def test_resolve_zone_by_name() -> None:
    assert resolve_zone("Europe/Riga") == RIGA
    for bad in ("Europe/Rgia", "", "../etc/passwd", "Europe/../Riga", "/etc/localtime"):
        with pytest.raises(ScheduleError, match="use an IANA name like Europe/Riga"):
            resolve_zone(bad)
    with pytest.raises(ScheduleError, match="unknown time zone 'Europe/Rgia'"):
        resolve_zone("Europe/Rgia")


def test_utc_by_name_is_zoneinfos_utc_without_zoneinfo() -> None:
    """Issue 27: `UTC` resolves to datetime's UTC (no zoneinfo, no sysconfig, no file to
    read): at every instant the same offset, name and wall time as ZoneInfo("UTC"), so every
    schedule steps alike; a zone by any other name still comes from zoneinfo."""
    zone, real = resolve_zone("UTC"), ZoneInfo("UTC")
    assert str(zone) == str(real) == "UTC"
    rng = random.Random(27)
    for _ in range(2000):
        t = datetime(2, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(9996 * 365 * 86400))
        assert t.astimezone(zone).utcoffset() == t.astimezone(real).utcoffset() == timedelta(0)
        assert t.astimezone(zone).tzname() == t.astimezone(real).tzname()
        wall = t.replace(tzinfo=None)
        for fold in (0, 1):
            assert (wall.replace(tzinfo=zone, fold=fold).utcoffset()
                    == wall.replace(tzinfo=real, fold=fold).utcoffset())
    for spec in ("30 3 * * *", "*/7 * * * *", "0 0 29 2 *", "15 2 * * 0"):
        a, b = parse_schedule(spec, zone), parse_schedule(spec, real)
        start = utc(2026, 3, 1)
        end = start + timedelta(days=400)
        assert fires_between(a, start, end, 500) == fires_between(b, start, end, 500)
    assert isinstance(resolve_zone("Etc/UTC"), ZoneInfo)
    code = ("import sys; from mdcron.core.wall_time import resolve_zone;"
            " resolve_zone('UTC'); print('zoneinfo' in sys.modules);"
            " resolve_zone('Europe/Riga'); print('zoneinfo' in sys.modules)")
    assert _python(code).split() == ["False", "True"]


def _python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "TZ"} | env
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_resolve_zone_system() -> None:
    code = "from mdcron.core.cron import resolve_zone; print(resolve_zone(None))"
    assert _python(code, TZ=":Europe/Riga") == "Europe/Riga"
    assert _python(code, TZ="America/New_York") == "America/New_York"
    fallback = _python(code, TZ="Not/AZone")  # falls through to /etc/localtime and friends
    assert fallback == _python(code)
    assert fallback != "Not/AZone"


def test_import_does_not_load_croniter_or_dateutil() -> None:
    code = ("import mdcron.core.cron, sys; "
            "assert 'croniter' not in sys.modules and 'dateutil' not in sys.modules; "
            "from mdcron.core.cron import parse_schedule, resolve_zone; "
            "s = parse_schedule('@every 5m', resolve_zone('UTC'));"
            "assert 'croniter' not in sys.modules; print('ok')")
    assert _python(code) == "ok"


# ---------------------------------------------------------------- decide


DAILY = parse_schedule("0 6 * * *", JNB)  # 06:00 SAST = 04:00 UTC


def test_decide_not_yet() -> None:
    d = decide(DAILY, now=utc(2026, 5, 4, 10), last_slot=utc(2026, 5, 4, 4), not_before=None,
               catchup=3600)
    assert d == Decision("wait", None, d.reason, utc(2026, 5, 5, 4))
    assert "not due" in d.reason and "2026-05-05 06:00 SAST" in d.reason
    never = decide(parse_schedule("@at 2026-12-01T09:00", JNB), now=utc(2026, 5, 4),
                   last_slot=None, not_before=None, catchup=math.inf)
    assert never.action == "wait" and never.next_fire == utc(2026, 12, 1, 7)


def test_decide_first_seen_does_not_run_earlier_fires() -> None:
    seen = utc(2026, 5, 4, 13)  # added at 15:00 local; today's 06:00 is not run
    d = decide(DAILY, now=seen + MINUTE, last_slot=None, not_before=seen, catchup=math.inf)
    assert d.action == "wait" and "first seen or re-enabled" in d.reason
    d = decide(DAILY, now=utc(2026, 5, 5, 4, 0, 20), last_slot=None, not_before=seen,
               catchup=0.0)
    assert (d.action, d.slot, d.missed) == ("run", utc(2026, 5, 5, 4), 0)


def test_decide_coalesces_missed_fires() -> None:
    hourly = parse_schedule("0 * * * *", JNB)
    d = decide(hourly, now=utc(2026, 5, 4, 14, 0, 20), last_slot=utc(2026, 5, 4, 10),
               not_before=None, catchup=math.inf)
    assert (d.action, d.slot, d.missed) == ("run", utc(2026, 5, 4, 14), 3)
    assert d.next_fire == utc(2026, 5, 4, 15)
    # a fire exactly at not_before counts; one before it does not
    d = decide(hourly, now=utc(2026, 5, 4, 14, 0, 20), last_slot=None,
               not_before=utc(2026, 5, 4, 11), catchup=math.inf)
    assert (d.slot, d.missed) == (utc(2026, 5, 4, 14), 3)
    every_minute = parse_schedule("* * * * *", JNB)
    d = decide(every_minute, now=utc(2026, 5, 4), last_slot=utc(2026, 4, 27), not_before=None,
               catchup=math.inf)
    assert d.action == "run" and d.missed == 1000


def test_decide_catchup_skip_and_always() -> None:
    now = utc(2026, 5, 4, 7, 2)  # 3h 2m after 06:00 SAST
    d = decide(DAILY, now=now, last_slot=utc(2026, 5, 3, 4), not_before=None, catchup=3600)
    assert (d.action, d.slot) == ("skip", utc(2026, 5, 4, 4))
    assert "missed by 3h 2m; catchup allows 1h" in d.reason
    d = decide(DAILY, now=now, last_slot=utc(2026, 5, 3, 4), not_before=None, catchup=4 * 3600)
    assert (d.action, d.missed) == ("run", 0)
    d = decide(DAILY, now=now, last_slot=utc(2026, 4, 1, 4), not_before=None, catchup=math.inf)
    assert (d.action, d.slot, d.missed) == ("run", utc(2026, 5, 4, 4), 32)


def test_decide_catchup_never_means_on_time_only() -> None:
    last = utc(2026, 5, 3, 4)
    on_time = decide(DAILY, now=utc(2026, 5, 4, 4, 0, 59), last_slot=last, not_before=None,
                     catchup=0.0)
    assert on_time.action == "run"
    late = decide(DAILY, now=utc(2026, 5, 4, 4, 1, 1), last_slot=last, not_before=None,
                  catchup=0.0)
    assert late.action == "skip" and "missed by 1m 1s" in late.reason
    # a catchup under a minute never makes an on-time fire skip
    assert decide(DAILY, now=utc(2026, 5, 4, 4, 0, 45), last_slot=last, not_before=None,
                  catchup=30).action == "run"
    with pytest.raises(ValueError):
        decide(DAILY, now=datetime(2026, 5, 4), last_slot=None, not_before=None, catchup=0.0)


# ---------------------------------------------------------------- properties

_CRON = st.tuples(
    st.sampled_from(["*", "0", "30", "*/15", "0-10", "5,35", "*/7", "59"]),
    st.sampled_from(["*", "3", "2-4", "*/2", "0", "4", "1,3"]),
    st.sampled_from(["*", "1", "25,29", "*/10", "31"]),
    st.sampled_from(["*", "3", "10", "3,10", "2"]),
    st.sampled_from(["*", "0", "1-5", "sun,sat"]),
).map(" ".join).filter(lambda e: e.split()[2:4] != ["31", "2"])  # never fires
_TRANSITIONS = [utc(2026, 3, 29, 1), utc(2026, 10, 25, 1)]
_INSTANTS = st.one_of(
    st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2026, 12, 31),
                 timezones=st.just(UTC)),
    st.builds(lambda at, s: at + timedelta(seconds=s), st.sampled_from(_TRANSITIONS),
              st.integers(-4 * 3600, 4 * 3600)),
)


@settings(max_examples=300, deadline=None)
@given(expr=_CRON, t=_INSTANTS)
def test_next_and_latest_agree(expr: str, t: datetime) -> None:
    s = parse_schedule(expr, RIGA)
    n = s.next_after(t)
    assert n is not None and n > t and n.tzinfo is UTC
    assert s.latest_at_or_before(n) == n
    assert fires_between(s, t, n) == [n]
    latest = s.latest_at_or_before(t)
    assert latest is not None and latest <= t and s.next_after(latest) == n
