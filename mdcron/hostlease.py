"""What one host's runs and suspensions mean for the others (issue 11).

A run in progress on another host keeps this host from starting the same task.

On one host the task's flock does this (locks.py). Hosts sharing a PostgreSQL state cannot see
each other's flocks, so the run row is the lease: a row of the task still `running` on another
host holds the task until its deadline, started_at + timeout + 60 s (the same allowance the
stale-lock rule gives a live holder). Before then, a new slot here is recorded `skipped`, as
with a held lock. After it, the holder is taken for dead or cut off: its row is closed as
`timeout` (check-and-set, one host wins) and this host runs. The holder's late result cannot
overwrite that row: finish_run only writes a row still `running`.

A suspension by the ladder on one host is recorded in task_state (suspended_at, suspended_by)
and holds on every host until the task is enabled again: honour_suspensions.

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


def honour_suspensions(store: Store, tasks: list[Task], say) -> list[Task]:
    """The due tasks this host may run: a task the ladder suspended on some host (its file
    there now says enabled: false) stays suspended here too, though this host's copy of the
    file may still say enabled: true, until it is enabled again: `enable` on any host (clears
    it), or its file edited after the suspension (this host clears it for every host)."""
    rows = {r[0]: (float(r[1]), r[2]) for r in store.connect().execute(
        "SELECT task_id, suspended_at, suspended_by FROM task_state"
        " WHERE suspended_at IS NOT NULL").fetchall()}
    if not rows:
        return tasks
    keep = []
    for task in tasks:
        if task.id not in rows:
            keep.append(task)
            continue
        at, by = rows[task.id]
        try:
            edited = task.path.stat().st_mtime > at
        except OSError:
            edited = False
        if edited:
            with store.write() as db:
                db.execute("UPDATE task_state SET suspended_at = NULL, suspended_by = NULL"
                           " WHERE task_id = ? AND suspended_at = ?", (task.id, at))
            say(f"{task.id}: its file changed after the suspension on host {by}: enabled again")
            keep.append(task)
        else:
            say(f"{task.id}: suspended on host {by} at {to_dt(at):%Y-%m-%d %H:%M:%S} UTC: not run"
                f" here either until it is enabled again (`enable {task.id}`, or edit its file)")
    return keep


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
    import time

    from .store import StoreError

    before = time.time()
    (theirs,) = store.connect().execute(
        "SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    after = time.time()
    reason = skew_refusal((before + after) / 2 - float(theirs), allowance, store.host or "?")
    if reason is not None:
        raise StoreError(reason)


def kill_taken_over(config, store: Store) -> list[str]:  # config: config.Config
    """A host coming back (its tick died, its task did not) finds its run taken over: the row
    was closed by another host after its deadline. Its task's process group still holds the
    local lock: kill it, so the task does not run on two hosts. Lines to say."""
    from .locks import holder_alive, kill_holder, read_info

    done = []
    try:
        paths = sorted(config.locks_dir.glob("*.lock"))
    except OSError:
        return done
    mark = f"host {store.host} did not finish it by its deadline"
    for path in paths:
        info = read_info(path)
        if info is None or info.run_id is None or not holder_alive(info):
            continue
        row = store.run(info.run_id)
        if (row is None or row["status"] == "running" or row.get("host") != store.host
                or not str(row.get("error") or "").startswith(mark)):
            continue
        killed = kill_holder(info, config.kill_grace)
        done.append(f"{info.task_id}: run {info.run_id} was taken over by another host after its"
                    f" deadline; {', '.join(killed) or 'its holder was gone'}")
    return done
