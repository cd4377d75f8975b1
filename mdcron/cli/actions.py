"""State-changing actions shared by the CLI commands and the web page (mdcron/web): the same
validation, the same byte-preserving edits, the same store calls. No printing here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..core.clock import minute_floor
from ..core.private_files import open_private
from ..schedule.cache import find_task
from ..schedule.held import lift
from ..schedule.pause import pauses, set_pause
from ..settings.config import Config
from ..state.store import state_store
from ..tasks.task import Task
from .usage import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess


class ActionError(UsageError):
    """An action that cannot be done; the message says why (a CLI usage error, a web 4xx)."""


def refuse_duplicate(duplicates: dict, task_id: str) -> None:
    """Issue 25: never pick one of two files that share an id (`show`, `next`, every action)."""
    if task_id in duplicates:
        from ..tasks.id_lines import located  # lazy: only for a duplicated id

        raise ActionError(f"duplicate id {task_id!r} in {located(duplicates[task_id])}:"
                          " rename one (the tick runs nothing until then)")


def load_task(config: Config, task_id: str) -> Task:
    found = find_task(config, task_id)  # issue 27: through the cache, this task decoded
    refuse_duplicate(found.duplicates, task_id)
    task = found.get(task_id)
    if task is not None:
        return task
    bad = [p for p in found.problems if p.severity == "error" and p.path.stem == task_id]
    if bad:
        raise ActionError(f"task {task_id!r} has errors: " + "; ".join(str(p) for p in bad))
    from ..schedule.cache import load_task_set  # lazy: every id, only for a did-you-mean
    from .ids import unknown_id  # lazy: only for an id nobody knows

    raise ActionError(unknown_id(task_id, (t.id for t in load_task_set(config).tasks),
                                 config.tasks_dir))


def set_enabled(config: Config, task_id: str, enabled: bool, reason: str | None, now: float,
                until: float | None = None, since: float | None = None) -> Task:
    """`enable` / `disable [--reason] [--until]`: edit the file (only those keys), record the
    state; a pause with `until` ends by itself (resume_due below, called by the tick).
    Enabling resolves the task's open incidents (a suspension, a timeout) and starts its
    count of failures afresh; fires before `since` (default `now`) are not run."""
    if until is not None and until <= now:
        raise ActionError("--until must lie in the future")
    task = load_task(config, task_id)
    try:
        from ..tasks.frontmatter_edit import edit_task_file  # lazy: only enable/disable edit

        edit_task_file(task.path, {"enabled": enabled, "disabled_reason": reason},
                       root=config.home)
    except OSError as exc:
        if not (enabled and task.enabled):  # else: the file already says so (held.py)
            raise ActionError(f"could not write {task.path}: {exc.strerror or exc}") from None
    with state_store(config) as store:
        store.set_enabled(task.id, enabled, now, since=since)
        if enabled:
            lift(store, task.id)  # a suspension the file could not take (issue 22)
            from ..alerts.incidents import resolve_for_task  # lazy: the tick loads actions

            resolve_for_task(store, task.id, now, "re-enabled")
    set_pause(str(config.home), task.id, until, str(task.path) if until is not None else None)
    return task


SCHEDULER = Path(__file__).resolve().parents[2] / "scheduler.py"


def start_run(config: Config, task_id: str, environ: dict[str, str] | None = None,
              ) -> subprocess.Popen:
    """`scheduler.py run <id>` in its own process and session, exactly as a person would start
    it: the caller does not wait (the web page follows the run through the store)."""
    task = load_task(config, task_id)
    log = config.state_dir / "web-runs.log"  # state/ walked from the home, never followed
    fd = open_private(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, root=config.home)
    import subprocess  # lazy: only the web's run button (show/next/list need none of it)

    with os.fdopen(fd, "ab") as out:
        return subprocess.Popen(
            [sys.executable, str(SCHEDULER), "--home", str(config.home), "run", "--recorded",
             task.id],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            close_fds=True, env=dict(os.environ if environ is None else environ),
        )


def resume_due(config: Config, now: float) -> list[str]:
    """Enable every task whose timed pause is over; returns one line per task for the tick.
    (Here, not in pause.py: the idle fast path imports pause.py and needs none of this.)"""
    home = str(config.home)
    due = [task_id for task_id, p in pauses(home).items() if p["until"] <= now]
    lines = []
    for task_id in due:
        try:
            # from the tick's minute, as before: the fire at the pause's end still runs
            task = set_enabled(config, task_id, True, None, now, since=minute_floor(now))
            lines.append(f"{task.id}: pause over, enabled again in {task.path}")
        except ActionError as exc:
            lines.append(f"mdcron: could not end the pause of {task_id}: {exc}")
            set_pause(home, task_id, None)
    return lines
