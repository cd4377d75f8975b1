"""The `meta` table: small facts about the ticks (last_tick, the parse cache's key, a lost
database's evidence), key -> text. The functions take a connection, so a read-only one
(doctor) or one inside a transaction (the cache, dbguard) can use them too."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .db import Tables, marks

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Any

_PUT = ("INSERT INTO meta(key, value) VALUES (?, ?)"
        " ON CONFLICT(key) DO UPDATE SET value = excluded.value")


def read_meta(db: Any, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def read_metas(db: Any, keys: Iterable[str]) -> dict[str, str]:
    keys = list(keys)
    return dict(db.execute(f"SELECT key, value FROM meta WHERE key IN ({marks(len(keys))})", keys))


def read_prefixed(db: Any, prefix: str) -> dict[str, str]:
    """Every key starting with `prefix` (doctor reads them through a read-only connection)."""
    return dict(db.execute("SELECT key, value FROM meta WHERE key LIKE ?", (prefix + "%",)))


def put_metas(db: Any, values: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
    db.executemany(_PUT, values.items() if isinstance(values, Mapping) else values)


def record_tick(store: Any, metrics_file: str | None, now: float, duration: float) -> None:
    """Issue 26, the full tick's part: its lag and duration in meta (the web's /metrics reads
    them), and with `metrics_file` the textfile (metrics.write_textfile), whose path the idle
    ticks find in meta cache_metrics (idle.py rewrites it with their own figures). OSError
    when the file cannot be written. `store`: a store.Store."""
    values = {"tick_figures": f"{now % 60.0!r} {duration!r} {now!r}"}
    if metrics_file is not None:
        from .metrics import write_textfile  # lazy: the figures only for a metrics_file

        write_textfile(store, metrics_file, now, duration)
    if (read_meta(store.connect(), "cache_metrics") or "") != (metrics_file or ""):
        values["cache_metrics"] = metrics_file or ""
    with store.write() as db:
        put_metas(db, values)


def take_meta(db: Any, key: str) -> bool:
    """Delete a key; True for the one caller that removed it (check-and-set)."""
    return db.execute("DELETE FROM meta WHERE key = ?", (key,)).rowcount == 1


def drop_naming(db: Any, prefix: str, name: str | None) -> None:
    """Delete the `prefix` keys whose comma-joined value names `name`."""
    db.execute("DELETE FROM meta WHERE key LIKE ? AND ',' || value || ',' LIKE ?",
               (prefix + "%", f"%,{name},%"))


def schema_and_integrity(db: Any) -> tuple[int, list[str]]:
    """A SQLite file's schema version and its integrity check's first lines (doctor)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    return version, [r[0] for r in db.execute("PRAGMA integrity_check(5)")]


class MetaTable(Tables):
    def get_meta(self, key: str) -> str | None:
        return read_meta(self.connect(), key)

    def set_meta(self, key: str, value: str) -> None:
        with self.write() as db:
            put_metas(db, {key: value})

    def take_meta(self, key: str) -> bool:
        with self.write() as db:
            return take_meta(db, key)

    def metas_with_prefix(self, prefix: str) -> dict[str, str]:
        return read_prefixed(self.connect(), prefix)

    def change_meta(self, key: str, value: str) -> bool:
        """Set a key unless it already holds `value`: True for the one caller that changed it
        (check-and-set)."""
        with self.write() as db:
            return db.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO"
                              " UPDATE SET value = excluded.value WHERE meta.value !="
                              " excluded.value RETURNING key", (key, value)).fetchone() is not None
