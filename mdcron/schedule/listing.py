"""The tasks `list` shows, at 10,000 files (issue 27): a cached task's listed fields only.

View.records() decodes every cached Task's whole JSON (its body, env, every key); `list` reads
a dozen of them. save() keeps those beside the JSON (state/task_cache.listing_of, schema 9: each
listed field's JSON one a line, and its checksum), and each task becomes that array decoded into a
TaskRecord, with the checks cache_json.record_of makes: the checksum, and the id, enabled flag
and file agreeing with the cache row. A Claude task (its prompt or body is its command text)
takes the whole record; a row without a listing, or one that fails a check, is read as
View.records() would (View.task: decoded, else the file).
"""

from __future__ import annotations

import json
import sqlite3
import zlib

from ..state import task_cache
from ..state.task_cache import LISTED
from ..tasks.task import Task
from .cache import View
from .cache_entry import Entry, GcPaused
from .cache_json import TaskRecord, record_of

_PATH = LISTED.index("path")
_ID = LISTED.index("id")
_ENABLED = LISTED.index("enabled")
_RUN_AS = LISTED.index("run_as")
NL = "\n"


def listed(view: View) -> list[Task]:
    """Every valid task of the view for `list`, in file-name order: a Task where one was read
    in this pass, else a TaskRecord of its listed fields (as View.records())."""
    valid = view.valid
    if view.db is None or sum(e.task is None for e in valid) <= 50:
        return view.records()
    try:
        rows = task_cache.listings(view.db)
    except sqlite3.Error:
        return view.records()
    out: list[Task] = []
    with GcPaused():
        for e in valid:
            record = None if e.task is not None else record_of_listing(view, rows.get(e.path), e)
            task = record if record is not None else view.task(e)
            if task is not None:
                out.append(task)  # type: ignore[arg-type]  (a TaskRecord reads as a Task)
    return out


def record_of_listing(view: View, listing: str | None, e: Entry) -> TaskRecord | None:
    """A listing (task_cache.listing_of) as a TaskRecord; None when it fails a check."""
    if not listing:
        return None
    crc, _, body = listing.partition(" ")
    try:
        if zlib.crc32(body.encode()) != int(crc):
            return None
        values = json.loads("[" + body.replace(NL, ",") + "]")  # one JSON text a line
    except ValueError:
        return None
    if (not isinstance(values, list) or len(values) != len(LISTED) or values[_ID] != e.id
            or values[_ENABLED] != e.enabled or values[_PATH] != e.path):
        return None
    if values[_RUN_AS] == "claude":  # its command text is its prompt or body: the whole row
        try:
            row = task_cache.cached_task(view.db, e.path)
        except sqlite3.Error:
            return None
        return record_of(row, e.id, e.enabled, e.path)
    record = TaskRecord()
    record.__dict__ = dict(zip(LISTED, values, strict=True))
    return record
