"""Due-ness: given a schedule, the last claimed slot and now, whether a task runs, is skipped
(too late for its catch-up) or waits, in plain words for `why` and the logs. Pure: `now` comes
in. cron.py re-exports it.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, tzinfo

from mdcron.core.units import format_duration
from mdcron.core.wall_time import as_utc

from .records import dataclass

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Literal

    from mdcron.core.cron import Schedule

_MISSED_CAP = 1000


@dataclass(frozen=True, slots=True)
class Decision:
    action: Literal["run", "skip", "wait"]
    slot: datetime | None  # the fire concerned (run/skip); for wait, None
    reason: str  # plain words for `why` and logs
    next_fire: datetime | None  # first fire strictly after now
    missed: int = 0  # earlier fires after last_slot coalesced into this slot (capped at 1000)


def _show(t: datetime | None, zone: tzinfo) -> str:
    if t is None:
        return "none"
    local = t.astimezone(zone)
    return local.strftime("%Y-%m-%d %H:%M:%S %Z" if local.second else "%Y-%m-%d %H:%M %Z")


def decide(schedule: Schedule, *, now: datetime, last_slot: datetime | None,
           not_before: datetime | None, catchup: float) -> Decision:
    """Whether to run now, given the last claimed slot.

    The slot is the latest fire at or before now. Not due if there is none, if it is not after
    last_slot, or if it is before not_before (when the task was first seen or re-enabled).
    A late slot runs if its lateness in whole minutes is <= catchup seconds (math.inf: always);
    a slot less than 60 s late is on time and always runs (catchup 0: on time only). Too late:
    skip, and the slot is spent. Earlier fires after last_slot (and at or after not_before)
    coalesce into the run; `missed` counts them."""
    if math.isnan(catchup) or catchup < 0:
        raise ValueError(f"catchup must be >= 0 seconds or math.inf, got {catchup!r}")
    now = as_utc(now)
    zone = schedule.zone
    latest = schedule.latest_at_or_before(now)
    next_fire = schedule.next_after(now)
    upcoming = f"next fire {_show(next_fire, zone)}"
    if latest is None or (last_slot is not None and latest <= last_slot):
        return Decision("wait", None, f"not due: last slot {_show(last_slot, zone)}, {upcoming}",
                        next_fire)
    if not_before is not None and latest < not_before:
        return Decision("wait", None, f"not due: the fire at {_show(latest, zone)} is before "
                        f"{_show(not_before, zone)}, when the task was first seen or re-enabled;"
                        f" {upcoming}", next_fire)
    lateness = (now - latest).total_seconds()
    # Judged in whole minutes, as cron ticks come: with `catchup: 10m` every tick of the tenth
    # minute after the slot still runs it (a tick starts a fraction of a second after its
    # minute, and `tick --now` adds the time the tick has taken).
    if (whole := lateness // 60 * 60) >= 60 and whole > catchup:
        allows = format_duration(catchup) if catchup else "no catch-up (on time only, under 1m)"
        return Decision("skip", latest, f"missed by {format_duration(lateness)}; catchup allows "
                        f"{allows}; {upcoming}", next_fire)
    floors = [as_utc(last_slot)] if last_slot else []
    if not_before is not None:
        floors.append(as_utc(not_before) - timedelta(microseconds=1))  # a fire at it counts
    missed = 0
    if floors:
        fire = schedule.next_after(max(floors))
        while fire is not None and fire < latest and missed < _MISSED_CAP:
            missed += 1
            fire = schedule.next_after(fire)
    late = f", {format_duration(lateness)} late" if lateness >= 60 else ""
    coalesced = f"; {missed} earlier fire(s) coalesced" if missed else ""
    return Decision("run", latest, f"due: fire at {_show(latest, zone)}{late}{coalesced}",
                    next_fire, missed)
