"""The `hosts` table (when each host last ticked, by the database's clock) and `task_files`
(each host's copy of each task file, by SHA-256), issue 11; also the database's clock itself.
Only a PostgreSQL state has several hosts, so these statements are written in PostgreSQL's
spelling (clock_timestamp()). Neither table has a trigger: writing them never sends another
host's idle tick down the full path. hosts/files.py decides what to record and say."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.records import NamedTuple  # typing's, without its per-field check
from .db import Tables
from .meta import drop_naming

ALERTED = "orphaned:"  # meta key prefix: task id -> its hosts (comma-joined) when alerted
DEAD_AFTER = 300.0  # seconds without a tick before a host counts as gone


def orphaned_state(here: str, ages: dict[str, float], elsewhere: dict[str, list[str]],
                   alerted: dict[str, str]) -> bool:
    """Pure: the alert rows agree with the hosts' liveness (seconds since each host's last
    tick) for each due task that runs elsewhere, and none names this host, so neither
    hosts/files.alert_orphaned nor seen would write anything (the idle tick asks: pgidle.py)."""
    if any(here in hosts.split(",") for hosts in alerted.values()):
        return False
    for task_id, hosts in elsewhere.items():
        dead = all(ages.get(h, float("inf")) > DEAD_AFTER for h in hosts)
        if alerted.get(task_id) != (",".join(hosts) if dead else None):
            return False
    return True


class FileCopy(NamedTuple):
    task_id: str
    host: str
    sha256: str


class HostTick(NamedTuple):
    """A host's last tick (Unix seconds) and how long ago it was, by the database's clock."""

    name: str
    seen_at: float
    age: float


class HostsTable(Tables):
    def host_files(self) -> dict[str, str]:
        """This host's recorded copies: task id -> SHA-256."""
        return {r[0]: r[1] for r in self.connect().execute(
            "SELECT task_id, sha256 FROM task_files WHERE host = ?", (self.host,)).fetchall()}

    def record_host_files(self, changed: Sequence[tuple[str, str]], gone: Sequence[str],
                          now: float) -> None:
        """One transaction: this host's `changed` copies (task id, SHA-256) seen at `now`, and
        the task ids it no longer has."""
        with self.write() as db:
            db.executemany("INSERT INTO task_files(task_id, host, sha256, seen_at)"
                           " VALUES (?, ?, ?, ?) ON CONFLICT(task_id, host) DO UPDATE SET"
                           " sha256 = excluded.sha256, seen_at = excluded.seen_at",
                           [(t, self.host, sha, now) for t, sha in changed])
            db.executemany("DELETE FROM task_files WHERE task_id = ? AND host = ?",
                           [(t, self.host) for t in gone])

    def file_copies(self) -> list[FileCopy]:
        """Every host's copy of every task file, by task id then host."""
        return [FileCopy._make(r) for r in self.connect().execute(
            "SELECT task_id, host, sha256 FROM task_files ORDER BY task_id, host").fetchall()]

    def file_counts(self) -> dict[str, int]:
        """host -> how many task files it recorded."""
        return {h: int(n) for h, n in self.connect().execute(
            "SELECT host, count(*) FROM task_files GROUP BY host").fetchall()}

    def host_seen(self) -> None:
        """This host ticked now (the database's clock), in one transaction with dropping the
        "runs nowhere" alerts (meta ALERTED<id>) that name it: such a task runs somewhere
        again."""
        with self.write() as db:
            db.execute("INSERT INTO hosts(name, seen_at) VALUES (?,"
                       " extract(epoch FROM clock_timestamp())) ON CONFLICT(name) DO UPDATE SET"
                       " seen_at = excluded.seen_at", (self.host,))
            drop_naming(db, ALERTED, self.host)

    def host_ticks(self) -> list[HostTick]:
        """Every host's last tick and its age, by the database's clock."""
        return [HostTick(name, float(at), float(age)) for name, at, age in self.connect().execute(
            "SELECT name, seen_at, extract(epoch FROM clock_timestamp()) - seen_at"
            " FROM hosts").fetchall()]

    def db_clock(self) -> float:
        """The database's clock now, as Unix seconds (one query)."""
        (now,) = self.connect().execute(
            "SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        return float(now)
