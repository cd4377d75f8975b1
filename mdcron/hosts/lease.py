"""Per-task leases across hosts (issue 11): which host's run holds a task, judged by the database.

On one host the task's flock decides (locks.py). Hosts sharing a PostgreSQL state cannot see
each other's flocks, so a run also holds a row of `leases` (task_id -> holder, fence, expiry):

- holder: `host:pid:boot-id` of the tick that runs the task; NULL once released.
- fence: a token that grows by one at every acquisition. While a run holds the lease, its
  store carries (task_id, fence) and every write transaction first checks the lease still
  has that fence (Store.write); a holder whose lease another host took over writes nothing
  (FencedOff): its late result, notes, retries, failure count or suspension change no row.
- expires_at: the database's clock (PostgreSQL clock_timestamp(); SQLite's own clock) plus
  `lease_seconds`. A thread of the tick (not the task: Prefect #18893) renews every lease the
  tick holds every lease_seconds / 3 while the tasks run, so a run that outlives the interval
  keeps its lease as long as its tick lives. A tick killed with SIGKILL stops renewing; the
  host's next tick extends the lease of its orphaned task while that task is within its
  deadline (recovery.py), as the flock outlives the tick. A host that is gone or cut off
  renews nothing: once the lease expired, another host takes the task on its next slot,
  closes the holder's rows as `timeout`, and runs.

No clock of a host is compared with another's: the expiry is written and judged by one clock,
the database's. A lease is taken and checked inside the write transaction (the advisory write
lock on PostgreSQL), so two hosts cannot both take one. The statements (and FencedOff, which
Store.write raises) live in state/leases.py; this module decides when to use them.

Lazy imports: the task lock's reader and killer (run/locks.py, above hosts in the layers) only
when a lease is found taken over and the stale run must be stopped.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..core.clock import to_dt
from ..core.outcome import Outcome
from ..state.leases import Busy, FencedOff

__all__ = ["LEASE_SECONDS", "FencedOff", "Lease", "Renewer", "acquire", "holder_id", "release",
           "renew", "renewer", "task_lease"]

LEASE_SECONDS = 90.0  # > a cron minute: the host's next tick extends an orphaned task's lease


@dataclass(frozen=True, slots=True)
class Lease:
    task_id: str
    holder: str
    fence: int


def holder_id(host: str, pid: int, boot: str | None) -> str:
    return f"{host}:{pid}:{boot or '-'}"


def acquire(store, task_id: str, run_id: int | None, holder: str,
            seconds: float) -> tuple[Lease | None, str | None, list[int]]:
    """Take the task's lease for `run_id`: (lease, None, rows of an expired holder to close) or
    (None, why the slot is skipped, []) while another host's holder is within its lease. A
    lease this host held before is taken at once: the caller holds the task's flock, so no
    process of that run is alive here."""
    got = store.take_lease(task_id, run_id, holder, seconds)
    if isinstance(got, Busy):
        return None, (f"previous run still running on host {got.host} since"
                      f" {to_dt(got.since):%Y-%m-%d %H:%M:%S} UTC (its lease runs"
                      f" until {to_dt(got.until):%H:%M:%S} UTC, database"
                      " clock); this slot is skipped, not queued"), []
    return Lease(task_id, holder, got.fence), None, got.taken


def release(store, lease: Lease) -> None:
    """The run ended: the lease is free (its fence stays, so an older holder stays fenced)."""
    store.release_lease(lease.task_id, lease.fence)


def renew(store, lease: Lease, seconds: float) -> bool:
    """One renewal (a lone autocommit statement); False: the lease is no longer this one's."""
    return store.renew_lease(lease.task_id, lease.fence, lease.holder, seconds)


class Renewer:
    """The tick's renewal thread: every `seconds / 3` it renews each lease the tick holds, on
    its own connection. A lease found taken over (the tick was cut off longer than the lease)
    is dropped and its task's process group killed: its result would be refused anyway."""

    def __init__(self, config, store) -> None:  # config.Config, store.Store
        self.config = config
        self.where = (type(store), store.path, store.url, store.host)  # its own connection
        self.leases: dict[str, Lease] = {}
        self.guard = threading.Lock()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self.guard:
            self.leases[lease.task_id] = lease
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="lease-renewal",
                                               daemon=True)
                self.thread.start()

    def drop(self, lease: Lease) -> None:
        with self.guard:
            if self.leases.get(lease.task_id) == lease:
                del self.leases[lease.task_id]

    def _loop(self) -> None:
        kind, path, url, host = self.where
        with kind(path, url=url, host=host) as store:
            while not self.wake.wait((seconds := self.config.lease_seconds) / 3):
                with self.guard:
                    held = list(self.leases.values())
                    if not held:  # the tick's runs ended: the next lease starts a new thread
                        self.thread = None
                        return
                for lease in held:
                    try:
                        if not renew(store, lease, seconds):
                            with self.guard:  # not lost if its run ended meanwhile (dropped)
                                lost = self.leases.get(lease.task_id) == lease
                                if lost:
                                    del self.leases[lease.task_id]
                            if lost:
                                self._lost(lease)
                    except Exception as exc:  # the database is away: try again next round
                        print(f"mdcron: could not renew the lease of {lease.task_id}: {exc}",
                              file=sys.stderr)
                        store.close()

    def _lost(self, lease: Lease) -> None:
        from ..run.locks import kill_holder, lock_path, read_info

        info = read_info(lock_path(self.config.locks_dir, lease.task_id))
        done = kill_holder(info, self.config.kill_grace) if (
            info is not None and info.tick_pid == os.getpid()) else []
        print(f"mdcron: {lease.task_id}: its lease was taken over by another host (this tick"
              f" could not renew it in time); {', '.join(done) or 'no process to stop'}; its"
              " result will not be recorded", file=sys.stderr)


_renewer: Renewer | None = None
_renewer_guard = threading.Lock()


def renewer(config, store) -> Renewer:
    """The process's one renewal thread (a daemon's reloaded config replaces its settings)."""
    global _renewer
    with _renewer_guard:
        if _renewer is None:
            _renewer = Renewer(config, store)
        _renewer.config = config
        _renewer.where = (type(store), store.path, store.url, store.host)
        return _renewer


@contextmanager
def task_lease(ctx, store, task, run_id: int) -> Iterator[str | None]:
    """Around a claimed run on a shared state: yields None while this run holds the task's
    lease (the store fenced, the lease renewed), or why the slot is skipped. Rows of an
    expired holder on another host are closed as `timeout` first. On SQLite: None, nothing
    done (one host: the flock decides)."""
    if not store.url:
        yield None
        return
    config = ctx.config
    holder = holder_id(store.host or "?", ctx.owner.pid, ctx.owner.boot)
    lease, refused, taken = acquire(store, task.id, run_id, holder, config.lease_seconds)
    if lease is None:
        yield refused
        return
    now = ctx.clock.now()
    for other in taken:
        store.end_running(other, Outcome.TIMEOUT,
                          "its host's lease expired (its tick stopped renewing it: dead or cut"
                          f" off); host {store.host} took the task over (fence {lease.fence})",
                          now, unobserved=True)
    keeper = renewer(config, store)
    keeper.add(lease)
    store.fence = (task.id, lease.fence)
    lost = False
    try:
        yield None
    except FencedOff:
        lost = True
        raise
    finally:
        keeper.drop(lease)
        store.fence = None
        if not lost:
            try:
                release(store, lease)
            except Exception as exc:  # it expires by itself; the run's result is recorded
                print(f"mdcron: could not release the lease of {task.id}: {exc}", file=sys.stderr)
