"""Wall times and instants in a time zone, for the schedule maths (cron.py): the zone of a name
(or the system's), and where a naive wall time falls, once, twice (fall back) or not at all (a
spring-forward gap). Pure apart from reading the system zone once.

Lazy imports: zoneinfo (with sysconfig, which it asks for its search path: ~2 ms, issue 27) only
for a zone other than UTC: "UTC" is datetime's own UTC, the same offset (zero) at every instant
and the same name, without a file to read.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache

_SECOND = timedelta(seconds=1)


class ScheduleError(ValueError):
    """A schedule or time zone that cannot be used; the message says what would be right."""


@lru_cache(maxsize=64)
def resolve_zone(name: str | None) -> tzinfo:
    """ZoneInfo for an IANA name; None means the system's zone: $TZ if set and valid (a leading
    ':' is ignored), else the target of the /etc/localtime symlink, else /etc/timezone, else UTC.
    Cached, so the system zone is read once per process."""
    if name is not None:
        zone = _zone_or_none(name)
        if zone is None:
            raise ScheduleError(f"unknown time zone {name!r}; use an IANA name like Europe/Riga")
        return zone
    candidates = [os.environ.get("TZ", "").removeprefix(":")]
    try:
        candidates.append(os.readlink("/etc/localtime"))
    except OSError:
        pass
    try:
        with open("/etc/timezone", encoding="utf-8") as f:
            candidates.append(f.read().strip())
    except OSError:
        pass
    for candidate in candidates:
        zone = _zone_or_none(candidate.rpartition("zoneinfo/")[2] if "zoneinfo/" in candidate
                             else candidate)
        if zone is not None:
            return zone
    return UTC


def _zone_or_none(name: str) -> tzinfo | None:
    if name == "UTC":  # ZoneInfo("UTC")'s offsets and name, without zoneinfo and its file
        return UTC
    if not name or ".." in name or name.startswith("/"):
        return None
    from zoneinfo import ZoneInfo  # lazy: a zone other than UTC (see the module's docstring)

    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return None


def as_utc(t: datetime) -> datetime:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"expected a timezone-aware datetime, got naive {t.isoformat()}")
    return t.astimezone(UTC)


def _offsets(wall: datetime, zone: tzinfo) -> tuple[timedelta, timedelta]:
    """UTC offsets of a naive wall time read with fold=0 and fold=1 (PEP 495): equal if it
    occurs once, first > second if it occurs twice, first < second if it falls in a gap."""
    first = wall.replace(tzinfo=zone, fold=0).utcoffset()
    second = wall.replace(tzinfo=zone, fold=1).utcoffset()
    assert first is not None and second is not None
    return first, second


def first_pass(wall: datetime, zone: tzinfo, fixed: bool) -> datetime | None:
    """The first instant showing `wall`; in a gap: the transition instant if `fixed`, else None."""
    before, after = _offsets(wall, zone)
    if before >= after:
        return (wall - before).replace(tzinfo=UTC)
    if not fixed:
        return None
    # The jump lies in (wall - after, wall - before]; bisect to the second.
    lo, hi = (wall - after).replace(tzinfo=UTC), (wall - before).replace(tzinfo=UTC)
    while hi - lo > _SECOND:
        mid = lo + timedelta(seconds=int((hi - lo).total_seconds()) // 2)
        if mid.astimezone(zone).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return hi


def last_pass(wall: datetime, zone: tzinfo) -> datetime | None:
    """The last instant showing `wall` (the second pass if it repeats); None in a gap."""
    before, after = _offsets(wall, zone)
    return (wall - after).replace(tzinfo=UTC) if before >= after else None
