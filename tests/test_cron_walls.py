"""Issue 27: cron wall times stepped forward without croniter (core/cron_walls.py): the same
wall times croniter steps to, so the same fires, DST included; `next` and `show` load neither
croniter nor dateutil."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from conftest import REPO, SCHEDULER
from croniter import CroniterBadDateError, croniter

from mdcron.core.cron import ScheduleError, parse_schedule
from mdcron.core.cron_walls import Walls


def _field(rnd: random.Random, lo: int, hi: int) -> str:
    k = rnd.random()
    if k < 0.3:
        return "*"
    if k < 0.4:
        return f"*/{rnd.randint(1, hi)}"
    if k < 0.55:
        a = rnd.randint(lo, hi)
        b = rnd.randint(a, hi)
        return f"{a}-{b}" + (f"/{rnd.randint(1, 5)}" if rnd.random() < 0.3 else "")
    return ",".join(str(rnd.randint(lo, hi)) for _ in range(rnd.randint(1, 3)))


def _croniter_next(spec: str, day_or: bool, t: datetime) -> datetime | None:
    it = croniter(spec, datetime(2000, 1, 1), day_or=day_or)
    it.set_current(t)
    try:
        return it.get_next(datetime)
    except CroniterBadDateError:
        return None


def test_walls_step_to_the_wall_times_croniter_steps_to():
    """3,000 random expressions (as parse_schedule makes them canonical), 15 steps each from a
    random wall time (seconds too, jumps of up to 400 days): every step equal."""
    rnd = random.Random(27)
    compared = 0
    for _ in range(3000):
        expression = " ".join([_field(rnd, 0, 59), _field(rnd, 0, 23), _field(rnd, 1, 31),
                               _field(rnd, 1, 12), _field(rnd, 0, 7)])
        try:
            schedule = parse_schedule(expression, UTC)
        except ScheduleError:
            continue
        walls = Walls(schedule.spec, schedule.day_or)
        t = datetime(rnd.randint(2000, 2100), rnd.randint(1, 12), rnd.randint(1, 28),
                     rnd.randint(0, 23), rnd.randint(0, 59), rnd.choice([0, 0, 30, 59]))
        for _ in range(15):
            expected = _croniter_next(schedule.spec, schedule.day_or, t)
            assert walls.after(t) == expected, (expression, t)
            compared += 1
            if expected is None:
                break
            t = expected + (timedelta(seconds=rnd.choice([0, 17])) if rnd.random() < 0.8
                            else timedelta(days=rnd.randint(1, 400)))
    assert compared > 20_000


def test_walls_agree_with_croniter_on_rare_and_impossible_days():
    for spec, day_or in (("0 0 30 2 *", False), ("0 0 31 4,6,9,11 *", False),
                         ("0 0 29 2 *", False), ("0 0 29 2 1", False), ("0 0 29 2 1", True),
                         ("0 0 1,29 2 1", False), ("59 23 31 12 *", False),
                         ("0 0 13 * 5", False), ("0 0 13 * 5", True)):
        for start in (datetime(2000, 1, 1), datetime(2099, 3, 1), datetime(2400, 2, 29),
                      datetime(2150, 1, 1, 23, 59, 59)):
            assert Walls(spec, day_or).after(start) == _croniter_next(spec, day_or, start)
    try:
        parse_schedule("0 0 30 2 *", UTC)
    except ScheduleError as exc:
        assert "it never fires" in str(exc)
    else:
        raise AssertionError("Feb 30 accepted")


def test_next_after_agrees_with_croniters_backward_scan_across_dst():
    """The forward scan (cron_walls) against the backward one (croniter), around real DST
    transitions (Europe/Riga 2026-03-29 and 2026-10-25, New York, Lord Howe's 30 minutes):
    each fire is a fire, and no fire lies between the start and it."""
    rnd = random.Random(4)
    zones = ["Europe/Riga", "America/New_York", "Australia/Lord_Howe", "UTC"]
    expressions = ["30 3 * * *", "0 * * * *", "*/20 2-4 * * *", "15 2 * * 0", "0 0 * * *",
                   "45 1,2,3 25-31 3,10 *", "* 3 * * *", "0 4 29 3 *", "0,30 * * * 1-5"]
    transitions = [datetime(2026, 3, 29, 0, 0, tzinfo=UTC), datetime(2026, 10, 24, 22, tzinfo=UTC),
                   datetime(2026, 3, 8, 6, tzinfo=UTC), datetime(2026, 11, 1, 5, tzinfo=UTC),
                   datetime(2026, 4, 4, 14, tzinfo=UTC), datetime(2026, 10, 3, 15, tzinfo=UTC)]
    for name in zones:
        for expression in expressions:
            schedule = parse_schedule(expression, ZoneInfo(name))
            for base in transitions:
                t = base + timedelta(minutes=rnd.randint(-300, 300), seconds=rnd.randint(0, 59))
                for _ in range(12):
                    fire = schedule.next_after(t)
                    assert fire is not None and fire > t
                    assert schedule.latest_at_or_before(fire) == fire, (name, expression, fire)
                    before = schedule.latest_at_or_before(fire - timedelta(microseconds=1))
                    assert before is None or before <= t, (name, expression, t, fire, before)
                    t = fire


PROBE = """
import sys
from mdcron.cli.main import main
code = main(sys.argv[1:])
print("PROBE", code, [m for m in ("croniter", "dateutil") if m in sys.modules], file=sys.stderr)
"""


def test_next_and_show_load_neither_croniter_nor_dateutil(home, write_task):
    write_task("daily", schedule="30 6 * * 1-5", command="true", timezone="Europe/Riga")
    subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), "tick", "--now",
                    "2026-11-23T10:00:00+00:00"], capture_output=True, timeout=120, check=True)
    for words in (["next", "daily", "--after", "2026-11-23T10:00:00+00:00"], ["show", "daily"],
                  ["next", "0 6 * * 1-5"]):
        out = subprocess.run([sys.executable, "-c", PROBE, "--home", str(home), *words],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
        assert out.stderr.strip().splitlines()[-1] == "PROBE 0 []", (words, out.stderr)
    shown = subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), "next", "daily",
                            "--after", "2026-11-23T10:00:00+00:00", "-n", "2"],
                           capture_output=True, text=True, timeout=120).stdout
    assert [line.split("  (")[0] for line in shown.splitlines()] == [
        "2026-11-24 06:30 EET (Tue)", "2026-11-25 06:30 EET (Wed)"], shown
