"""`scheduler.py state copy --to postgresql://…`: move a home's SQLite state to PostgreSQL
(issue 11), so that a host joining a shared state keeps its history.

Copies every table of the state (runs, task state, notifications and their windows,
incidents, heals, comments), ids included, in one transaction into an empty database, then moves
the id sequences past the copied ids. Runs recorded before hosts existed get this host's name.
The parse cache and meta facts stay local (they are this host's). The SQLite file is only read.

The target must be mdcron's: a schema holding any table or view that mdcron does not create (an
application's `users`, say) is refused before anything is created in it, unless `--schema NAME`
puts mdcron's tables in a schema of their own (the URL then carries its `search_path`).

Lazy imports: pgstate (and psycopg behind it) only once the target URL is known good.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

from ..settings.state_url import mask
from . import transfer
from .schema import PG_MIGRATIONS, PG_SCHEMA
from .store import Store

TABLES = ("task_state", "runs", "outbox", "alert_windows", "incidents", "heals", "comments",
          "audit")
ID_TABLES = ("runs", "outbox", "incidents", "heals", "comments", "audit")


OURS = frozenset(re.findall(r"CREATE TABLE (\w+)", PG_SCHEMA + "".join(PG_MIGRATIONS.values())))
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class CopyError(Exception):
    """The copy cannot be made; the message says why and what to do (URL masked)."""


def with_schema(url: str, schema: str) -> str:
    """The URL whose connections use `schema` (libpq's `options=-c search_path=…`)."""
    if not SCHEMA_NAME.fullmatch(schema):
        raise CopyError(f"--schema {schema!r}: use lower-case letters, digits and _ (at most 63,"
                        " not starting with a digit)")
    return f"{url}{'&' if '?' in url else '?'}options={quote(f'-c search_path={schema}')}"


def copy_state(db_path: Path, url: str, host: str, schema: str | None = None) -> dict[str, int]:
    """Rows copied per table. CopyError when the source is missing, the target holds tables
    that are not mdcron's, or mdcron's tables there are not empty. With `schema`, `url` must
    already be `with_schema(url, schema)`."""
    from .pgstate import PgError, connect

    if not db_path.is_file():
        raise CopyError(f"{db_path} does not exist: there is no SQLite state to copy")
    try:
        probe = connect(url, migrate=False)
    except PgError as exc:
        raise CopyError(str(exc)) from None
    try:
        foreign = [t for t in transfer.schema_relations(probe, schema) if t not in OURS]
        if foreign:
            where = f"schema {schema}" if schema else "its current schema"
            raise CopyError(
                f"{mask(url)} already holds tables mdcron did not create in {where}"
                f" ({', '.join(foreign[:5])}{', …' if len(foreign) > 5 else ''}): it is another"
                " application's. Copy into a new, empty database (CREATE DATABASE mdcron), or"
                " give --schema NAME to keep mdcron's tables in a schema of their own")
        if schema:
            transfer.create_schema(probe, schema)
    finally:
        probe.close()
    try:
        target = connect(url)
    except PgError as exc:
        raise CopyError(str(exc)) from None
    counts: dict[str, int] = {}
    try:
        # one long transaction on purpose (whole tables, the write lock held): the bounds of a
        # tick's session (pgbounds.py) would end it half way on a large history
        target.execute("SET idle_in_transaction_session_timeout = '10min'")
        target.execute("SET statement_timeout = '10min'")
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
