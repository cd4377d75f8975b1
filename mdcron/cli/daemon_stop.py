"""What the daemon's stop does to the ticks still running once `stop_grace` is over.

Each tick is killed first (so it cannot see its task die and record it as failed or start a
retry), then its tasks' process groups, found through the task lock files, which name the tick
and the group (TERM, `kill_grace`, KILL; what left a group too), and their runs are recorded
`crashed`, "daemon stopped" (only this host's rows, and only those the killed ticks owned).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from ..core.outcome import Outcome
from ..run.locks import kill_leftovers as kill_escaped
from ..run.locks import process_matches, read_info
from ..run.process import kill_process_group
from ..settings.config import Config, ConfigError, load_config
from ..state.store import StoreError, state_store
from .daemon_ticks import TickChildren, minute_text


def kill_ticks(children: TickChildren, home: Path, kill_grace: float,
               log: Callable[..., None]) -> None:
    """Kill the ticks still running, then their tasks' groups; record the runs crashed."""
    pids = set(children.ticks)
    try:
        config, _ = load_config(home)
    except ConfigError:
        config = Config(home=home.resolve())
    groups = []
    for path in sorted(config.locks_dir.glob("*.lock")):
        info = read_info(path)
        if info is not None and info.tick_pid in pids and info.pgid:
            groups.append(info)
    for pid in pids:  # the tick first: it must not see its task die and retry or record it
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        tick = children.ticks.pop(pid)
        tick.process.returncode = -signal.SIGKILL
        log("tick killed", pid=pid, minute=minute_text(tick.minute))
    for info in groups:
        if process_matches(info.pgid, info.child_start, info.boot_id):
            kill_process_group(info.pgid, kill_grace)  # type: ignore[arg-type]
            log("task killed", task=info.task_id, pgid=info.pgid)
        for named in kill_escaped(info, kill_grace):  # issue 21: what left the group
            log("task process killed", task=info.task_id, process=named)
    children.reap()
    record_crashed(config, pids, log)


def record_crashed(config: Config, pids: set[int], log: Callable[..., None]) -> None:
    try:
        with state_store(config) as store:  # issue 11: only this host's rows are its pids
            for row in store.running_rows():
                if row.get("host") not in (None, store.host):
                    continue
                if row["owner_pid"] in pids and store.end_running(
                        # type: ignore[arg-type]
                        int(row["id"]), Outcome.CRASHED, "daemon stopped",
                        time.time()):
                    log("run recorded crashed", task=row["task_id"], run=row["id"],
                        reason="daemon stopped")
    except StoreError as exc:
        log("could not record the stopped runs", error=str(exc))
