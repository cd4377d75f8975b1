"""The state: runs (one row per attempt), per-task state, and small facts about ticks.

SQLite in state/mdcron.db by default; PostgreSQL when state_url says so (issue 11: several
hosts share one database). The SQL is written once in SQLite's spelling; pgstate.py translates
it. `connect()` returns a sqlite3.Connection or a pgstate.PgConnection, which behave alike for
what the modules do with them (execute, executemany, rowcount, lastrowid, description).

Times are stored as Unix seconds (REAL); conversion to aware datetimes happens at the edges.
Connections are short-lived and autocommit; every write is one `BEGIN IMMEDIATE` transaction, so
no write transaction is ever held while a task runs. Exactly-once per (task, slot) rests on a
partial unique index: the scheduled first attempt of a slot can be inserted once, by one tick.

Lazy imports: the spool, pgstate (psycopg) and the lost-database guard load only when they
apply: a result the database could not take, a PostgreSQL URL, a database file that had to be
created (or a won claim, which the guard's marker remembers); the leases' fence check only for
a run holding a lease (a shared state).
"""

from __future__ import annotations

import _thread
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from ..core import safe_fs
from ..core.background import Background
from ..core.outcome import Outcome, RunResult
from .clockback import ClockBackTable
from .comments import CommentsTable
from .db import FencedOff
from .meta import MetaTable, put_metas
from .runs import Owner, RunsTable
from .schema import MIGRATIONS, SCHEMA_VERSION
from .seldom import SeldomTables
from .task_state import StateRow, TaskState, TaskStateTable, state_rows
from .trouble import LOCK_BUDGET, Locked, describe, is_busy, is_trouble

__all__ = ["SCHEMA_VERSION", "Owner", "Store", "StoreError", "TaskState", "last_tick",
           "state_store"]


_lock_wait = LOCK_BUDGET  # this process's bound; the dashboard shortens it (limit_lock_wait)
# Issue 27: this process's writers of one SQLite file take turns on a lock of their own. SQLite
# makes a writer that finds the lock taken sleep 1, 2, 5, 10, 15, 20, 25 ms... between tries,
# so 8 workers recording 100 runs at once slept up to ~80 ms for one short write; a turn is
# handed over the moment the writer before commits. Re-entrant: a write inside a write (two
# connections, one thread) waits on SQLite as before. Other processes: SQLite's wait, as ever.
_TURNS: dict[str, _thread.RLock] = {}


def limit_lock_wait(seconds: float) -> None:
    """This process waits at most `seconds` per store for other writers' locks, instead of
    LOCK_BUDGET: the dashboard answers "busy" rather than wait out a tick (issue 24)."""
    global _lock_wait
    _lock_wait = seconds


class StoreError(Exception):
    """The state database cannot be used (missing folder rights, corrupt file, ...)."""


def database_lost(exc: BaseException) -> bool:
    """A PostgreSQL connection that failed or was cut (psycopg's OperationalError family, told
    apart by name: psycopg is imported only with a shared state)."""
    return any(c.__name__ == "OperationalError" and c.__module__ == "psycopg"
               for c in type(exc).__mro__)


def lost_in_tick(exc: BaseException) -> StoreError:
    """What a tick says when the database went away while it ran (issue 23)."""
    from ..settings.state_url import mask  # lazy: only on this rare path

    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return StoreError(f"the state database (state_url) became unreachable during the tick"
                      f" ({mask(first)}); outcomes it could not take are kept in"
                      " state/spool.jsonl and the next tick records them")


