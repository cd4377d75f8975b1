"""The `runs` table: one row per attempt (scheduled, manual, retry, heal, rerun). Exactly-once
per (task, slot) rests on a partial unique index: the scheduled first attempt of a slot can be
inserted once, by one tick. Whole rows come back as dicts keyed by column (history, `show`,
the dashboard print most of them)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence

from ..core.outcome import Outcome, RunResult
from ..core.records import NamedTuple, dataclass  # NamedTuple: typing's, cheaper to build
from .db import Tables, marks

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Any

RunRow = dict[str, object]


@dataclass(frozen=True, slots=True)
class Owner:
    """The process that claims a run row; a row whose owner is gone and whose lock is free
    was left behind by a crash."""

    pid: int
    start: int | None
    boot: str | None


class SlotRow(NamedTuple):
    """One attempt at an upstream's slot, as the chains read them."""

    task_id: str
    scheduled_for: float
    status: str
    error: str | None


@dataclass(frozen=True)
class RunFilter:
    """The dashboard's history page: equal-to filters, a started_at range, keyset `before`."""

    task_id: str | None = None
    status: str | None = None
    trigger: str | None = None
    started_from: float | None = None
    started_until: float | None = None
    before: int | None = None


def running_on(db: Any, task_id: str, host: str) -> list[int]:
    """Inside the caller's transaction (leases.take_lease): the task's rows still running on
    `host`, whose lease expired."""
    return [int(r[0]) for r in db.execute(
        "SELECT id FROM runs WHERE task_id = ? AND status = 'running' AND host = ?",
        (task_id, host))]



# issue 27: a skip-scan over runs_by_task (each next task id, then its max id: two index seeks
# a task) instead of reading the whole index: 1,000,000 runs, 2x faster
_LAST_RUNS = (
    "WITH RECURSIVE ids(t) AS (SELECT min(task_id) FROM runs UNION ALL"
    " SELECT (SELECT min(task_id) FROM runs WHERE task_id > ids.t) FROM ids"
    " WHERE ids.t IS NOT NULL)"
    " SELECT {columns} FROM ids JOIN runs r"
    " ON r.id = (SELECT max(id) FROM runs x WHERE x.task_id = ids.t)")


