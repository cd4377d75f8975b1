"""Silence is an error (issue 22): a task file that does not run because of its problems, a
chain whose upstream file is gone, a missing tasks/ folder each become one alert.

Each file's (or the folder's) error problems are digested; the alert goes out when that digest
differs from the one last alerted (meta `problem_alerted:<path>`), so it is sent once and
again only when the problems change. A file whose problems are gone drops its key, so a new
breakage alerts again. The tick's exit status and the heartbeat say "failed" while it lasts
(tick.TickReport.exit_code); `doctor` has a line for each.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..core.problems import Problem
from ..settings.config import Config
from ..state.store import Store

PREFIX = "problem_alerted:"


def alert_problems(store: Store, config: Config, problems: list[Problem], now: float) -> int:
    """Queue one alert per file (or the tasks folder) whose error problems changed since the
    last alert; returns how many were queued. Never raises (the tick goes on)."""
    from .notify import Alert, enqueue  # lazy: only when something is to be said

    by_path: dict[Path, list[Problem]] = {}
    for p in problems:
        if p.severity == "error":
            by_path.setdefault(p.path, []).append(p)
    known = store.metas_with_prefix(PREFIX)
    queued = 0
    for path, found in sorted(by_path.items()):
        key = PREFIX + str(path)
        lines = sorted({str(p) for p in found})
        digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        if known.get(key) == digest or not store.change_meta(key, digest):
            continue  # said already (or another tick is saying it now)
        enqueue(store, config, _alert(config, path, lines, Alert), now)
        queued += 1
    current = {PREFIX + str(p) for p in by_path}
    for key in known:
        if key not in current:
            store.take_meta(key)  # fixed: a new breakage alerts again
    return queued


def _alert(config: Config, path: Path, lines: list[str], alert_type):  # -> notify.Alert
    if path == config.tasks_dir:
        return alert_type(
            "tasks_missing", None, "mdcron: the tasks folder is missing, nothing runs",
            "\n".join(lines) + f"\nCreate {path} (or restore it) and put the task files back;"
            " this alert is not repeated while it stays missing.", forced=True)
    shown = f"{path.parent.name}/{path.name}"
    upstream = any("upstream" in line for line in lines)
    what = "its chain stops" if upstream else "it does not run"
    return alert_type(
        "task_file", path.stem, f"mdcron: {shown} has errors: {what}",
        "\n".join(lines) + "\nFix the file (`scheduler.py validate` shows every problem); this"
        " alert is not repeated until its problems change.")
