"""The matching wall times of a canonical five-field cron spec, stepped up or down (cron.py's
scans): what croniter did for it, in plain date arithmetic (issue 27: croniter and dateutil
cost a tick ~10 ms to import, for sets of numbers this module matches directly).

A spec is cron.py's canonical form: five space-separated fields, each `*` or a sorted list of
numbers (minute, hour, day of month, month, day of week with 0 = Sunday). The days match as in
Vixie cron: with `day_or` (both day fields restricted) a day matches either of them, otherwise
both. Wall times are naive whole minutes; no zone plays a part here (cron.py maps walls to
instants under its DST policy). Pure; the standard library's datetime only.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

_DAY = timedelta(days=1)
_FEB_DAYS = 29  # a day of month up to this fits February in some year (cron.py's never-fires)
_MONTH_DAYS = (31, _FEB_DAYS, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_SEARCH_DAYS = 366 * 60  # a feasible spec matches within 28 years (weekday x leap day cycle)


class NoFire(ValueError):
    """No matching wall time in the search window (a spec that never fires)."""


def _field(text: str, lo: int, hi: int) -> tuple[int, ...]:
    return tuple(range(lo, hi + 1)) if text == "*" else tuple(sorted(map(int, text.split(","))))


class WallSteps:
    """croniter's stepping interface over a canonical spec: set_current(wall), then get_next()
    (the first matching wall strictly after the current one) or get_prev() (the last strictly
    before it); each makes the wall it returns the current one. OverflowError past the years
    datetime holds; NoFire when nothing matches within the search window."""

    def __init__(self, spec: str, day_or: bool):
        minute, hour, dom, month, dow = spec.split()
        self.minutes = _field(minute, 0, 59)
        self.hours = _field(hour, 0, 23)
        self.doms = frozenset(_field(dom, 1, 31))
        self.months = frozenset(_field(month, 1, 12))
        self.dows = frozenset(_field(dow, 0, 6))
        # OR only with both day fields restricted (cron.py makes both `*` otherwise)
        self.either = day_or and not (dom == "*" and dow == "*")
        self.current = datetime(2000, 1, 1)

    def set_current(self, wall: datetime) -> None:
        self.current = wall

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_date = day.day in self.doms
        by_week = (day.weekday() + 1) % 7 in self.dows  # cron: 0 is Sunday
        return (by_date or by_week) if self.either else (by_date and by_week)

    def get_next(self, _type: object = None) -> datetime:
        t = self.current
        day = t.date()
        if self.day_matches(day):
            for h in self.hours:
                if h < t.hour:
                    continue
                for m in self.minutes:
                    if (h, m) > (t.hour, t.minute):
                        return self._at(day, h, m)
        for _ in range(_SEARCH_DAYS):
            day = self._next_day(day)
            if self.day_matches(day):
                return self._at(day, self.hours[0], self.minutes[0])
        raise NoFire(f"no match within {_SEARCH_DAYS} days")

    def get_prev(self, _type: object = None) -> datetime:
        t = self.current
        day = t.date()
        now = (t.hour, t.minute, t.second or t.microsecond)
        if self.day_matches(day):
            for h in reversed(self.hours):
                if h > t.hour:
                    continue
                for m in reversed(self.minutes):
                    if (h, m, 0) < now:
                        return self._at(day, h, m)
        for _ in range(_SEARCH_DAYS):
            day = self._prev_day(day)
            if self.day_matches(day):
                return self._at(day, self.hours[-1], self.minutes[-1])
        raise NoFire(f"no match within {_SEARCH_DAYS} days")

    def _at(self, day: date, hour: int, minute: int) -> datetime:
        self.current = datetime(day.year, day.month, day.day, hour, minute)
        return self.current

    def _next_day(self, day: date) -> date:
        """The next day, or the first of the next month in months when this month is not."""
        if day.month in self.months:
            return day + _DAY  # OverflowError after 9999-12-31
        year, month = day.year, day.month
        while True:
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            if year > 9999:
                raise OverflowError("date value out of range")
            if month in self.months:
                return date(year, month, 1)

    def _prev_day(self, day: date) -> date:
        """The day before, or the last of the previous month in months when this one is not."""
        if day.month in self.months:
            return day - _DAY  # OverflowError before 0001-01-01
        year, month = day.year, day.month
        while True:
            year, month = (year - 1, 12) if month == 1 else (year, month - 1)
            if year < 1:
                raise OverflowError("date value out of range")
            if month in self.months:
                return date(year, month + 1, 1) - _DAY if month < 12 else date(year, 12, 31)


def never_fires(spec: str, day_or: bool) -> bool:
    """True when no date in any year matches: the day-of-month/month pairs all fall past the
    month's length and the days are ANDed (or the day of week cannot rescue them)."""
    steps = WallSteps(spec, day_or)
    if steps.either:
        return False  # every week has each weekday, in every month
    return not any(d <= _MONTH_DAYS[m - 1] for m in steps.months for d in steps.doms)
