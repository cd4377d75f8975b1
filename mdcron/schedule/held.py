"""Suspensions kept in the state because the task file could not take them (issue 22).

The ladder suspends a task by writing `enabled: false` into its file. A file mdcron cannot
write (chattr +i, a read-only mount, another owner) would keep saying `enabled: true`, so the
task would run, fail and be suspended again every minute. Instead the suspension is recorded
in the state (meta `held:<id>`: when, why, and the SHA-256 of the file as it was), alerted once
with the suspension itself, and honoured by every tick: the task is not run until
`scheduler.py enable <id>` lifts it, or the file's content changes (a person edited it: their
word is the newer one). `list`, `show` and `doctor` show it.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path

from ..core.clock import to_dt
from ..state.store import Store
from ..state.trouble import immutable
from ..tasks.task import Task

PREFIX = "held:"
_WHY = {errno.EROFS: "read-only filesystem", errno.EPERM: "read-only: immutable?",
        errno.EACCES: "permission denied"}


def _digest(path: Path) -> str | None:
    import hashlib  # lazy: only for a held suspension (OpenSSL's load is ~2 ms of a tick)

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def record(store: Store, task: Task, now: float, exc: BaseException) -> str:
    """Hold the suspension in the state; the sentence the alert carries."""
    code = getattr(exc, "errno", None)
    why = _WHY.get(code or -1) or (os.strerror(code).lower() if code else type(exc).__name__)
    if getattr(exc, "errno", None) == errno.EPERM:
        why = "read-only: immutable" if immutable(task.path) else "operation not permitted"
    store.set_meta(PREFIX + task.id, json.dumps({
        "at": now, "path": str(task.path), "sha256": _digest(task.path), "why": why}))
    return (f"could not write {_shown(task.path)} ({why}): the suspension is recorded in the"
            f" state; `scheduler.py enable {task.id}` lifts it")


def held(store: Store) -> dict[str, dict]:
    """Task id -> its held suspension {at, path, sha256, why}."""
    out = {}
    for key, value in store.metas_with_prefix(PREFIX).items():
        try:
            out[key[len(PREFIX):]] = json.loads(value)
        except ValueError:
            out[key[len(PREFIX):]] = {}
    return out


def honour(store: Store, tasks: list[Task], say: Callable[[str], None]) -> list[Task]:
    """The due tasks without a held suspension; a hold whose file changed since is lifted."""
    holds = held(store) if tasks else {}
    if not holds:
        return tasks
    keep = []
    for task in tasks:
        hold = holds.get(task.id)
        if hold is None:
            keep.append(task)
        elif hold.get("sha256") not in (None, _digest(task.path)):
            lift(store, task.id)
            say(f"{task.id}: its file changed after the suspension held in the state: enabled"
                " again")
            keep.append(task)
    return keep


def lift(store: Store, task_id: str) -> bool:
    return store.take_meta(PREFIX + task_id)


def describe(hold: dict, task_id: str) -> str:
    """One line for list/show/doctor."""
    at = hold.get("at")
    when = f" since {to_dt(float(at)):%Y-%m-%d %H:%M} UTC" if at is not None else ""
    return (f"suspended{when}, held in the state: {_shown(Path(hold.get('path') or task_id))}"
            f" could not be written ({hold.get('why', '?')}); `scheduler.py enable {task_id}`"
            " lifts it")


def _shown(path: Path) -> str:
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name

