"""`state copy`'s statements: whole tables from a SQLite state into an empty PostgreSQL one
(state/copy.py decides what to copy; pgstate.translate spells these for PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .db import marks


def schema_relations(db: Any, schema: str | None) -> list[str]:
    """The tables and views in `schema` (None: the connection's current schema)."""
    where = "current_schema()" if schema is None else "?"
    return [r[0] for r in db.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = " + where
        + " ORDER BY table_name", () if schema is None else (schema,)).fetchall()]


def create_schema(db: Any, schema: str) -> None:
    db.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')  # a checked identifier (copy.py)


def row_count(db: Any, table: str) -> int:
    return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def advance_ids(db: Any, table: str) -> None:
    """Move a PostgreSQL table's id sequence past the ids copied into it."""
    db.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
               f" (SELECT max(id) FROM {table}))")


def pg_columns(db: Any, table: str) -> list[str]:
    return [r[0] for r in db.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema ="
        " current_schema() AND table_name = ? ORDER BY ordinal_position", (table,)).fetchall()]


def sqlite_columns(db: Any, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def read_table(db: Any, table: str, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    return db.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid").fetchall()


def insert_rows(db: Any, table: str, columns: Sequence[str],
                rows: Sequence[tuple[Any, ...]]) -> None:
    db.executemany(f"INSERT INTO {table}({', '.join(columns)})"
                   f" VALUES ({marks(len(columns)).replace(',', ', ')})", rows)
