"""The tasks `list` shows, at 10,000 files (issue 27): a cached task's listed fields only.

View.records() decodes every cached Task's whole JSON (its body, env, every key); `list` reads
a dozen of them. save() keeps those beside the JSON (state/task_cache.listing_of, schema 9: each
listed field's JSON one a line, and its checksum), and each task becomes that array decoded (all
of them in one json.loads) as a Listed record, a named tuple of those fields, with the checks
cache_json.record_of makes: the checksum, and the id, enabled flag and file agreeing with the
cache row. A Claude task (its prompt or body is its command text)
takes the whole record; a row without a listing, or one that fails a check, is read as
View.records() would (View.task: decoded, else the file).
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections import namedtuple
from collections.abc import Callable

from ..state import task_cache
from ..state.task_cache import LISTED
from ..tasks.task import Task
from .cache_entry import Entry, GcPaused
from .cache_json import TaskRecord, record_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .cache import View  # only its type: `list --json`'s rows need not load the View

Listed = namedtuple("Listed", LISTED)  # noqa: PYI024  a task's listed fields, read as a Task
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
        decoded = _decode_all(valid, rows)
        for e in valid:
            record = None
            if e.task is None:
                values = decoded.get(e.path)
                record = (checked(view, values, e) if values is not None
                          else record_of_listing(view, rows.get(e.path), e))
            task = record if record is not None else view.task(e)
            if task is not None:
                out.append(task)  # type: ignore[arg-type]  (a TaskRecord reads as a Task)
    return out


def _decode_all(valid: list[Entry], rows: dict[str, str | None]) -> dict[str, list]:
    """path -> its listing's array, for each entry without a Task whose listing's checksum
    holds: every such listing decoded in one json.loads (issue 27: a call per row was a sixth
    of `list`). A listing is its fields' JSON texts one a line (task_cache.listing_of), so
    the bodies joined make one array of arrays; if that is not exactly one array per body,
    nothing is taken from it and each row is read alone (record_of_listing)."""
    paths, bodies = [], []
    for e in valid:
        listing = rows.get(e.path) if e.task is None else None
        if listing:
            crc, _, body = listing.partition(" ")
            if crc.isdigit() and zlib.crc32(body.encode()) == int(crc):
                paths.append(e.path)
                bodies.append(body)
    if not bodies:
        return {}
    try:
        values = json.loads("[[" + "],[".join(bodies).replace(NL, ",") + "]]")
    except ValueError:
        return {}
    if len(values) != len(paths):
        return {}
    return dict(zip(paths, values, strict=True))


def record_of_listing(view: View, listing: str | None, e: Entry) -> Listed | TaskRecord | None:
    """A listing (task_cache.listing_of) as a TaskRecord; None when it fails a check."""
    values = _decoded(listing)
    return None if values is None else checked(view, values, e)


def listed_of(listing: str | None, task_id: str, enabled: bool, path: str,
              whole: Callable[[str], tuple[str, int] | None]) -> Listed | TaskRecord | None:
    """record_of_listing without a view (cache_listed.py's rows): a Claude task's whole cached
    row is `whole(path)`."""
    values = _decoded(listing)
    if (not isinstance(values, list) or len(values) != len(LISTED) or values[_ID] != task_id
            or values[_ENABLED] != enabled or values[_PATH] != path):
        return None
    if values[_RUN_AS] == "claude":  # as checked() reads it
        return record_of(whole(path), task_id, enabled, path)
    return tuple.__new__(Listed, values)


def _decoded(listing: str | None) -> object:
    """A listing's fields as one JSON array, when its checksum holds; else None."""
    if not listing:
        return None
    crc, _, body = listing.partition(" ")
    try:
        if zlib.crc32(body.encode()) != int(crc):
            return None
        return json.loads("[" + body.replace(NL, ",") + "]")  # one JSON text a line
    except ValueError:
        return None


def checked(view: View, values: object, e: Entry) -> Listed | TaskRecord | None:
    """A listing's decoded array as a Listed record, when it agrees with its cache row (the
    id, enabled flag and file); None when not. A Claude task's is its whole cached row (a
    TaskRecord)."""
    if (not isinstance(values, list) or len(values) != len(LISTED) or values[_ID] != e.id
            or values[_ENABLED] != e.enabled or values[_PATH] != e.path):
        return None
    if values[_RUN_AS] == "claude":  # its command text is its prompt or body: the whole row
        try:
            row = task_cache.cached_task(view.db, e.path)
        except sqlite3.Error:
            return None
        return record_of(row, e.id, e.enabled, e.path)
    return tuple.__new__(Listed, values)  # Listed._make without its checks: 10,000 rows
