"""The parse cache's tables (`task_cache`: a file's stat, id, problems and due key;
`task_cache_data`: its Task as JSON with a checksum) and the `meta` keys that seal them. Always
this host's own SQLite file, also with a PostgreSQL state. The idle tick (state/idle.py) reads
the same rows with its own stdlib-only queries; cache.py decides what to write."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable

from ..core.records import NamedTuple  # typing's, without its per-field check
from .idle import RACY_NS
from .meta import put_metas, read_metas

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Any


class CacheRow(NamedTuple):
    path: str
    size: int
    mtime_ns: int
    ino: int
    ctime_ns: int
    read_ns: int
    deps: str
    task_id: str | None
    enabled: int
    problems: str | None
    next_due: float | None
    due_last: float | None
    due_nb: float | None
    due_zone: str
    due_after: float | None


_COLUMNS = ("path, size, mtime_ns, ino, ctime_ns, read_ns, deps, task_id, enabled, problems,"
            " next_due, due_last, due_nb, due_zone, due_after")  # CacheRow's fields
ROWS = f"SELECT {_COLUMNS} FROM task_cache"


def _sealed(db: Any, key: str, *more: str) -> dict[str, str] | None:
    """The meta keys `more`, when the rows are this key's and sealed (save() wrote them and
    nothing changed them since); None when they must not be read."""
    meta = read_metas(db, ("cache_key", "cache_sealed", *more))
    if meta.get("cache_key") != key or meta.get("cache_sealed") != "1":
        return None
    return meta


def read_cache(db: Any, key: str, only: str | None = None) -> dict[str, CacheRow] | None:
    """The rows by path in one read transaction; None when they belong to another key or were
    changed behind save()'s back (not sealed): then every file is read again. `only` (a task
    id): a row of another id that holds whatever its file's stat is (no problems, no outside
    paths, not racily clean when read) comes as its stat alone, (size, mtime_ns, ino, ctime_ns):
    it holds exactly when the file's stat is that (cache_entry.from_row: with the stat unchanged,
    racy() reads the stored times); the others come whole (issue 27: `show` at 10,000 tasks)."""
    db.execute("BEGIN")
    try:
        if _sealed(db, key) is None:
            return None
        new = tuple.__new__  # CacheRow._make without its checks: 10k rows cost no more
        if only is None:
            return {r[0]: new(CacheRow, r) for r in db.execute(ROWS)}
        short = ("(task_id IS NOT ? AND problems IS NULL AND deps = ''"
                 " AND max(mtime_ns, ctime_ns) < read_ns - ?)")
        rows = {r[0]: r[1:] for r in db.execute(
            "SELECT path, size, mtime_ns, ino, ctime_ns FROM task_cache WHERE " + short
            + " IS 1", (only, RACY_NS))}
        rows.update((r[0], new(CacheRow, r)) for r in db.execute(
            ROWS + " WHERE " + short + " IS NOT 1", (only, RACY_NS)))
        return rows  # type: ignore[return-value]  (the short rows: see above)
    finally:
        db.execute("COMMIT")


def cached_task(db: Any, path: str) -> tuple[str, int] | None:
    """(task JSON, its crc32) for a file's row."""
    row = db.execute("SELECT task, crc FROM task_cache_data WHERE path = ?", (path,)).fetchone()
    return (row[0], row[1]) if row else None


def cached_tasks(db: Any) -> dict[str, tuple[str, int]]:
    """Every file's (task JSON, crc32) by path, in one query (a whole task set decoded)."""
    return {r[0]: (r[1], r[2]) for r in db.execute("SELECT path, task, crc FROM task_cache_data")}


# what `list` reads of a task (cli/queries.list_rows, next_fire, start_offset, the Claude note)
LISTED = ("id", "title", "schedule", "timezone", "enabled", "disabled_reason", "run_as",
          "command", "tags", "uses", "after", "path", "jitter")


