"""One task file as a pass of the parse cache sees it (an Entry, cache.py): from its cache row
while the row holds (same stat, not racily clean, its outside paths resolve as before), else
read from the file.

Lazy imports: the task-file parser (yaml) and the path checks load only for a file that changed.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

from ..core.problems import Problem
from ..core.records import dataclass
from ..settings.config import Config
from ..state import idle as fastpath
from ..state import task_cache
from ..state.task_state import StateRow
from ..tasks.task import Task
from .cache_json import Damaged, problems_from_json, problems_to_json

_PATH_KEYS = frozenset({"cwd", "cwd_policy", "command", "user", "group"})
# problems that may be about paths, users or groups: such a file is read again every time


@dataclass(slots=True, eq=False)
class Entry:
    """One task file as this pass sees it: from its cache row, or read just now."""

    path: str
    stat: fastpath.Stat | None  # None: not a regular file, or not stat-able (never cached)
    read_ns: int
    deps: str
    id: str | None  # None: the file has errors
    enabled: bool
    problems: list[Problem]
    next_due: float | None = None
    due_last: float | None = None
    due_nb: float | None = None  # None: next_due not computed
    due_zone: str = ""
    due_after: float | None = None  # the fire after next_due; None: unknown
    due_prepared: bool = False  # due_after found after the claim: complete() writes it
    task: Task | None = None  # read or decoded when needed
    parsed: bool = False  # read from the file in this pass: its row is written
    due_dirty: bool = False  # next_due recomputed: written
    skip: bool = False  # changed under us: not used this pass, read again next time

    def due_known(self, state: StateRow, zone: str) -> bool:
        return (self.due_nb is not None and self.due_nb == state.not_before
                and self.due_last == state.last_slot and self.due_zone in ("", zone))




def row_of_entry(e: Entry) -> tuple:
    size, mtime_ns, ino, ctime_ns = e.stat  # type: ignore[misc]
    return (e.path, size, mtime_ns, ino, ctime_ns, e.read_ns, e.deps, e.id, int(e.enabled),
            problems_to_json(e.problems), e.next_due, e.due_last, e.due_nb, e.due_zone,
            e.due_after)


def from_row(row: task_cache.CacheRow, stat: fastpath.Stat) -> Entry | None:
    (path, size, mtime_ns, ino, ctime_ns, read_ns, deps, task_id, enabled, problems,
     due, due_last, due_nb, due_zone, due_after) = row
    if not fastpath.row_holds(stat, size, mtime_ns, ino, ctime_ns, read_ns, deps):
        return None
    if problems is None:
        found: list[Problem] = []
    else:
        try:
            found = problems_from_json(problems)
        except Damaged:
            return None
    return Entry(path, stat, read_ns, deps, task_id, bool(enabled), found, due, due_last, due_nb,
                 due_zone, due_after)


def read_entry(path: str, stat: fastpath.Stat | None, read_ns: int, config: Config) -> Entry:
    from ..tasks.taskfile import load_task_file

    task, problems = load_task_file(Path(path), config)
    if task is None:
        deps = "*" if stat is None or any(p.key in _PATH_KEYS for p in problems) else ""
        return Entry(path, stat, read_ns, deps, None, False, problems, parsed=True)
    deps = "*" if stat is None else _deps(task, config)
    return Entry(path, stat, read_ns, deps, task.id, task.enabled, problems, task=task,
                 parsed=True)


def _deps(task: Task, config: Config) -> str:
    """The paths paths.task_cwd / script_path look at for this task (validation checks that the
    folder and script stay inside the home, and that they exist), with where each leads now."""
    if task.cwd is None and task.cwd_policy is None and task.run_as != "script":
        return ""  # runs in the home folder: nothing outside the file can change its checks
    from ..tasks.paths import PathError, script_word

    home = str(config.home)
    home_real = os.path.realpath(home)
    paths = [home] + [os.path.join(home_real, os.path.expanduser(a))
                      for a in config.allow_outside_home]
    base = home
    if task.cwd is not None:
        base = os.path.join(home, os.path.expanduser(task.cwd))
    elif task.cwd_policy is not None and task.cwd_policy in config.cwd_policies:
        base = os.path.join(home, os.path.expanduser(config.cwd_policies[task.cwd_policy]))
    paths.append(base)
    if task.run_as == "script":
        try:
            word = script_word(task.command or "")
            paths.append(os.path.join(os.path.realpath(base), os.path.expanduser(word)))
        except PathError:
            pass
    return "\0".join(p + "\0" + fastpath.path_state(p) for p in paths)


class GcPaused:
    """The cyclic collector held off while a pass builds its 10,000 entries or records: they
    hold no cycles, and its passes over them cost `list` a fifth of its time (issue 27)."""

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()
