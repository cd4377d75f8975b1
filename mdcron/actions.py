"""State-changing actions shared by the CLI commands and the web page (mdcron/web): the same
validation, the same byte-preserving edits, the same store calls. No printing here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .config import Config
from .store import state_store
from .task import Task
from .usage import UsageError


class ActionError(UsageError):
    """An action that cannot be done; the message says why (a CLI usage error, a web 4xx)."""


def load_task(config: Config, task_id: str) -> Task:
    from .cache import load_task_set

    found = load_task_set(config)
    task = found.get(task_id)
    if task is not None:
        return task
    bad = [p for p in found.problems if p.severity == "error" and p.path.stem == task_id]
    if bad:
        raise ActionError(f"task {task_id!r} has errors: " + "; ".join(str(p) for p in bad))
    raise ActionError(f"no task with id {task_id!r} in {config.tasks_dir} (see `list`)")


def set_enabled(config: Config, task_id: str, enabled: bool, reason: str | None, now: float,
                until: float | None = None) -> Task:
    """`enable` / `disable [--reason] [--until]`: edit the file (only those keys), record the
    state; a pause with `until` ends by itself (pause.resume_due, called by the tick)."""
    from .frontmatter_edit import edit_task_file
    from .pause import set_pause

    if until is not None and until <= now:
        raise ActionError("--until must lie in the future")
    task = load_task(config, task_id)
    edit_task_file(task.path, {"enabled": enabled, "disabled_reason": reason})
    with state_store(config) as store:
        store.set_enabled(task.id, enabled, now)
    set_pause(str(config.home), task.id, until, str(task.path) if until is not None else None)
    return task


SCHEDULER = Path(__file__).resolve().parent.parent / "scheduler.py"


def start_run(config: Config, task_id: str, environ: dict[str, str] | None = None,
              ) -> subprocess.Popen:
    """`scheduler.py run <id>` in its own process and session, exactly as a person would start
    it: the caller does not wait (the web page follows the run through the store)."""
    task = load_task(config, task_id)
    log = config.state_dir / "web-runs.log"
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, str(SCHEDULER), "--home", str(config.home), "run", task.id],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            close_fds=True, env=dict(os.environ if environ is None else environ),
        )