def listing_of(task_json: str) -> str | None:
    """A cached task's LISTED fields as '<crc32 of the body> <body>' (schema 9), for `list`
    to decode instead of the whole JSON (issue 27); None when the JSON is not a Task's. The
    body is each field's JSON as `list --json` writes it (json's default separators, ASCII),
    one a line: cli/list_json.py copies them into its rows as they are, schedule/listing.py
    reads them as one array. A JSON text in ASCII holds no line break, so none is ambiguous."""
    try:
        data = json.loads(task_json)
        body = "\n".join(_encode(data[name]) for name in LISTED)
    except (ValueError, TypeError, KeyError):
        return None
    return f"{zlib.crc32(body.encode())} {body}"


_encode = json.JSONEncoder().encode  # ensure_ascii, ", " and ": ": list --json's own


def listings(db: Any) -> dict[str, str | None]:
    """Every file's listing (listing_of) by path, in one query."""
    return dict(db.execute("SELECT path, listing FROM task_cache_data"))


def read_listed(db: Any, key: str) -> dict[str, tuple[Any, ...]] | None:
    """`list --json`'s read (issue 27): by path, the CacheRow's fields then the listing (path,
    size, ..., due_after, listing), each row with its listing, in one read transaction; None as
    read_cache (another key, not sealed). A row cut to CacheRow is read_cache's row: a
    declined fast path hands them to load(), not read twice."""
    db.execute("BEGIN")
    try:
        if _sealed(db, key) is None:
            return None
        return {r[0]: r for r in db.execute(  # `path` is the join's own column (USING)
            f"SELECT {_COLUMNS}, listing FROM task_cache LEFT JOIN task_cache_data USING (path)")}
    finally:
        db.execute("COMMIT")


def split_listed(rows: dict[str, tuple[Any, ...]]
                 ) -> tuple[dict[str, CacheRow], dict[str, str | None]]:
    """read_listed's rows as read_cache's rows and listings' listings."""
    new, n = tuple.__new__, len(CacheRow._fields)  # the listing follows the row's fields
    return ({p: new(CacheRow, r[:n]) for p, r in rows.items()},
            {p: r[n] for p, r in rows.items()})


def write_due_after(db: Any, rows: Iterable[tuple[Any, ...]]) -> None:
    """(due_after, path, next_due, due_last, due_nb, due_zone): only where the row still holds
    the due key the fire was computed from."""
    db.executemany("UPDATE task_cache SET due_after = ? WHERE path = ? AND next_due IS ?"
                   " AND due_last IS ? AND due_nb IS ? AND due_zone = ?", rows)


def write_cache(db: Any, *, rebuild: bool, drop: Iterable[str], rows: Iterable[tuple[Any, ...]],
                data: Iterable[tuple[str, str, int]], no_task: Iterable[str],
                dues: Iterable[tuple[Any, ...]]) -> None:
    """One save: `rows` in CacheRow order, `data` (path, JSON, crc), `no_task` paths whose
    Task is gone, `dues` (next_due, due_last, due_nb, due_zone, due_after, path)."""
    if rebuild:
        db.execute("DELETE FROM task_cache")
        db.execute("DELETE FROM task_cache_data")
    drop = [(p,) for p in drop]
    db.executemany("DELETE FROM task_cache WHERE path = ?", drop)
    db.executemany("DELETE FROM task_cache_data WHERE path = ?", drop)
    db.executemany(
        "INSERT OR REPLACE INTO task_cache(path, size, mtime_ns, ino, ctime_ns,"
        " read_ns, deps, task_id, enabled, problems, next_due, due_last, due_nb,"
        " due_zone, due_after) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    db.executemany("INSERT OR REPLACE INTO task_cache_data(path, task, crc, listing)"
                   " VALUES (?, ?, ?, ?)", ((p, t, c, listing_of(t)) for p, t, c in data))
    db.executemany("DELETE FROM task_cache_data WHERE path = ?", ((p,) for p in no_task))
    db.executemany("UPDATE task_cache SET next_due = ?, due_last = ?, due_nb = ?,"
                   " due_zone = ?, due_after = ? WHERE path = ?", dues)


