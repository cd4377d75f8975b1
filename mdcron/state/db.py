"""What every table needs from the connection owner (store.Store): a connection, a short write
transaction, the state's URL (None for SQLite) and this host's name; and the one helper that
turns a cursor into dicts keyed by column."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Any


class FencedOff(Exception):
    """A write by a holder whose lease was taken over: refused, nothing changed (leases.py
    checks the fence; Store.write refuses every write of a holder that fenced itself)."""


class Tables:
    """The base of the table mixins; store.Store provides the real members."""

    url: str | None
    host: str | None
    fence: tuple[str, int] | None  # a run's lease (issue 11), while it holds one

    def connect(self) -> sqlite3.Connection:  # pragma: no cover - Store overrides it
        raise NotImplementedError

    def write(self) -> AbstractContextManager[sqlite3.Connection]:  # pragma: no cover
        raise NotImplementedError

    def _rows(self, sql: str, args: tuple[object, ...] = ()) -> list[dict[str, object]]:
        return dict_rows(self.connect(), sql, args)

    def _nothing_to_write(self, sql: str, args: tuple[object, ...]) -> bool:
        """`sql` (what a write would change) finds no row, read outside a write transaction:
        the write may be skipped, as if it ran at this read (issue 27: a success after a
        success took write turns for transactions that changed nothing). Never for a run
        holding a lease (issue 11: its writes check the lease is still its own, and say so)."""
        return self.fence is None and self.connect().execute(sql, args).fetchone() is None


def dict_rows(db: Any, sql: str, args: tuple[object, ...] | list[object] = ()
              ) -> list[dict[str, object]]:
    """Whole rows as {column: value} (SELECT * callers that show every column)."""
    cur = db.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def marks(n: int) -> str:
    """`?, ?, ?` for an IN list of n values."""
    return ",".join("?" * n)
