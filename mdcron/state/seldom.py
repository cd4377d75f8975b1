"""The operations of the tables a tick seldom needs (audit, heals, hosts, incidents, leases,
metrics, outbox), composed into store.Store. Each loads its table module on its first
call and runs that table's own code on the store: the tick's path to its first task no longer
imports the seven modules (issue 27: ~2 ms) for what mostly the commands, the dashboard, the
ladder's failures, a shared state and the alerts after a run ask.

Lazy imports: every method imports its table module (those modules hold the SQL; this one only
the signatures state/protocol.py lists, which tests/test_state_protocol.py compares).
"""

from __future__ import annotations

from .db import Tables

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .audit import AuditRow
    from .heals import AppliedHeal, HealRow
    from .hosts import FileCopy, HostTick
    from .incidents import IncidentRow
    from .leases import Busy, Granted, LeaseRow
    from .outbox import Claimed, Due


class SeldomTables(Tables):
    """Store's operations on the seldom-used tables, each delegated to its table's class."""

    # -- audit (commands that change a task)

    def add_audit(self, at: float, who: str, action: str, task_id: str | None,
                  detail: str | None, origin: str | None) -> int:
        from .audit import AuditTable

        return AuditTable.add_audit(self, at, who, action, task_id, detail, origin)

    def audit_rows(self, task_id: str | None = None, limit: int = 50) -> list[AuditRow]:
        from .audit import AuditTable

        return AuditTable.audit_rows(self, task_id, limit)

    # -- heals (a failed run's self-heal)

    def add_heal(self, task_id: str, run_id: int, attempt: int, created_at: float,
                 diagnosis: str | None, diff: str | None, backup_dir: str | None,
                 outcome: str) -> int:
        from .heals import HealsTable

        return HealsTable.add_heal(self, task_id, run_id, attempt, created_at, diagnosis, diff,
                                   backup_dir, outcome)

    def heals_since(self, task_id: str, since: float) -> int:
        from .heals import HealsTable

        return HealsTable.heals_since(self, task_id, since)

    def heal_history(self, task_id: str, limit: int = 10) -> list[HealRow]:
        from .heals import HealsTable

        return HealsTable.heal_history(self, task_id, limit)

    def last_applied_heal(self, task_id: str) -> AppliedHeal | None:
        from .heals import HealsTable

        return HealsTable.last_applied_heal(self, task_id)

    def heal_for_run(self, task_id: str, run_id: int, created_at: float) -> int | None:
        from .heals import HealsTable

        return HealsTable.heal_for_run(self, task_id, run_id, created_at)

    def mark_reverted(self, heal_id: int) -> None:
        from .heals import HealsTable

        HealsTable.mark_reverted(self, heal_id)

    # -- hosts (a shared state)

    def host_files(self) -> dict[str, str]:
        from .hosts import HostsTable

        return HostsTable.host_files(self)

    def record_host_files(self, changed: Sequence[tuple[str, str]], gone: Sequence[str],
                          now: float) -> None:
        from .hosts import HostsTable

        HostsTable.record_host_files(self, changed, gone, now)

    def file_copies(self) -> list[FileCopy]:
        from .hosts import HostsTable

        return HostsTable.file_copies(self)

    def file_counts(self) -> dict[str, int]:
        from .hosts import HostsTable

        return HostsTable.file_counts(self)

    def host_seen(self) -> None:
        from .hosts import HostsTable

        HostsTable.host_seen(self)

    def host_ticks(self) -> list[HostTick]:
        from .hosts import HostsTable

        return HostsTable.host_ticks(self)

    def db_clock(self) -> float:
        from .hosts import HostsTable

        return HostsTable.db_clock(self)

    # -- incidents (a run that failed or recovered, the commands)

    def open_or_bump_incident(self, task: str, kind: str, error: str | None,
                              output_tail: str | None, now: float) -> tuple[int, bool]:
        from .incidents import IncidentsTable

        return IncidentsTable.open_or_bump_incident(self, task, kind, error, output_tail, now)

    def resolve_task_incidents(self, task_id: str, now: float, resolution: str) -> list[int]:
        from .incidents import IncidentsTable

        return IncidentsTable.resolve_task_incidents(self, task_id, now, resolution)

    def resolve_incident(self, incident_id: int, now: float, resolution: str) -> bool:
        from .incidents import IncidentsTable

        return IncidentsTable.resolve_incident(self, incident_id, now, resolution)

    def incident(self, incident_id: int) -> IncidentRow | None:
        from .incidents import IncidentsTable

        return IncidentsTable.incident(self, incident_id)

    def incidents(self, include_resolved: bool = False) -> list[IncidentRow]:
        from .incidents import IncidentsTable

        return IncidentsTable.incidents(self, include_resolved)

    def open_incident_count(self) -> int:
        from .incidents import IncidentsTable

        return IncidentsTable.open_incident_count(self)

    def suspended_but_enabled(self) -> list[str]:
        from .incidents import IncidentsTable

        return IncidentsTable.suspended_but_enabled(self)

    # -- leases (a shared state)

    def take_lease(self, task_id: str, run_id: int | None, holder: str,
                   seconds: float) -> Granted | Busy:
        from .leases import LeasesTable

        return LeasesTable.take_lease(self, task_id, run_id, holder, seconds)

    def release_lease(self, task_id: str, fence: int) -> None:
        from .leases import LeasesTable

        LeasesTable.release_lease(self, task_id, fence)

    def renew_lease(self, task_id: str, fence: int, holder: str, seconds: float) -> bool:
        from .leases import LeasesTable

        return LeasesTable.renew_lease(self, task_id, fence, holder, seconds)

    def extend_lease(self, task_id: str, seconds: float) -> bool:
        from .leases import LeasesTable

        return LeasesTable.extend_lease(self, task_id, seconds)

    def lease(self, task_id: str) -> LeaseRow | None:
        from .leases import LeasesTable

        return LeasesTable.lease(self, task_id)

    def lease_busy(self, task_id: str) -> Busy | None:
        from .leases import LeasesTable

        return LeasesTable.lease_busy(self, task_id)

    # -- metrics (/metrics, metrics_file)

    def metric_rows(self) -> dict[str, list[tuple]]:
        from .metrics import MetricsTable

        return MetricsTable.metric_rows(self)

    # -- outbox (alerts)

    def due_messages(self, ts: float) -> list[Due]:
        from .outbox import OutboxTable

        return OutboxTable.due_messages(self, ts)

    def claim_message(self, message_id: int, ts: float, lease: float) -> Claimed | None:
        from .outbox import OutboxTable

        return OutboxTable.claim_message(self, message_id, ts, lease)

    def message_sent(self, message_id: int, ts: float) -> None:
        from .outbox import OutboxTable

        OutboxTable.message_sent(self, message_id, ts)

    def message_failed(self, message_id: int, status: str, next_attempt_at: float | None,
                       error: str) -> None:
        from .outbox import OutboxTable

        OutboxTable.message_failed(self, message_id, status, next_attempt_at, error)

    def outbox_waiting(self) -> bool:
        from .outbox import OutboxTable

        return OutboxTable.outbox_waiting(self)

    def outbox_unsent(self, limit: int = 100) -> list[dict[str, object]]:
        from .outbox import OutboxTable

        return OutboxTable.outbox_unsent(self, limit)
