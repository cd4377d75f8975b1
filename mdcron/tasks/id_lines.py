"""Where a task file sets its id (issue 25): `tasks/a.md:3`, for the duplicate-id messages, so
that a person can open both files at the right line."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..core import safe_fs
from .frontmatter_edit import EditError, find_frontmatter, key_lines, split_lines

_LIMIT = 1024 * 1024  # a task file's own bound (taskfile.MAX_BYTES)


def id_line(path: Path) -> int | None:
    """The 1-based line of the file's `id:` key; None when it cannot be read or found."""
    try:
        text = safe_fs.read_regular(path, _LIMIT).decode("utf-8")
        lines = split_lines(text)
        opening, close = find_frontmatter(lines)
    except (OSError, ValueError, EditError):
        return None
    found = [k.start + 1 for k in key_lines(lines, opening + 1, close) if k.key == "id"]
    return found[-1] if found else None


def where(path: Path) -> str:
    """`path:line` of its id, or the path alone."""
    line = id_line(path)
    return f"{path}:{line}" if line else str(path)


def located(paths: Iterable[Path | str]) -> str:
    """"tasks/a.md:2 and tasks/b.md:3"."""
    return " and ".join(where(Path(os.fspath(p))) for p in paths)