def cached_problems(db: Any) -> tuple[list[str], int]:
    """Every row's problems JSON, and how many rows hold a task."""
    texts = [t for (t,) in db.execute(
        "SELECT problems FROM task_cache WHERE problems IS NOT NULL")]
    tasks = db.execute("SELECT count(*) FROM task_cache WHERE task_id IS NOT NULL").fetchone()[0]
    return texts, int(tasks)


def enabled_naming_hosts(db: Any) -> list[tuple[str, str]]:
    """(id, task JSON) of the enabled tasks whose JSON may name `hosts:` (not the empty list)."""
    return db.execute(
        "SELECT c.task_id, d.task FROM task_cache c JOIN task_cache_data d USING (path)"
        " WHERE c.task_id IS NOT NULL AND c.enabled = 1"
        " AND d.task NOT LIKE '%\"hosts\":[]%'").fetchall()


def seal(db: Any, values: dict[str, str]) -> None:
    """The summary the idle tick reads instead of the rows; and meta cache_gen moves on: rows
    read in a pass are the same rows later while it holds (and cache_sealed is still '1')."""
    put_metas(db, values)
    db.execute("INSERT INTO meta(key, value) VALUES ('cache_gen', '1') ON CONFLICT(key)"
               " DO UPDATE SET value = CAST(value AS INTEGER) + 1")


# Issue 27, the tick's lean load (schedule/cache_fill.py). A row is quiet when what it says
# holds whatever its file's stat is (no problems, no outside paths, not racily clean when read)
# and its task cannot be a candidate at :now (disabled, or next_due after :now)...
QUIET = ("(c.task_id IS NOT NULL AND c.problems IS NULL AND c.deps = ''"
         " AND max(c.mtime_ns, c.ctime_ns) < c.read_ns - :racy AND (c.enabled = 0"
         " OR (c.next_due IS NOT NULL AND c.next_due > :now)))")
# ... and its task_state row agrees: observe() would write nothing, next_due still holds
AGREES = ("(s.enabled = c.enabled AND s.path = c.path AND (c.enabled = 0"
          " OR (c.due_nb = s.not_before AND c.due_last IS s.last_slot"
          " AND c.due_zone IN ('', :zone))))")


def read_lean(db: Any, key: str, now: float
              ) -> tuple[list[tuple[Any, ...]], dict[str, CacheRow], str | None] | None:
    """The rows in one read transaction, for the tick: the quiet ones (QUIET) as (path, size,
    mtime_ns, ino, ctime_ns, task_id, enabled), the others whole by path, and meta cache_gen;
    None as read_cache (another key, not sealed)."""
    db.execute("BEGIN")
    try:
        meta = _sealed(db, key, "cache_gen")
        if meta is None:
            return None
        args = {"racy": RACY_NS, "now": now}
        quiet = db.execute("SELECT c.path, c.size, c.mtime_ns, c.ino, c.ctime_ns, c.task_id,"
                           " c.enabled FROM task_cache c WHERE " + QUIET + " IS 1", args
                           ).fetchall()
        new = tuple.__new__
        rest = {r[0]: new(CacheRow, r) for r in db.execute(
            ROWS + " c WHERE " + QUIET + " IS NOT 1", args)}
        return quiet, rest, meta.get("cache_gen")
    finally:
        db.execute("COMMIT")


def lean_holds(db: Any, gen: str | None, now: float, zone: str) -> bool:
    """In one read: the rows are still those read_lean read (cache_gen, cache_sealed), and
    every quiet row's task_state row agrees (AGREES)."""
    meta = read_metas(db, ("cache_sealed", "cache_gen"))
    if meta.get("cache_sealed") != "1" or meta.get("cache_gen") != gen:
        return False
    return db.execute(
        "SELECT NOT EXISTS(SELECT 1 FROM task_cache c LEFT JOIN task_state s"
        " ON s.task_id = c.task_id WHERE " + QUIET + " IS 1 AND " + AGREES + " IS NOT 1)",
        {"racy": RACY_NS, "now": now, "zone": zone}).fetchone()[0] == 1
