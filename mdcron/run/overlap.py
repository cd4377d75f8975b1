"""Issue 26: what a slot does when the task's previous run still holds it (`overlap:`, after
Kubernetes' concurrencyPolicy).

- skip (the default): the slot is recorded `skipped` (ladder.not_now).
- queue: the claim is given back unrecorded, as a chain's is (ladder.not_now): the slot is owed
  again and a later tick, on any host, claims it once the previous run has ended, as long as
  it is still within the task's catch-up window (decide() judges that as for any late slot;
  several queued slots coalesce into one run).
- replace: the previous run is stopped (TERM, grace, KILL, its whole tree), its row closed
  `skipped` "replaced by slot …", its ladder told to stop (no rerun, no heal: a `replaced:`
  meta naming its row, which the old ladder checks between steps), then this slot runs.
  On another host the holder is asked through the state (`replace_request:` meta); its lease
  renewal thread stops it (hosts/lease.py) and this slot is queued meanwhile.
- allow: the slot runs beside the previous run under a lock of its own
  (`<id>@<run id>.lock`, removed when it ends) and without the task's lease.

Lazy imports: none; the ladder asks only when the task's lock is taken.
"""

from __future__ import annotations

import time
from contextlib import suppress

from ..core.clock import to_dt
from ..core.outcome import Outcome
from ..hosts.replace_marks import REPLACE_REQUEST, REPLACED, marked_row, replaced_mark
from ..state.store import Store
from ..tasks.task import Task
from .attempt import RunContext
from .locks import TaskLock, holder_alive, lock_path, read_info, run_lock_path, stop_run_tree

LOCK_WAIT = 10.0  # seconds, after the kill's grace, for the stopped run's ladder to let go


def own_lock(ctx: RunContext, task_id: str, run_id: int) -> TaskLock | None:
    """`overlap: allow`: a lock of this run's own (None only if it cannot be taken)."""
    lock = TaskLock(run_lock_path(ctx.config.locks_dir, task_id, run_id), ctx.config.home)
    return lock if lock.try_acquire() else None


def release_own(lock: TaskLock) -> None:
    """Release a run's own lock and remove its file (nobody else ever opens it but recovery,
    which then finds the row's tick gone and closes it as usual)."""
    lock.release()
    with suppress(OSError):
        lock.path.unlink()


def slot_words(store: Store, run_id: int) -> str:
    row = store.run(run_id) or {}
    slot = row.get("scheduled_for")
    return f"slot {to_dt(float(slot)):%Y-%m-%d %H:%M} UTC" if slot is not None else "a later slot"


def replace_previous(ctx: RunContext, store: Store, task: Task, run_id: int) -> TaskLock | None:
    """Stop the run holding the task's lock on this host and take the lock; None when there is
    no live holder to stop or its ladder did not let go in time (the slot is then skipped)."""
    path = lock_path(ctx.config.locks_dir, task.id)
    info = read_info(path)
    if info is None or not holder_alive(info):
        return None
    why = f"replaced by {slot_words(store, run_id)}"
    store.set_meta(REPLACED + task.id, replaced_mark(info.run_id, why))
    store.end_running(info.run_id, Outcome.SKIPPED, f"{why}: stopped (TERM, grace, KILL)",
                      ctx.clock.now())
    grace = ctx.config.kill_grace
    stop_run_tree(info, grace)
    lock = TaskLock(path, ctx.config.home)
    give_up = time.monotonic() + grace + LOCK_WAIT
    while not lock.try_acquire():
        if time.monotonic() >= give_up:
            return None
        time.sleep(0.05)
    store.take_meta(REPLACED + task.id)  # its ladder has ended: the mark has done its work
    return lock


def replaced_by(store: Store, task: Task, row: int) -> str | None:
    """For the ladder of a `replace` task: why its run `row` was replaced, or None."""
    if task.overlap != "replace":
        return None
    found = marked_row(store.get_meta(REPLACED + task.id))
    return found[1] if found is not None and found[0] == str(row) else None


def ask_to_replace(store: Store, task: Task, run_id: int, busy: str) -> str:
    """The holder runs on another host (its lease says so): ask it, through the state, to stop
    its run (its lease renewal thread does, hosts/lease.py); this slot is queued meanwhile."""
    store.set_meta(REPLACE_REQUEST + task.id, f"replaced by {slot_words(store, run_id)}")
    return f"{busy.split(';')[0]} (asked to stop it: overlap: replace)"
