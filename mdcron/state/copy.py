"""`scheduler.py state copy --to postgresql://…`: move a home's SQLite state to PostgreSQL
(issue 11), so that a host joining a shared state keeps its history.

Copies every table of the state (runs, task state, notifications and their windows,
incidents, heals, comments), ids included, in one transaction into an empty database, then moves
the id sequences past the copied ids. Runs recorded before hosts existed get this host's name.
The parse cache and meta facts stay local (they are this host's). The SQLite file is only read.

Lazy imports: pgstate (and psycopg behind it) only once the target URL is known good.
"""

from __future__ import annotations

from pathlib import Path

from ..settings.state_url import mask
from . import transfer
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
                    held = transfer.row_count(target, table)
                    if held:
                        raise CopyError(f"{mask(url)} already holds {held} row(s) in {table}:"
                                        " copy into a new, empty database (CREATE DATABASE …)")
                for table in TABLES:
                    counts[table] = _copy_table(src, target, table, host)
                for table in ID_TABLES:
                    if counts[table]:
                        transfer.advance_ids(target, table)
            except BaseException:
                target.execute("ROLLBACK")
                raise
            target.execute("COMMIT")
    finally:
        target.close()
    return counts


def _copy_table(src, target, table: str, host: str) -> int:
    ours = transfer.sqlite_columns(src, table)
    columns = [c for c in transfer.pg_columns(target, table) if c in ours]
    rows = transfer.read_table(src, table, columns)
    if table == "runs":  # rows from before hosts existed were this host's
        at = columns.index("host")
        rows = [r[:at] + ((r[at] or host),) + r[at + 1:] for r in rows]
    transfer.insert_rows(target, table, columns, rows)
    return len(rows)
