"""The idle tick with a PostgreSQL state (issue 11): one query, and no psycopg.

The idle proof (state/idle.py) reads the local state/mdcron.db. With a PostgreSQL state that file
keeps, besides the parse cache, this host's copy of what the proof needs from the shared state:
task_state's rows and retention_at, written by `mirror` at the end of every full tick from one
consistent snapshot, together with the snapshot's `state_version`. PostgreSQL moves that
version in the same transaction as every statement that changes task_state, runs or outbox
(a trigger, schema.PG_SCHEMA). So when the version is still the one mirrored, the copy is
exact and the local proof holds for the shared state too; `unchanged` asks exactly that, plus
the database's clock for the skew rule, in one query.

That query goes through libpq itself (ctypes, the library psycopg[binary] ships): importing
psycopg costs ~300 ms, libpq ~15 ms. Anything unexpected (no library, no connection, another
URL, a version moved) answers False and the full tick runs, which says what is wrong.

Lazy imports: the idle tick with PostgreSQL, in milliseconds: ctypes and the library search load
only when libpq is first needed, `re` (via envref) only for a `${VAR}` in the URL, host-file
markers only when due tasks run elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import re
import time

_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # state_url.HOST_LIKE: safe in SQL text
_STATES = ("SELECT task_id, first_seen, not_before, last_slot, enabled, consecutive_failures,"
           " path FROM task_state")


def url_digest(url: str) -> str:
    """Which database the copy is of, without keeping the URL (it may hold a password)."""
    return hashlib.sha256(url.encode()).hexdigest()


def mirror(store, local, config) -> None:  # store: the PostgreSQL Store; local: the SQLite one
    """After a full tick: this host's copy of the shared state the idle proof reads."""
    db = store.connect()
    db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")  # one snapshot for all
    try:
        version = db.execute("SELECT value FROM meta WHERE key = 'state_version'").fetchone()
        busy = db.execute(
            "SELECT EXISTS(SELECT 1 FROM runs WHERE status = 'running'"
            " AND (host IS NULL OR host = ?))"
            " OR EXISTS(SELECT 1 FROM outbox WHERE status IN ('pending', 'held'))",
            (store.host,)).fetchone()[0]
        rows = [tuple(r) for r in db.execute(_STATES).fetchall()]
        retention = db.execute("SELECT value FROM meta WHERE key = 'retention_at'").fetchone()
    finally:
        db.execute("COMMIT")
    copied = "" if busy or version is None else str(version[0])  # '': never idle on this
    mine = dict(local.connect().execute(  # the shared path is the first host's: use ours
        "SELECT task_id, path FROM task_cache WHERE task_id IS NOT NULL").fetchall())
    rows = [r[:6] + (mine.get(r[0], r[6]),) for r in rows]
    with local.write() as ldb:
        ldb.execute("DELETE FROM task_state")
        ldb.executemany("INSERT INTO task_state(task_id, first_seen, not_before, last_slot,"
                        " enabled, consecutive_failures, path) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        ldb.execute("DELETE FROM meta WHERE key = 'retention_at'")
        values = [("pg_version", copied), ("pg_url", url_digest(store.url)),
                  ("pg_host", store.host or ""),
                  ("pg_max_skew", repr(config.max_clock_skew))]
        if retention is not None:
            values.append(("retention_at", str(retention[0])))
        ldb.executemany("INSERT INTO meta(key, value) VALUES (?, ?)"
                        " ON CONFLICT(key) DO UPDATE SET value = excluded.value", values)


def state_url(config_text: str) -> str | None:
    """The state URL as config.py would find it ($MDCRON_STATE_URL wins, ${VAR}s expanded),
    from a one-line `state_url:` (plain, '…' or "…" without escapes, a comment after it, CRLF
    line ends); None when it cannot be read this simply (the full tick reads it)."""
    url = os.environ.get("MDCRON_STATE_URL")
    if not url:  # fastpath.config_text marks the file's text with a leading '+'
        url = _one_line(config_text[1:] if config_text.startswith("+") else config_text)
        if url is None:
            return None
    try:
        from ..core.envref import ENV_REF

        return ENV_REF.sub(lambda m: os.environ[m.group(1)], url.strip())
    except KeyError:
        return None


def _one_line(text: str) -> str | None:
    """The value of the last top-level `state_url:` line (YAML keeps the last of a key given
    twice), if it is a one-line scalar without YAML escapes; else None."""
    lines = [line for line in text.splitlines() if line.startswith("state_url:")]
    if not lines:
        return None
    rest = lines[-1][len("state_url:"):].strip()
    if rest[:1] in ("'", '"'):
        quote = rest[0]
        end = rest.find(quote, 1)
        if quote == "'":
            while end != -1 and rest[end + 1:end + 2] == "'":  # '' is one '
                end = rest.find("'", end + 2)
        if end == -1:
            return None
        value, tail = rest[1:end], rest[end + 1:]
        if quote == '"' and "\\" in value:
            return None  # an escape: YAML's rules, not ours
        if tail and not (tail[0].isspace() and tail.lstrip().startswith("#")):
            return None
        return value.replace("''", "'") if quote == "'" else value
    for mark in (" #", "\t#"):
        if mark in rest:
            rest = rest[:rest.index(mark)].rstrip()
    if not rest or rest[0] in "|>&*!{[@`%#":
        return None  # a block scalar, an alias, a tag, a flow collection: the full tick
    return rest


def unchanged(db, config_text: str, home: str,
              elsewhere: dict[str, list[str]] | None = None) -> bool:
    """`db`: the local state (sqlite3). True when the shared state is still the mirrored one
    and the database's clock agrees with this machine's within max_clock_skew (and no result
    waits in the spool, spool.py). `elsewhere`: due tasks whose `hosts:` leave this host out
    (id -> hosts); idle only while their "runs nowhere" alerts agree with their hosts'
    liveness (hostfiles.alert_orphaned would write nothing): asked in the same query."""
    if os.path.exists(os.path.join(home, "state", "spool.jsonl")):
        return False
    meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN"
                           " ('pg_version', 'pg_url', 'pg_max_skew', 'pg_host')").fetchall())
    url = state_url(config_text)
    host = meta.get("pg_host") or ""
    if (not meta.get("pg_version") or url is None or meta.get("pg_url") != url_digest(url)
            or not _HOST.fullmatch(host)):
        return False
    # the same round trip says this host is alive (hostfiles.orphaned); hosts has no trigger
    # (no fsync wait for it: a lost liveness mark costs nothing; still one round trip)
    answer = _ask(url, "SET synchronous_commit TO off;"
                       " WITH seen AS (UPDATE hosts SET seen_at = extract(epoch FROM"
                       f" clock_timestamp()) WHERE name = '{host}' RETURNING 1)"
                       " SELECT (SELECT value FROM meta WHERE key = 'state_version'),"
                       " extract(epoch FROM clock_timestamp())::float8"
                       + _ALERTS + (_AGES if elsewhere else ""))
    if answer is None:
        return False
    (version, theirs, alerts, *ages), midpoint = answer
    if (alerts or elsewhere) and not _agrees(host, alerts, ages, elsewhere or {}):
        return False
    try:
        if abs(midpoint - float(theirs)) > float(meta["pg_max_skew"]):
            return False  # the full tick refuses and alerts (hostlease.check_clock)
    except (TypeError, ValueError, KeyError):
        return False
    return version == meta["pg_version"]


