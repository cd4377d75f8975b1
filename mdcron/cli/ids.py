"""One rule for a name the command does not know (issue 25): the same message shape for an
unknown task id or tag in every command, with the nearest names, and exit 2 (a UsageError)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..tasks.task import Task


def _nearest(name: str, known: Iterable[str]) -> str:
    from difflib import get_close_matches  # lazy: difflib only for a name nobody knows

    near = get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""


def unknown_id(task_id: str, known: Iterable[str], tasks_dir: Path) -> str:
    """"no task with id 'x' in DIR (see `list`)", with the nearest ids when there are some."""
    return f"no task with id {task_id!r} in {tasks_dir}{_nearest(task_id, known)} (see `list`)"


def unknown_tag(tag: str, tasks: Iterable[Task]) -> str:
    tags = sorted({t for task in tasks for t in task.tags})
    listed = f" (tags: {', '.join(tags)})" if tags and len(tags) <= 20 else ""
    return f"no task has the tag {tag!r}{_nearest(tag, tags) or listed}"
