"""PostgreSQL as the state database (issue 11): a connection that speaks store.py's SQL.

The state's SQL is written once, in SQLite's spelling (`?` placeholders, INSERT OR IGNORE,
scalar max/min). `translate` rewrites a statement for PostgreSQL once per process (cached), and
`PgConnection` offers the slice of sqlite3.Connection the modules use: execute, executemany,
cursors with fetchone/fetchall/iteration, rowcount, lastrowid and description.

Transactions: the connection is in autocommit mode, so a lone statement commits by itself, as
with SQLite's `isolation_level=None`. `BEGIN IMMEDIATE` becomes BEGIN plus a transaction-level
advisory lock: writers take turns exactly as SQLite's single writer makes them, so every
read-then-write inside Store.write() keeps the meaning it has on SQLite. The lock is held only
for one short write (never while a task runs) and ends with the transaction, so it also works
behind PgBouncer in transaction mode. Exactly-once per (task, slot) does not rest on it: the
partial unique index runs_one_per_slot decides (INSERT ... ON CONFLICT DO NOTHING).

psycopg is imported here only, and this module only when state_url is a postgresql:// URL.

Lazy imports: psycopg (~300 ms) is imported by the functions that connect, so translating SQL,
and a home on SQLite, never load it.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache

from ..settings.state_url import mask
from .pgbounds import KEEPALIVES, SESSION_BOUNDS
from .schema import PG_MIGRATIONS, PG_SCHEMA, PG_SCHEMA_VERSION, SCHEMA_VERSION

WRITE_LOCK = 0x6D6463726F6E  # 'mdcron': the advisory lock every write transaction takes
SCHEMA_LOCK = WRITE_LOCK + 1
CONNECT_TIMEOUT = 10  # seconds; a tick that cannot reach the database says so, it does not hang
# A server at max_connections is waited for this long (issue 23: hosts that spread a minute's
# runs each hold a connection per running task, so a burst can fill it for a moment).
FULL_WAIT = 30.0
ID_TABLES = frozenset({"runs", "outbox", "incidents", "heals", "comments", "audit"})  # id identity
_INSERT = re.compile(r"^\s*INSERT\s+(OR\s+(IGNORE|REPLACE)\s+)?INTO\s+(\w+)\s*\(([^)]*)\)",
                     re.IGNORECASE | re.DOTALL)
_SCALAR = re.compile(r"\b(max|min)\(", re.IGNORECASE)


class PgError(Exception):
    """Raised for a connection that cannot be made; the message masks the password."""


@lru_cache(maxsize=512)
def translate(sql: str, returning_id: bool = True) -> str:
    """SQLite's spelling -> PostgreSQL's: `?` -> %s (and a literal % doubled), INSERT OR IGNORE
    -> ON CONFLICT DO NOTHING, INSERT OR REPLACE -> ON CONFLICT (first column) DO UPDATE, scalar
    max(a, b) / min(a, b) -> GREATEST / LEAST, BEGIN IMMEDIATE -> BEGIN; an INSERT into a table
    with an id gets RETURNING id (for lastrowid) unless it returns something already."""
    if re.fullmatch(r"\s*BEGIN(\s+IMMEDIATE)?\s*", sql, re.IGNORECASE):
        return "BEGIN"
    out = _placeholders(_scalars(sql))
    m = _INSERT.match(out)
    if m is None:
        return out
    mode, table, columns = (m.group(2) or "").upper(), m.group(3), m.group(4)
    head = out[:m.start(1)] + out[m.end(1):] if m.group(1) else out
    tail = ""
    ret = re.search(r"\sRETURNING\s", head, re.IGNORECASE)
    if ret:
        head, tail = head[:ret.start()], head[ret.start():]
    elif returning_id and table.lower() in ID_TABLES and mode != "REPLACE":
        tail = " RETURNING id"
    if mode == "IGNORE":
        head += " ON CONFLICT DO NOTHING"
    elif mode == "REPLACE":  # the first column is the key in every table written this way
        names = [c.strip() for c in columns.split(",")]
        sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in names[1:])
        head += f" ON CONFLICT ({names[0]}) DO UPDATE SET {sets}"
    return head + tail


def _placeholders(sql: str) -> str:
    out, quoted = [], False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
        if ch == "%":
            out.append("%%")
        elif ch == "?" and not quoted:
            out.append("%s")
        else:
            out.append(ch)
    return "".join(out)


def _scalars(sql: str) -> str:
    """max(a, b) with two or more arguments is SQLite's scalar max: GREATEST in PostgreSQL."""
    pos = 0
    while (m := _SCALAR.search(sql, pos)) is not None:
        depth, commas, i = 1, 0, m.end()
        while i < len(sql) and depth:
            depth += {"(": 1, ")": -1}.get(sql[i], 0)
            commas += sql[i] == "," and depth == 1
            i += 1
        if commas:
            name = "GREATEST" if m.group(1).lower() == "max" else "LEAST"
            sql = sql[:m.start()] + name + sql[m.end() - 1:]
        pos = m.start() + 1
    return sql


