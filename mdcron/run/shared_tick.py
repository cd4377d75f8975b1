"""The tick's steps for a state shared by several hosts (issue 11), in the order run_tick
takes them. Each is a no-op on SQLite except `runnable_here` (the `hosts:` key) and the spool's
replay in `opening` (issue 22: a SQLite file that refused a run's result).

Lazy imports: on SQLite every step here is a no-op, so the spool, the lease and host-file
modules, the spooled ladder and the idle mirror load only with a shared (PostgreSQL) state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from ..settings.config import Config
from ..state.store import Store
from ..tasks.task import Task

Say = Callable[[str], None]


def opening(store: Store, config: Config, say: Say, now: float = 0.0,
            environ: Mapping[str, str] | None = None) -> None:
    """Before anything else: refuse to claim with a clock too far off the database's
    (StoreError), then record the outcomes a lost connection left in the spool (before recovery
    could call their rows crashed) and finish those runs' ladders (spool_ladder.py)."""
    if store.url:
        from ..hosts.peers import check_clock

        check_clock(store, config.max_clock_skew)
    elif not any((d / "spool.jsonl").exists() for d in (config.state_dir, config.logs_dir)):
        return  # SQLite: a spool only when the file refused a result (state/spool.py)
    from ..state.spool import replay

    recorded: list = []
    for line in replay(store, config.state_dir, recorded):
        say(line)
    if recorded:
        from .spool_ladder import finish

        finish(store, config, recorded, now, environ or {}, say)


@contextmanager
def problems_store(store: Store, config: Config) -> Iterator[Store]:
    """Where the digest of the problems last reported lives: each host reports its own
    files' problems, so with a shared state it is this host's own database."""
    if not store.url:
        yield store
        return
    with Store(config.db_path) as local:
        yield local


def after_recovery(store: Store, config: Config, say: Say) -> None:
    """A run another host took over after its deadline must not go on here."""
    if store.url:
        for line in kill_taken_over(config, store):
            say(line)


def runnable_here(store: Store, config: Config, files: list[tuple[str, str]],
                  candidates: list[Task], now: float, say: Say) -> list[Task]:
    """The due candidates this host may run: `hosts:` names it, and no suspension on another
    host holds the task. Records this host's copies of the task files and that it is alive;
    a due task none of whose hosts ticks any more is said and alerted."""
    if store.url:
        from ..hosts.files import record, seen

        record(store, files, now)
        seen(store)
    if any(t.hosts for t in candidates):
        from ..settings.state_url import runs_here

        here = config.host_name
        elsewhere = [t for t in candidates if not runs_here(t.hosts, here)]
        candidates = [t for t in candidates if runs_here(t.hosts, here)]
        if store.url and elsewhere:
            from ..hosts.files import alert_orphaned

            alert_orphaned(store, config, elsewhere, now, say)
    if store.url:
        from ..hosts.peers import honour_suspensions

        candidates = honour_suspensions(store, candidates, say)
    return candidates


def closing(store: Store, config: Config, now: float) -> None:
    """This host's last tick, and its copy of the shared state for the next idle tick
    (pgidle.py), in its own database."""
    if store.url:
        from ..state.pgidle import mirror

        with Store(config.db_path) as local:
            local.set_meta("last_tick", repr(now))
            mirror(store, local, config)


def kill_taken_over(config, store: Store) -> list[str]:  # config: config.Config
    """A host coming back (its tick died or was cut off, its task did not) finds its run taken
    over: the run's row was closed by another host and the task's lease is that host's now
    (hosts/lease.py). Its task's process group still holds the local lock: kill it, so the task does
    not go on running beside the newer run. Lines to say."""
    from ..core.lock_info import holder_alive, read_info
    from .locks import kill_holder

    done = []
    try:
        paths = sorted(config.locks_dir.glob("*.lock"))
    except OSError:
        return done
    for path in paths:
        info = read_info(path)
        if info is None or info.run_id is None or not holder_alive(info):
            continue
        row = store.run(info.run_id)
        lease = store.lease(info.task_id)
        if (row is None or row["status"] == "running" or row.get("host") != store.host
                or lease is None or lease.host == store.host):
            continue
        killed = kill_holder(info, config.kill_grace)
        done.append(f"{info.task_id}: run {info.run_id} was taken over by host {lease.host}"
                    f" after its lease expired (fence {lease.fence}); its result is not"
                    f" recorded here; {', '.join(killed) or 'its holder was gone'}")
    return done
