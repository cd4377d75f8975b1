"""What one host's runs and suspensions mean for the others (issue 11).

A run in progress on another host keeps this host from starting the same task: lease.py (a
lease row with a fence, expiry by the database's clock, renewed by the tick). When a host comes
back and finds its run taken over, it kills its own stale process group (the tick's step:
run/shared_tick.kill_taken_over).

A suspension by the ladder on one host is recorded in task_state (suspended_at, suspended_by,
suspended_hash) and holds on every host until the task is enabled again or its file's content
changes: honour_suspensions.

Before a host claims anything, its clock is compared with the database's: check_clock.

Lazy imports: the task file's hasher (and its frontmatter reader) only when a suspension is in
force.
"""

from __future__ import annotations

import time

from ..core.clock import to_dt
from ..state.store import Store, StoreError
from ..tasks.task import Task


def honour_suspensions(store: Store, tasks: list[Task], say) -> list[Task]:
    """The due tasks this host may run: a task the ladder suspended on some host (its file
    there now says enabled: false) stays suspended here too, though this host's copy of the
    file may still say enabled: true, until it is enabled again: `enable` on any host (clears
    it), or its file's content changed since the suspension (this host clears it for every
    host). Content, not mtime (issue 23): a fresh `git clone` or `cp` of the same file is no
    edit; the keys the suspension wrote do not count (tasks/content_hash.py)."""
    rows = store.suspensions()
    if not rows:
        return tasks
    keep = []
    for task in tasks:
        if task.id not in rows:
            keep.append(task)
            continue
        at, by, suspended = rows[task.id]
        if edited_since(task, at, suspended):
            store.clear_suspension(task.id, at)
            say(f"{task.id}: its file changed after the suspension on host {by}: enabled again")
            keep.append(task)
        else:
            say(f"{task.id}: suspended on host {by} at {to_dt(at):%Y-%m-%d %H:%M:%S} UTC: not run"
                f" here either until it is enabled again (`enable {task.id}`, or edit its file)")
    return keep


def edited_since(task: Task, at: float, suspended: str | None) -> bool:
    """This host's copy says something else than the file as suspended. A suspension
    recorded before its hash was kept (schema 7) falls back to the copy's mtime."""
    from ..tasks.content_hash import file_hash

    if suspended is not None:
        now = file_hash(task.path)
        return now is not None and now != suspended
    try:
        return task.path.stat().st_mtime > at
    except OSError:
        return False


def skew_refusal(offset: float, allowance: float, host: str) -> str | None:
    """Pure: why a host whose clock is `offset` seconds off the database's must not claim, or
    None. A host ahead would claim slots early; one behind, late (issue 11)."""
    if abs(offset) <= allowance:
        return None
    way = "ahead of" if offset > 0 else "behind"
    return (f"this host's clock ({host}) is {abs(offset):.3f} s {way} the database's, more than"
            f" max_clock_skew ({allowance:g} s): it claims nothing until its clock is fixed"
            " (NTP: `timedatectl status`, chrony or ntpd)")


def check_clock(store: Store, allowance: float) -> None:
    """One query: the database's clock against this machine's real one (not a `--now`
    replay's instant: skew is a property of the machine). StoreError when too far off."""
    before = time.time()
    theirs = store.db_clock()
    after = time.time()
    reason = skew_refusal((before + after) / 2 - theirs, allowance, store.host or "?")
    if reason is not None:
        raise StoreError(reason)
