"""The `outbox` table (alerts waiting to be sent, held in quiet hours, sent, dead) and
`alert_windows` (the collapse window per task and kind). Enqueueing reads and writes both in
one transaction, so its steps take the connection `store.write()` yields; the flush's steps
are one short transaction each."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..core.records import NamedTuple  # typing's, without its per-field check
from .db import Tables, marks

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Any


class Window(NamedTuple):
    kind: str
    start: float
    suppressed: int


class Held(NamedTuple):
    id: int
    created_at: float
    destination: str
    title: str
    body: str


class Due(NamedTuple):
    id: int
    destination: str


class Claimed(NamedTuple):
    title: str
    body: str
    attempts: int
    kind: str = "info"  # the alert's kind (its apprise notify type: notify.notify_type)


class Message(NamedTuple):
    created_at: float
    destination: str
    task_id: str | None
    kind: str
    forced: bool
    title: str
    body: str
    held: bool


# -- enqueue's steps: inside the caller's write transaction ------------------------------------


def window(db: Any, task_key: str, kind: str) -> Window | None:
    row = db.execute(
        "SELECT kind, window_start, suppressed FROM alert_windows WHERE task_id = ? AND kind = ?",
        (task_key, kind),
    ).fetchone()
    return Window._make(row) if row else None


def count_suppressed(db: Any, task_key: str, kind: str) -> None:
    db.execute("UPDATE alert_windows SET suppressed = suppressed + 1"
               " WHERE task_id = ? AND kind = ?", (task_key, kind))


def open_window(db: Any, task_key: str, kind: str, start: float) -> None:
    db.execute(
        "INSERT INTO alert_windows(task_id, kind, window_start, suppressed)"
        " VALUES (?, ?, ?, 0) ON CONFLICT(task_id, kind)"
        " DO UPDATE SET window_start = excluded.window_start, suppressed = 0",
        (task_key, kind, start),
    )


def close_windows(db: Any, task_key: str, keep: Collection[str]) -> list[Window]:
    """Delete the task's windows of every kind but `keep`; the deleted ones, by kind."""
    kinds = sorted(keep)
    closed = db.execute(
        f"SELECT kind, window_start, suppressed FROM alert_windows WHERE task_id = ?"
        f" AND kind NOT IN ({marks(len(kinds))}) ORDER BY kind", (task_key, *kinds),
    ).fetchall()
    db.execute(f"DELETE FROM alert_windows WHERE task_id = ? AND kind NOT IN"
               f" ({marks(len(kinds))})", (task_key, *kinds))
    return [Window._make(r) for r in closed]


def add_message(db: Any, m: Message) -> None:
    db.execute(
        "INSERT INTO outbox(created_at, destination, task_id, kind, forced, title, body,"
        " status, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (m.created_at, m.destination, m.task_id, m.kind, int(m.forced), m.title, m.body,
         "held" if m.held else "pending", None if m.held else m.created_at),
    )


# -- held messages -------------------------------------------------------------------------------


def held(db: Any) -> list[Held]:
    return [Held._make(r) for r in db.execute(
        "SELECT id, created_at, destination, title, body FROM outbox WHERE status = 'held'"
        " ORDER BY id")]


def release(db: Any, message_id: int, ts: float) -> None:
    db.execute("UPDATE outbox SET status = 'pending', next_attempt_at = ?"
               " WHERE id = ? AND status = 'held'", (ts, message_id))


def add_digest(db: Any, ts: float, destination: str, title: str, body: str,
               ids: Sequence[int]) -> int:
    """One pending digest instead of the held messages `ids` (marked digested)."""
    cur = db.execute(
        "INSERT INTO outbox(created_at, destination, kind, title, body, status,"
        " next_attempt_at) VALUES (?, ?, 'digest', ?, ?, 'pending', ?)",
        (ts, destination, title, body, ts),
    )
    db.execute(f"UPDATE outbox SET status = 'digested' WHERE status = 'held'"
               f" AND id IN ({marks(len(ids))})", list(ids))
    return int(cur.lastrowid or 0)


class OutboxTable(Tables):
    def due_messages(self, ts: float) -> list[Due]:
        return [Due._make(r) for r in self.connect().execute(
            "SELECT id, destination FROM outbox WHERE status = 'pending'"
            " AND next_attempt_at <= ? ORDER BY id", (ts,))]

    def claim_message(self, message_id: int, ts: float, lease: float) -> Claimed | None:
        """Check-and-set: only the flush whose UPDATE changes the row sends the message."""
        with self.write() as db:
            cur = db.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?"
                " WHERE id = ? AND status = 'pending' AND next_attempt_at <= ?",
                (ts + lease, message_id, ts),
            )
            if cur.rowcount != 1:
                return None
            row = db.execute(
                "SELECT title, body, attempts, kind FROM outbox WHERE id = ?", (message_id,)
            ).fetchone()
        return Claimed(str(row[0]), str(row[1]), int(row[2]), str(row[3] or "info"))

    def message_sent(self, message_id: int, ts: float) -> None:
        with self.write() as db:
            db.execute("UPDATE outbox SET status = 'sent', sent_at = ?, next_attempt_at = NULL,"
                       " last_error = NULL WHERE id = ?", (ts, message_id))

    def message_failed(self, message_id: int, status: str, next_attempt_at: float | None,
                       error: str) -> None:
        with self.write() as db:
            db.execute("UPDATE outbox SET status = ?, next_attempt_at = ?, last_error = ?"
                       " WHERE id = ?", (status, next_attempt_at, error, message_id))

    def outbox_waiting(self) -> bool:
        """Whether anything is pending or held (a tick with nothing skips notify entirely)."""
        return self.connect().execute(
            "SELECT 1 FROM outbox WHERE status IN ('pending', 'held') LIMIT 1"
        ).fetchone() is not None

    def outbox_unsent(self, limit: int = 100) -> list[dict[str, object]]:
        """Pending, held and dead messages, newest first (the dashboard's health page)."""
        return self._rows(
            "SELECT id, created_at, destination, task_id, kind, title, status, attempts,"
            " next_attempt_at, last_error FROM outbox WHERE status IN ('pending', 'held',"
            " 'dead') ORDER BY id DESC LIMIT ?", (limit,))
