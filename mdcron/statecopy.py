"""`scheduler.py state copy --to postgresql://…`: move a home's SQLite state to PostgreSQL
(issue 11), so that a host joining a shared state keeps its history.

Copies every table of the state (runs, task state, notifications and their windows,
incidents, heals, comments), ids included, in one transaction into an empty database, then moves
the id sequences past the copied ids. Runs recorded before hosts existed get this host's name.
The parse cache and meta facts stay local (they are this host's). The SQLite file is only read.
"""

from __future__ import annotations

from pathlib import Path

from .state_url import mask
from .store import Store

TABLES = ("task_state", "runs", "outbox", "alert_windows", "incidents", "heals", "comments")
ID_TABLES = ("runs", "outbox", "incidents", "heals", "comments")


class CopyError(Exception):
    """The copy cannot be made; the message says why and what to do (URL masked)."""


def copy_state(db_path: Path, url: str, host: str) -> dict[str, int]:
    """Rows copied per table. CopyError when the source is missing or the target not empty."""
    from .pgstate import PgError, connect

    if not db_path.is_file():
        raise CopyError(f"{db_path} does not exist: there is no SQLite state to copy")
    try:
        target = connect(url)
    except PgError as exc:
        raise CopyError(str(exc)) from None
    counts: dict[str, int] = {}
    try:
        with Store(db_path) as source:
            src = source.connect()
            target.execute("BEGIN IMMEDIATE")
            try:
                for table in TABLES:
                    held = target.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    if held:
                        raise CopyError(f"{mask(url)} already holds {held} row(s) in {table}:"
                                        " copy into a new, empty database (CREATE DATABASE …)")
                for table in TABLES:
                    counts[table] = _copy_table(src, target, table, host)
                for table in ID_TABLES:
                    if counts[table]:
                        target.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                                       f" (SELECT max(id) FROM {table}))")
            except BaseException:
                target.execute("ROLLBACK")
                raise
            target.execute("COMMIT")
    finally:
        target.close()
    return counts


def _copy_table(src, target, table: str, host: str) -> int:
    theirs = [r[0] for r in target.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema ="
        " current_schema() AND table_name = ? ORDER BY ordinal_position", (table,)).fetchall()]
    ours = {r[1] for r in src.execute(f"PRAGMA table_info({table})")}
    columns = [c for c in theirs if c in ours]
    rows = src.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid").fetchall()
    if table == "runs":  # rows from before hosts existed were this host's
        at = columns.index("host")
        rows = [r[:at] + ((r[at] or host),) + r[at + 1:] for r in rows]
    marks = ", ".join("?" * len(columns))
    target.executemany(f"INSERT INTO {table}({', '.join(columns)}) VALUES ({marks})", rows)
    return len(rows)
