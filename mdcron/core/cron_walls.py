"""The wall times a five-field cron spec matches, stepped forward with the standard library
(issue 27: `next` and `show` without croniter and dateutil, ~15 ms of imports).

A spec here is cron.py's canonical one: each field `*` or a sorted list of numbers, day-of-week
0-6 (Sunday 0). Wall times are naive datetimes, whole minutes. Days match as croniter matches
them with cron.py's `day_or`: with `day_or` and both day fields restricted, a day matches when
either does; otherwise both must (a `*` matches every day). As croniter, `after` finds the first
matching minute strictly after its argument, and gives up (None) when there is none within 50
years of it (croniter's max_years_between_matches) or before year 9999 ends. The DST policy is
not here: cron.py maps each wall time to instants (first and second passes, gaps).
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime, timedelta

_YEARS = 50  # croniter's default max_years_between_matches
_DAY = timedelta(days=1)
_HOUR = timedelta(hours=1)
_MINUTE = timedelta(minutes=1)


def _values(field: str, lo: int, hi: int) -> tuple[int, ...]:
    return tuple(range(lo, hi + 1)) if field == "*" else tuple(sorted(map(int, field.split(","))))


class Walls:
    """The matching wall times of one canonical spec."""

    __slots__ = ("minutes", "hours", "minute_set", "hour_set", "doms", "months", "dows",
                 "either")

    def __init__(self, spec: str, day_or: bool) -> None:
        minute, hour, dom, month, dow = spec.split()
        self.minutes = _values(minute, 0, 59)
        self.hours = _values(hour, 0, 23)
        self.minute_set, self.hour_set = frozenset(self.minutes), frozenset(self.hours)
        self.doms = frozenset(_values(dom, 1, 31))
        self.months = frozenset(_values(month, 1, 12))
        self.dows = frozenset(_values(dow, 0, 6))
        self.either = day_or and dom != "*" and dow != "*"

    def _day(self, t: datetime) -> bool:
        dom, dow = t.day in self.doms, (t.isoweekday() % 7) in self.dows
        return dom or dow if self.either else dom and dow

    def after(self, start: datetime) -> datetime | None:
        """The first matching wall time strictly after `start` (naive); None: none within 50
        years, or past year 9999."""
        limit = start.year + _YEARS
        t = start.replace(second=0, microsecond=0) + _MINUTE
        minutes, hours = self.minutes, self.hours
        try:
            while t.year <= limit:
                if t.month not in self.months:  # the first day of the next month
                    t = (t.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
                    continue
                if not self._day(t):
                    t = t.replace(hour=0, minute=0) + _DAY
                    continue
                if t.hour not in self.hour_set:  # the next listed hour today, else tomorrow
                    i = bisect_right(hours, t.hour)
                    t = (t.replace(hour=hours[i], minute=0) if i < len(hours)
                         else t.replace(hour=0, minute=0) + _DAY)
                    continue
                if t.minute not in self.minute_set:  # the next listed minute, else next hour
                    i = bisect_right(minutes, t.minute)
                    t = (t.replace(minute=minutes[i]) if i < len(minutes)
                         else t.replace(minute=0) + _HOUR)
                    continue
                return t
        except OverflowError:  # past year 9999
            return None
        return None