def _args(args: object) -> object:
    """Booleans as 0/1, as sqlite3 stores them (the columns are integers)."""
    if isinstance(args, dict):
        return {k: int(v) if isinstance(v, bool) else v for k, v in args.items()}
    return tuple(int(v) if isinstance(v, bool) else v for v in args)  # type: ignore[union-attr]


class PgCursor:
    def __init__(self, cur, lastrowid: int | None = None):
        self._cur = cur
        self.lastrowid = lastrowid
        self.rowcount = cur.rowcount

    @property
    def description(self):
        return self._cur.description

    def fetchone(self):
        return self._cur.fetchone() if self._cur.description else None

    def fetchall(self) -> list:
        return self._cur.fetchall() if self._cur.description else []

    def __iter__(self) -> Iterator:
        return iter(self.fetchall())


class PgConnection:
    """The part of sqlite3.Connection that the state modules use."""

    dialect = "postgresql"

    def __init__(self, conn, url: str = ""):
        self._conn = conn
        self._url = url
        self._in_tx = False  # inside a BEGIN of ours: a lost connection lost the transaction

    def execute(self, sql: str, args: Sequence[object] | dict = ()) -> PgCursor:
        text = translate(sql)
        cur = self._run(lambda: self._conn.execute(text, _args(args) if args else None), text)
        if text == "BEGIN":
            self._in_tx = True
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        elif text in ("COMMIT", "ROLLBACK"):
            self._in_tx = False
        lastrowid = None
        if text.endswith(" RETURNING id") and not sql.rstrip().upper().endswith(" RETURNING ID"):
            row = cur.fetchone()  # the id is for lastrowid; the caller expects no rows
            lastrowid = row[0] if row else None
            return PgCursor(_Done(cur.rowcount), lastrowid)
        return PgCursor(cur, lastrowid)

    def _run(self, call, text: str):
        """A connection lost between statements (the server restarted, a proxy dropped it
        while a task ran) is made again once, unless a transaction of ours was open on it:
        then the error stands (the transaction is gone; Store.write reports it)."""
        import psycopg

        try:
            return call()
        except psycopg.OperationalError:
            lost = self._conn.closed or self._conn.broken
            if not lost or not self._url or (self._in_tx and text != "BEGIN"):
                if text == "ROLLBACK" and lost:
                    self._in_tx = False
                    return _Done(0)  # nothing left to roll back
                raise
        self._conn = _connect(self._url)
        self._in_tx = False
        return call()

    def executemany(self, sql: str, seq: Iterable[Sequence[object]]) -> PgCursor:
        rows = [_args(a) for a in seq]
        with self._conn.cursor() as cur:
            if rows:
                cur.executemany(translate(sql, returning_id=False), rows)
            return PgCursor(_Done(cur.rowcount if rows else 0))

    def close(self) -> None:
        self._conn.close()


class _Done:
    """A finished cursor whose rows were consumed."""

    description = None

    def __init__(self, rowcount: int):
        self.rowcount = rowcount


