"""The state database's lines of `doctor`: the SQLite file (there, writable, whole, at a schema
this mdcron knows), a PostgreSQL state (reachable, its hosts' task files alike), and the last
tick. `Check` is one line of doctor. Reads only.

Lazy imports: the PostgreSQL probe, the hosts' files and the cache loader only for a
PostgreSQL state.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from ..alerts.heartbeat import STALE_TICK
from ..core.records import dataclass
from ..core.units import format_duration
from ..settings.config import Config
from ..state.meta import read_meta, schema_and_integrity
from ..state.trouble import immutable


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return {"check": self.name, "status": self.status, "detail": self.detail,
                "fix": self.fix}


def state_check(config: Config) -> Check:
    """A PostgreSQL state (issue 11): reachable, and at a schema this mdcron knows."""
    from ..settings.state_url import mask
    from ..state.pgstate import probe
    from ..state.store import SCHEMA_VERSION

    shown = mask(config.state_url or "")
    version, error = probe(config.state_url or "")
    if error is not None:
        return Check("database", "fail", f"state_url {shown} cannot be reached: {error}; every"
                     " tick stops", "start PostgreSQL or fix state_url in scheduler.yaml (or"
                     " $MDCRON_STATE_URL): host, port, database, user and password")
    if version and version > SCHEMA_VERSION:
        return Check("database", "fail", f"state_url {shown}: schema {version} is newer than"
                     f" this mdcron's ({SCHEMA_VERSION})", "upgrade mdcron on this host")
    what = f"schema {version}" if version else "empty (the next tick creates the tables)"
    if version:
        from ..hosts.files import describe, differing, orphaned
        from ..schedule.cache import load_task_set
        from ..state.store import state_store

        try:
            with state_store(config) as store:
                odd = [describe(t, h) for t, h in differing(store).items()]
                odd += orphaned(store, load_task_set(config).tasks)
        except Exception:
            odd = []
        if odd:
            return Check("database", "warn", f"PostgreSQL state {shown}: " + "; ".join(odd),
                         "sync tasks/ on every host; start the tick on the hosts named")
    return Check("database", "ok", f"PostgreSQL state {shown} (host {config.host_name}): {what}")


# Passed integrity checks by file: (path, inode) -> (checked at, schema version). The check
# reads the whole file (0.3 s at 100,000 runs): the dashboard reuses a recent pass.
_PASSED: dict[tuple[str, int], tuple[float, int]] = {}


def database_check(home: Path, integrity_age: float = 0.0) -> Check:
    path = home / "state" / "mdcron.db"
    recover = (f"stop cron, then `mv {path} {path}.broken` (the next tick starts a new one;"
               f" history is lost) or salvage it: `sqlite3 {path}.broken .recover | sqlite3"
               f" {path}`")
    if not path.exists():
        return Check("database", "warn", f"{path} does not exist yet",
                     "the next tick creates it (tasks count as first seen then: nothing past"
                     " runs)")
    if immutable(path) or immutable(path.parent):
        return Check("database", "fail", f"{path} (or its folder) is marked immutable: every"
                     " tick stops", f"chattr -i {path.parent} {path}*")
    if not os.access(path, os.R_OK | os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
        return Check("database", "fail", f"{path} (or its folder) is not writable: every tick"
                     " stops", f"chmod u+rw {path}* and u+rwx {path.parent}")
    key = (str(path), path.stat().st_ino)
    passed = _PASSED.get(key)
    when = ""
    if integrity_age > 0 and passed is not None and time.time() - passed[0] < integrity_age:
        version = passed[1]
        when = f" (checked {format_duration(time.time() - passed[0])} ago)"
    else:
        try:
            db = read_only(path)
            try:
                version, result = schema_and_integrity(db)
            finally:
                db.close()
        except sqlite3.Error as exc:
            return Check("database", "fail", f"{path} cannot be read: {exc}", recover)
        if result != ["ok"]:
            _PASSED.pop(key, None)
            return Check("database", "fail", f"{path} is damaged: {'; '.join(result)}",
                         recover)
        _PASSED[key] = (time.time(), version)
    from ..state.store import SCHEMA_VERSION

    if version > SCHEMA_VERSION:
        return Check("database", "fail", f"schema {version} is newer than this mdcron's"
                     f" ({SCHEMA_VERSION})", "upgrade mdcron (git pull)")
    return Check("database", "ok", f"{path}: integrity ok{when}, schema {version}")


def read_only(path: Path) -> sqlite3.Connection:
    quoted = str(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return sqlite3.connect(f"file:{quoted}?mode=ro", uri=True, timeout=10)


def last_tick(home: Path, now: float) -> Check:
    path = home / "state" / "mdcron.db"
    try:
        db = read_only(path)
        try:
            row = read_meta(db, "last_tick")
        finally:
            db.close()
    except sqlite3.Error:
        if path.exists():
            return Check("last tick", "warn", "unknown: the database cannot be read",
                         "see the database check")
        row = None
    if row is None:
        return Check("last tick", "warn", "no tick recorded yet",
                     "run `scheduler.py tick` once, and add the crontab line")
    from ..core.units import format_duration

    age = now - float(row)
    if age > STALE_TICK:
        return Check("last tick", "warn", f"the last tick ran {format_duration(age)} ago",
                     "is cron running, and is the crontab line still there?")
    return Check("last tick", "ok", f"{format_duration(max(0.0, age))} ago")

