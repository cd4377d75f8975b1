"""The one place time comes from. The CLI reads the real clock once (or takes --now); everything
below receives a Clock, so a `tick --now` replay reasons exactly like a real tick at that instant.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from .limits import RANGE_TEXT, InstantError, check_instant


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


def monotonic() -> float:
    """CLOCK_MONOTONIC: seconds since boot, the same for every process of one boot (so a lock
    record carries it with the boot id), never stepped by NTP, a `date -s` or `tick --now`.
    It stands still while the machine sleeps, exactly as the holder's own timeout does
    (process.py), so a stale-lock judgement agrees with the holder about how long it ran."""
    return time.monotonic()


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
