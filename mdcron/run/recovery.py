"""Runs left behind: rows still marked `running` whose tick died, and stale locks.

A row is crashed when the tick that owned it is gone *and* the task's lock is free (no orphaned
task process is still running). A lock whose live holder is past its deadline + 60 s is stale: its
process group is killed and the run recorded as a timeout. "Past its deadline" is measured on the
monotonic clock the lock records (locks.is_stale), never on the tick's wall clock: a clock set
forward, or a `tick --now` replay, does not kill a healthy run.

Issue 21: a run whose tick and leader are both gone is over, whatever else still holds its lock
or its `uses:` units (a grandchild that called setsid inherits their descriptors). What is left of
it, found through the cgroup and mark its lock record names (proctree.py), is killed, which frees
the lock and the units, and the crash reason (hence the alert) names each process killed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from ..core.outcome import Outcome
from ..core.records import dataclass, replace
from ..settings.config import Config
from ..state.store import Store
from .heal_protocol import Settled, journal_dir
from .locks import (
    LockInfo,
    TaskLock,
    holder_alive,
    is_stale,
    kill_holder,
    kill_leftovers,
    lock_path,
    process_matches,
    read_info,
    run_lock_path,
)
from .proctree import remove_cgroup

RELOCK_SECONDS = 1.0  # how long a lock may take to come free once its last holder was killed


@dataclass(frozen=True)
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
        own = run_lock_path(config.locks_dir, task_id, run_id)  # issue 26: `overlap: allow`
        if (info is None or info.run_id != run_id) and own.exists():
            path, info = own, read_info(own)
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
        ours = info is not None and info.run_id == run_id
        over = ours and not holder_alive(info)  # its leader is gone too (or never started)
        killed = kill_leftovers(info, config.kill_grace) if over and info is not None else []
        lock = TaskLock(path, config.home)
        if not _relock(lock, wait=bool(killed)):  # the task outlived its tick, within its time
            if store.url:  # issue 11: its lease lives on as the flock does (hosts/lease.py)
                store.extend_lease(task_id, config.lease_seconds)
            continue
        try:
            if ours and info is not None:
                remove_cgroup_of(info)
            reason, ended_at, unobserved = crash_reason(row, info, run_id)
            if killed:
                reason += f"; still running after it, killed: {', '.join(killed)}"
            if store.end_running(run_id, Outcome.CRASHED, reason, now, ended_at, unobserved):
                found.append(Recovered(task_id, run_id, Outcome.CRASHED, reason))
        finally:
            lock.release()
            if path == own:  # a run's own lock file goes with its run
                own.unlink(missing_ok=True)
    return found


def _relock(lock: TaskLock, wait: bool) -> bool:
    """Take the lock; after a kill, give the dying holders a moment to let it go."""
    give_up = time.monotonic() + (RELOCK_SECONDS if wait else 0.0)
    while not lock.try_acquire():
        if time.monotonic() >= give_up:
            return False
        time.sleep(0.02)
    return True


def remove_cgroup_of(info: LockInfo) -> None:
    """A run's cgroup, once empty (a tick killed with -9 never removed it)."""
    if info.cgroup and info.mark and Path(info.cgroup).name == f"mdcron-{info.mark}":
        remove_cgroup(Path(info.cgroup))


def crash_reason(row: dict, info: LockInfo | None, run_id: int) -> tuple[str, float | None, bool]:
    """Pure: what is known of a run whose tick died -> (reason, real end or None, unobserved).
    The lock names the run once it is taken, its mark just before the spawn and its process
    group once the task started; no record of this run means the task never started (it ended
    when it was claimed), a mark without a group that it may have."""
    died = f"the tick running it (pid {row['owner_pid']}) died before it finished"
    if info is None or info.run_id != run_id:
        return f"{died}; the task never started", float(row["started_at"]), False
    if info.pgid is None and info.mark:  # killed between the spawn and its record
        return (f"{died}; the task may have started (its process was not yet recorded), so no"
                " duration is recorded", None, True)
    if info.pgid is None:
        return f"{died}; the task never started", float(row["started_at"]), False
    return (f"{died}; the task (process group {info.pgid}) ended unobserved, so no duration"
            " is recorded", None, True)


def recover_heals(config: Config, store: Store, now: float, recovered: list[Recovered],
                  settle: Callable[[Config, Store, float], list[Settled]] | None,
                  ) -> tuple[list[Recovered], list[str]]:
    """Heals a dead process left half-done (a journal in logs/heal-journal/), settled by
    `settle` (the tick's SelfHeal.settle_unfinished: selfheal/unfinished.py, lent by cli/):
    rolled back, or left as found and said. What was done joins the reason of the heal's
    crashed row, so its crash alert says it; lines about the others (their row already ended,
    or the database is new) come back for the tick's log. None (a tick without self-heal, in
    tests): the journals stay for the next tick that has it."""
    if settle is None:
        return recovered, []
    try:
        if not any(n.endswith(".json") for n in os.listdir(journal_dir(config.logs_dir))):
            return recovered, []
    except OSError:  # no journal folder: no heal was ever cut off (the usual tick)
        return recovered, []
    # self-heal (and its Claude client) loads only with a journal left behind
    notes = {s.run_id: s for s in settle(config, store, now) if s.outcome != "closed"}
    out = [replace(r, reason=f"{r.reason}; {notes.pop(r.run_id).note}")
           if r.run_id in notes else r for r in recovered]
    return out, [f"{s.task_id}: heal run {s.run_id}: {s.note}" for s in notes.values()]
