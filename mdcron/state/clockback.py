"""State stamped after now: what a clock that went back (or one `tick --now` in 2027) leaves
behind, found and cleared in one transaction (run/clock_back.py says it).

A task whose last_slot (or not_before) lies in the future is never due until that moment comes:
an every-minute task would silently not run for a year. Clearing means: last_slot NULL and
not_before the start of now's minute, the first-seen rule (schedule/observe.py), so the current
minute's fire runs and nothing before it (no daily task fires spuriously). retention_at in the
future would keep retention from ever running; an outbox message waiting until then would never
be sent. Run rows are history and stay as they are.
"""

from __future__ import annotations

from operator import itemgetter

from ..core.clock import minute_floor
from ..core.records import NamedTuple  # typing's, without its per-field check
from .db import Tables
from .meta import put_metas, read_meta
from .task_state import StateRow

_NOT_BEFORE, _LAST_SLOT = itemgetter(2), itemgetter(3)  # StateRow fields, read fast
OUTBOX_HORIZON = 7200.0  # the outbox waits at most 60 min (backoff) or 5 min (lease) by itself


class Future(NamedTuple):
    latest: float | None  # the latest stamp found after the limit; None: nothing was
    tasks: list[str]  # the tasks whose slots were cleared


def _later(*values: float | None) -> float | None:
    found = [v for v in values if v is not None]
    return max(found) if found else None


def ahead(rows: dict[str, StateRow], last: str | None, limit: float) -> bool:
    """Pure: does anything the tick has read lie after `limit`? Two C-level passes over the
    rows the full tick read anyway (10k tasks: 4.6 ms on this 2-core machine at load 19)."""
    try:
        if last is not None and float(last) > limit:
            return True
    except ValueError:
        pass
    values = rows.values()
    if max(map(_NOT_BEFORE, values), default=0.0) > limit:
        return True
    return max(filter(None, map(_LAST_SLOT, values)), default=0.0) > limit


def cleared(row: StateRow, now: float, limit: float) -> StateRow:
    """Pure: the row as clear_future leaves it (for `tick --dry-run`, which writes nothing)."""
    if (row.last_slot is not None and row.last_slot > limit) or row.not_before > limit:
        return row._replace(last_slot=None, not_before=minute_floor(now))
    return row


class ClockBackTable(Tables):
    def clear_future(self, now: float, limit: float) -> Future:
        """Clear what is stamped after `limit` (now + a slack for host skew); see the module
        docstring. One write transaction: the tick calls it only when it saw a future stamp."""
        floor = minute_floor(now)
        with self.write() as db:
            rows = db.execute(
                "SELECT task_id, last_slot, not_before FROM task_state"
                " WHERE last_slot > ? OR not_before > ? ORDER BY task_id", (limit, limit)
            ).fetchall()
            latest = _later(*(_later(r[1], r[2]) for r in rows))
            if rows:
                db.execute("UPDATE task_state SET last_slot = NULL, not_before = ?"
                           " WHERE last_slot > ? OR not_before > ?", (floor, limit, limit))
            retention = read_meta(db, "retention_at")
            try:
                stamp = float(retention) if retention is not None else None
            except ValueError:
                stamp = None
            if stamp is not None and stamp > limit:
                latest = _later(latest, stamp)
                put_metas(db, {"retention_at": repr(now)})
            waiting = db.execute(
                "SELECT max(next_attempt_at) FROM outbox WHERE status = 'pending'"
                " AND next_attempt_at > ?", (limit + OUTBOX_HORIZON,)).fetchone()[0]
            if waiting is not None:
                latest = _later(latest, float(waiting))
                db.execute("UPDATE outbox SET next_attempt_at = ? WHERE status = 'pending'"
                           " AND next_attempt_at > ?", (now, limit + OUTBOX_HORIZON))
        return Future(latest, [str(r[0]) for r in rows])
