"""What the commands share with the entry point: exit statuses, the usage error, the clock.

A module of its own so that commands.py and actions.py need not import cli/main.py, which imports
them. Standard library and clock.py only (every command loads clock.py anyway, through commands.py).
"""

from __future__ import annotations

from datetime import datetime

from ..core.clock import Clock, InstantError, parse_instant

OK, PROBLEM, USAGE = 0, 1, 2


class UsageError(Exception):
    """A command-line value that cannot be used; the message says which and why."""


def clock_from(value: str | None, option: str = "", zone: object = None) -> Clock:
    """The real clock, read once here, unless an instant is given (`option`: --now, --at...);
    a value without a UTC offset is read in `zone` (default: the system's)."""
    if not value:
        return Clock.real()
    try:
        return Clock(parse_instant(value, zone))
    except InstantError as exc:
        raise UsageError(f"{option}: {exc}" if option else str(exc)) from None
    except ValueError as exc:
        raise UsageError(f"not an ISO-8601 instant: {value!r} ({exc})") from exc


def typed_clock(value: str | None, option: str, zone_name: str | None,
                whose: str) -> tuple[Clock, str | None]:
    """Issue 25: an instant a person typed, read where they mean it. Without a UTC offset it is
    wall time in `zone_name` (None: the system's zone); `whose` names that zone ("the config's
    zone", "the task's zone"). Returns the clock and, for a naive value, the line that says how
    it was read (None when the value carried its offset, or was not given)."""
    if not value or not _naive(value):  # an offset says where: no zone to load (duefast)
        return clock_from(value, option), None
    from ..core.cron import resolve_zone  # lazy: zoneinfo, only for a naive typed instant

    zone = resolve_zone(zone_name)
    clock = clock_from(value, option, zone)
    name = zone_name or f"{getattr(zone, 'key', None) or zone} (the system's zone)"
    where = f"{name}, {whose}" if zone_name else name
    local = clock.anchor.astimezone(zone).isoformat()  # type: ignore[arg-type]
    return clock, f"{option} {value.strip()} has no UTC offset: read in {where}, as {local}"


def _naive(value: str) -> bool:
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).tzinfo is None
    except ValueError:
        return False
