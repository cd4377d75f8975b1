"""The parse cache's JSON (cache.py): a Task and a file's problems as its rows keep them, read
back with checks; a row that fails them (Damaged) means: read the file again. A TaskRecord is a
cached Task's fields without building the Task (issue 27: `list` at 10,000 tasks).

Lazy imports: hashlib only for a digest of problems there are.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from pathlib import Path

from ..core.problems import Problem
from ..core.records import fields
from ..tasks.task import Task

_TUPLES = frozenset(f.name for f in fields(Task) if str(f.type).startswith("tuple"))
EMPTY_DIGEST = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # no problems


class Damaged(ValueError):
    """A cache row that cannot be used; the file is read again."""


def task_to_json(task: Task) -> str:
    data = {}
    for f in fields(Task):
        value = getattr(task, f.name)
        data[f.name] = str(value) if isinstance(value, Path) else (
            list(value) if isinstance(value, tuple) else value)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def task_from_json(text: str) -> Task:
    try:
        data = json.loads(text)
        data["path"] = Path(data["path"])
        for name in _TUPLES:
            data[name] = tuple(data[name])
        return Task(**data)
    except (ValueError, TypeError, KeyError) as exc:
        raise Damaged(f"task JSON: {exc}") from exc


class TaskRecord:
    """A cached Task's fields as plain attributes, for read-only listings: `path` a str, lists
    for tuples. Never handed to code that runs, edits or hashes a task (use View.task)."""


def record_of(row: tuple[str, int] | None, task_id: str | None, enabled: bool,
              path: str) -> TaskRecord | None:
    """The row (task JSON, crc32) as a TaskRecord; None when it is missing, damaged or names
    another id, enabled flag or file than its cache row."""
    if row is None or zlib.crc32(str(row[0]).encode()) != row[1]:
        return None
    try:
        data = json.loads(row[0])
        if data["id"] != task_id or data["enabled"] != enabled or data["path"] != path:
            return None
    except (ValueError, TypeError, KeyError):
        return None
    record = TaskRecord()
    record.__dict__ = data
    return record


def problems_to_json(problems: list[Problem]) -> str | None:
    if not problems:
        return None
    return json.dumps([[str(p.path), p.message, p.key, p.line, p.severity] for p in problems],
                      separators=(",", ":"))


def problems_from_json(text: str | None) -> list[Problem]:
    if text is None:
        return []
    try:
        out = [Problem(Path(p), m, k, n, s) for p, m, k, n, s in json.loads(text)]
    except (ValueError, TypeError) as exc:
        raise Damaged(f"problems JSON: {exc}") from exc
    if not all(isinstance(p.message, str) and p.severity in ("error", "warning") for p in out):
        raise Damaged("problems JSON")
    return out


def problems_digest(problems: Iterable[Problem]) -> str:
    """What tick._problems_changed compares: order does not matter."""
    lines = sorted(map(str, problems))
    if not lines:
        return EMPTY_DIGEST
    import hashlib

    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
