"""The wall times of a cron spec that restricts only its minute, hour and weekday fields
(`* * * * *`, `*/5 * * * *`, `30 6 * * *`, `0 9 * * 1-5`), stepped without croniter.

Issue 27: croniter and dateutil cost a tick ~15 ms to import, paid after its first task started
to compute that task's next fire (and `next`/`show` ~15% of their time). Most schedules match
every day, or the days of some weekdays; for them the matching wall times are one sorted list
of minutes of a matching day, and a step is a bisection, then a walk of at most a week to the
next matching day. A weekday-only spec always fires (every week has every weekday), so nothing
croniter would refuse is taken from it. `steps(spec)` gives
a stepper with the three methods cron.py calls on a croniter (set_current, get_next, get_prev),
stepping exactly as croniter does over naive wall time in whole minutes: get_next is the first
match strictly after the current time, get_prev the last strictly before it, and each step
becomes the current time. None for any other spec: croniter steps those.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from datetime import datetime, timedelta
from functools import lru_cache

_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)


@lru_cache(maxsize=256)
def _day_minutes(spec: str) -> tuple[tuple[int, ...], frozenset[int] | None] | None:
    """(the matching minutes of a matching day, sorted; the matching days as date.weekday()
    numbers, None for every day) of a canonical spec (cron.py `_canon`: `*` or sorted numbers,
    weekday 0 = Sunday) whose day-of-month and month fields are `*`; None otherwise."""
    fields = spec.split()
    if len(fields) != 5 or fields[2:4] != ["*", "*"]:
        return None
    try:
        minutes = range(60) if fields[0] == "*" else [int(v) for v in fields[0].split(",")]
        hours = range(24) if fields[1] == "*" else [int(v) for v in fields[1].split(",")]
        days = None if fields[4] == "*" else {int(v) for v in fields[4].split(",")}
    except ValueError:
        return None
    if not minutes or not hours or not all(0 <= m < 60 for m in minutes) or not all(
            0 <= h < 24 for h in hours):
        return None
    if days is not None and (not days or not days <= set(range(7))):
        return None
    weekdays = None if days is None or len(days) == 7 else frozenset((d - 1) % 7 for d in days)
    return tuple(sorted({h * 60 + m for h in hours for m in minutes})), weekdays


class DailySteps:
    """Steps over the wall times whose minute of the day is in `times`, on the days whose
    weekday() is in `days` (None: every day)."""

    __slots__ = ("current", "days", "times")

    def __init__(self, times: tuple[int, ...], days: frozenset[int] | None = None) -> None:
        self.times = times
        self.days = days
        self.current = datetime(2000, 1, 1)

    def set_current(self, t: datetime) -> None:
        self.current = t

    def get_next(self, _type: type = datetime) -> datetime:
        """The first match strictly after the current time (OverflowError past year 9999)."""
        base = self.current.replace(second=0, microsecond=0)
        day = base.replace(hour=0, minute=0)
        i = bisect_right(self.times, base.hour * 60 + base.minute)
        if i == len(self.times) or (self.days is not None and day.weekday() not in self.days):
            day, i = day + _DAY, 0
            while self.days is not None and day.weekday() not in self.days:  # < 7 steps
                day += _DAY
        self.current = day + timedelta(minutes=self.times[i])
        return self.current

    def get_prev(self, _type: type = datetime) -> datetime:
        """The last match strictly before the current time (OverflowError before year 1)."""
        base = (self.current - _TICK).replace(second=0, microsecond=0)
        day = base.replace(hour=0, minute=0)
        i = bisect_left(self.times, base.hour * 60 + base.minute + 1) - 1
        if i < 0 or (self.days is not None and day.weekday() not in self.days):
            day, i = day - _DAY, len(self.times) - 1
            while self.days is not None and day.weekday() not in self.days:  # < 7 steps
                day -= _DAY
        self.current = day + timedelta(minutes=self.times[i])
        return self.current


def steps(spec: str) -> DailySteps | None:
    """A stepper for `spec` when it matches the same minutes on every matching day and only
    its weekday field restricts the days, else None."""
    found = _day_minutes(spec)
    return DailySteps(*found) if found is not None else None