# alert rows and hosts' ages as text: host names are HOST_LIKE, task ids ID_LIKE (no ' ', ',',
# '='); the ages only when a due task runs elsewhere
_ALERTS = (", (SELECT string_agg(key || '=' || value, ' ') FROM meta"
           " WHERE key LIKE 'orphaned:%')")
_AGES = (", (SELECT string_agg(name || ' ' || (extract(epoch FROM clock_timestamp()) - seen_at)"
         "::text, ',') FROM hosts)")


def _agrees(here: str, alerts: str | None, ages: list[str | None],
            elsewhere: dict[str, list[str]]) -> bool:
    """The "runs nowhere" alert rows are as the full tick would leave them (hostfiles)."""
    from .hosts import ALERTED, orphaned_state  # lazy: a due task that runs elsewhere only

    try:
        seen = {n: float(a) for n, _, a in (h.partition(" ") for h in (ages[0] or "").split(",")
                                            if h)} if ages else {}
        alerted = {k.removeprefix(ALERTED): v for k, _, v in (
            a.partition("=") for a in (alerts or "").split(" ") if a)}
    except ValueError:
        return False
    return orphaned_state(here, seen, elsewhere, alerted)


def _ask(url: str, sql: str) -> tuple[tuple[str | None, ...], float] | None:
    """One row of text values through libpq, and the midpoint of this machine's clock around
    the query; None on any failure."""
    lib = _libpq()
    if lib is None:
        return None
    import ctypes

    from .pgbounds import KEEPALIVES  # lazy: with the ctypes above, PostgreSQL's idle path only

    # no `options` here: it would replace the URL's own (a --schema search_path); this
    # one-row read takes no lock
    params = {"dbname": url, "connect_timeout": "10", "application_name": "mdcron idle",
              **{k: str(v) for k, v in KEEPALIVES.items()}}
    keys = (ctypes.c_char_p * (len(params) + 1))(*(k.encode() for k in params), None)
    vals = (ctypes.c_char_p * (len(params) + 1))(*(v.encode() for v in params.values()), None)
    conn = lib.PQconnectdbParams(keys, vals, 1)
    try:
        if not conn or lib.PQstatus(conn) != 0:  # CONNECTION_OK
            return None
        before = time.time()
        res = lib.PQexec(conn, sql.encode())
        after = time.time()
        try:
            if lib.PQresultStatus(res) != 2 or lib.PQntuples(res) != 1:  # PGRES_TUPLES_OK
                return None
            row = tuple(None if lib.PQgetisnull(res, 0, i) else
                        lib.PQgetvalue(res, 0, i).decode() for i in range(lib.PQnfields(res)))
        finally:
            lib.PQclear(res)
        return row, (before + after) / 2
    finally:
        if conn:
            lib.PQfinish(conn)


_LIB: list = []


def _libpq():
    """libpq as psycopg[binary] ships it (found without importing psycopg), else the
    system's; None when there is none."""
    if _LIB:
        return _LIB[0]
    import ctypes
    import ctypes.util
    import glob
    import importlib.util

    path = None
    try:
        spec = importlib.util.find_spec("psycopg_binary")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        found = glob.glob(os.path.join(os.path.dirname(os.path.dirname(spec.origin)),
                                       "psycopg_binary.libs", "libpq-*.so*"))
        path = found[0] if found else None
    path = path or ctypes.util.find_library("pq")
    lib = None
    if path:
        try:
            lib = ctypes.CDLL(path)
            p, i, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
            for name, res, args in (
                    ("PQconnectdbParams", p, [ctypes.POINTER(s), ctypes.POINTER(s), i]),
                    ("PQstatus", i, [p]), ("PQexec", p, [p, s]), ("PQresultStatus", i, [p]),
                    ("PQntuples", i, [p]), ("PQnfields", i, [p]), ("PQgetisnull", i, [p, i, i]),
                    ("PQgetvalue", s, [p, i, i]), ("PQclear", None, [p]), ("PQfinish", None, [p])):
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
        except (OSError, AttributeError):
            lib = None
    _LIB.append(lib)
    return lib
