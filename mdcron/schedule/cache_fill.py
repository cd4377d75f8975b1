"""A view's entries (cache.py) from the cache rows: fill, each file from its row while the row
holds, else read; and the tick's lean load (issue 27), an Entry only for the files that may
matter this minute, not for the 1,000 that cannot.

Lean: a cache row is quiet (state/task_cache.QUIET) when what it says holds whatever its file's
stat is (no problems, no outside paths, not racily clean when read) and its task cannot be a
candidate now (disabled, or next_due after now). A quiet row whose file's stat is the row's
gets no Entry: fill would build it from the row as it stands, and the tick would do nothing
with it, provided its task_state row agrees (state/task_cache.AGREES: observe writes nothing,
next_due still holds). lean_states checks that in the same read as the state rows the tick
goes on with, on rows proven unchanged since (meta cache_gen and cache_sealed). The tick counts
the quiet rows, looks for duplicate ids among all of them and sees their future stamps
(clock_back) as before; whatever needs every Entry (View.valid, a proof that fails) builds
them first (inflate): never a different answer, only a slower one.
"""

from __future__ import annotations

import sqlite3

from ..state import idle as fastpath
from ..state import task_cache
from ..state.task_state import StateRow, state_rows_for
from .cache_entry import from_row, read_entry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..state.store import Store
    from .cache import View


def fill(view: View, files: dict[str, fastpath.Stat | None], read_ns: int,
         only: str | None, given: dict[str, task_cache.CacheRow] | None = None) -> None:
    """load()'s entries: each file from its row while the row holds, else read. `given`: the
    rows read_cache would read (the caller read them under this key)."""
    key = view.key
    rows: dict[str, task_cache.CacheRow] = {}
    if given is not None and view.db is not None and key is not None and only is None:
        rows, view.rebuild = given, False
    elif view.db is not None and key is not None:
        try:
            # None: another key, or not sealed (a row was changed behind save()'s back)
            found = task_cache.read_cache(view.db, key, only)
            view.rebuild = found is None
            rows = found or {}
        except sqlite3.Error:
            rows, view.rebuild = {}, True
    elif key is not None:
        view.rebuild = True
    entries, problems = view.entries, view.problems
    for path in sorted(files):
        stat = files[path]
        row = rows.get(path)
        if only is not None and row is not None and len(row) == 4:  # another id's short row
            if row == stat:  # it holds (task_cache.read_cache)
                continue
            row = None  # read the file: it may now hold this id
        # _add(), inlined (issue 27: 10,000 rows a `list`)
        entry = from_row(row, stat) if row is not None and stat is not None else None
        if entry is None:
            entry = read_entry(path, stat, read_ns, view.config)
        entries.append(entry)
        if entry.problems:
            problems.extend(entry.problems)
    view.removed = [p for p in rows if p not in files]


def _add(view: View, path: str, stat: fastpath.Stat | None, row: task_cache.CacheRow | None,
         read_ns: int) -> None:
    entry = from_row(row, stat) if row is not None and stat is not None else None
    if entry is None:
        entry = read_entry(path, stat, read_ns, view.config)
    view.entries.append(entry)
    view.problems.extend(entry.problems)


def fill_lean(view: View, files: dict[str, fastpath.Stat | None], read_ns: int,
              now: float) -> bool:
    """fill for a tick at `now`, quiet rows left out (view.quiet: path -> (stat, id,
    enabled)). False when the rows cannot be read so (another key, not sealed, no
    database): the caller fills the view as always."""
    if view.db is None or view.key is None:
        return False
    try:
        found = task_cache.read_lean(view.db, view.key, now + fastpath.DUE_SLACK)
    except sqlite3.Error:
        return False
    if found is None:
        return False
    rows, rest, gen = found
    get = files.get
    quiet: dict[str, tuple[fastpath.Stat, str, bool]] = {}
    gone = []
    for path, size, mtime_ns, ino, ctime_ns, task_id, enabled in rows:
        stat = (size, mtime_ns, ino, ctime_ns)
        if get(path) == stat:
            quiet[path] = (stat, task_id, bool(enabled))
        elif path not in files:
            gone.append(path)
        # else the file changed: read below, as from_row refuses its row
    for path in sorted(files.keys() - quiet.keys()):  # the files that may matter, in order
        _add(view, path, files[path], rest.get(path), read_ns)
    view.removed = [p for p in rest if p not in files] + gone
    view.quiet, view.lean = quiet, (gen, now, read_ns)
    return True


def lean_states(view: View, store: Store) -> dict[str, StateRow] | None:
    """The state rows the tick goes on with after a lean load: those of the entries built,
    and any stamped after now + FUTURE_SLACK (clockback.ahead), read with the proof that the
    quiet rows are as read and agree with their state rows. None (the view inflated) when
    that does not hold: then every row, as always."""
    gen, now, _ = view.lean  # type: ignore[misc]
    db = store.connect()
    db.execute("BEGIN")  # one snapshot: the proof and the rows
    try:
        rows = None
        if task_cache.lean_holds(db, gen, now + fastpath.DUE_SLACK, view.zone):
            rows = state_rows_for(db, [str(e.id) for e in view.entries if e.id is not None],
                                  now + fastpath.FUTURE_SLACK)
    finally:
        db.execute("COMMIT")
    if rows is None:
        inflate(view)
    return rows


def inflate(view: View) -> None:
    """Every quiet row's Entry, as fill builds it: from its row while that holds, else read."""
    quiet, view.quiet = view.quiet, {}
    if not quiet:
        return
    rows: dict[str, task_cache.CacheRow] = {}
    if view.db is not None and view.key is not None:
        try:
            rows = task_cache.read_cache(view.db, view.key) or {}
        except sqlite3.Error:
            rows = {}
    for path, (stat, _, _) in quiet.items():
        _add(view, path, stat, rows.get(path), view.lean[2])  # type: ignore[index]
    view.entries.sort(key=lambda e: e.path)
