"""Shared resources (`uses:` in a task, `resources: {name: capacity}` in the config).

A resource of capacity n is n unit files, state/resources/<name>.<i>.lock; holding a unit is
holding an flock on its file (locks.TaskLock), exactly like the task lock. The run holds its
units for its whole ladder, and the task's process inherits the descriptors (RunContext.
inherit_fds), so a tick killed with -9 leaves the units held by its still-running task, and a
dead holder (tick and task both gone, or a stale run killed by recovery) frees them by itself:
no TTL, nothing to clean up. The JSON inside a held unit names the holder, for `list` and `why`.

A task with `uses:` claims its slot only once its units are held (a tick waiting on a resource
never blocks another tick from claiming the slot), and `on_busy` decides what a busy resource
means: `wait` (up to busy_wait within the tick; then the slot stays pending for the next tick
until its catch-up allowance runs out, then `skipped`), `skip`, or `run` (run anyway, told by
MDCRON_BUSY_RESOURCES). With a state shared by several hosts (issue 11) each unit is also a
lease row (lease.py), so the capacity holds across hosts; `holders` (for `list`, `why`) still
shows this host's units only.

Lazy imports: leases (hosts/lease.py) only with a shared state, where a unit is also a lease
row.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from ..core.records import dataclass, field
from ..settings.config import Config
from ..tasks.task import Task
from .locks import LockInfo, TaskLock, kill_holder, read_info, stop_run_tree

POLL = 0.1  # seconds between looks at a busy resource (on_busy: wait)
BUSY_ENV = "MDCRON_BUSY_RESOURCES"


def unit_path(config: Config, name: str, unit: int) -> Path:
    # resource names are checked by config.py (letters, digits, '-', '_'): safe as file names
    return config.state_dir / "resources" / f"{name}.{unit}.lock"


@dataclass(slots=True)
class Held:
    """Units one run holds, and the resources it found busy."""

    units: list[tuple[str, TaskLock]] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    leases: list = field(default_factory=list)  # lease.Lease of each unit, with a shared state
    store: object = None  # store.Store the leases were taken through
    config: Config | None = None

    def fds(self) -> tuple[int, ...]:
        return tuple(lock.fileno() for _, lock in self.units)

    def write(self, info: LockInfo) -> None:
        for _, lock in self.units:
            lock.write(info)

    def release(self) -> None:
        if self.leases:
            from ..hosts.lease import Stopper, release, renewer

            for lease in self.leases:
                renewer(self.config, self.store, Stopper(kill_holder, stop_run_tree)).drop(lease)
                release(self.store, lease)
            self.leases.clear()
        for _, lock in self.units:
            lock.release()
        self.units.clear()


def try_take(config: Config, names: tuple[str, ...], keep_partial: bool,
             shared: tuple[object, str] | None = None) -> Held:
    """One unit of each named resource, without waiting. Busy names are listed in `busy`; unless
    `keep_partial`, a busy one means nothing is held. `shared`: (store, holder id) with a state
    shared by several hosts: a unit is also a lease row (lease.py, key `resource:<name>.<i>`),
    so a unit another host holds is busy here too."""
    held = Held(store=shared[0] if shared else None, config=config)
    for name in sorted(set(names)):
        for unit in range(config.resources.get(name, 0)):
            lock = TaskLock(unit_path(config, name, unit), config.home)
            if lock.try_acquire():
                if shared is not None and not _lease_unit(config, held, shared, name, unit):
                    lock.release()
                    continue
                held.units.append((name, lock))
                break
        else:
            held.busy.append(name)
    if held.busy and not keep_partial:
        held.release()
    return held


def _lease_unit(config: Config, held: Held, shared: tuple[object, str], name: str,
                unit: int) -> bool:
    from ..hosts.lease import Stopper, acquire, renewer

    store, holder = shared
    lease, _busy, _ = acquire(store, f"resource:{name}.{unit}", None, holder,
                              config.lease_seconds)
    if lease is None:
        return False
    held.leases.append(lease)
    renewer(config, store, Stopper(kill_holder, stop_run_tree)).add(lease)
    return True


def take(config: Config, task: Task, stop: Callable[[], bool] | None = None,
         shared: tuple[object, str] | None = None) -> Held:
    """The units `task` uses, per its on_busy: `wait` polls up to busy_wait (or until `stop`)."""
    if task.on_busy == "run":
        return try_take(config, task.uses, keep_partial=True, shared=shared)
    give_up = time.monotonic() + (task.busy_wait if task.on_busy == "wait" else 0.0)
    while True:
        held = try_take(config, task.uses, keep_partial=False, shared=shared)
        if not held.busy or time.monotonic() >= give_up or (stop is not None and stop()):
            return held
        time.sleep(POLL)


def busy_env(held: Held) -> tuple[tuple[str, str], ...]:
    """on_busy: run with a busy resource: the task learns which, to use its fallback."""
    return ((BUSY_ENV, ",".join(held.busy)),) if held.busy else ()


@dataclass(frozen=True, slots=True)
class Holder:
    resource: str
    unit: int
    info: LockInfo | None  # None: held, but the holder has not written its record yet


def holders(config: Config) -> list[Holder]:
    """Who holds which unit now. A unit is probed with a non-blocking flock (taken and given
    back at once when free), so a record left in a free unit's file never counts. Only the unit
    files that exist are looked at (one listing of the folder), never each unit of a capacity."""
    out = []
    for name, unit in _unit_files(config):
        path = unit_path(config, name, unit)
        probe = TaskLock(path, config.home)
        if probe.try_acquire():
            probe.release()  # free: given back at once (its old record is cleared)
            continue
        out.append(Holder(name, unit, read_info(path)))
    return out


def _unit_files(config: Config) -> list[tuple[str, int]]:
    """(resource, unit) of each unit file in state/resources/ within the configured capacity,
    sorted."""
    try:
        names = os.listdir(config.state_dir / "resources")
    except OSError:
        return []
    found = []
    for file_name in names:
        name, dot, rest = file_name.removesuffix(".lock").rpartition(".")
        if (dot and file_name.endswith(".lock") and rest.isdigit() and rest == str(int(rest))
                and int(rest) < config.resources.get(name, 0)):
            found.append((name, int(rest)))
    return sorted(found)


def describe_holders(config: Config, task: Task | None = None) -> list[str]:
    """Plain lines for `why`: each resource the task uses (all, without a task) and its holders."""
    names = sorted(set(task.uses)) if task is not None else sorted(config.resources)
    found = holders(config)
    lines = []
    for name in names:
        mine = [h for h in found if h.resource == name]
        cap = config.resources.get(name, 0)
        who = ", ".join(
            f"{h.info.task_id} (run {h.info.run_id})" if h.info else f"unit {h.unit} (starting)"
            for h in mine) or "nobody"
        lines.append(f"resource {name}: {len(mine)} of {cap} unit(s) held by {who}")
    return lines

