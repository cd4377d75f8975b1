"""The `leases` table (issue 11): per-task (and per-resource-unit) leases across hosts, each a
holder, a fence that grows by one at every acquisition and an expiry by the database's own
clock. hosts/lease.py decides when to take, renew and release them; the statements live here.
A lease is taken and checked inside one write transaction (the advisory write lock on
PostgreSQL), so two hosts cannot both take one.

Issue 23: the expiry written is `lease_seconds` plus a safety margin (lease_span): the holder
stops its task by itself once its last successful renewal is older than the lease minus that
margin (hosts/lease.py), so another host may only take the lease a margin after that."""

from __future__ import annotations

from ..core.records import NamedTuple  # typing's, without its per-field check
from .db import FencedOff, Tables
from .runs import running_on

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Any


class LeaseRow(NamedTuple):
    holder: str | None
    host: str | None
    run_id: int | None
    fence: int


class Granted(NamedTuple):
    """The lease is the caller's now, with `fence`; `taken`: the running rows of an expired
    holder on another host, for the caller to close."""

    fence: int
    taken: list[int]
    last_renewed: float | None = None  # the expired holder's last renewal (database clock)
    old_host: str | None = None  # that holder's host


class Busy(NamedTuple):
    """Another host's holder is within its lease (database clock): nothing was written."""

    host: str
    since: float
    until: float


MARGIN_SHARE = 0.1  # of lease_seconds: the safety margin on each side of the nominal lease


def margin(seconds: float) -> float:
    """Pure: the safety margin of a lease of `seconds` (issue 23)."""
    return seconds * MARGIN_SHARE


def lease_span(seconds: float) -> float:
    """Pure: how long after a renewal another host may take the lease: the lease plus the
    margin (the holder fenced itself by the lease minus the margin)."""
    return seconds + margin(seconds)


def db_now(dialect: str) -> str:
    """The database's own clock as Unix seconds, in SQL."""
    if dialect == "postgresql":
        return "extract(epoch FROM clock_timestamp())::float8"
    return "((julianday('now') - 2440587.5) * 86400.0)"


def check_fence(db: Any, task_id: str, fence: int) -> None:
    """Inside a write transaction: FencedOff unless the task's lease still has `fence`."""
    row = db.execute("SELECT fence, host FROM leases WHERE task_id = ?", (task_id,)).fetchone()
    if row is None or int(row[0]) != fence:
        by = f"host {row[1]} (fence {row[0]})" if row else "nobody"
        raise FencedOff(f"the lease of {task_id} was taken over by {by} after it expired; this"
                        f" holder's write (fence {fence}) was refused: nothing changed")


class LeasesTable(Tables):
    dialect: str

    def take_lease(self, task_id: str, run_id: int | None, holder: str,
                   seconds: float) -> Granted | Busy:
        """Take the lease for `run_id` in one write transaction, unless another host's holder
        is within its lease. A lease this host held before is taken at once (the caller holds
        the task's flock)."""
        now_sql, span = db_now(self.dialect), lease_span(seconds)
        renewed: float | None = None
        old: str | None = None
        with self.write() as db:
            (now,) = db.execute(f"SELECT {now_sql}").fetchone()
            row = db.execute("SELECT holder, host, fence, expires_at, coalesce((SELECT"
                             " started_at FROM runs WHERE runs.id = leases.run_id),"
                             " acquired_at) FROM leases WHERE task_id = ?",
                             (task_id,)).fetchone()
            taken: list[int] = []
            if row is None:
                fence = 1
                db.execute("INSERT INTO leases(task_id, holder, host, run_id, fence,"
                           " acquired_at, expires_at) VALUES (?, ?, ?, ?, 1, ?, ?)",
                           (task_id, holder, self.host, run_id, now, now + span))
            else:
                old_holder, old_host, old_fence, expires_at, since = row
                if old_holder is not None and old_host != self.host and float(expires_at) > now:
                    return Busy(old_host, float(since), float(expires_at))
                if old_holder is not None and old_host != self.host:
                    taken = running_on(db, task_id, old_host)
                    renewed, old = float(expires_at) - span, old_host
                fence = int(old_fence) + 1
                db.execute("UPDATE leases SET holder = ?, host = ?, run_id = ?, fence = ?,"
                           " acquired_at = ?, expires_at = ? WHERE task_id = ?",
                           (holder, self.host, run_id, fence, now, now + span, task_id))
        return Granted(fence, taken, renewed, old)

    def release_lease(self, task_id: str, fence: int) -> None:
        """The run ended: the lease is free (its fence stays, so an older holder stays
        fenced)."""
        with self.write() as db:
            db.execute("UPDATE leases SET holder = NULL, expires_at = NULL"
                       " WHERE task_id = ? AND fence = ?", (task_id, fence))

    def renew_lease(self, task_id: str, fence: int, holder: str, seconds: float) -> bool:
        """One renewal (a lone autocommit statement); False: the lease is no longer this
        holder's. An expired lease is not revived: another host may be taking it."""
        now = db_now(self.dialect)
        cur = self.connect().execute(
            f"UPDATE leases SET expires_at = {now} + ? WHERE task_id = ?"
            f" AND fence = ? AND holder = ? AND expires_at > {now}",
            (lease_span(seconds), task_id, fence, holder))
        return cur.rowcount == 1

    def extend_lease(self, task_id: str, seconds: float) -> bool:
        """Extend this host's held, unexpired lease of the task (an orphaned run within its
        deadline); an expired lease is not revived."""
        now_sql = db_now(self.dialect)
        with self.write() as db:
            cur = db.execute(f"UPDATE leases SET expires_at = {now_sql} + ? WHERE task_id = ?"
                             f" AND host = ? AND holder IS NOT NULL AND expires_at > {now_sql}",
                             (lease_span(seconds), task_id, self.host))
            return cur.rowcount == 1

    def lease(self, task_id: str) -> LeaseRow | None:
        row = self.connect().execute("SELECT holder, host, run_id, fence FROM leases"
                                     " WHERE task_id = ?", (task_id,)).fetchone()
        return LeaseRow._make(row) if row else None

    def lease_busy(self, task_id: str) -> Busy | None:
        """Another host's holder within its lease (database clock), or None: the chains ask
        before claiming a downstream (an expired holder is taken over by the claim's run)."""
        now_sql = db_now(self.dialect)
        row = self.connect().execute(
            f"SELECT host, coalesce((SELECT started_at FROM runs WHERE runs.id = leases.run_id),"
            f" acquired_at), expires_at FROM leases WHERE task_id = ? AND holder IS NOT NULL"
            f" AND host != ? AND expires_at > {now_sql}", (task_id, self.host or "")).fetchone()
        return Busy(row[0], float(row[1]), float(row[2])) if row else None
