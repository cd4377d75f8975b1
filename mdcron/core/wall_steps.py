"""The wall times of a cron spec that restricts only its minute and hour fields (`* * * * *`,
`*/5 * * * *`, `30 6 * * *`), stepped without croniter.

Issue 27: croniter and dateutil cost a tick ~15 ms to import, paid after its first task started
to compute that task's next fire. Most schedules match every day; for them the matching wall
times are one sorted list of minutes of the day, and a step is a bisection. `steps(spec)` gives
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
def _day_minutes(spec: str) -> tuple[int, ...] | None:
    """The matching minutes of the day (sorted) of a canonical spec (cron.py `_canon`: `*` or
    sorted numbers) whose day, month and weekday fields are all `*`; None otherwise."""
    fields = spec.split()
    if len(fields) != 5 or fields[2:] != ["*", "*", "*"]:
        return None
    try:
        minutes = range(60) if fields[0] == "*" else [int(v) for v in fields[0].split(",")]
        hours = range(24) if fields[1] == "*" else [int(v) for v in fields[1].split(",")]
    except ValueError:
        return None
    if not minutes or not hours or not all(0 <= m < 60 for m in minutes) or not all(
            0 <= h < 24 for h in hours):
        return None
    return tuple(sorted({h * 60 + m for h in hours for m in minutes}))


class DailySteps:
    """Steps over the wall times whose minute of the day is in `times` (every day alike)."""

    __slots__ = ("current", "times")

    def __init__(self, times: tuple[int, ...]) -> None:
        self.times = times
        self.current = datetime(2000, 1, 1)

    def set_current(self, t: datetime) -> None:
        self.current = t

    def get_next(self, _type: type = datetime) -> datetime:
        """The first match strictly after the current time (OverflowError past year 9999)."""
        base = self.current.replace(second=0, microsecond=0)
        i = bisect_right(self.times, base.hour * 60 + base.minute)
        day = base.replace(hour=0, minute=0)
        if i == len(self.times):
            day, i = day + _DAY, 0
        self.current = day + timedelta(minutes=self.times[i])
        return self.current

    def get_prev(self, _type: type = datetime) -> datetime:
        """The last match strictly before the current time (OverflowError before year 1)."""
        base = (self.current - _TICK).replace(second=0, microsecond=0)
        i = bisect_left(self.times, base.hour * 60 + base.minute + 1) - 1
        day = base.replace(hour=0, minute=0)
        if i < 0:
            day, i = day - _DAY, len(self.times) - 1
        self.current = day + timedelta(minutes=self.times[i])
        return self.current


def steps(spec: str) -> DailySteps | None:
    """A stepper for `spec` when it matches the same minutes every day, else None."""
    times = _day_minutes(spec)
    return DailySteps(times) if times is not None else None
