"""Incidents: one open record per (task, kind) that something needs a person.

A repeat of an open incident bumps its count, last_seen, last error and output tail instead of
opening another (the partial unique index `incidents_one_open` makes that an upsert, safe
against two ticks at once). Incidents close when the task succeeds or is re-enabled, or by hand.
`incident_command` (from the config) runs for newly opened incidents only; the caller decides,
and run/incident_command.py runs it (starting a process is the run/ layer's job).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from ..state.store import Store

SCHEDULER_TASK = "*"  # task_id of scheduler-level incidents (duplicate ids, crashed ticks)
_TIMES = ("opened_at", "last_seen", "resolved_at")


def open_or_bump(store: Store, *, task_id: str | None, kind: str, error: str | None,
                 output_tail: str | None, now: float) -> tuple[int, bool]:
    """Open an incident for (task, kind), or bump the open one. Returns (id, newly opened)."""
    return store.open_or_bump_incident(task_id or SCHEDULER_TASK, kind, error, output_tail, now)


def resolve_for_task(store: Store, task_id: str, now: float, resolution: str) -> list[int]:
    """Resolve every open incident of a task ("task succeeded", "re-enabled"); their ids."""
    return store.resolve_task_incidents(task_id, now, resolution)


def resolve(store: Store, incident_id: int, now: float,
            resolution: str = "resolved by hand") -> bool:
    """Resolve one incident; False when it does not exist or was not open."""
    return store.resolve_incident(incident_id, now, resolution)


def get_incident(store: Store, incident_id: int) -> dict[str, object] | None:
    return store.incident(incident_id)


def list_incidents(store: Store, include_resolved: bool = False) -> list[dict[str, object]]:
    """Open incidents first, newest first within each group (all columns, times as Unix s)."""
    return store.incidents(include_resolved)


def incident_title(incident: Mapping[str, object]) -> str:
    if incident.get("title"):
        return str(incident["title"])
    task = incident.get("task_id")
    who = "scheduler" if task in (None, SCHEDULER_TASK) else str(task)
    return f"{who}: {incident.get('kind')}"


def incident_json(incident: Mapping[str, object]) -> dict[str, object]:
    """The incident as sent to incident_command: times as ISO-8601 UTC, plus a title."""
    data = dict(incident)
    for key in _TIMES:
        value = data.get(key)
        if isinstance(value, (int, float)):
            data[key] = datetime.fromtimestamp(value, UTC).isoformat()
    data["title"] = incident_title(incident)
    return data
