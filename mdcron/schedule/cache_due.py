"""A cached task's next_due (the first fire decide() could run, from the task_state row it was
computed from) and the fire after it (due_after), for the parse cache (cache.py); and what the
cache alone says about a plain due slot (plain_due).

Lazy imports: the cron maths (croniter) load only when a fire is computed, never for a row
whose due times still hold.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from ..core.clock import to_dt
from ..core.problems import Problem
from ..settings.config import Config
from ..state import idle as fastpath
from ..tasks.task import Task


def next_due(task: Task, config: Config, last_slot: float | None,
             not_before: float) -> float | None:
    """The first fire strictly after max(last_slot, not_before - 1 µs): decide() runs or skips a
    slot exactly when some fire lies there and at or before now (the floors decide() uses)."""
    from ..core.cron import schedule_of

    if task.after:
        # issue 12: a chain's eligibility comes from its upstreams' run rows, not a schedule,
        # so it could always be due: never idle-decidable (the full tick looks every time).
        return 0.0
    floor = to_dt(not_before) - timedelta(microseconds=1)
    if last_slot is not None:
        floor = max(floor, to_dt(last_slot))
    fire = schedule_of(task, config).next_after(floor)
    return fire.timestamp() if fire is not None else None


def fire_after(task: Task, config: Config, fire: float | None) -> float | None:
    """The fire strictly after `fire` (None: none, or no `fire`)."""
    from ..core.cron import schedule_of

    if fire is None or task.after:  # a chain has no fire of its own (next_due above)
        return None
    after = schedule_of(task, config).next_after(to_dt(fire))
    return after.timestamp() if after is not None else None


def maths_problem(task_id: str | None, path: str | Path, exc: Exception) -> Problem:
    """One task whose fire times cannot be computed (a state row out of range, a schedule the
    maths refuses): invalid for this tick, the others run (design: one bad input, one task)."""
    why = f" (`why {task_id}`)" if task_id else ""
    return Problem(Path(path), f"its next fire cannot be computed ({type(exc).__name__}: {exc});"
                   f" this tick skips it; fix: check its schedule and its state{why}")


PLAIN_LATE = 59.0  # decide(): a slot under 60 s late runs whatever catchup says (margin: 1 s)


def plain_due(next_due: float | None, due_after: float | None, now: float) -> bool:
    """What decide() says, known from the cache alone: when next_due (the first fire after the
    floors) is at or before now, the fire after it is later than now, and now is less than a
    minute past it, decide() runs next_due, on time, with nothing coalesced (missed 0). Every
    other case (late, several fires passed, an unknown due_after) goes through decide()."""
    return (next_due is not None and due_after is not None and next_due <= now
            and due_after > now + fastpath.DUE_SLACK and now - next_due < PLAIN_LATE)


def zone_bound(task: Task, config: Config) -> bool:
    return task.timezone is None and config.timezone is None