def connect(url: str, migrate: bool = True) -> PgConnection:
    """Connect and bring the schema to SCHEMA_VERSION (unless told not to: `state copy` looks
    at the target before it creates anything). PgError (password masked) on failure."""
    try:
        import psycopg
    except ImportError as exc:
        raise PgError("state_url is PostgreSQL but the driver is not installed: run"
                      " `pip install -r requirements.txt` (psycopg[binary])") from exc
    try:
        conn = _connect_when_free(url)
    except psycopg.Error as exc:
        raise PgError(f"cannot connect to {mask(url)}: {_first_line(exc, url)}") from None
    try:
        if migrate:
            _migrate(conn)
    except psycopg.Error as exc:
        conn.close()
        raise PgError(f"the state database {mask(url)} cannot be used:"
                      f" {_first_line(exc, url)}") from None
    return PgConnection(conn, url)


def _connect_when_free(url: str):
    """_connect, waiting (up to FULL_WAIT, with jittered backoff) while the server refuses
    with "too many clients"; any other failure is raised at once."""
    import psycopg

    deadline, pause = time.monotonic() + FULL_WAIT, 0.05
    while True:
        try:
            return _connect(url)
        except psycopg.OperationalError as exc:
            if not _server_full(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause * random.uniform(0.5, 1.5))  # waiting on connections, not the clock
        pause = min(pause * 2, 1.0)


def _server_full(exc: Exception) -> bool:
    text = str(exc)
    return (getattr(exc, "sqlstate", None) == "53300" or "too many clients" in text
            or "too many connections" in text or "remaining connection slots" in text)


def _connect(url: str, application: str = "mdcron"):
    import psycopg
    from psycopg.conninfo import conninfo_to_dict  # lazy: psycopg's, as above

    own = conninfo_to_dict(url).get("options")  # e.g. `state copy --schema`'s search_path
    options = f"{own} {SESSION_BOUNDS}" if own else SESSION_BOUNDS
    return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                           application_name=application, options=options, **KEEPALIVES)


def probe(url: str) -> tuple[int | None, str | None]:
    """For doctor, reading only: (schema version, None) or (None, what is wrong, masked).
    Version 0: reachable, no schema yet (the first tick creates it)."""
    try:
        import psycopg
    except ImportError:
        return None, "the driver is not installed (pip install -r requirements.txt)"
    try:
        with _connect(url, "mdcron doctor") as conn:
            if not _has_meta(conn):
                return 0, None
            return _version(conn), None
    except psycopg.Error as exc:
        return None, _first_line(exc, url)


def _first_line(exc: BaseException, url: str) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return mask(text.replace(url, mask(url)))


def _migrate(conn) -> None:
    """One schema version for both back ends (meta 'schema_version' here, user_version in
    SQLite). A new database gets PG_SCHEMA (version 5) in one step, then every later step of
    schema.PG_MIGRATIONS, as an older database does."""
    if _has_meta(conn):
        version = _version(conn)
        if version == SCHEMA_VERSION:
            return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        version = _version(conn) if _has_meta(conn) else 0
        if version > SCHEMA_VERSION:
            raise _newer(version)
        if version < SCHEMA_VERSION:
            if version == 0:
                conn.execute(PG_SCHEMA)
                conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', %s)",
                             (str(PG_SCHEMA_VERSION),))
                version = PG_SCHEMA_VERSION
            for step in range(version, SCHEMA_VERSION):
                conn.execute(PG_MIGRATIONS[step])
            conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'",
                         (str(SCHEMA_VERSION),))


def _has_meta(conn) -> bool:
    """Read from pg_tables, not to_regclass: a backend's cache may still remember 'no such
    table' from before it waited for another host's schema creation (found by bench/hosts.py)."""
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname ="
                        " current_schema() AND tablename = 'meta')").fetchone()[0]


def _version(conn) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _newer(version: int) -> Exception:
    import psycopg

    return psycopg.DataError(f"schema version {version} is newer than this mdcron"
                             f" ({SCHEMA_VERSION}): upgrade mdcron on this host")
