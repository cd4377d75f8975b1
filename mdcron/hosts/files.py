"""Each host's copy of each task file, and when each host last ticked (issue 11).

People keep the hosts' `tasks/` in sync by hand, with git or a shared folder, and a copy that
differs runs differently. Every full tick of a host with a PostgreSQL state records the SHA-256
of its copies in task_files, and every tick (the idle one in its single query) its time in
hosts; neither table has a trigger, so this never sends another host's idle tick down the full
path. `list` and `doctor` name the tasks whose copies differ, and the tasks whose `hosts:` have
all stopped ticking (they run nowhere).

Lazy imports: the outbox (alerts/) only when a task that runs nowhere must be reported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ..core import safe_fs
from ..core.units import format_duration
from ..state.hosts import ALERTED, DEAD_AFTER, orphaned_state

__all__ = ["ALERTED", "DEAD_AFTER", "alert_orphaned", "describe", "differing", "orphaned",
           "orphaned_state", "record", "seen"]


def record(store, files: Iterable[tuple[str, str]], now: float) -> None:
    """files: (task id, path) of this host's valid task files. Writes only what changed."""
    mine = store.host_files()
    seen, changed = set(), []
    for task_id, path in files:
        try:
            # never waits on a FIFO swapped in since the file was validated
            digest = hashlib.sha256(safe_fs.read_regular(path, READ_LIMIT)).hexdigest()
        except OSError:
            continue
        seen.add(task_id)
        if mine.get(task_id) != digest:
            changed.append((task_id, digest))
    gone = [t for t in mine if t not in seen]
    if changed or gone:
        store.record_host_files(changed, gone, now)


def differing(store) -> dict[str, dict[str, str]]:
    """task id -> {host: short hash} for the tasks whose hosts' copies are not all alike."""
    by_task: dict[str, dict[str, str]] = {}
    for task_id, host, digest in store.file_copies():
        by_task.setdefault(task_id, {})[host] = digest[:8]
    return {t: hosts for t, hosts in by_task.items() if len(set(hosts.values())) > 1}


def describe(task_id: str, hosts: dict[str, str]) -> str:
    copies = ", ".join(f"{h} ({d})" for h, d in hosts.items())
    return (f"{task_id}: the hosts' copies of its file differ: {copies}; sync tasks/ on every"
            " host (git pull, or a shared folder)")


READ_LIMIT = 1 << 20  # a valid task file's own bound (taskfile.MAX_BYTES)


def seen(store) -> None:
    """This host ticked now (the database's clock); the idle tick does it in its one query. A
    task alerted as running nowhere that names this host runs somewhere again (its alert row
    goes, in the same transaction)."""
    store.host_seen()


def alert_orphaned(store, config, tasks, now: float, say) -> None:
    """Due tasks none of whose hosts ticks: a line in the tick log, and one alert per task
    until that changes (a host of it ticks again, or its `hosts:` change): the meta row
    orphaned:<id> is claimed by check-and-set, so one host sends it, once. The idle tick
    (pgidle.unchanged) holds only while these rows agree with the hosts' liveness."""
    from ..alerts.notify import Alert, enqueue

    keys = store.metas_with_prefix(ALERTED)
    for task, line in zip(tasks, orphaned(store, tasks, keep=True), strict=True):
        key, sig = ALERTED + task.id, ",".join(task.hosts)
        if not line:
            if key in keys:  # it runs again: a later loss of its hosts alerts anew
                store.take_meta(key)
            continue
        say(line)
        if keys.get(key) == sig:
            continue  # said already, by this host or another
        if store.change_meta(key, sig):
            enqueue(store, config, Alert("orphaned", task.id, f"mdcron: {task.id} runs nowhere",
                                         line, destination=task.notify_to), now)


def orphaned(store, tasks, keep: bool = False) -> list[str]:
    """Lines for the tasks whose `hosts:` have all stopped ticking: they run nowhere.
    `keep`: one entry per task, '' for the others."""
    age = {h.name: h.age for h in store.host_ticks()}
    out = []
    for task in tasks:
        if task.hosts and task.enabled and all(age.get(h, float("inf")) > DEAD_AFTER
                                               for h in task.hosts):
            last = ", ".join(f"{h} ({_ago(age.get(h))})" for h in task.hosts)
            out.append(f"{task.id}: none of its hosts ticks any more: {last}; it runs nowhere"
                       " until one does (or add a live host to its hosts:)")
        elif keep:
            out.append("")
    return out


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "never seen"
    return f"last tick {format_duration(seconds)} ago"
