"""A run in progress on another host keeps this host from starting the same task (issue 11).

On one host the task's flock does this (locks.py). Hosts sharing a PostgreSQL state cannot see
each other's flocks, so the run row is the lease: a row of the task still `running` on another
host holds the task until its deadline, started_at + timeout + 60 s (the same allowance the
stale-lock rule gives a live holder). Before then, a new slot here is recorded `skipped`, as
with a held lock. After it, the holder is taken for dead or cut off: its row is closed as
`timeout` (check-and-set, one host wins) and this host runs. The holder's late result cannot
overwrite that row: finish_run only writes a row still `running`.

Not yet (see README, "Several hosts"): deadlines judged by the database's clock, renewal for
runs that may outlive their timeout, and a returning host killing its own stale process group.
"""

from __future__ import annotations

from .clock import to_dt
from .outcome import Outcome
from .store import Store
from .task import Task

GRACE = 60.0  # seconds past the timeout, as locks.is_stale


def held_elsewhere(store: Store, task: Task, run_id: int, now: float) -> str | None:
    """The reason this run must be skipped (another host's run of the task is within its
    deadline), or None. Expired holders found on the way are closed as `timeout`."""
    if not store.url:
        return None  # one host: the flock decides
    rows = store.connect().execute(
        "SELECT id, host, started_at FROM runs WHERE task_id = ? AND status = 'running'"
        " AND id != ? AND host IS NOT NULL AND host != ? ORDER BY id",
        (task.id, run_id, store.host),
    ).fetchall()
    held = None
    for other_id, host, started_at in rows:
        deadline = float(started_at) + task.timeout + GRACE
        if now < deadline:
            held = held or (f"previous run still running on host {host} since"
                            f" {to_dt(float(started_at)):%Y-%m-%d %H:%M:%S} UTC; this slot is"
                            " skipped, not queued")
            continue
        store.end_running(int(other_id), Outcome.TIMEOUT,
                          f"host {host} did not finish it by its deadline (timeout +"
                          f" {int(GRACE)} s): taken for dead or cut off; host {store.host}"
                          " runs the task from now on", now, unobserved=True)
    return held
