"""Stopping a running run on a person's request (the dashboard's Stop button, issue 24).

The request is a small file, state/stops/<run id>.json ({"by": …, "at": …}), written before
the signal: the runner that owns the run (attempt.py) reads it when the process ends and records
the run as "stopped from the dashboard by …" (row and log), and the ladder neither retries nor
heals a run a person stopped. The kill itself is the one a stale holder gets (locks.py): TERM,
grace, KILL of the run's process group as its lock records it (pid and start time checked, so a
reused pid is never hit), then what left the group (its cgroup, its mark).

Lazy imports: the process runner and the tree sweep load only when a stop is carried out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..core import safe_fs
from ..core.private_files import append_private, write_private
from ..settings.config import Config
from .locks import holder_alive, kill_leftovers, lock_path, process_matches, read_info

RECORD_LIMIT = 4096  # bytes of a stop record read


class NotRunning(LookupError):
    """The run is not running here now (finished, another host's, not started): a 409."""


def _record_path(config: Config, run_id: int) -> Path:
    return config.state_dir / "stops" / f"{int(run_id)}.json"


def stop_run(config: Config, task_id: str, run_id: int, by: str, now: float,
             grace: float | None = None) -> list[str]:
    """End run `run_id` of `task_id`: record who asked, then TERM → grace → KILL its process
    group and what left it. Raises NotRunning when the task's lock does not name this run as
    running with a started process. Returns what was done, in words."""
    info = read_info(lock_path(config.locks_dir, task_id))
    if info is None or info.run_id != run_id or not holder_alive(info):
        raise NotRunning(f"run {run_id} of {task_id} is not running on this host")
    if not info.pgid or not process_matches(info.pgid, info.child_start, info.boot_id):
        raise NotRunning(f"run {run_id} of {task_id} has no process of its own to stop (not"
                         " started yet, or a Claude run, which ends at its timeout)")
    record = json.dumps({"by": by, "at": now, "task_id": task_id}).encode("utf-8")
    write_private(_record_path(config, run_id), record, root=config.home)
    from .process import kill_process_group  # lazy: the runner's module, only when stopping

    wait = config.kill_grace if grace is None else grace
    done = [f"TERM to process group {info.pgid}"]
    if not kill_process_group(info.pgid, wait):
        done.append("a process survived KILL")
    left = kill_leftovers(info, wait)
    if left:
        done.append(f"ended what left its group: {', '.join(left)}")
    return done


def take_stop(config: Config, run_id: int) -> str | None:
    """Who stopped run `run_id` (the record is removed), or None when nobody asked."""
    path = _record_path(config, run_id)
    try:  # issue 27: one stat where the walk below makes ~10 calls, for every run's end. No
        os.stat(path)  # file there by any way (symlinks followed or not): none to read below
    except FileNotFoundError:
        return None
    except OSError:
        pass  # the walk decides (it refuses, or reads it)
    try:
        raw = safe_fs.read_regular(path, RECORD_LIMIT, root=config.home)
    except OSError:
        return None
    safe_fs.remove_file(path, root=config.home)
    try:
        by = json.loads(raw.decode("utf-8")).get("by")
    except (ValueError, AttributeError):
        by = None
    return str(by or "someone")[:120]


def stopped_reason(by: str) -> str:
    return f"stopped from the dashboard by {by}"


def note_in_log(log_path: Path | None, config: Config, by: str) -> None:
    """One line at the end of the run's log; the runner has closed it. Best effort."""
    if log_path is None:
        return
    try:
        append_private(log_path, f"[mdcron] {stopped_reason(by)}\n".encode(), root=config.home)
    except OSError:
        pass
