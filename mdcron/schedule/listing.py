"""The tasks `list` shows, at 10,000 files (issue 27): a cached task's listed fields only.

View.records() decodes every cached Task's whole JSON (its body, env, every key); `list` reads
a dozen of them. Here SQLite picks those fields out of each row (state/task_cache.listed_tasks)
and each task becomes a short array decoded into a TaskRecord, with the same checks as
cache_json.record_of: the row's checksum, and its id, enabled flag and file agreeing with the
cache row. A Claude task (its prompt or body is its command text) takes the whole record; a row
that fails a check is read as View.records() would (View.task: decoded, else the file).
"""

from __future__ import annotations

import json
import sqlite3
import zlib

from ..state import task_cache
from ..tasks.task import Task
from .cache import View
from .cache_entry import Entry, GcPaused
from .cache_json import TaskRecord, record_of

# what `list` reads of a task: queries.list_rows, next_fire, start_offset, the Claude note
LISTED = ("id", "title", "schedule", "timezone", "enabled", "disabled_reason", "run_as",
          "command", "tags", "uses", "after", "path", "jitter")
_PATH = LISTED.index("path")
_ID = LISTED.index("id")
_ENABLED = LISTED.index("enabled")
_RUN_AS = LISTED.index("run_as")


def listed(view: View) -> list[Task]:
    """Every valid task of the view for `list`, in file-name order: a Task where one was read
    in this pass, else a TaskRecord of its listed fields (as View.records())."""
    valid = view.valid
    if view.db is None or sum(e.task is None for e in valid) <= 50:
        return view.records()
    try:
        rows = task_cache.listed_tasks(view.db, LISTED)
    except sqlite3.Error:  # malformed JSON in a row, say: the careful way, row by row
        return view.records()
    out: list[Task] = []
    with GcPaused():
        for e in valid:
            record = None if e.task is not None else _record(rows.get(e.path), e)
            task = record if record is not None else view.task(e)
            if task is not None:
                out.append(task)  # type: ignore[arg-type]  (a TaskRecord reads as a Task)
    return out


def _record(row: tuple[str, int, str] | None, e: Entry) -> TaskRecord | None:
    if row is None or zlib.crc32(str(row[0]).encode()) != row[1]:
        return None
    try:
        values = json.loads(row[2])
        if (not isinstance(values, list) or len(values) != len(LISTED) or values[_ID] != e.id
                or values[_ENABLED] != e.enabled or values[_PATH] != e.path):
            return None
    except (ValueError, TypeError):
        return None
    if values[_RUN_AS] == "claude":  # its command text is its prompt or body
        return record_of(row[:2], e.id, e.enabled, e.path)  # type: ignore[arg-type]
    record = TaskRecord()
    record.__dict__ = dict(zip(LISTED, values, strict=True))
    return record
