"""cron_walls.py steps the matching wall times of a canonical cron spec as croniter did (issue
27: croniter and dateutil left the tick). croniter stays the oracle here: random specs (steps,
ranges, lists, both day fields), random walls, several steps up and down, and the specs that
never fire."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from conftest import REPO
from croniter import croniter

from mdcron.core import cron
from mdcron.core.cron_walls import WallSteps, never_fires


def _field(rnd: random.Random, lo: int, hi: int) -> str:
    r = rnd.random()
    if r < 0.3:
        return "*"
    if r < 0.45:
        return f"*/{rnd.randint(1, 7)}"
    if r < 0.7:
        return ",".join(str(rnd.randint(lo, hi)) for _ in range(rnd.randint(1, 3)))
    a = rnd.randint(lo, hi)
    b = rnd.randint(a, hi)
    return f"{a}-{b}" + (f"/{rnd.randint(1, 3)}" if rnd.random() < 0.3 else "")


def _canonical(expr: str) -> tuple[str, bool]:
    """cron._parse_cron's spec and day_or for an expression (before its never-fires check)."""
    fields = expr.split()
    values = [cron._parse_field(expr, f, i) for i, f in enumerate(fields)]
    values[4] = frozenset(0 if v == 7 else v for v in values[4])
    canon = [cron._canon(v, i) for i, v in enumerate(values)]
    day_stars = fields[2].startswith("*") or fields[4].startswith("*")
    if not day_stars and "*" in (canon[2], canon[4]):
        canon[2] = canon[4] = "*"
    return " ".join(canon), not day_stars


def test_steps_match_croniter_up_and_down():
    rnd = random.Random(27)
    checked = 0
    for _ in range(1500):
        expr = " ".join([_field(rnd, 0, 59), _field(rnd, 0, 23), _field(rnd, 1, 31),
                         _field(rnd, 1, 12), _field(rnd, 0, 7)])
        spec, day_or = _canonical(expr)
        if never_fires(spec, day_or):
            continue
        start = datetime(rnd.randint(1971, 2090), rnd.randint(1, 12), rnd.randint(1, 28),
                         rnd.randint(0, 23), rnd.randint(0, 59), rnd.choice([0, 0, 30]))
        for up in (True, False):
            current = start if up else start.replace(second=0) + timedelta(minutes=1)
            theirs = croniter(spec, current, day_or=day_or)
            mine = WallSteps(spec, day_or)
            mine.set_current(current)
            for _ in range(4):
                expected = theirs.get_next(datetime) if up else theirs.get_prev(datetime)
                assert (mine.get_next() if up else mine.get_prev()) == expected, \
                    (expr, spec, day_or, current, up)
                checked += 1
    assert checked > 5000


def test_never_fires_as_croniter_said():
    """croniter found no date for these in any year; cron_walls says so without searching."""
    rnd = random.Random(11)
    for _ in range(600):
        expr = (f"0 0 {rnd.choice(['29', '30', '31', '30,31', '*/15', '28-31', '1', '*'])}"
                f" {rnd.choice(['2', '4', '6', '9', '11', '2,4', '4,6,9,11', '*', '2-4'])}"
                f" {rnd.choice(['*', '1', '*/2', '0-6', '5', '*/3', '7'])}")
        spec, day_or = _canonical(expr)
        theirs = croniter(spec, datetime(2000, 1, 1), day_or=day_or)
        try:
            theirs.get_next(datetime)
            expected = False
        except Exception:  # croniter's CroniterBadDateError
            expected = True
        assert never_fires(spec, day_or) == expected, expr


def test_far_years_end_the_scan():
    steps = WallSteps("0 0 29 2 *", False)
    steps.set_current(datetime(9996, 3, 1))
    try:
        steps.get_next()
    except OverflowError:
        pass
    else:
        raise AssertionError("a fire after 9999")
    schedule = cron.parse_schedule("0 0 29 2 *", UTC)
    assert schedule.next_after(datetime(2028, 3, 1, tzinfo=UTC)) == datetime(2032, 2, 29,
                                                                             tzinfo=UTC)


def test_the_schedule_maths_load_neither_croniter_nor_dateutil():
    code = """
import sys
from datetime import datetime
from zoneinfo import ZoneInfo
from mdcron.core.cron import decide, parse_schedule
s = parse_schedule("30 2 * * 1-5", ZoneInfo("Europe/Riga"))
now = datetime(2026, 3, 30, 1, 0, tzinfo=ZoneInfo("UTC"))
d = decide(s, now=now, last_slot=None, not_before=None, catchup=0)
print(d.action, d.slot.isoformat(), "croniter" in sys.modules, "dateutil" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.split() == ["skip", "2026-03-29T23:30:00+00:00", "False", "False"], \
        out.stdout + out.stderr
