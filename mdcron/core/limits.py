"""The range of instants mdcron handles (--now, --after, --at, --until, `@at`), in one place.

A pure module of its own: clock.py (which parses the command line's instants) and cron.py (which
parses `@at` and stops scheduling past LATEST) both need it, and clock.py already reaches cron.py
for a zone, so neither can hold it."""

from __future__ import annotations

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
