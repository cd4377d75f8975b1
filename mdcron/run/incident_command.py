"""The configured `incident_command`, run for a newly opened incident (alerts/after_run.py decides
when; starting a process is this layer's job, so the callers in run/ and cli/ hand this function
down to alerts/ as its `incident_runner`).

The command runs with /bin/sh through the task runner (process.py): its own process group,
killed at its deadline, its output in logs/incidents/<id>.log.

Lazy imports: the runner, json and tempfile load only when an incident command runs (most ticks
open no incident; a tick imports this module with the alerts, once a run ended).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..alerts.incidents import incident_json, incident_title
from ..settings.config import is_secret


def run_incident_command(command: str, incident: Mapping[str, object], *, home: Path,
                         environ: Mapping[str, str], timeout: float = 30,
                         secret_names: Sequence[str] = (),
                         kill_grace: float = 5.0) -> str | None:
    """Run `command` with /bin/sh, the incident as JSON on stdin and MDCRON_INCIDENT_ID,
    MDCRON_INCIDENT_TITLE, MDCRON_INCIDENT_KIND and MDCRON_TASK_ID set, in the scheduler's
    environment minus secrets (`secret_names`: Config.secret_names()). Its own process group,
    killed after `timeout`; output in logs/incidents/<id>.log. Returns an error line or None;
    never raises."""
    import json
    import shlex
    import tempfile

    from .process import CommandSpec, run_command

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