class RunsTable(Tables):
    # -- claims and writes ------------------------------------------------------------------

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

    def release_claim(self, run_id: int, task_id: str, slot: float) -> bool:
        """Give back a claim that never started (a chain's downstream whose previous run still
        holds the task): its row goes and last_slot steps back to the claim before it (unless
        a later slot was claimed meanwhile), so the slot is owed again to whichever tick, on
        any host, finds the task free. Only the owner's row still marked running goes."""
        with self.write() as db:
            cur = db.execute("DELETE FROM runs WHERE id = ? AND status = 'running'", (run_id,))
            if cur.rowcount != 1:
                return False
            db.execute(
                "UPDATE task_state SET last_slot = (SELECT max(scheduled_for) FROM runs"
                " WHERE task_id = ? AND trigger = 'schedule' AND attempt = 1"
                " AND scheduled_for < ?) WHERE task_id = ? AND last_slot = ?",
                (task_id, slot, task_id, slot))
        return True

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

    def _keep_late(self, run_id: int, reason: str, note: str, at: float) -> bool:
        """Issue 23 (Store.keep_late): close the row `lost` if still running; add the note."""
        closed = self._end_running(run_id, Outcome.LOST, reason, at, False)
        self.add_note(run_id, note)
        return closed

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

    def prune_runs(self, older_than: float, keep: int = 0, share: float = 1.0) -> list[str]:
        """Delete finished runs that started before `older_than`, oldest first, but never a
        task's `keep` newest runs (by id: the order they were recorded, whatever the clock
        said) and at most `share` of all rows (rounded up) in this call. Returns the deleted
        runs' log paths (with a shared state, only this host's: another host's logs are on
        that host). The choice is read outside the write lock (newer runs only push a run
        further from its task's newest); the delete re-checks that a row is finished."""
        db = self.connect()
        total = db.execute("SELECT count(*) FROM runs").fetchone()[0]
        limit = math.ceil(total * share)
        if not limit:
            return []
        newest: dict[str, int] = {}  # task -> the id of its keep-th newest run (kept from it up)
        if keep:
            newest = dict(db.execute(
                "SELECT t.task_id, (SELECT id FROM runs r WHERE r.task_id = t.task_id"
                " ORDER BY id DESC LIMIT 1 OFFSET ?) FROM (SELECT DISTINCT task_id FROM runs) t",
                (keep - 1,)).fetchall())
        doomed: list[tuple[int, object, object]] = []
        old = db.execute(  # enough rows even if every task's kept runs come first
            "SELECT id, task_id, log_path, host FROM runs WHERE started_at < ?"
            " AND status != 'running' ORDER BY started_at, id LIMIT ?",
            (older_than, limit + keep * len(newest))).fetchall()
        for run_id, task_id, log_path, host in old:
            kept_from = newest.get(task_id)  # None: the task has fewer than `keep` runs
            if not keep or (kept_from is not None and run_id < kept_from):
                doomed.append((run_id, log_path, host))
                if len(doomed) >= limit:
                    break
        if not doomed:
            return []
        with self.write() as db:
            db.executemany("DELETE FROM runs WHERE id = ? AND status != 'running'",
                           [(r[0],) for r in doomed])
        return [str(r[1]) for r in doomed
                if r[1] is not None and (not self.url or r[2] in (None, self.host))]

    # -- reads ------------------------------------------------------------------------------

    def running_rows(self) -> list[RunRow]:
        return self._rows("SELECT * FROM runs WHERE status = 'running' ORDER BY id")

    def run(self, run_id: int) -> RunRow | None:
        rows = self._rows("SELECT * FROM runs WHERE id = ?", (run_id,))
        return rows[0] if rows else None

    def slot_of(self, run_id: int) -> tuple[float, str] | None:
        """(scheduled_for, trigger) of a run: what the ladder reads of its row before the start
        (issue 27: not the whole row made a dict, ~30 µs per run, 100 runs at once)."""
        row = self.connect().execute(
            "SELECT scheduled_for, trigger FROM runs WHERE id = ?", (run_id,)).fetchone()
        return (row[0], row[1]) if row else None

    def history(self, limit: int = 20, task_id: str | None = None) -> list[RunRow]:
        if task_id is None:
            return self._rows("SELECT * FROM runs ORDER BY id DESC LIMIT ?", (limit,))
        return self._rows(
            "SELECT * FROM runs WHERE task_id = ? ORDER BY id DESC LIMIT ?", (task_id, limit)
        )

    def history_page(self, where: RunFilter, limit: int) -> list[RunRow]:
        """Newest first, keyset pagination on id (fast at any depth)."""
        conds, args = [], []
        for col, value in (("task_id", where.task_id), ("status", where.status),
                           ("trigger", where.trigger)):
            if value:
                conds.append(f"{col} = ?")
                args.append(value)
        if where.started_from is not None and where.started_until is not None:
            conds.append("started_at >= ? AND started_at < ?")
            args += [where.started_from, where.started_until]
        if where.before is not None:
            conds.append("id < ?")
            args.append(where.before)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(conds) if conds else "")
        return self._rows(sql + " ORDER BY id DESC LIMIT ?", (*args, limit))

    def runs_version(self) -> tuple[int, tuple[int, ...]]:
        """(newest run id, ids of the running rows): changes whenever a run starts or ends,
        so the dashboard keeps its per-task dots until it does (two indexed reads)."""
        db = self.connect()
        top = db.execute("SELECT max(id) FROM runs").fetchone()[0]
        running = db.execute("SELECT id FROM runs WHERE status = 'running' ORDER BY id")
        return int(top or 0), tuple(int(r[0]) for r in running)

    def recent_runs(self, task_ids: Sequence[str], limit: int
                    ) -> dict[str, list[tuple[int, str, int | None]]]:
        """Each task's newest `limit` runs as (id, status, duration_ms), newest first: one
        indexed read per task (runs_by_task), not a scan of the whole table."""
        db = self.connect()
        out: dict[str, list[tuple[int, str, int | None]]] = {}
        for task_id in task_ids:
            rows = db.execute("SELECT id, status, duration_ms FROM runs WHERE task_id = ?"
                              " ORDER BY id DESC LIMIT ?", (task_id, limit)).fetchall()
            if rows:
                out[task_id] = [(int(r[0]), str(r[1]), r[2]) for r in rows]
        return out

    def neighbour_runs(self, task_id: str, run_id: int) -> tuple[int | None, int | None]:
        """The task's run just before `run_id` and just after it (ids), for prev/next links."""
        db = self.connect()
        prev = db.execute("SELECT max(id) FROM runs WHERE task_id = ? AND id < ?",
                          (task_id, run_id)).fetchone()[0]
        nxt = db.execute("SELECT min(id) FROM runs WHERE task_id = ? AND id > ?",
                         (task_id, run_id)).fetchone()[0]
        return prev, nxt

    def slot_rows(self, task_id: str, slot: float) -> list[RunRow]:
        """Every attempt at one slot of a task (run, retries, heals, rerun), oldest first."""
        return self._rows("SELECT * FROM runs WHERE task_id = ? AND scheduled_for = ?"
                          " ORDER BY id", (task_id, slot))

    def last_runs(self) -> dict[str, RunRow]:
        """The newest row of each task (any trigger, any attempt)."""
        rows = self._rows(_LAST_RUNS.format(columns="r.*"))
        return {str(r["task_id"]): r for r in rows}

    def last_run_briefs(self, task_ids: Iterable[str]) -> dict[str, RunRow]:
        """The newest row of each of these tasks as {started_at, status, host}: what `list`
        shows of it (issue 27: 10,000 tasks' three columns, not their whole rows; the ids
        given, not every id the runs table skip-scans for: half the time)."""
        ids = sorted(set(task_ids))
        if self.url:  # PostgreSQL: the ids as one array parameter
            source, arg = "unnest(CAST(? AS text[])) AS i(value)", ids
        else:
            source, arg = "json_each(?) AS i", json.dumps(ids)  # type: ignore[assignment]
        rows = self.connect().execute(
            "SELECT r.task_id, r.started_at, r.status, r.host FROM " + source + " JOIN runs r"
            " ON r.id = (SELECT max(id) FROM runs x WHERE x.task_id = i.value)", (arg,))
        return {str(t): {"started_at": at, "status": status, "host": host}
                for t, at, status, host in rows}

    def slot_claimed(self, task_id: str, slot: float) -> bool:
        """Whether the scheduled first attempt of (task, slot) has a row."""
        return self.connect().execute(
            "SELECT 1 FROM runs WHERE task_id = ? AND scheduled_for = ? AND trigger = 'schedule'"
            " AND attempt = 1", (task_id, slot)).fetchone() is not None

    def slots_after(self, task_ids: Sequence[str], after: float) -> list[SlotRow]:
        """The attempts of these tasks at slots after `after` (no heals, no `run --no-chain`),
        by task, slot, id."""
        if not task_ids:
            return []
        rows = self.connect().execute(
            f"SELECT task_id, scheduled_for, status, error FROM runs WHERE task_id IN"
            f" ({marks(len(task_ids))}) AND scheduled_for > ? AND kind != 'heal'"
            " AND trigger != 'manual-no-chain' ORDER BY task_id, scheduled_for, id",
            (*task_ids, after))
        return [SlotRow._make(r) for r in rows]

    def last_skipped(self, task_ids: Sequence[str], reason_prefix: str) -> dict[str, float]:
        """The latest scheduled slot per task recorded `skipped` with an error starting with
        `reason_prefix` (once_per.py: was this period's skip already written?)."""
        if not task_ids:
            return {}
        rows = self.connect().execute(
            f"SELECT task_id, max(scheduled_for) FROM runs WHERE status = 'skipped'"
            f" AND trigger = 'schedule' AND error LIKE ? AND task_id IN"
            f" ({marks(len(task_ids))}) GROUP BY task_id",
            (reason_prefix.replace("%", "") + "%", *task_ids),
        )
        return {r[0]: r[1] for r in rows}

    def pass_slots(self, passes: Sequence[tuple[str, float]]) -> set[tuple[str, float]]:
        """Claim (task_id, slot) pairs without a run row: last_slot moves to the slot by a
        check-and-set, so of two ticks only one passes it (a once_per skip already said once
        this period). Returns the pairs this call passed."""
        won: set[tuple[str, float]] = set()
        if not passes:
            return won
        with self.write() as db:
            for task_id, slot in passes:
                cur = db.execute(
                    "UPDATE task_state SET last_slot = ? WHERE task_id = ?"
                    " AND (last_slot IS NULL OR last_slot < ?)", (slot, task_id, slot))
                if cur.rowcount == 1:
                    won.add((task_id, slot))
        return won

    def last_successes(self, task_ids: Sequence[str], before: float) -> dict[str, float]:
        """The latest success slot per task, at or before `before` (any trigger, any attempt)."""
        if not task_ids:
            return {}
        rows = self.connect().execute(
            f"SELECT task_id, max(scheduled_for) FROM runs WHERE status = 'success'"
            f" AND scheduled_for <= ? AND task_id IN ({marks(len(task_ids))}) GROUP BY task_id",
            (before, *task_ids),
        )
        return {r[0]: r[1] for r in rows}
