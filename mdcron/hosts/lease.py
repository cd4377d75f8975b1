"""Per-task leases across hosts (issue 11): which host's run holds a task, judged by the database.

On one host the task's flock decides (locks.py). Hosts sharing a PostgreSQL state cannot see
each other's flocks, so a run also holds a row of `leases` (task_id -> holder, fence, expiry):

- holder: `host:pid:boot-id` of the tick that runs the task; NULL once released.
- fence: a token that grows by one at every acquisition. While a run holds the lease, its
  store carries (task_id, fence) and every write transaction first checks the lease still
  has that fence (Store.write); a holder whose lease another host took over writes nothing
  (FencedOff): its late result, notes, retries, failure count or suspension change no row.
- expires_at: the database's clock (PostgreSQL clock_timestamp(); SQLite's own clock) plus
  `lease_seconds` plus a margin M (a tenth of it, state/leases.margin). A thread of the tick
  (not the task: Prefect #18893) renews every lease the tick holds every lease_seconds / 3
  while the tasks run, so a run that outlives the interval keeps its lease as long as its
  tick lives. A tick killed with SIGKILL stops renewing; the host's next tick extends the
  lease of its orphaned task while that task is within its deadline (recovery.py), as the
  flock outlives the tick. A host that is gone or cut off renews nothing: once the lease
  expired, another host takes the task on its next slot, closes the holder's rows as `lost`
  (one alert; a late result of the holder is kept beside the row as a note, ladder.py), and
  runs.

Self-fencing (issue 23): fences protect the database, not what the task does to the world. The
tick's renewal thread is also a watchdog on this host's monotonic clock that never waits on the
database (renewals run in rounds with a hard deadline, Round): once a lease's last successful
renewal was *sent* more than lease - 2M ago, it kills the task's tree (TERM, grace <= M, KILL)
and refuses the run's writes, so the task is gone by lease - M after that send; the database
dated the renewal at or after the send and lets no other host take the lease before lease + M.
Never two copies, provided this host's clock and the database's advance by amounts that differ
by less than 2M per lease (a fifth of the lease) and the host can still kill its processes.
No clock of a host is compared with another's: the expiry is written and judged by one clock,
the database's. A lease is taken and checked inside the write transaction (the advisory write
lock on PostgreSQL), so two hosts cannot both take one. The statements (and FencedOff, which
Store.write raises) live in state/leases.py; this module decides when to use them.

Lazy imports: the task lock's reader only when a lease is found taken over or overdue and the
run must be stopped (by the run layer's own killer, passed in: Stopper).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..core.clock import to_dt
from ..core.lock_info import LockInfo
from ..core.outcome import Outcome
from ..core.records import dataclass
from ..state.leases import Busy, FencedOff, margin
from .replace_marks import REPLACE_REQUEST, REPLACED, replaced_mark

__all__ = ["LEASE_SECONDS", "FencedOff", "Lease", "Renewer", "Stopper", "acquire", "holder_id",
           "release", "renew", "renewer", "task_lease"]

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
        return None, busy_reason(got), []
    return Lease(task_id, holder, got.fence), None, got.taken


def busy_reason(got: Busy) -> str:
    return (f"previous run still running on host {got.host} since"
            f" {to_dt(got.since):%Y-%m-%d %H:%M:%S} UTC (its lease runs until"
            f" {to_dt(got.until):%H:%M:%S} UTC, database clock); this slot is skipped, not"
            " queued")


def release(store, lease: Lease) -> None:
    """The run ended: the lease is free (its fence stays, so an older holder stays fenced)."""
    store.release_lease(lease.task_id, lease.fence)


def renew(store, lease: Lease, seconds: float) -> bool:
    """One renewal (a lone autocommit statement); False: the lease is no longer this one's."""
    return store.renew_lease(lease.task_id, lease.fence, lease.holder, seconds)


@dataclass(slots=True)
class Held:
    """A lease the tick holds, the store of its run (fenced off locally when this holder fences
    itself; None for a resource unit) and when its last successful renewal was sent."""

    lease: Lease
    store: Any | None
    renewed: float  # time.monotonic() when the last renewal that succeeded (or the take) was sent
    replace: bool = False  # issue 26: its task has `overlap: replace` (replace_marks.py)


class Round:
    """One renewal round on the renewal connection, in a thread of its own. A round that has
    not finished within its deadline counts as failed whether or not its call ever returns
    (a frozen link blocks a psycopg call for good): it is abandoned, and closes its
    connection itself if it ever returns; the next round opens a new one."""

    def __init__(self, owner: Renewer, held: list[Held], seconds: float) -> None:
        self.owner, self.held, self.seconds = owner, held, seconds
        self.abandoned = False
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="lease-renewal-round", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        owner = self.owner
        store = owner.conn
        try:
            if store is None:
                kind, path, url, host = owner.where
                store = kind(path, url=url, host=host)
                with owner.guard:  # an abandoned round keeps its connection to itself
                    if not self.abandoned:
                        owner.conn = store
            for h in self.held:
                sent = time.monotonic()
                if renew(store, h.lease, self.seconds):
                    owner.renewed(self, h, sent)
                    if h.replace:  # issue 26: a later slot on another host asks to replace
                        owner.replace_if_asked(store, h)
                else:
                    owner.taken_over(h)
        except Exception as exc:  # the database is away: the next round tries again
            print(f"mdcron: could not renew the leases of this tick: {exc}", file=sys.stderr)
            with owner.guard:
                if owner.conn is store:
                    owner.conn = None
            if store is not None:
                store.close()
        with owner.guard:
            late = self.abandoned and store is not None and owner.conn is not store
        if late:
            store.close()


