"""Runs left behind: rows still marked `running` whose tick died, and stale locks.

A row is crashed when the tick that owned it is gone *and* the task's lock is free (no orphaned
task process is still running). A lock whose live holder is past its deadline + 60 s is stale: its
process group is killed and the run recorded as a timeout. "Past its deadline" is measured on the
monotonic clock the lock records (locks.is_stale), never on the tick's wall clock: a clock set
forward, or a `tick --now` replay, does not kill a healthy run.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.outcome import Outcome
from ..settings.config import Config
from ..state.store import Store
from .locks import LockInfo, TaskLock, is_stale, kill_holder, lock_path, process_matches, read_info


@dataclass(frozen=True, slots=True)
class Recovered:
    task_id: str
    run_id: int
    status: Outcome
    reason: str


def recover(config: Config, store: Store, now: float, own_pid: int) -> list[Recovered]:
    found: list[Recovered] = []
    for row in store.running_rows():
        task_id, run_id = str(row["task_id"]), int(row["id"])  # type: ignore[arg-type]
        if row["owner_pid"] == own_pid:
            continue
        if store.url and row.get("host") not in (None, store.host):
            continue  # issue 11: only its own host can see its processes and locks (hostlease)
        path = lock_path(config.locks_dir, task_id)
        owner_alive = process_matches(
            row["owner_pid"], row["owner_start"], row["owner_boot"]  # type: ignore[arg-type]
        )
        info = read_info(path)
        if info is not None and info.run_id == run_id and is_stale(info, now):
            done = kill_holder(info, config.kill_grace)
            reason = (
                f"still running past its deadline + 60 s; {', '.join(done) or 'holder gone'}"
                " (stale lock)"
            )
            if store.end_running(run_id, Outcome.TIMEOUT, reason, now):
                found.append(Recovered(task_id, run_id, Outcome.TIMEOUT, reason))
            continue
        if owner_alive:
            continue  # its tick is still working on it (or between claim and lock)
        lock = TaskLock(path)
        if not lock.try_acquire():  # the task outlived its tick and is still within its time
            if store.url:  # issue 11: its lease lives on as the flock does (hosts/lease.py)
                store.extend_lease(task_id, config.lease_seconds)
            continue
        try:
            reason, ended_at, unobserved = crash_reason(row, info, run_id)
            if store.end_running(run_id, Outcome.CRASHED, reason, now, ended_at, unobserved):
                found.append(Recovered(task_id, run_id, Outcome.CRASHED, reason))
        finally:
            lock.release()
    return found


def crash_reason(row: dict, info: LockInfo | None, run_id: int) -> tuple[str, float | None, bool]:
    """Pure: what is known of a run whose tick died -> (reason, real end or None, unobserved).
    The lock names the run once it is taken and its process group once the task started; no
    record of this run means the task never started (it ended when it was claimed)."""
    died = f"the tick running it (pid {row['owner_pid']}) died before it finished"
    if info is None or info.run_id != run_id:
        return f"{died}; the task never started", float(row["started_at"]), False
    if info.pgid is None:
        return f"{died}; the task never started", float(row["started_at"]), False
    return (f"{died}; the task (process group {info.pgid}) ended unobserved, so no duration"
            " is recorded", None, True)