class Store(TaskStateTable, RunsTable, MetaTable, ClockBackTable, CommentsTable,
            SeldomTables):
    """The state: a connection (SQLite or PostgreSQL), its short write transactions and
    migrations; every table's operations come from mdcron/state/ (protocol.State lists them):
    the tables a due tick reads before its first task (comments: each run's has_unread) as
    mixins, the others through seldom.py, which loads each one on its first use."""

    def __init__(self, path: Path, url: str | None = None, host: str | None = None):
        """`path`: the SQLite file; `url`: a postgresql:// URL, used instead when given;
        `host`: this host's name, written into the run rows it claims."""
        self.path = path
        self.url = url
        self.host = host
        self.fence: tuple[str, int] | None = None  # (task, token) while a run holds its lease
        self.fenced_off: str | None = None  # issue 23: why this holder stopped its own run
        self._db: sqlite3.Connection | None = None
        self._waited = 0.0  # seconds spent waiting for other writers' locks (LOCK_BUDGET)
        self._rows_ahead: tuple[int, dict[str, StateRow]] | None = None  # read_ahead()

    @property
    def dialect(self) -> str:
        return "postgresql" if self.url else "sqlite"

    # -- connection -------------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        if self._db is None:
            if self.url:
                self._db = _open_pg(self.url)  # type: ignore[assignment]
            else:
                self._db, waited = _open(self.path, _lock_wait - self._waited)
                self._waited += waited
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
        ticks never deadlock upgrading a read lock). On SQLite, the waits for another
        writer's lock add up to at most LOCK_BUDGET per store; past it, trouble.Locked."""
        if self.fence is not None and self.fenced_off is not None:
            raise FencedOff(self.fenced_off)  # issue 23: it fenced itself; nothing is written
        self._rows_ahead = None  # our own writes leave PRAGMA data_version as it was
        db = self.connect()
        turn = self._turn()
        try:
            try:
                self._begin(db)
            except Exception as exc:
                if self.url and type(exc).__name__ == "LockNotAvailable":  # pgbounds.LOCK_WAIT
                    raise StoreError(_write_lock_timeout()) from None
                raise
            try:
                if self.fence is not None:  # issue 11: a holder whose lease was taken over
                    from .leases import check_fence  # lazy: a run holding a lease only

                    check_fence(db, *self.fence)  # writes nothing (FencedOff)
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            if turn is not None:
                turn.release()

    def _turn(self) -> _thread.RLock | None:
        """This process's turn to write this SQLite file (_TURNS), within the lock budget."""
        if self.url:
            return None
        turn = _TURNS.setdefault(str(self.path), _thread.RLock())
        started = time.monotonic()
        got = turn.acquire(timeout=max(0.0, _lock_wait - self._waited))
        self._waited += time.monotonic() - started
        if not got:
            raise Locked(self._waited, _lock_wait)
        return turn

    def _begin(self, db: sqlite3.Connection) -> None:
        if self.url:
            db.execute("BEGIN IMMEDIATE")
            return
        left = _lock_wait - self._waited
        db.execute(f"PRAGMA busy_timeout = {max(0, int(left * 1000))}")
        started = time.monotonic()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            self._waited = _retry_busy(db, lambda: db.execute("BEGIN IMMEDIATE"),
                                       self._waited + time.monotonic() - started, _lock_wait)
            return
        self._waited += time.monotonic() - started


    def write_ahead(self, note: str) -> None:
        """Issue 27, the daemon's held tick (cli/warm.py): pay before the minute what the first
        write after a WAL reset costs (a checkpoint of what other ticks left, the new WAL's
        header synced: ~10 ms), so that the claims at the minute do not. `note`: kept as meta
        `held_tick` (the minute the tick waits for), the one row this writes. Another writer
        holding the lock: nothing done (the claims pay it, as in a cold tick)."""
        if self.url:
            return
        db = self.connect()
        db.execute("PRAGMA busy_timeout = 200")  # never held up by another writer: it is
        try:  # only worth it when free (and this store's lock budget stays whole)
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return
        try:
            put_metas(db, {"held_tick": note})
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def read_ahead(self) -> None:
        """Issue 27, the held tick: read the task_state rows before the minute; the next
        state_rows() returns them if no connection committed since (PRAGMA data_version moves
        with every other connection's commit; a write of this store's drops them)."""
        if self.url:
            return
        db = self.connect()
        version = db.execute("PRAGMA data_version").fetchone()[0]
        self._rows_ahead = (version, state_rows(db))

    def state_rows(self) -> dict[str, StateRow]:
        ahead, self._rows_ahead = self._rows_ahead, None
        if ahead is not None and self.connect().execute(
                "PRAGMA data_version").fetchone()[0] == ahead[0]:
            return ahead[1]
        return super().state_rows()

    def claim_slots(
        self, claims: Sequence[tuple[str, float, str | None, str]], now: float, owner: Owner
    ) -> dict[tuple[str, float], int]:
        """runs.RunsTable.claim_slots; a won claim also moves the lost-database marker's latest
        claimed slot (dbguard.py), so a database lost later never runs that slot again."""
        _warmed()  # warm_ahead's write first: the claim need not wait for its lock
        won = super().claim_slots(claims, now, owner)
        if won and not self.url:
            from .dbguard import note_claims, noted

            noted()  # the marker written ahead (tick.py), then this claim's if it is later
            note_claims(self.path, max(slot for _, slot in won))
        return won

    # -- runs: the closing writes, kept in the spool when the database refuses them ---------

    def finish_run(self, run_id: int, result: RunResult, finished_at: float) -> bool:
        """Record the outcome of a running row. Returns False when the row was no longer
        running (another tick already declared it timed out or crashed). PostgreSQL out of
        reach, or a SQLite file that refuses it (read-only, damaged, locked, a full disk):
        the outcome goes to the spool (spool.py) and StoreError says so."""
        with self._spooling(run_id, {
                "op": "finish", "run_id": run_id, "at": finished_at,
                "outcome": result.outcome.value, "exit_code": result.exit_code,
                "fail_reason": result.fail_reason, "duration": result.duration,
                "output_tail": result.output_tail, "extra": result.extra or None,
                "log_path": str(result.log_path) if result.log_path else None}):
            return self._finish_run(run_id, result, finished_at)

    @contextmanager
    def _spooling(self, run_id: int, entry: dict) -> Iterator[None]:
        """A run's closing write that a lost PostgreSQL connection (issue 11) or a SQLite
        file in trouble (issue 22) refuses is kept in state/spool.jsonl (logs/ when state/ has
        no room) for the next tick (spool.replay), not lost."""
        try:
            yield
        except Exception as exc:
            if self.url and not database_lost(exc):
                raise
            if not self.url and not is_trouble(exc):
                raise
            from .spool import add

            kept = add(self.path.parent, entry)
            what = (f"the state database (state_url) became unreachable: {exc}." if self.url
                    else describe(self.path, exc) + ".")
            raise StoreError(
                f"{what} Run {run_id}'s outcome is kept in {kept}; the next tick records it"
                if kept else f"{what} Run {run_id}'s outcome could not be kept either"
                " (no room for the spool)") from None

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


    def keep_late(self, run_id: int, reason: str, note: str, at: float) -> bool:
        """Issue 23: a fenced-off holder's own result beside its row: the row, if nobody closed
        it yet, is closed `lost` with `reason` (True); `note` says what the task did. Not
        fenced; spooled like finish_run while PostgreSQL is away."""
        with self._spooling(run_id, {"op": "late", "run_id": run_id, "reason": reason,
                                     "note": note, "at": at}):
            return self._keep_late(run_id, reason, note, at)


