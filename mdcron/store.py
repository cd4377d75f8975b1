"""The state: runs (one row per attempt), per-task state, and small facts about ticks.

SQLite in state/mdcron.db by default; PostgreSQL when state_url says so (issue 11: several
hosts share one database). The SQL is written once in SQLite's spelling; pgstate.py translates
it. `connect()` returns a sqlite3.Connection or a pgstate.PgConnection, which behave alike for
what the modules do with them (execute, executemany, rowcount, lastrowid, description).

Times are stored as Unix seconds (REAL); conversion to aware datetimes happens at the edges.
Connections are short-lived and autocommit; every write is one `BEGIN IMMEDIATE` transaction, so
no write transaction is ever held while a task runs. Exactly-once per (task, slot) rests on a
partial unique index: the scheduled first attempt of a slot can be inserted once, by one tick.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .clock import minute_floor
from .outcome import Outcome, RunResult
from .schema import MIGRATIONS, SCHEMA_VERSION

RUN_COLUMNS = (
    "id", "task_id", "scheduled_for", "trigger", "attempt", "kind", "status", "started_at",
    "finished_at", "duration_ms", "exit_code", "error", "output_tail", "log_path", "owner_pid",
    "owner_start", "owner_boot", "task_file", "extra", "host",
)


@dataclass(frozen=True, slots=True)
class TaskState:
    task_id: str
    first_seen: float
    not_before: float
    last_slot: float | None
    enabled: bool
    consecutive_failures: int
    path: str | None


@dataclass(frozen=True, slots=True)
class Owner:
    """The process that claims a run row; a row whose owner is gone and whose lock is free
    was left behind by a crash."""

    pid: int
    start: int | None
    boot: str | None


class StoreError(Exception):
    """The state database cannot be used (missing folder rights, corrupt file, ...)."""


class Store:
    def __init__(self, path: Path, url: str | None = None, host: str | None = None):
        """`path`: the SQLite file; `url`: a postgresql:// URL, used instead when given;
        `host`: this host's name, written into the run rows it claims."""
        self.path = path
        self.url = url
        self.host = host
        self.fence: tuple[str, int] | None = None  # (task, token) while a run holds its lease
        self._db: sqlite3.Connection | None = None

    @property
    def dialect(self) -> str:
        return "postgresql" if self.url else "sqlite"

    # -- connection -------------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = _open_pg(self.url) if self.url else _open(self.path)  # type: ignore[assignment]
        return self._db  # type: ignore[return-value]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Store:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction (BEGIN IMMEDIATE takes the write lock up front, so two
        ticks never deadlock upgrading a read lock)."""
        db = self.connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            if self.fence is not None:  # issue 11: a holder whose lease was taken over
                from .lease import check_fence  # writes nothing (lease.FencedOff)

                check_fence(db, *self.fence)
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # -- task state -------------------------------------------------------------------------

    def task_states(self) -> dict[str, TaskState]:
        rows = self.connect().execute(
            "SELECT task_id, first_seen, not_before, last_slot, enabled, consecutive_failures,"
            " path FROM task_state"
        )
        return {r[0]: TaskState(r[0], r[1], r[2], r[3], bool(r[4]), r[5], r[6]) for r in rows}

    def observe(self, seen: Iterable[tuple[str, bool, str]], now: float) -> dict[str, TaskState]:
        """Record the tasks this tick sees: (id, enabled, path). A new task, or one enabled
        again, gets not_before = now: fires before that moment are never run."""
        states = self.task_states()
        start = minute_floor(now)
        new, enabled_again, changed = [], [], []
        for task_id, enabled, path in seen:
            state = states.get(task_id)
            if state is not None and self.url:
                path = state.path or path  # issue 11: each host's copy has its own path
            if state is None:
                new.append((task_id, now, start, int(enabled), path))
            elif enabled and not state.enabled:
                enabled_again.append((start, path, task_id))
            elif state.enabled != enabled or state.path != path:
                changed.append((int(enabled), path, task_id))
        if new or enabled_again or changed:
            with self.write() as db:
                db.executemany(
                    "INSERT OR IGNORE INTO task_state(task_id, first_seen, not_before, enabled,"
                    " path) VALUES (?, ?, ?, ?, ?)",
                    new,
                )
                db.executemany(
                    "UPDATE task_state SET enabled = 1, not_before = ?, path = ?"
                    " WHERE task_id = ? AND enabled = 0",
                    enabled_again,
                )
                db.executemany(
                    "UPDATE task_state SET enabled = ?, path = ? WHERE task_id = ?", changed
                )
            states = self.task_states()
        return states

    def set_enabled(self, task_id: str, enabled: bool, now: float,
                    suspended: bool = False) -> None:
        """Used by `enable`/`disable`: enabling counts as a new start for first-seen rules.
        `suspended`: the ladder suspends it; every host honours that until it is enabled
        again (issue 11, hostlease.honour_suspensions); enabling clears it."""
        with self.write() as db:
            db.execute(
                "INSERT OR IGNORE INTO task_state(task_id, first_seen, not_before, enabled)"
                " VALUES (?, ?, ?, ?)",
                (task_id, now, minute_floor(now), int(enabled)),
            )
            if enabled:
                db.execute(
                    "UPDATE task_state SET enabled = 1, not_before = ? WHERE task_id = ?"
                    " AND enabled = 0",
                    (minute_floor(now), task_id),
                )
                db.execute("UPDATE task_state SET suspended_at = NULL, suspended_by = NULL"
                           " WHERE task_id = ?", (task_id,))
            else:
                db.execute("UPDATE task_state SET enabled = 0 WHERE task_id = ?", (task_id,))
            if suspended:
                db.execute("UPDATE task_state SET suspended_at = ?, suspended_by = ?"
                           " WHERE task_id = ?", (now, self.host, task_id))

    def count_failure(self, task_id: str, failed: bool) -> int:
        """Advance or reset the consecutive-failure count; returns the new count."""
        with self.write() as db:
            if failed:
                db.execute(
                    "UPDATE task_state SET consecutive_failures = consecutive_failures + 1"
                    " WHERE task_id = ?",
                    (task_id,),
                )
            else:
                db.execute(
                    "UPDATE task_state SET consecutive_failures = 0 WHERE task_id = ?", (task_id,)
                )
            row = db.execute(
                "SELECT consecutive_failures FROM task_state WHERE task_id = ?", (task_id,)
            ).fetchone()
        return row[0] if row else 0

    def probation_until(self, task_id: str) -> float | None:
        row = self.connect().execute(
            "SELECT probation_until FROM task_state WHERE task_id = ?", (task_id,)
        ).fetchone()
        return row[0] if row else None

    def set_probation(self, task_id: str, until: float | None) -> None:
        with self.write() as db:
            db.execute(
                "UPDATE task_state SET probation_until = ? WHERE task_id = ?", (until, task_id)
            )

    def set_alerted(self, task_id: str, alerted: bool) -> bool:
        """Set the 'a failure was alerted' flag; returns what it was before."""
        with self.write() as db:
            row = db.execute(
                "SELECT alerted FROM task_state WHERE task_id = ?", (task_id,)
            ).fetchone()
            db.execute(
                "UPDATE task_state SET alerted = ? WHERE task_id = ?", (int(alerted), task_id)
            )
        return bool(row and row[0])

    # -- runs -------------------------------------------------------------------------------

    def claim_slots(
        self, claims: Sequence[tuple[str, float, str | None, str]], now: float, owner: Owner
    ) -> dict[tuple[str, float], int]:
        """Claim (task_id, slot, skip_reason, task_file) rows in one transaction. A claim with a
        skip reason is recorded as skipped at once. Returns {(task, slot): run id} for the claims
        this call won; a slot another tick claimed first is simply absent."""
        won: dict[tuple[str, float], int] = {}
        if not claims:
            return won
        with self.write() as db:
            for task_id, slot, skip_reason, task_file in claims:
                status = Outcome.SKIPPED if skip_reason else Outcome.RUNNING
                cur = db.execute(
                    "INSERT OR IGNORE INTO runs(task_id, scheduled_for, trigger, attempt, kind,"
                    " status, started_at, finished_at, duration_ms, error, owner_pid, owner_start,"
                    " owner_boot, task_file, host) VALUES (?, ?, 'schedule', 1, 'run', ?, ?, ?,"
                    " ?, ?, ?, ?, ?, ?, ?)",
                    (
                        task_id, slot, status.value, now, now if skip_reason else None,
                        0 if skip_reason else None, skip_reason, owner.pid, owner.start,
                        owner.boot, task_file, self.host,
                    ),
                )
                if cur.rowcount == 1:
                    won[(task_id, slot)] = int(cur.lastrowid or 0)
                    db.execute(
                        "UPDATE task_state SET last_slot = max(coalesce(last_slot, 0), ?)"
                        " WHERE task_id = ?",
                        (slot, task_id),
                    )
        return won

    def start_run(
        self,
        task_id: str,
        *,
        scheduled_for: float,
        trigger: str,
        attempt: int,
        kind: str,
        now: float,
        owner: Owner,
        task_file: str | None,
    ) -> int:
        """A run row that needs no slot claim: manual runs, retries and heals."""
        with self.write() as db:
            cur = db.execute(
                "INSERT INTO runs(task_id, scheduled_for, trigger, attempt, kind, status,"
                " started_at, owner_pid, owner_start, owner_boot, task_file, host)"
                " VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (
                    task_id, scheduled_for, trigger, attempt, kind, now, owner.pid, owner.start,
                    owner.boot, task_file, self.host,
                ),
            )
            return int(cur.lastrowid or 0)

    def set_started(self, run_id: int, started_at: float, log_path: str | None) -> None:
        with self.write() as db:
            db.execute(
                "UPDATE runs SET started_at = ?, log_path = ? WHERE id = ?",
                (started_at, log_path, run_id),
            )

    def finish_run(self, run_id: int, result: RunResult, finished_at: float) -> bool:
        """Record the outcome of a running row. Returns False when the row was no longer
        running (another tick already declared it timed out or crashed). PostgreSQL out of
        reach: the outcome goes to the spool (spool.py) and StoreError says so."""
        with self._spooling(run_id, {
                "op": "finish", "run_id": run_id, "at": finished_at,
                "outcome": result.outcome.value, "exit_code": result.exit_code,
                "fail_reason": result.fail_reason, "duration": result.duration,
                "output_tail": result.output_tail, "extra": result.extra or None,
                "log_path": str(result.log_path) if result.log_path else None}):
            return self._finish_run(run_id, result, finished_at)

    @contextmanager
    def _spooling(self, run_id: int, entry: dict) -> Iterator[None]:
        """Issue 11: a run's closing write that a lost PostgreSQL connection refuses is kept
        in state/spool.jsonl for the next tick (spool.replay), not lost."""
        try:
            yield
        except Exception as exc:
            if not self.url or type(exc).__name__ != "OperationalError":
                raise
            from .spool import NAME, add

            add(self.path.parent, entry)
            raise StoreError(
                f"the state database (state_url) became unreachable: {exc}. Run {run_id}'s"
                f" outcome is kept in {self.path.parent / NAME}; the next tick records it"
            ) from None

    def _finish_run(self, run_id: int, result: RunResult, finished_at: float) -> bool:
        extra = json.dumps(result.extra) if result.extra else None
        with self.write() as db:
            cur = db.execute(
                "UPDATE runs SET status = ?, finished_at = ?, duration_ms = ?, exit_code = ?,"
                " error = ?, output_tail = ?, log_path = coalesce(?, log_path), extra = ?"
                " WHERE id = ? AND status = 'running'",
                (
                    result.outcome.value, finished_at, int(round(result.duration * 1000)),
                    result.exit_code, result.fail_reason, result.output_tail,
                    str(result.log_path) if result.log_path else None, extra, run_id,
                ),
            )
            return cur.rowcount == 1

    def end_running(self, run_id: int, status: Outcome, reason: str, now: float,
                    ended_at: float | None = None, unobserved: bool = False) -> bool:
        """Close a row still marked running (crashed, timed out by a stale-lock kill, skipped
        because the lock was held). Check-and-set: only one caller wins. `ended_at`: the real
        end when known; `unobserved`: nobody saw the end, so no duration is recorded (the time
        until detection is not one)."""
        end = now if ended_at is None else ended_at
        with self._spooling(run_id, {"op": "end", "run_id": run_id, "status": status.value,
                                     "reason": reason, "now": now, "ended_at": ended_at,
                                     "unobserved": unobserved}):
            return self._end_running(run_id, status, reason, end, unobserved)

    def _end_running(self, run_id: int, status: Outcome, reason: str, end: float,
                     unobserved: bool) -> bool:
        with self.write() as db:
            cur = db.execute(
                "UPDATE runs SET status = ?, error = ?, finished_at = ?,"
                " duration_ms = CASE WHEN ? = 1 THEN NULL"
                " ELSE CAST(max(0, (? - started_at) * 1000) AS INTEGER) END"
                " WHERE id = ? AND status = 'running'",
                (status.value, reason, end, unobserved, end, run_id),
            )
            return cur.rowcount == 1

    def add_note(self, run_id: int, note: str) -> None:
        """Attach a sentence to a finished row (`extra.note`; history and `show` print it after
        the error: 'exit 1; self-heal not attempted: ...'). The error itself stays the run's."""
        with self.write() as db:  # read-modify-write: the write lock makes it one step
            row = db.execute("SELECT extra FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                return
            try:
                extra = json.loads(row[0]) if row[0] else {}
            except ValueError:
                extra = {}
            if not isinstance(extra, dict):
                extra = {}
            extra["note"] = f"{extra['note']}; {note}" if extra.get("note") is not None else note
            db.execute("UPDATE runs SET extra = ? WHERE id = ?", (json.dumps(extra), run_id))

    def running_rows(self) -> list[dict[str, object]]:
        return self._rows("SELECT * FROM runs WHERE status = 'running' ORDER BY id", ())

    def run(self, run_id: int) -> dict[str, object] | None:
        rows = self._rows("SELECT * FROM runs WHERE id = ?", (run_id,))
        return rows[0] if rows else None

    def history(self, limit: int = 20, task_id: str | None = None) -> list[dict[str, object]]:
        if task_id is None:
            return self._rows("SELECT * FROM runs ORDER BY id DESC LIMIT ?", (limit,))
        return self._rows(
            "SELECT * FROM runs WHERE task_id = ? ORDER BY id DESC LIMIT ?", (task_id, limit)
        )

    def last_runs(self) -> dict[str, dict[str, object]]:
        """The newest row of each task (any trigger, any attempt)."""
        rows = self._rows(
            "SELECT * FROM runs WHERE id IN (SELECT max(id) FROM runs GROUP BY task_id)", ()
        )
        return {str(r["task_id"]): r for r in rows}

    def _rows(self, sql: str, args: tuple[object, ...]) -> list[dict[str, object]]:
        cur = self.connect().execute(sql, args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    # -- meta, retention --------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.connect().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.write() as db:
            db.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def prune_runs(self, older_than: float) -> list[str]:
        """Delete finished runs that started before `older_than`; returns their log paths
        (with a shared state, only this host's: another host's logs are on that host)."""
        mine = " AND (host IS NULL OR host = ?)" if self.url else ""
        with self.write() as db:
            logs = [
                r[0]
                for r in db.execute(
                    "SELECT log_path FROM runs WHERE started_at < ? AND status != 'running'"
                    " AND log_path IS NOT NULL" + mine,
                    (older_than, self.host) if self.url else (older_than,),
                )
            ]
            db.execute(
                "DELETE FROM runs WHERE started_at < ? AND status != 'running'", (older_than,)
            )
        return logs


def last_tick(config, store: Store) -> str | None:
    """When this host's tick last ran: with a shared state, kept in this host's own database
    (its idle ticks write nothing to PostgreSQL; issue 11)."""
    if not config.state_url:
        return store.get_meta("last_tick")
    if not config.db_path.exists():
        return None
    with Store(config.db_path) as local:
        return local.get_meta("last_tick")


def state_store(config) -> Store:  # config: config.Config
    """The configured state: PostgreSQL when state_url is set, else state/mdcron.db."""
    return Store(config.db_path, url=config.state_url, host=config.host_name)


def _open_pg(url: str):  # -> pgstate.PgConnection
    from .pgstate import PgError, connect

    try:
        return connect(url)
    except PgError as exc:
        raise StoreError(f"the state database (state_url) cannot be used: {exc}. Check that"
                         " PostgreSQL is running and reachable from this host and that the URL"
                         " and password are right (`scheduler.py doctor`); nothing ran.") from None


def _open(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        created = False
        if not path.exists():
            # Created owner-only before SQLite touches it; the WAL files inherit the mode.
            # O_EXCL: of two ticks racing to create it, one only is the creator.
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                created = True
            except FileExistsError:
                pass
        db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout = 60000")
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        _migrate(db)
        if created:  # a lost database must not pass silently (dbguard.py)
            from .dbguard import note_created

            note_created(db, path)
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"the state database {path} cannot be used: {exc}. Run `scheduler.py doctor`; to"
            f" start afresh, move the file aside (history will be lost)."
        ) from exc
    except OSError as exc:
        raise StoreError(f"the state database {path} cannot be opened: {exc}") from exc
    return db


def _migrate(db: sqlite3.Connection) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"schema version {version} is newer than this mdcron ({SCHEMA_VERSION}): upgrade mdcron"
        )
    db.execute("BEGIN IMMEDIATE")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]  # another tick may have won
        for step in range(version, SCHEMA_VERSION):
            for statement in _statements(MIGRATIONS[step]):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {step + 1}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (executescript would COMMIT our transaction)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer
            buffer = ""
    if buffer.strip():
        yield buffer
