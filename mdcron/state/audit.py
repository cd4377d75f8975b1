"""The `audit` table (issue 24): every action a person took, from the dashboard or the CLI:
who (a web session's label and the account, a script's token, or the CLI's user), what, on
which task, when, and from where (the remote address, or the terminal)."""

from __future__ import annotations

from .db import Tables

AuditRow = dict[str, object]
FIELD = 500  # characters kept of who, detail and origin (a hostile header cannot bloat a row)


class AuditTable(Tables):
    def add_audit(self, at: float, who: str, action: str, task_id: str | None,
                  detail: str | None, origin: str | None) -> int:
        with self.write() as db:
            cur = db.execute(
                "INSERT INTO audit(at, who, action, task_id, detail, origin)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (at, who[:FIELD], action[:64], task_id, (detail or "")[:FIELD] or None,
                 (origin or "")[:FIELD] or None),
            )
            return int(cur.lastrowid or 0)

    def audit_rows(self, task_id: str | None = None, limit: int = 50) -> list[AuditRow]:
        """The newest actions first; only one task's with `task_id`."""
        if task_id is None:
            return self._rows("SELECT * FROM audit ORDER BY id DESC LIMIT ?", (limit,))
        return self._rows("SELECT * FROM audit WHERE task_id = ? ORDER BY id DESC LIMIT ?",
                          (task_id, limit))