def _write_lock_timeout() -> str:
    from .pgbounds import IDLE_IN_TX, LOCK_WAIT

    return (f"the state database (state_url) is busy: another session held mdcron's write lock"
            f" for over {LOCK_WAIT}, so this tick stopped. A host frozen mid-write loses its"
            f" session (and the lock) after {IDLE_IN_TX} of silence; if this repeats, look in"
            " pg_stat_activity for the session holding it (application_name mdcron, or another"
            " program's)")


def last_tick(config, store: Store) -> str | None:
    """When this host's tick last ran: with a shared state, kept in this host's own database
    (its idle ticks write nothing to PostgreSQL; issue 11)."""
    if not config.state_url:
        return store.get_meta("last_tick")
    if not config.db_path.exists():
        return None
    with Store(config.db_path) as local:
        return local.get_meta("last_tick")


_warming = Background("wal")  # warm_ahead's write, until Store.claim_slots waits for it


def warm_ahead(path: Path, now: float) -> None:
    """Issue 27: a tick that will claim starts its database's write-ahead log in a thread
    while it loads. The first commit after a checkpoint restarts the log, and SQLite syncs its
    header then (and the state folder, when the log file is new: the last close removed it):
    two syncs that otherwise come inside the claim, before the first task starts. The write
    that does it is meta tick_began (when this host's latest full tick with work began; SQLite
    writes nothing for a row set to itself). Never raises."""
    _warming.start(_warm, path, now)


