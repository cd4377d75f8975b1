"""The daemon's timing decisions (`scheduler.py daemon`), pure: fed the wall and monotonic
clocks by the caller (real in cli/daemon.py, scripted in tests).

A tick starts whenever the wall-clock minute differs from the last ticked one: the clock passed
a boundary, stepped forward or resumed from suspend (at once, once), or stepped backwards (the
claims, one row per task and slot, keep every slot single). The clock is looked at least every
MAX_NAP, so a step is seen within a second.
"""

from __future__ import annotations

from ..core.records import dataclass

PAST_BOUNDARY = 0.0005  # wake this long after the boundary: its minute has surely begun
MAX_NAP = 1.0  # re-read the wall clock at least this often: a clock step is seen within 1 s
JUMP = 2.0  # wall time moving this much more (or less) than monotonic time is a clock step


def minute_of(wall: float) -> int:
    """The wall-clock minute holding `wall` (minutes since the epoch)."""
    return int(wall // 60)


def should_tick(last_minute: int | None, wall: float) -> bool:
    """A tick starts whenever the minute differs from the last ticked one: a new minute, a
    forward step or resume (at once, once), or a step backwards (the claims keep slots single)."""
    return last_minute != minute_of(wall)


def nap(wall: float) -> float:
    """How long to wait before looking at the clock again: until just past the next minute
    boundary, but never more than MAX_NAP, so a clock step is noticed within a second."""
    boundary = (minute_of(wall) + 1) * 60.0
    return max(PAST_BOUNDARY, min(boundary - wall + PAST_BOUNDARY, MAX_NAP))


def clock_step(prev_wall: float, prev_mono: float, wall: float, mono: float) -> float:
    """Seconds the wall clock moved beyond the monotonic clock (negative: backwards). A suspend
    shows as a forward step: CLOCK_MONOTONIC stands still while the machine sleeps."""
    return (wall - prev_wall) - (mono - prev_mono)


@dataclass(frozen=True, slots=True)
class Step:
    """What the loop does after one look at the clocks."""

    tick: bool  # start a tick now
    reason: str  # start | minute | clock step forward | clock step backwards
    minute: int
    jump: float  # seconds the wall clock stepped since the last look (0 when it did not)
    wait: float  # then wait this long before looking again


class Planner:
    """The daemon's timing decisions, fed the wall and monotonic clocks by the caller (real in
    the daemon, scripted in tests)."""

    def __init__(self) -> None:
        self.last_minute: int | None = None
        self._prev: tuple[float, float] | None = None
        self._reason = "start"

    def observe(self, wall: float, mono: float) -> Step:
        jump = 0.0
        if self._prev is not None:
            step = clock_step(*self._prev, wall, mono)
            if abs(step) >= JUMP:
                jump = step
                self._reason = "clock step forward" if step > 0 else "clock step backwards"
        self._prev = (wall, mono)
        tick = should_tick(self.last_minute, wall)
        reason = self._reason
        if tick:
            self.last_minute = minute_of(wall)
            self._reason = "minute"
        return Step(tick, reason, minute_of(wall), jump, nap(wall))
