"""Times and schedules for people (issue 25): "in 4 min", "3 min ago", absolute times with their
zone, a cron line in words. Pure: `now` is an argument."""

from __future__ import annotations

from datetime import datetime, tzinfo

from ..core.clock import to_dt


def as_dt(value: str | float | datetime | None) -> datetime | None:
    """An ISO string, Unix seconds or a datetime (None stays None)."""
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, (int, float)):
        return to_dt(value)
    return datetime.fromisoformat(value)


def span(seconds: float) -> str:
    """A length of time, rounded down to what a person needs: 45 s, 4 min, 2 h 5 min, 3 days."""
    s = int(abs(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(s // 3600, 24)
    if d >= 7:
        return f"{d} days"
    return f"{d} day{'s' if d > 1 else ''} {h} h" if h else f"{d} day{'s' if d > 1 else ''}"


def relative(value: str | float | datetime | None, now: float) -> str:
    """'in 4 min', '3 min ago', 'now' ('—' for none)."""
    dt = as_dt(value)
    if dt is None:
        return "—"
    delta = dt.timestamp() - now
    if abs(delta) < 1:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def absolute(value: str | float | datetime | None, zone: tzinfo | None = None) -> str:
    """'2026-11-25 14:00 CET': minute precision, in `zone` (else local), zone named."""
    dt = as_dt(value)
    if dt is None:
        return "—"
    return dt.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def short_absolute(value: str | float | datetime | None, zone: tzinfo | None,
                   now: float) -> str:
    """As absolute() without the year when it is this year: 'Nov 25 14:00 CET'."""
    dt = as_dt(value)
    if dt is None:
        return "—"
    local = dt.astimezone(zone)
    # by hand, as strftime("%b %d %H:%M %Z") writes it in the C locale: `list` calls this
    # 20,000 times at 10,000 tasks (issue 27)
    clock = f"{local.hour:02d}:{local.minute:02d} {local.tzname() or ''}"
    if local.year == _year(now, zone):
        return f"{_MONTHS[local.month - 1]} {local.day:02d} {clock}"
    return f"{local.year:04d}-{local.month:02d}-{local.day:02d} {clock}"


_YEARS: dict[tuple[float, tzinfo | None], int] = {}


def _year(now: float, zone: tzinfo | None) -> int:
    """The year `now` falls in, in `zone`: worked out once per (now, zone), not per cell."""
    year = _YEARS.get((now, zone))
    if year is None:
        if len(_YEARS) > 16:  # a long-lived process (the dashboard) asks at many nows
            _YEARS.clear()
        year = _YEARS[(now, zone)] = to_dt(now).astimezone(zone).year
    return year


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_NAMED = {"@hourly": "every hour", "@daily": "every day at midnight",
          "@midnight": "every day at midnight", "@weekly": "every Sunday at midnight",
          "@monthly": "on the 1st of every month at midnight",
          "@yearly": "every 1 January at midnight", "@annually": "every 1 January at midnight",
          "@reboot": "at boot", "* * * * *": "every minute"}


def _days(dow: str) -> str | None:
    names = {"*": "every day", "1-5": "on weekdays (Monday to Friday)", "0,6": "on weekends",
             "6,0": "on weekends", "6-7": "on weekends", "7": "on Sundays",
             **{str(i): f"on {n}s" for i, n in enumerate(_DAYS)}}
    if dow in names:
        return names[dow]
    if all(p.isdigit() and int(p) <= 7 for p in dow.split(",")):
        return "on " + ", ".join(_DAYS[int(p) % 7] + "s" for p in dow.split(","))
    return None


def _hours(h: str) -> str | None:
    if "-" in h and h.replace("-", "").isdigit():
        a, b = h.split("-", 1)
        return f"from {int(a):02d}:00 to {int(b):02d}:59"
    return None


def words(schedule: str | None) -> str:
    """A schedule in plain words where it is a common shape; else the expression itself
    (`why` and `next` then say exactly when it fires)."""
    if not schedule:
        return ""
    s = " ".join(schedule.split())
    if s in _NAMED:
        return _NAMED[s]
    if s.startswith("@every "):
        return "every " + s[len("@every "):]
    if s.startswith("@at "):
        return "once, at " + s[len("@at "):]
    parts = s.split(" ")
    if len(parts) != 5:
        return s
    m, h, dom, mon, dow = parts
    days = _days(dow) if dom == mon == "*" else None
    if days is None:
        return s
    on = "" if dow == "*" else " " + days
    if m.startswith("*/") and m[2:].isdigit() and h == "*":
        return f"every {m[2:]} minutes{on}"
    if m.startswith("*/") and m[2:].isdigit() and (hours := _hours(h)):
        return f"every {m[2:]} minutes {hours}{on}"
    if m.isdigit() and h == "*":
        return f"every hour at :{int(m):02d}{on}"
    if m.isdigit() and h.startswith("*/") and h[2:].isdigit():
        return f"every {h[2:]} hours at :{int(m):02d}{on}"
    if m.isdigit() and h.isdigit():
        return f"{days} at {int(h):02d}:{int(m):02d}"
    if m.isdigit() and all(p.isdigit() for p in h.split(",")):
        times = ", ".join(f"{int(x):02d}:{int(m):02d}" for x in h.split(","))
        return f"{days} at {times}"
    return s
