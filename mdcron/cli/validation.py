"""What `validate` adds to the per-file checks that needs the clock (issue 25): an `@at`
instant already past. (Per-file checks live in tasks/taskfile.py, the crontab line's in
doctor.py.) The state is not opened: `validate` leaves the state folder untouched."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.clock import to_dt
from ..core.cron import OneShotSchedule, schedule_of
from ..core.problems import Problem
from ..settings.config import Config
from ..tasks.task import Task


def past_at(config: Config, tasks: Iterable[Task], now: float) -> list[Problem]:
    """A warning for each enabled `@at` task whose instant is past: it is never due again."""
    problems = []
    for task in tasks:
        if not (task.enabled and task.schedule.strip().lower().startswith("@at")):
            continue
        schedule = schedule_of(task, config)
        if not isinstance(schedule, OneShotSchedule) or schedule.at > to_dt(now):
            continue
        when = schedule.at.astimezone(schedule.zone).strftime("%Y-%m-%d %H:%M %Z")
        problems.append(Problem(task.path, (
            f"schedule: {task.schedule.strip()} is in the past ({when}): the task is not due "
            "again, so if it has not run it never will; set a future instant, or delete the "
            "file once it has run"), key="schedule", severity="warning"))
    return problems