class Renewer:
    """The tick's renewal thread: every `seconds / 3` a renewal round renews each lease the tick
    holds, on its own connection, under a hard deadline. The same thread is the watchdog
    (issue 23): it never waits on the database, and once a lease's last successful renewal
    is older than the lease minus twice the margin (state/leases.margin), on this host's
    monotonic clock, it stops the lease's task itself (TERM, at most a margin of grace, KILL:
    the whole tree), so the task is gone by the lease minus the margin, a margin before the
    lease (written as lease + margin) lets another host take it. A lease found taken over
    is dropped and its task killed the same way: its result would be refused anyway."""

    def __init__(self, config, store, stop: Stopper) -> None:  # config.Config, store.Store
        self.config = config
        self.stop = stop  # the run layer's: kill a run's holder, stop a run's tree (run/locks.py)
        self.where = (type(store), store.path, store.url, store.host)  # its own connection
        self.held: dict[str, Held] = {}
        self.guard = threading.Lock()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.conn: Any | None = None  # the renewal connection's store, made by a round

    def add(self, lease: Lease, store=None, sent: float | None = None,
            replace: bool = False) -> None:
        """Hold `lease` (taken when `sent`, monotonic); `store`: its run's, to fence off."""
        with self.guard:
            self.held[lease.task_id] = Held(lease, store, time.monotonic() if sent is None
                                            else sent, replace)
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="lease-renewal",
                                               daemon=True)
                self.thread.start()

    def drop(self, lease: Lease) -> None:
        with self.guard:
            if (h := self.held.get(lease.task_id)) is not None and h.lease == lease:
                del self.held[lease.task_id]

    def _take(self, h: Held) -> bool:
        """Under the guard: remove `h` if it is still held (its run may have ended)."""
        if self.held.get(h.lease.task_id) is not h:
            return False
        del self.held[h.lease.task_id]
        return True

    def _loop(self) -> None:
        current: Round | None = None
        next_round = time.monotonic() + self.config.lease_seconds / 3
        while not self.wake.wait(min(self.config.lease_seconds / 30, 1.0)):
            seconds = self.config.lease_seconds
            now = time.monotonic()
            with self.guard:
                held = list(self.held.values())
                if not held:  # the tick's runs ended: the next lease starts a new thread
                    self.thread = None
                    if current is not None and current.thread.is_alive():
                        current.abandoned = True
                    elif self.conn is not None:
                        self.conn.close()
                    self.conn = None
                    return
            self._fence_overdue(held, now, seconds)
            if current is not None and not current.thread.is_alive():
                current = None
            elif current is not None and now - current.started > seconds / 3:
                with self.guard:  # no success within the deadline: failed, whatever comes
                    current.abandoned = True
                    self.conn = None
                print(f"mdcron: the lease renewal got no answer within {seconds / 3:g} s;"
                      " trying again on a new connection", file=sys.stderr)
                current = None
            if current is None and now >= next_round:
                with self.guard:
                    held = list(self.held.values())
                current = Round(self, held, seconds) if held else None
                next_round = now + seconds / 3

    def _fence_overdue(self, held: list[Held], now: float, seconds: float) -> None:
        limit = seconds - 2 * margin(seconds)
        for h in held:
            if now - h.renewed <= limit:
                continue
            with self.guard:
                if not self._take(h):
                    continue
            why = (f"this host could not renew the lease of {h.lease.task_id} for"
                   f" {now - h.renewed:.1f} s (cut off from the database, or it answered too"
                   f" late): it stopped the run itself, before another host may take the"
                   f" lease ({seconds:g} s + a {margin(seconds):g} s margin after its last"
                   " renewal)")
            if h.store is not None:
                h.store.fenced_off = why  # its writes are refused from now on (FencedOff)
            # not a daemon: the tick, done with its run, waits for the stop (bounded by the
            # kill grace) and its line on stderr instead of exiting in the middle of them
            threading.Thread(target=self._stop, args=(h, why), daemon=False).start()

    def renewed(self, round_: Round, h: Held, sent: float) -> None:
        with self.guard:
            if not round_.abandoned and self.held.get(h.lease.task_id) is h:
                h.renewed = max(h.renewed, sent)

    def taken_over(self, h: Held) -> None:
        with self.guard:  # not lost if its run ended meanwhile (dropped)
            lost = self._take(h)
        if lost:
            self._stop(h, "its lease was taken over by another host (this tick could not"
                       " renew it in time)")

    def replace_if_asked(self, store, h: Held) -> None:
        """Issue 26: another host's later slot asked (replace_marks.py) to replace this run:
        close its row "replaced by slot …", mark it so its ladder ends, stop its tree. On the
        round's connection; the mark is taken by one host only (check-and-set)."""
        task_id = h.lease.task_id
        why = store.get_meta(REPLACE_REQUEST + task_id)
        if not why or not store.take_meta(REPLACE_REQUEST + task_id):
            return
        from ..core.lock_info import lock_path, read_info

        info = read_info(lock_path(self.config.locks_dir, task_id))
        if info is None or info.tick_pid != os.getpid():
            return
        store.set_meta(REPLACED + task_id, replaced_mark(info.run_id, why))
        store.end_running(info.run_id, Outcome.SKIPPED, f"{why}: stopped (TERM, grace, KILL)",
                          time.time())  # the round has no tick clock: the real time
        threading.Thread(target=self.stop.stop_run_tree, args=(info, self.config.kill_grace),
                         daemon=True).start()

    def _stop(self, h: Held, why: str) -> None:
        from ..core.lock_info import lock_path, read_info

        seconds = self.config.lease_seconds
        info = read_info(lock_path(self.config.locks_dir, h.lease.task_id))
        done = self.stop.kill_holder(info, min(self.config.kill_grace, margin(seconds))) if (
            info is not None and info.tick_pid == os.getpid()) else []
        print(f"mdcron: {h.lease.task_id}: {why}; {', '.join(done) or 'no process to stop'};"
              " its result will not be recorded as the run's", file=sys.stderr)


