"""`validate FILE…` (issue 25): check only the given task files, as a pre-commit hook does with
`pass_filenames` (the staged files), and whether their ids clash with another file in tasks/."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..core.problems import Problem
from ..settings.config import Config
from ..tasks.taskfile import load_task_file


def file_problems(config: Config, files: Sequence[str]) -> tuple[int, list[Problem]]:
    """(valid tasks among the files, every problem of those files)."""
    from ..schedule.cache import load_task_set  # lazy: only to look for clashing ids

    problems: list[Problem] = []
    mine: dict[str, Path] = {}
    for name in files:
        path = Path(name).absolute()
        if not path.is_file():
            problems.append(Problem(path, "no such file: give the path of a task file"))
            continue
        task, found = load_task_file(path, config)
        problems += found
        if task is not None:
            mine[task.id] = task.path
    if mine:
        others = load_task_set(config).tasks
        for task in others:
            path = mine.get(task.id)
            if path is not None and task.path.resolve() != path.resolve():
                problems.append(Problem(path, f"duplicate id {task.id!r} (also in {task.path}):"
                                        " the tick refuses to run anything until one is"
                                        " renamed", key="id"))
    return len(mine), problems
