"""core/wall_steps.py: a spec matching the same minutes every day, or on some weekdays, steps
exactly as croniter does, and a tick over such schedules never imports croniter (issue 27)."""

import random
import subprocess
import sys
from datetime import datetime, timedelta

import pytest
from conftest import REPO

from mdcron.core.cron import _load_croniter, parse_schedule
from mdcron.core.wall_steps import steps
from mdcron.core.wall_time import resolve_zone


def _field(rng: random.Random, hi: int) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return "*"
    if kind == 1:
        return str(rng.randrange(hi))
    if kind == 2:
        return ",".join(map(str, sorted(rng.sample(range(hi), rng.randint(2, 5)))))
    step = rng.randint(2, 20)
    return ",".join(map(str, range(rng.randrange(step), hi, step)))


def _instant(rng: random.Random) -> datetime:
    year = rng.choice([2000, 2024, 2026, 2100, 8999, rng.randint(2001, 8998)])
    start = datetime(year, 1, 1)
    t = start + timedelta(seconds=rng.randrange(366 * 86400))
    if rng.random() < 0.5:  # a whole minute, often a matching one
        t = t.replace(second=0)
    return t.replace(microsecond=0) if rng.random() < 0.7 else t


def test_steps_match_croniter_next_and_prev():
    _load_croniter()
    from croniter import croniter

    rng = random.Random(27)
    for n in range(1200):
        days = "*" if n % 3 == 0 else ",".join(  # weekdays, 0 = Sunday
            map(str, sorted(rng.sample(range(7), rng.randint(1, 6)))))
        spec = f"{_field(rng, 60)} {_field(rng, 24)} * * {days}"
        start = _instant(rng)
        ours, theirs = steps(spec), croniter(spec, datetime(2000, 1, 1))
        assert ours is not None
        for method in ("get_next", "get_prev"):
            ours.set_current(start)
            theirs.set_current(start)
            for _ in range(4):
                want = getattr(theirs, method)(datetime)
                assert getattr(ours, method)(datetime) == want, (spec, start, method)


@pytest.mark.parametrize("spec", ["0 6 1 * *", "0 6 * 1 *", "0 6 1 * 1-5", "0 6 1 * 7",
                                  "@monthly", "@yearly", "0 6 29 2 *"])
def test_other_specs_go_to_croniter(spec):
    schedule = parse_schedule(spec, resolve_zone("UTC"))
    assert steps(schedule.spec) is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("spec", ["0 6 * * 1-5", "@weekly", "30 9 * * 7", "*/15 8-17 * * 1,3",
                                  "0 6 1-31 * 1-5", "0 0 * * 0-6"])
def test_weekday_specs_step_without_croniter(spec):
    """`7` is Sunday as `0` is; a day-of-month field that is every day leaves the weekdays
    (cron's OR of an unrestricted side: every day); every weekday is every day."""
    schedule = parse_schedule(spec, resolve_zone("UTC"))
    assert steps(schedule.spec) is not None  # type: ignore[attr-defined]


def test_weekday_steps_walk_to_the_next_matching_day():
    it = steps("0 9 * * 1,2,3,4,5")  # Mondays to Fridays, 09:00
    it.set_current(datetime(2026, 11, 27, 9, 0))  # a Friday, at the fire
    assert it.get_next(datetime) == datetime(2026, 11, 30, 9, 0)  # Monday
    assert it.get_prev(datetime) == datetime(2026, 11, 27, 9, 0)
    it.set_current(datetime(2026, 11, 29, 12, 0))  # a Sunday
    assert it.get_prev(datetime) == datetime(2026, 11, 27, 9, 0)
    it = steps("59 23 * * 5")  # Fridays: 9999-12-31 is one
    it.set_current(datetime(9999, 12, 31, 23, 59))
    with pytest.raises(OverflowError):
        it.get_next(datetime)


def test_steps_past_the_last_day_overflow():
    it = steps("59 23 * * *")
    it.set_current(datetime(9999, 12, 31, 23, 59))
    with pytest.raises(OverflowError):
        it.get_next(datetime)


PROBE = """
import sys
from mdcron.cli.main import main
for minute in ("10:00", "10:01"):  # the first reads the files, the second runs from the cache
    code = main(["--home", sys.argv[1], "tick", "--now", f"2026-11-23T{minute}:00+00:00"])
print("CRONITER", "croniter" in sys.modules, code)
"""


def test_tick_of_daily_schedules_does_not_import_croniter(home, write_task):
    write_task("every-minute", command="true")
    write_task("five", command="true", schedule="*/5 * * * *")
    write_task("morning", command="true", schedule="30 6 * * *", timezone="Europe/Riga")
    write_task("weekdays", command="true", schedule="0 10 * * 1-5", timezone="Europe/Riga")
    out = subprocess.run([sys.executable, "-c", PROBE, str(home)], cwd=REPO,
                         capture_output=True, text=True)
    assert "CRONITER False 0" in out.stdout, out.stdout + out.stderr


def test_plain_cron_items_read_without_the_item_pattern_as_with_it():
    """Issue 27: `*`, `*/n` and a number are read without compiling cron.py's _ITEM; each
    reads as its spelling through the pattern does (`lo-hi`, `lo-hi/n`, `d-d`), refuses what
    that refuses, and anything else still goes through the pattern."""
    from mdcron.core.cron import _FIELDS, ScheduleError, _parse_field

    for index, (_, lo, hi, _, _) in enumerate(_FIELDS):
        assert _parse_field("t", "*", index) == _parse_field("t", f"{lo}-{hi}", index)
        for n in (1, 2, 5, 7, 13, 60, 99):
            assert (_parse_field("t", f"*/{n}", index)
                    == _parse_field("t", f"{lo}-{hi}/{n}", index))
        for d in range(0, 100):
            try:
                expected = _parse_field("t", f"{d}-{d}", index)
            except ScheduleError as exc:
                with pytest.raises(ScheduleError) as info:
                    _parse_field("t", str(d), index)
                assert str(info.value) == str(exc)
            else:
                assert _parse_field("t", str(d), index) == expected
        for bad in ("*/0", "*/", "*/x", "*/-1", "\u0663", "\u00b2", "*/\u0663", "*/2/2", ""):
            with pytest.raises(ScheduleError):
                _parse_field("t", bad, index)


def test_a_plain_schedule_compiles_no_pattern():
    code = ("import re; from mdcron.core.cron import _ITEM, parse_schedule;"
            " from mdcron.core.wall_time import resolve_zone;"
            " [parse_schedule(s, resolve_zone('UTC')) for s in"
            " ('* * * * *', '30 6 * * *', '*/5 * * * *', '0 */2 1 * 0')];"
            " print(any(k[1] == _ITEM for k in re._cache))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
