"""Incidents: one open record per (task, kind) that something needs a person.

A repeat of an open incident bumps its count, last_seen, last error and output tail instead of
opening another (the partial unique index `incidents_one_open` makes that an upsert, safe
against two ticks at once). Incidents close when the task succeeds or is re-enabled, or by hand.
`incident_command` (from the config) runs for newly opened incidents only; the caller decides.

Lazy imports: the process runner (run/process.py) loads only when an incident command is
configured and runs.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from ..settings.config import is_secret
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


def run_incident_command(command: str, incident: Mapping[str, object], *, home: Path,
                         environ: Mapping[str, str], timeout: float = 30,
                         secret_names: Sequence[str] = (),
                         kill_grace: float = 5.0) -> str | None:
    """Run `command` with /bin/sh, the incident as JSON on stdin and MDCRON_INCIDENT_ID,
    MDCRON_INCIDENT_TITLE, MDCRON_INCIDENT_KIND and MDCRON_TASK_ID set, in the scheduler's
    environment minus secrets (`secret_names`: Config.secret_names()). Its own process group,
    killed after `timeout`; output in logs/incidents/<id>.log. Returns an error line or None;
    never raises."""
    from ..run.process import CommandSpec, run_command

    incident_id = incident.get("id")
    where = f"incident_command for incident #{incident_id}"
    stdin_path: str | None = None
    try:
        env = {k: v for k, v in environ.items() if not is_secret(k, secret_names)}
        env.update({
            "MDCRON_INCIDENT_ID": str(incident_id),
            "MDCRON_INCIDENT_TITLE": incident_title(incident),
            "MDCRON_INCIDENT_KIND": str(incident.get("kind") or ""),
            "MDCRON_TASK_ID": str(incident.get("task_id") or ""),
        })
        fd, stdin_path = tempfile.mkstemp(prefix="mdcron-incident-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(incident_json(incident), f, default=str)
        # run_command gives the child no stdin; the script opens the JSON as its stdin first.
        script = f"exec <{shlex.quote(stdin_path)}\n{command}"
        log_path = home / "logs" / "incidents" / f"{incident_id}.log"
        result = run_command(
            CommandSpec(["/bin/sh", "-c", script], home, env, timeout),
            log_path=log_path, max_log_bytes=1024 * 1024, tail_bytes=2048,
            kill_grace=kill_grace, log_root=home,
        )
        if result.ok:
            return None
        return f"{where} {result.fail_reason or result.outcome.value} (log: {log_path})"
    except Exception as exc:
        return f"{where} could not run: {type(exc).__name__}: {exc}"
    finally:
        if stdin_path is not None:
            try:
                os.unlink(stdin_path)
            except OSError:
                pass
