"""What in tasks/ is not a task, said once instead of failing (issue 25).

A Markdown file without frontmatter (a README.md, notes) is not a task: `validate` and `list`
name it with a warning, the tick ignores it (exit 0, no alert, no heartbeat /fail). A file that
looks like a task whose opening `---` is missing (its first line is `key: value`) is still an
error: that is a task that does not run.

Only `tasks/*.md` are task files. `.md` files in sub-folders are not loaded; each such folder is
named once, as a warning, by `validate` and `list`, so that nothing is ignored silently.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..core.problems import Problem

NOT_A_TASK = ("not a task: no frontmatter, so it is ignored (a task file starts with a line '---'"
              ", then id, schedule, ...); keep notes here if you like, or add frontmatter to make"
              " it a task")
_KEY_LINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*:(\s|$)")
_SCAN_LIMIT = 1000  # entries looked at per sub-folder: a huge tree must not slow `list`


def not_a_task(lines: list[str]) -> bool:
    """No frontmatter at all, and the first text line is not a `key: value` (a task whose
    opening '---' was forgotten) nor a '---' after blank lines (frontmatter not on line 1).
    An empty file is a task still being written: an error, as before."""
    first = next((line.lstrip("\ufeff").strip() for line in lines if line.strip()), "")
    return bool(first) and first != "---" and not _KEY_LINE.match(first)


def ignored_folders(tasks_dir: Path) -> list[Problem]:
    """One warning per sub-folder of tasks/ that holds `.md` files (hidden ones skipped)."""
    problems = []
    try:
        with os.scandir(tasks_dir) as entries:
            folders = sorted(e.path for e in entries
                             if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:
        return []  # the loader reports a tasks folder it cannot list
    for folder in folders:
        count, more = _markdown_files(folder)
        if count:
            problems.append(Problem(Path(folder), (
                f"a sub-folder with {count}{'+' if more else ''} .md file(s): only tasks/*.md "
                "are task files, so these are not loaded; move the tasks up into tasks/ to "
                "schedule them"), severity="warning"))
    return problems


def list_notes(problems: list[Problem], tasks_dir: Path) -> list[str]:
    """`list`'s one line for each file that is not a task and each ignored sub-folder."""
    found = [p for p in problems if p.message == NOT_A_TASK] + ignored_folders(tasks_dir)
    return [str(p) for p in found]


def _markdown_files(folder: str) -> tuple[int, bool]:
    """How many .md files the folder holds, and whether the count stopped at the limit."""
    count = seen = 0
    for _root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        count += sum(1 for f in files if f.endswith(".md") and not f.startswith("."))
        seen += len(files) + len(dirs)
        if seen >= _SCAN_LIMIT:
            return count, True
    return count, False
