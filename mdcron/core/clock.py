"""The one place time comes from. The CLI reads the real clock once (or takes --now); everything
below receives a Clock, so a `tick --now` replay reasons exactly like a real tick at that instant.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

# The instants mdcron handles: --now, --after, --at, --until and `@at` must lie in between.
# Schedule maths adds margins (hours, a catch-up, an interval of up to 366 days) to them, and
# Python's datetime ends at 9999-12-31: 9000 leaves a wide gap, 2000 is before any real run.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
RANGE_TEXT = "from 2000-01-01 to 8999-12-31"


class InstantError(ValueError):
    """An instant outside [EARLIEST, LATEST); the message says the range."""


def check_instant(value: datetime) -> datetime:
    """`value` (aware) when mdcron can reason about it; InstantError otherwise."""
    if not EARLIEST <= value < LATEST:
        raise InstantError(f"{value.isoformat()} is out of range: mdcron handles instants "
                           f"{RANGE_TEXT}")
    return value


class Clock:
    """An anchor instant plus the monotonic time elapsed since the tick began."""

    def __init__(self, anchor: datetime):
        if anchor.tzinfo is None:
            raise ValueError("the clock's anchor must be timezone-aware")
        self.anchor = anchor.astimezone(UTC)
        self._anchor_ts = self.anchor.timestamp()
        self._t0 = time.monotonic()

    @classmethod
    def real(cls) -> Clock:
        return cls(datetime.now(UTC))

    def now(self) -> float:
        """Unix seconds: the anchor plus real elapsed time."""
        return self._anchor_ts + (time.monotonic() - self._t0)

    def now_dt(self) -> datetime:
        return to_dt(self.now())


def minute_floor(ts: float) -> float:
    """Start of the minute holding `ts`. A task first seen (or enabled) during a minute counts
    as seen from that minute's start: cron starts the tick a little after the minute, and a task
    written at 09:59:40 for 10:00 must still run at 10:00."""
    return ts - (ts % 60)


def to_dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def parse_instant(text: str, zone: object = None) -> datetime:
    """ISO-8601 from the command line; a naive value is read in `zone` (default: local).
    ValueError (InstantError when out of range) for anything else."""
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        if zone is None:
            from .cron import resolve_zone  # lazy: zoneinfo, only for a naive instant

            zone = resolve_zone(None)
        value = value.replace(tzinfo=zone)  # type: ignore[arg-type]
    try:
        return check_instant(value.astimezone(UTC))
    except OverflowError:  # 0001-01-01 or 9999-12-31 in a zone that pushes it past the end
        raise InstantError(f"{text.strip()} is out of range: mdcron handles instants "
                           f"{RANGE_TEXT}") from None