_renewer: Renewer | None = None
_renewer_guard = threading.Lock()


@dataclass(frozen=True)
class Stopper:
    """How the run layer ends a run found without its lease (run/locks.py passes its own)."""

    kill_holder: Callable[[LockInfo, float], list[str]]  # the task's tree, then a hung tick
    stop_run_tree: Callable[[LockInfo, float], list[str]]  # the run's tree, never its tick


def renewer(config, store, stop: Stopper) -> Renewer:
    """The process's one renewal thread (a daemon's reloaded config replaces its settings)."""
    global _renewer
    with _renewer_guard:
        if _renewer is None:
            _renewer = Renewer(config, store, stop)
        _renewer.config, _renewer.stop = config, stop
        _renewer.where = (type(store), store.path, store.url, store.host)
        return _renewer


def lost_reason(old_host: str | None, last_renewed: float | None, me: str | None,
                fence: int) -> str:
    """Pure: what a host taking over an expired lease knows of the run it closes (issue 23)."""
    since = (f" since {to_dt(last_renewed):%Y-%m-%d %H:%M:%S} UTC (its last lease renewal,"
             " database clock)" if last_renewed is not None else "")
    return (f"lost: host {old_host or '?'} unreachable{since}; it stopped renewing its lease"
            f" (dead or cut off), so host {me} took the task over (fence {fence}). What the"
            " task did there is unknown here: a late result from that host is kept beside"
            " this row")


@contextmanager
def task_lease(ctx, store, task, run_id: int, lost: list[tuple[int, str]] | None = None, *,
               stop: Stopper) -> Iterator[str | None]:
    """Around a claimed run on a shared state: yields None while this run holds the task's
    lease (the store fenced, the lease renewed), or why the slot is skipped. Rows of an
    expired holder on another host are closed as `lost` first, and listed in `lost` (run id,
    reason) for one alert each. On SQLite: None, nothing done (one host: the flock decides).
    `stop`: how the renewer ends this run should its lease be lost."""
    if not store.url:
        yield None
        return
    config = ctx.config
    holder = holder_id(store.host or "?", ctx.owner.pid, ctx.owner.boot)
    sent = time.monotonic()
    got = store.take_lease(task.id, run_id, holder, config.lease_seconds)
    if isinstance(got, Busy):
        yield busy_reason(got)
        return
    lease = Lease(task.id, holder, got.fence)
    now = ctx.clock.now()
    for other in got.taken:
        why = lost_reason(got.old_host, got.last_renewed, store.host, lease.fence)
        if store.end_running(other, Outcome.LOST, why, now, unobserved=True) and lost is not None:
            lost.append((other, why))
    keeper = renewer(config, store, stop)
    keeper.add(lease, store, sent, replace=getattr(task, "overlap", "skip") == "replace")
    store.fence = (task.id, lease.fence)
    fenced = False
    try:
        yield None
    except FencedOff:
        fenced = True
        raise
    finally:
        keeper.drop(lease)
        fenced = fenced or store.fenced_off is not None
        store.fence, store.fenced_off = None, None
        if not fenced:
            try:
                release(store, lease)
            except Exception as exc:  # it expires by itself; the run's result is recorded
                print(f"mdcron: could not release the lease of {task.id}: {exc}", file=sys.stderr)
