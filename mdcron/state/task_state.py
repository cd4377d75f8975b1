"""The `task_state` table: one row per task id, what the scheduler remembers between ticks
(first seen, not-before, the last claimed slot, enabled, failures in a row, probation, the
alerted flag, a suspension)."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.clock import minute_floor
from ..core.records import NamedTuple, dataclass  # NamedTuple: typing's, cheaper to build
from .db import Tables

_COLUMNS = "task_id, first_seen, not_before, last_slot, enabled, consecutive_failures, path"
STATES = f"SELECT {_COLUMNS} FROM task_state"


@dataclass(frozen=True, slots=True)
class TaskState:
    task_id: str
    first_seen: float
    not_before: float
    last_slot: float | None
    enabled: bool
    consecutive_failures: int
    path: str | None


class StateRow(NamedTuple):
    """A task_state row as the parse cache keeps 10k of them: a tuple with names, lighter than
    TaskState objects (`enabled` is the stored 0/1)."""

    task_id: str
    first_seen: float
    not_before: float
    last_slot: float | None
    enabled: int
    consecutive_failures: int
    path: str | None

    def as_state(self) -> TaskState:
        return TaskState(self.task_id, self.first_seen, self.not_before, self.last_slot,
                         bool(self.enabled), self.consecutive_failures, self.path)

    @classmethod
    def of(cls, s: TaskState) -> StateRow:
        return cls(s.task_id, s.first_seen, s.not_before, s.last_slot, int(s.enabled),
                   s.consecutive_failures, s.path)


class Suspension(NamedTuple):
    """A suspension by the ladder on some host (issue 11): when, by which host, and the hash of
    its file as suspended (issue 23, tasks/content_hash.py; None: made before it was kept)."""

    at: float
    by: str | None
    hash: str | None = None


def state_rows(db) -> dict[str, StateRow]:  # db: a connection (sqlite3 or pgstate)
    """Every task_state row by id (the cache's read: no store needed)."""
    new = tuple.__new__  # StateRow._make without its checks: as cheap as the plain tuples
    return {r[0]: new(StateRow, r) for r in db.execute(STATES)}


def state_rows_for(db, ids: list[str], limit: float) -> dict[str, StateRow]:
    """The rows of these ids, and every row stamped after `limit` (the clock went back:
    clockback.ahead must see it as in all the rows): the tick's lean load (issue 27)."""
    import json  # lazy: loaded by the tick already (the due task's JSON)

    new = tuple.__new__
    return {r[0]: new(StateRow, r) for r in db.execute(
        STATES + " WHERE task_id IN (SELECT value FROM json_each(?))"
        " OR not_before > ? OR last_slot > ?", (json.dumps(ids), limit, limit))}


class TaskStateTable(Tables):
    def task_states(self) -> dict[str, TaskState]:
        return {k: r.as_state() for k, r in state_rows(self.connect()).items()}

    def state_rows(self) -> dict[str, StateRow]:
        return state_rows(self.connect())

    def task_state(self, task_id: str) -> TaskState | None:
        """One task's row (the ladder reads one, not the whole table)."""
        row = self.connect().execute(STATES + " WHERE task_id = ?", (task_id,)).fetchone()
        return StateRow._make(row).as_state() if row else None

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
                    suspended: bool = False, content: str | None = None,
                    since: float | None = None) -> None:
        """Used by `enable`/`disable`: enabling counts as a new start for first-seen rules,
        from `since` (default `now` itself, not its minute: a fire that passed while the task
        was disabled is not run, as cron would not) and with no failures counted (issue 25:
        the next failure must not re-suspend it at once). `suspended`: the ladder suspends
        it; every host honours that until it is enabled again (issue 11,
        hostlease.honour_suspensions) or its file's `content` hash changes (issue 23);
        enabling clears it."""
        start = now if since is None else since
        with self.write() as db:
            db.execute(
                "INSERT OR IGNORE INTO task_state(task_id, first_seen, not_before, enabled)"
                " VALUES (?, ?, ?, ?)",
                (task_id, now, start if enabled else minute_floor(now), int(enabled)),
            )
            if enabled:
                db.execute(
                    "UPDATE task_state SET enabled = 1, not_before = ? WHERE task_id = ?"
                    " AND enabled = 0",
                    (start, task_id),
                )
                db.execute("UPDATE task_state SET suspended_at = NULL, suspended_by = NULL,"
                           " suspended_hash = NULL, consecutive_failures = 0"
                           " WHERE task_id = ?", (task_id,))
            else:
                db.execute("UPDATE task_state SET enabled = 0 WHERE task_id = ?", (task_id,))
            if suspended:
                db.execute("UPDATE task_state SET suspended_at = ?, suspended_by = ?,"
                           " suspended_hash = ? WHERE task_id = ?",
                           (now, self.host, content, task_id))

    def count_failure(self, task_id: str, failed: bool) -> int:
        """Advance or reset the consecutive-failure count; returns the new count. A reset of
        a count already 0 writes nothing (issue 27: a success after a success, the usual run,
        took the write turn for a transaction that changed no value)."""
        if not failed and self._unchanged("consecutive_failures", task_id):
            return 0
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

    def ladder_start(self, task_id: str) -> tuple[int, float | None]:
        """(consecutive failures, probation until) of a task, as its ladder starts: one read
        (issue 27: task_state() and probation_until() were two, ~25 µs per run)."""
        row = self.connect().execute(
            "SELECT consecutive_failures, probation_until FROM task_state WHERE task_id = ?",
            (task_id,)).fetchone()
        return (row[0], row[1]) if row else (0, None)

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
        """Set the 'a failure was alerted' flag; returns what it was before. Clearing a flag
        already clear writes nothing (issue 27: as count_failure)."""
        if not alerted and self._unchanged("alerted", task_id):
            return False
        with self.write() as db:
            row = db.execute(
                "SELECT alerted FROM task_state WHERE task_id = ?", (task_id,)
            ).fetchone()
            db.execute(
                "UPDATE task_state SET alerted = ? WHERE task_id = ?", (int(alerted), task_id)
            )
        return bool(row and row[0])

    def quiet_success(self, task_id: str, now: float) -> bool:
        """A success of `task_id` has nothing to write or send: its alerted flag is clear, no
        incident of it is open, no outbox message is due (run/dispatch.after_one then skips
        alerts/after_run.after_ladder, which would write and send nothing: issue 27, the
        alerts, incidents and outbox modules not imported after a plain success). One read;
        never for a run holding a lease (_nothing_to_write)."""
        return self._nothing_to_write(
            "SELECT 1 WHERE EXISTS(SELECT 1 FROM task_state WHERE task_id = ? AND alerted != 0)"
            " OR EXISTS(SELECT 1 FROM incidents WHERE task_id = ? AND status = 'open')"
            " OR EXISTS(SELECT 1 FROM outbox WHERE status = 'pending'"
            " AND next_attempt_at <= ?)", (task_id, task_id, now))

    def quiet_end(self) -> bool:
        """The tick's end has nothing to resolve or send: no `suspended` incident is open (none
        for alerts/after_run.resolve_reenabled to close) and nothing is pending or held in the
        outbox (finish_tick's outbox_waiting). One read (issue 27: run/tick._aftermath)."""
        return self.connect().execute(
            "SELECT 1 WHERE EXISTS(SELECT 1 FROM incidents WHERE status = 'open'"
            " AND kind = 'suspended') OR EXISTS(SELECT 1 FROM outbox"
            " WHERE status IN ('pending', 'held'))").fetchone() is None

    def _unchanged(self, column: str, task_id: str) -> bool:
        """The task's `column` is 0 (or NULL) or it has no row: setting it to 0 writes nothing."""
        return self._nothing_to_write(
            f"SELECT 1 FROM task_state WHERE task_id = ? AND {column} != 0", (task_id,))  # noqa: S608

    def suspensions(self) -> dict[str, Suspension]:
        """The suspended tasks by id (every host honours them, hosts/peers.py)."""
        return {r[0]: Suspension(float(r[1]), r[2], r[3]) for r in self.connect().execute(
            "SELECT task_id, suspended_at, suspended_by, suspended_hash FROM task_state"
            " WHERE suspended_at IS NOT NULL").fetchall()}

    def clear_suspension(self, task_id: str, at: float) -> None:
        """Lift the task's suspension, unless a newer one replaced the one made `at`."""
        with self.write() as db:
            db.execute("UPDATE task_state SET suspended_at = NULL, suspended_by = NULL,"
                       " suspended_hash = NULL WHERE task_id = ? AND suspended_at = ?",
                       (task_id, at))
