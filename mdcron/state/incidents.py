"""The `incidents` table: one open row per (task, kind); the partial unique index
`incidents_one_open` makes a repeat an upsert, safe against two ticks at once."""

from __future__ import annotations

from .db import Tables

IncidentRow = dict[str, object]


class IncidentsTable(Tables):
    def open_or_bump_incident(self, task: str, kind: str, error: str | None,
                              output_tail: str | None, now: float) -> tuple[int, bool]:
        """Open an incident for (task, kind), or bump the open one: (id, newly opened)."""
        with self.write() as db:
            db.execute(
                "INSERT INTO incidents(task_id, kind, status, opened_at, last_seen, count,"
                " last_error, output_tail) VALUES (?, ?, 'open', ?, ?, 1, ?, ?)"
                " ON CONFLICT(task_id, kind) WHERE status = 'open' DO UPDATE SET"
                " count = incidents.count + 1, last_seen = excluded.last_seen,"
                " last_error = excluded.last_error, output_tail = excluded.output_tail",
                (task, kind, now, now, error, output_tail),
            )
            row = db.execute(
                "SELECT id, count FROM incidents WHERE task_id = ? AND kind = ?"
                " AND status = 'open'",
                (task, kind),
            ).fetchone()
        return int(row[0]), row[1] == 1

    def resolve_task_incidents(self, task_id: str, now: float, resolution: str) -> list[int]:
        """Resolve every open incident of a task; their ids. None open (a success after a
        success): nothing is written (issue 27: no write turn for a transaction that changed
        nothing; one that opens meanwhile is as if opened after this call). A run holding a
        lease writes all the same (issue 11: its writes check the lease is still its own)."""
        if self._nothing_to_write(
                "SELECT 1 FROM incidents WHERE task_id = ? AND status = 'open' LIMIT 1",
                (task_id,)):
            return []
        with self.write() as db:
            ids = [r[0] for r in db.execute(
                "SELECT id FROM incidents WHERE task_id = ? AND status = 'open' ORDER BY id",
                (task_id,),
            )]
            db.execute(
                "UPDATE incidents SET status = 'resolved', resolved_at = ?, resolution = ?"
                " WHERE task_id = ? AND status = 'open'",
                (now, resolution, task_id),
            )
        return ids

    def resolve_incident(self, incident_id: int, now: float, resolution: str) -> bool:
        """False when it does not exist or was not open."""
        with self.write() as db:
            cur = db.execute(
                "UPDATE incidents SET status = 'resolved', resolved_at = ?, resolution = ?"
                " WHERE id = ? AND status = 'open'",
                (now, resolution, incident_id),
            )
            return cur.rowcount == 1

    def incident(self, incident_id: int) -> IncidentRow | None:
        rows = self._rows("SELECT * FROM incidents WHERE id = ?", (incident_id,))
        return rows[0] if rows else None

    def incidents(self, include_resolved: bool = False) -> list[IncidentRow]:
        """Open incidents first, newest first within each group."""
        where = "" if include_resolved else " WHERE status = 'open'"
        return self._rows(f"SELECT * FROM incidents{where} ORDER BY status = 'open' DESC,"
                          " id DESC")

    def open_incident_count(self) -> int:
        return int(self.connect().execute(
            "SELECT count(*) FROM incidents WHERE status = 'open'").fetchone()[0])

    def suspended_but_enabled(self) -> list[str]:
        """Tasks with an open `suspended` incident that a person has enabled again."""
        return [str(r[0]) for r in self.connect().execute(
            "SELECT DISTINCT i.task_id FROM incidents i JOIN task_state s"
            " ON s.task_id = i.task_id WHERE i.status = 'open' AND i.kind = 'suspended'"
            " AND s.enabled = 1")]
