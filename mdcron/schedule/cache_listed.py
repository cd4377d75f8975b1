"""`list --json` at 10,000 tasks (issue 27): the cache's rows and their listings read as they
stand, no Entry built, when every file's row holds as load() would hold it.

load() (cache.py) builds an Entry per file, from its row while the row holds; `list --json`
then reads each row's listing (state/task_cache.listing_of) and the due hints fill_dues finds
in the rows. This reads the rows with their listings in one query and checks every file the
way cache_entry.from_row does (the same stat, not racily clean, its outside paths resolving
as before); every row must hold, none may carry an error or repeat an id, and there must be
no row without a file nor file without a row. Anything else (a changed or new file, a row to
drop, a rebuild, a due hint to compute) returns None: the caller loads the view as always,
which reads, computes and saves what is needed; this never answers differently, it only
declines.
"""

from __future__ import annotations

import sqlite3

from ..core.records import NamedTuple
from ..settings.config import Config
from ..state import cache_key as keys
from ..state import idle as fastpath
from ..state import task_cache
from ..state.task_state import StateRow
from .cache_json import Damaged, problems_from_json
from .cache_summary import cache_key_of, open_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Row(NamedTuple):
    """A file whose cache row holds: what `list --json` reads of it."""

    path: str
    id: str
    enabled: bool
    listing: str | None
    next_due: float | None
    due_last: float | None
    due_nb: float | None
    due_zone: str


def read_rows(config: Config) -> dict[str, tuple[Any, ...]] | None:
    """The cache rows with their listings (task_cache.read_listed); None when there is no
    cache to read or it is not this config's (load() then reads every file)."""
    key = cache_key_of(config)
    if key is None:
        return None
    db = open_cache(config)
    if db is None:
        return None
    try:
        return task_cache.read_listed(db, key)
    except sqlite3.Error:
        return None
    finally:
        db.close()


def held_rows(files: dict[str, fastpath.Stat | None], rows: dict[str, tuple[Any, ...]]
              ) -> list[Row] | None:
    """Every task file's Row, in file-name order, when each file's cache row (read_rows) holds
    for the stat the folder's scan (`files`) gave it (see above); None when load() has anything
    to read, drop, compute or report."""
    if len(rows) != len(files):
        return None
    out: list[Row] = []
    ids: set[str] = set()
    new = tuple.__new__  # Row._make without its checks: 10,000 rows
    for path in sorted(files):
        stat, row = files[path], rows.get(path)
        if row is None or stat is None:
            return None
        (_, size, mtime_ns, ino, ctime_ns, read_ns, deps, task_id, enabled, problems, due,
         due_last, due_nb, due_zone, _, listing) = row
        # cache_entry.from_row's rule, and a task without errors, its id seen once
        if (not fastpath.row_holds(stat, size, mtime_ns, ino, ctime_ns, read_ns, deps)
                or task_id is None or task_id in ids
                or (problems is not None and not _warnings(problems))):
            return None
        ids.add(task_id)
        out.append(new(Row, (path, task_id, bool(enabled), listing, due, due_last, due_nb,
                             due_zone)))
    return out


def _warnings(problems: str) -> bool:
    """Whether a row's problems are warnings only: `list --json` shows none of them (its rows
    of invalid files are the errors'), as from_row reads them (damaged JSON: read again)."""
    try:
        return all(p.severity != "error" for p in problems_from_json(problems))
    except Damaged:
        return False


def due_hints(rows: list[Row], states: dict[str, StateRow]
              ) -> dict[str, tuple[float, float | None]] | None:
    """View.fill_dues' hints when every enabled task with a state row has its next_due for
    that row in the cache (Entry.due_known); None when one must be computed (and saved)."""
    zone = keys.zone_key()
    hints = {}
    for r in rows:
        s = states.get(r.id)
        if s is None or not r.enabled:
            continue
        if r.due_nb is None or r.due_nb != s.not_before or r.due_last != s.last_slot or (
                r.due_zone not in ("", zone)):
            return None
        hints[r.id] = (max(s.not_before - 1e-6, s.last_slot) if s.last_slot is not None
                       else s.not_before - 1e-6, r.next_due)
    return hints


class WholeRows:
    """A file's cached Task JSON and checksum (task_cache.cached_task) from one connection
    opened at the first ask: the rows a listing does not make (a Claude task's command text
    is its prompt or body, listing.listed_of)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.db: sqlite3.Connection | None = None

    def __call__(self, path: str) -> tuple[str, int] | None:
        try:
            if self.db is None:
                self.db = open_cache(self.config)
            return None if self.db is None else task_cache.cached_task(self.db, path)
        except sqlite3.Error:
            return None

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
