"""Issue 26 in `why` and `show`: what a task's retries, jitter and overlap policy mean, in
words, for this host."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from ..core.units import format_duration
from ..settings.config import Config
from ..tasks.run_keys import backoff, start_offset
from ..tasks.task import Task

OVERLAP_WORDS = {
    "skip": "a slot that finds the previous run still going is skipped",
    "queue": "a slot that finds the previous run still going runs once it ends (within the "
             "catch-up window)",
    "replace": "a slot that finds the previous run still going stops it (TERM, grace, KILL) "
               "and runs",
    "allow": "a slot runs even while earlier runs still go (each run its own lock)",
}


def next_start(task: Task, config: Config, fire: datetime | None) -> datetime | None:
    """The real start of a fire: the fire plus this host's jitter offset."""
    if fire is None:
        return None
    return fire + timedelta(seconds=start_offset(task, config))


def retry_words(task: Task) -> str:
    if not task.retry:
        return "no reruns (retry: 0)"
    delays = [backoff(task.retry_delay, k) for k in range(1, task.retry + 1)]
    shown = ", ".join(format_duration(d) for d in delays[:4]) + (", …" if len(delays) > 4 else "")
    after = f" after {shown}" if any(delays) else " at once"
    return (f"{task.retry} rerun(s){after}, within the ladder's deadline; then self-heal "
            "where available")


def policy_lines(config: Config, task: Task, fire: datetime | None,
                 local: Callable[[datetime | None], str]) -> list[str]:
    """`why`'s lines for the issue 26 keys (nothing for a task that uses none of them)."""
    lines = []
    if task.retry:
        lines.append(f"on failure: {retry_words(task)}")
    if task.jitter:
        offset = start_offset(task, config)
        lines.append(f"jitter {format_duration(task.jitter)}: starts {format_duration(offset)}"
                     f" after each slot on host {config.host_name!r} (a fixed offset); "
                     f"next start {local(next_start(task, config, fire))}")
    if task.overlap != "skip":
        lines.append(f"overlap: {task.overlap}: {OVERLAP_WORDS[task.overlap]}")
    return lines


def show_lines(config: Config, task: Task) -> list[tuple[str, str]]:
    """`show`'s extra rows: the start offset and the overlap policy in words."""
    rows = []
    if task.retry:
        rows.append(("on failure", retry_words(task)))
    if task.jitter:
        rows.append(("starts", f"{format_duration(start_offset(task, config))} after each slot"
                     f" (jitter, fixed for host {config.host_name!r})"))
    rows.append(("overlap", f"{task.overlap}: {OVERLAP_WORDS[task.overlap]}"))
    return rows
