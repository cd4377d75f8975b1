"""The `heals` table: one row per self-heal attempt (diagnosis, diff, backup, outcome)."""

from __future__ import annotations

from ..core.records import NamedTuple  # typing's, without its per-field check
from .db import Tables

HealRow = dict[str, object]


class AppliedHeal(NamedTuple):
    id: int
    backup_dir: str


class HealsTable(Tables):
    def add_heal(self, task_id: str, run_id: int, attempt: int, created_at: float,
                 diagnosis: str | None, diff: str | None, backup_dir: str | None,
                 outcome: str) -> int:
        with self.write() as db:
            cur = db.execute(
                "INSERT INTO heals(task_id, run_id, attempt, created_at, diagnosis, diff,"
                " backup_dir, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (task_id, run_id, attempt, created_at, diagnosis, diff, backup_dir, outcome),
            )
            return int(cur.lastrowid or 0)

    def heals_since(self, task_id: str, since: float) -> int:
        row = self.connect().execute(
            "SELECT count(*) FROM heals WHERE task_id = ? AND created_at >= ?", (task_id, since)
        ).fetchone()
        return int(row[0])

    def heal_history(self, task_id: str, limit: int = 10) -> list[HealRow]:
        """The newest heals of a task."""
        return self._rows("SELECT * FROM heals WHERE task_id = ? ORDER BY id DESC LIMIT ?",
                          (task_id, limit))

    def last_applied_heal(self, task_id: str) -> AppliedHeal | None:
        """The newest heal that changed files and kept a backup (what `revert` undoes): a
        finished one (`changed`), or one cut off whose files the next tick could not all put
        back (`interrupted`, selfheal/unfinished.py)."""
        row = self.connect().execute(
            "SELECT id, backup_dir FROM heals WHERE task_id = ?"
            " AND outcome IN ('changed', 'interrupted')"
            " AND backup_dir IS NOT NULL ORDER BY id DESC LIMIT 1", (task_id,)
        ).fetchone()
        return AppliedHeal._make(row) if row else None

    def heal_for_run(self, task_id: str, run_id: int, created_at: float) -> int | None:
        """The row a heal wrote when it ended (its journal outlived it: selfheal/unfinished)."""
        row = self.connect().execute(
            "SELECT id FROM heals WHERE task_id = ? AND run_id = ? AND created_at = ?"
            " ORDER BY id LIMIT 1", (task_id, run_id, created_at)
        ).fetchone()
        return int(row[0]) if row else None

    def mark_reverted(self, heal_id: int) -> None:
        with self.write() as db:
            db.execute("UPDATE heals SET outcome = 'reverted' WHERE id = ?", (heal_id,))