def _warm(path: Path, now: float) -> None:
    try:
        db, _ = _open(path, _lock_wait)
    except Exception:  # noqa: BLE001  # the tick's own connection says why, in one line
        return
    try:
        db.execute("PRAGMA busy_timeout = 20")  # another writer: give up at once, the claim
        put_metas(db, {"tick_began": repr(now)})  # waits its own bounded time (LOCK_BUDGET)
    except sqlite3.Error:
        pass  # busy or in trouble: the claim meets it as it always would
    finally:
        with suppress(sqlite3.Error):
            db.close()


def _warmed() -> None:
    _warming.join()


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


def _refuse_symlinks(path: Path) -> None:
    """SQLite opens the file by name and follows links: the state folder (made 0700 here) and
    the database file must be real (core/safe_fs.py), else StoreError with the fix."""
    try:
        os.close(safe_fs.open_dir(path.parent.parent, path.parent, create=True))
    except safe_fs.UnsafePath as exc:
        raise StoreError(f"the state database {path} cannot be opened: {exc}. Nothing ran."
                         ) from None
    if os.path.islink(path):
        raise StoreError(f"the state database {path} is a symlink; mdcron does not open its"
                         " database through a link: move the real file into its place."
                         " Nothing ran.")


def _open(path: Path, budget: float) -> tuple[sqlite3.Connection, float]:
    """The connection, set up and migrated, and the seconds the opening took, counted as
    waited (SQLite's busy waits on another opener and _retry_busy's; the work itself is a few
    ms): at most `budget` seconds."""
    started = time.monotonic()
    try:
        _refuse_symlinks(path)
        if not path.exists():
            # Created owner-only before SQLite touches it; the WAL files inherit the mode.
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                pass
        db = sqlite3.connect(path, timeout=max(0.0, budget), isolation_level=None,
                             check_same_thread=False)
        try:
            _set_up(db, path)
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            waited = _retry_busy(db, lambda: _set_up(db, path),
                                 time.monotonic() - started, budget)
            db.execute(f"PRAGMA busy_timeout = {max(0, int((budget - waited) * 1000))}")
    except (sqlite3.DatabaseError, OSError) as exc:
        raise StoreError(describe(path, exc)) from None
    return db, time.monotonic() - started


def _set_up(db: sqlite3.Connection, path: Path) -> None:
    """WAL mode and the schema. On a file still in rollback mode (new), the switch to WAL
    reads, then upgrades to a write: another opener's write lock makes SQLite answer busy at
    once, without its busy handler (it never waits holding a read), so _open retries."""
    if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    # A new file, or an empty (zero-byte) one, is migrated from version 0 by exactly one
    # opener, inside the write lock: that one says if a database was lost (dbguard.py).
    if _migrate(db) == 0:
        from .dbguard import note_created

        note_created(db, path)


def _retry_busy(db: sqlite3.Connection, again: Callable[[], object], waited: float,
                budget: float) -> float:
    """The error path of a statement SQLite refused as busy, `waited` seconds in: SQLite
    gives up at once, without its busy handler, on a read upgraded to a write (a journal
    switch, BUSY_SNAPSHOT), so `again()` is retried with a short backoff, each try's own
    busy wait bounded by what is left, until it passes or `budget` seconds were really
    waited (trouble.Locked). Returns the seconds waited in all."""
    pause = 0.002
    while True:
        left = budget - waited
        if left <= 0:
            raise Locked(waited, budget)
        pause = min(pause * 2, 0.1, left)
        started = time.monotonic()
        time.sleep(pause)
        db.execute(f"PRAGMA busy_timeout = {max(0, int((left - pause) * 1000))}")
        try:
            again()
            return waited + time.monotonic() - started
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            waited += time.monotonic() - started


def _migrate(db: sqlite3.Connection) -> int | None:
    """Bring the schema up to date; the version found, inside the write lock, when this call
    migrated (0: the file was new or empty, and this caller is the one that filled it), else
    None (nothing to do, or another tick did it first)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return None
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
    return version if version < SCHEMA_VERSION else None


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
