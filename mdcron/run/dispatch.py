"""Claimed runs, dispatched: the ladders of a tick's (task, run id) pairs on a pool of
`max_parallel` threads, each reading its unread comments first and sending its own alerts when
it ends; the plan item (`Planned`) and the one-line summaries the tick prints.

Shared by the tick, the chain rounds (chains.py) and the resource-deferred runs
(resource_runs.py), none of which import tick.py for it.

Lazy imports: a tick that claimed nothing loads neither the thread pool nor the comments and
alerts modules; the ladder's reload only when a comment changed the task.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextlib import nullcontext

from ..core.outcome import Outcome, RunResult
from ..core.records import dataclass, replace
from ..settings.config import Config
from ..state.store import Owner, Store, StoreError, database_lost, state_store
from ..state.trouble import is_trouble
from ..tasks.task import Task
from .attempt import RunContext
from .cgroup_keep import KEEP_S, keep_joins_quick
from .escalation_policy import Step
from .heal_protocol import Healer
from .ladder import LadderOutcome, execute_claimed
from .start_order import StartOrder
from .waits import Gate

TYPE_CHECKING = False  # typing stays off a due tick's path (issue 27, tests/test_imports.py)
if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

_Item = tuple[Task, int]  # a claimed run: its task and run id

# Issue 27, while a pool starts its first round of processes (FIRST_ROUND_WAIT at most): the
# GIL is handed over within SWITCH_S (a worker back from its start, its join, its row waited
# out another thread's Python for up to the default 5 ms; later, with the runs spread out, the
# extra switches cost more CPU than they save), and `meanwhile` waits. The cgroup joins are
# kept quick (proctree.keep_joins_quick) for KEEP_S.
SWITCH_S = 0.0005
FIRST_ROUND_WAIT = 0.25


@dataclass(slots=True)
class Planned:
    task: Task
    action: str  # run | skip
    slot: float
    reason: str
    missed: int = 0
    quiet: bool = False  # a skip said once already (once_per.py): passed without a row


def first_round(planned: list[Planned],
                max_parallel: int) -> tuple[list[Planned], list[Planned]]:
    """Issue 27: (the skips and the first `max_parallel` runs, the other runs) when a pool
    runs more than one round (run_all claims the others once its first run started), else
    (all, [])."""
    runs = [p for p in planned if p.action == "run"]
    if max_parallel <= 1 or len(runs) <= max_parallel:
        return planned, []
    rest = {id(p) for p in runs[max_parallel:]}
    return [p for p in planned if id(p) not in rest], runs[max_parallel:]


def claim(store: Store, planned: list[Planned], now: float, owner: Owner,
          lost: list[str]) -> list[_Item]:
    """Claim `planned`'s slots in one transaction (a skip's row recorded as skipped): the
    runs won, (task, run id); a slot another tick claimed first is added to `lost`."""
    won = store.claim_slots([(p.task.id, p.slot, p.reason if p.action == "skip" else None,
                              str(p.task.path)) for p in planned], now, owner)
    to_run = []
    for p in planned:
        run_id = won.get((p.task.id, p.slot))
        if run_id is None:
            lost.append(p.task.id)
        elif p.action == "run":
            to_run.append((p.task, run_id))
    return to_run


def run_all(
    ctx: RunContext, to_run: list[tuple[Task, int]], say: Callable[[str], None],
    healer: Healer | None, meanwhile: Callable[[], object] | None = None,
    on_end: Callable[[LadderOutcome], object] | None = None, store: Store | None = None,
    more: tuple[list[Task], Callable[[], list[_Item]]] | None = None,
) -> list[LadderOutcome]:
    """`meanwhile` runs in this thread while a pool runs the tasks, once its first round of
    processes has started (not before the first starts when they run one by one here).
    `on_end(outcome)` is called as each ladder ends, in its worker (issue 27: chain_follow
    starts the downstreams then). `store`: the caller's SQLite connection, used by the runs
    that go one by one in this thread (issue 27: a tick with one due task opens its database
    once); a pool's workers open their own.
    `more`: (the tasks of runs still to claim, claim): issue 27, the runs after the first
    round, claimed by `claim` (its claimed items, each run started only once its claim is
    committed) in this thread once the first process has started; the outcomes are in the
    order of `to_run` then claim's items."""
    later, claim_more = more if more is not None else ([], None)
    if not to_run and not later:
        return []

    tasks = [task for task, _ in to_run] + later
    slots = max(1, min(ctx.config.max_parallel, len(tasks)))
    waiting = sum(1 for task in tasks if may_wait(task))
    workers = min(len(tasks), slots + waiting)
    if waiting and workers > slots:  # issue 26: a waiting ladder gives its slot back (waits.py)
        ctx = replace(ctx, gate=Gate(slots))

    order = StartOrder(workers)  # issue 27: the first round starts its processes in turns
    mine = store if workers == 1 and store is not None and not store.url else None
    workers_own = WorkerStores(ctx.config) if workers > 1 else None

    def one(item: tuple[Task, int]) -> LadderOutcome:
        own = mine if workers_own is None else workers_own.get()
        if ctx.gate is None:
            with order.turn():
                outcome = run_one(ctx, item, say, healer, own)
        else:
            with ctx.gate, order.turn():
                outcome = run_one(ctx, item, say, healer, own)
        if on_end is not None:  # issue 27: a downstream starts at once
            try:
                on_end(outcome)
            except Exception:  # noqa: S110  # the tick's chain rounds after the batch still run
                pass
        return outcome

    if workers == 1:
        return [one(item) for item in [*to_run, *(claim_more() if claim_more else [])]]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, SWITCH_S))
    keep_joins_quick(KEEP_S)
    try:
        with take_pool(workers) as pool:
            feed = Feed(to_run, claim_more is not None)
            _, drains = drain_into(pool, workers, one, feed)
            if claim_more is not None:
                order.first.wait(FIRST_ROUND_WAIT)  # issue 27: the first run's start first
                try:
                    feed.add(claim_more())
                except BaseException:
                    feed.add([])  # the runs started end as they do; the error is the tick's
                    for drain in drains:
                        drain.exception()
                    raise
            order.round.wait(FIRST_ROUND_WAIT)  # not on the GIL while the first ones start
            sys.setswitchinterval(interval)  # later: quick hand-overs cost more than they gain
            if meanwhile is not None:
                try:
                    meanwhile()
                except Exception:  # an optimisation only: its work is done again after the runs
                    pass
            for drain in drains:
                drain.result()  # a worker's error (the database refused) is the tick's
            return feed.outcomes  # type: ignore[return-value]  # each filled by its worker
    finally:
        sys.setswitchinterval(interval)
        workers_own.close()  # type: ignore[union-attr]


class Feed:
    """The claimed runs a pool's workers take one at a time (drain_into); with more to come
    (run_all's `more`), a worker that finds none left waits until they are added."""

    def __init__(self, items: list[_Item], more_coming: bool = False) -> None:
        self.items = list(items)
        self.outcomes: list[LadderOutcome | None] = [None] * len(self.items)
        self._next = 0
        self._open = more_coming
        self._cond = threading.Condition()

    def take(self) -> tuple[int, _Item] | None:
        """The next item and its place, or None once all are taken and no more will come."""
        with self._cond:
            while self._next >= len(self.items) and self._open:
                self._cond.wait()
            if self._next >= len(self.items):
                return None
            k = self._next
            self._next += 1
            return k, self.items[k]

    def add(self, items: list[_Item]) -> None:
        """The last items (claimed now): none come after them."""
        with self._cond:
            self.items.extend(items)
            self.outcomes.extend([None] * len(items))
            self._open = False
            self._cond.notify_all()


def drain_into(pool: ThreadPoolExecutor, workers: int, one: Callable[[_Item], LadderOutcome],
               items: Feed | list[_Item]) -> tuple[list[LadderOutcome | None], list[Future[None]]]:
    """Issue 27: `workers` jobs on the pool, each taking the next of `items` (a Feed, or a
    list) until none is left, its outcome put at the item's place (the feed's outcomes, also
    returned); not one Future per item, submitted by this thread while the first workers start
    their processes (pool.map: 100 of them, ~1 ms on the GIL). A worker's error stops every
    worker taking another item (the runs started end as they do), and is raised by its job's
    result()."""
    feed = items if isinstance(items, Feed) else Feed(items)
    failed: list[BaseException] = []

    def drain() -> None:
        while (got := feed.take()) is not None:
            if failed:
                return
            k, item = got
            try:
                feed.outcomes[k] = one(item)
            except BaseException as exc:
                failed.append(exc)
                raise

    return feed.outcomes, [pool.submit(drain) for _ in range(workers)]


_LENT: list[Store] = []  # lend_stores: connections opened ahead, for the next pool's workers
_POOLS: list[tuple[int, ThreadPoolExecutor]] = []  # lend_pool: (workers, its threads started)
READY_WAIT = 5.0  # lend_pool: how long its threads may take to start, at most


def lend_pool(workers: int) -> None:
    """Issue 27, the daemon's held tick (cli/warm.py): a pool whose `workers` threads are
    started before its minute, for the next run_all of that many workers to take (at the go,
    the tick started its 8 threads one by one while the first worker made its way to its
    process, each start taking the GIL from it). The threads wait idle until then."""
    from concurrent.futures import ThreadPoolExecutor  # lazy: as run_all's

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="task")
    ready = threading.Barrier(workers + 1)  # each thread busy until all started: one each
    for _ in range(workers):
        pool.submit(ready.wait, READY_WAIT)
    try:
        ready.wait(READY_WAIT)
    except threading.BrokenBarrierError:
        pass  # slow to start: it is lent all the same, its threads start as it is used
    _POOLS.append((workers, pool))


def take_pool(workers: int) -> ThreadPoolExecutor:
    """The pool lent for `workers` workers (lend_pool), else a new one; a lent pool of
    another size is shut down."""
    from concurrent.futures import ThreadPoolExecutor  # lazy: only a tick with a pool

    while _POOLS:
        size, pool = _POOLS.pop()
        if size == workers:
            return pool
        pool.shutdown(wait=False)
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="task")


def lend_stores(stores: list[Store]) -> None:
    """Issue 27, the daemon's held tick (cli/warm.py): SQLite connections it opened before its
    minute (and checked at the go: the same file) for the first pool's workers to take."""
    _LENT.extend(stores)


class WorkerStores:
    """Issue 27: each worker of a pool keeps one SQLite connection for all its runs (opening
    one per run cost ~0.45 ms and ~40 system calls, 100 times over); closed with the pool.
    A shared state (PostgreSQL: leases fence a store per run) opens one per run, as before."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._local = threading.local()
        self._opened: list[Store] = []

    def get(self) -> Store | None:
        """This thread's store, or None (run_one opens its own) with a shared state."""
        if self.config.state_url:
            return None
        own = getattr(self._local, "store", None)
        if own is None:
            try:
                own = _LENT.pop()  # atomic under the GIL
            except IndexError:
                own = state_store(self.config)
            if own.path != self.config.db_path:  # lent for another home: not this one's
                own.close()
                own = state_store(self.config)
            self._local.store = own
            self._opened.append(own)  # list.append: atomic under the GIL
        return own

    def close(self) -> None:
        """The workers' connections, and any lent one no worker took."""
        for own in self._opened:
            own.close()
        self._opened.clear()
        while _LENT:
            _LENT.pop().close()


def may_wait(task: Task) -> bool:
    """Issue 26: a ladder that may wait (a rerun's delay, a jitter start) inside the tick."""
    return bool(task.jitter or (task.retry and task.retry_delay))


def run_one(ctx: RunContext, item: tuple[Task, int], say: Callable[[str], None],
            healer: Healer | None, store: Store | None = None) -> LadderOutcome:
    """One claimed run: its comments, its ladder, its alerts, on its own connection (or on
    `store`, this thread's, left open)."""
    task, run_id = item
    # one connection per thread
    with nullcontext(store) if store is not None else state_store(ctx.config) as store:
        try:
            task, skip_reason, unread_note = read_comments(ctx, store, task)
            if skip_reason is not None:
                store.end_running(run_id, Outcome.SKIPPED, skip_reason, ctx.clock.now())
                result = RunResult(Outcome.SKIPPED, fail_reason=skip_reason)
                outcome = LadderOutcome(task, result, Step.DONE, skip_reason,
                                        steps=[(1, "run", result)])
            else:
                outcome = execute_claimed(ctx, store, task, run_id, healer)
                if unread_note:  # why the comments were not read, on the run's row
                    store.add_note(run_id, unread_note)
        except StoreError:
            raise  # the database refused: the tick stops with one line (its result spooled)
        except Exception as exc:  # one task's failure never ends the tick
            if database_lost(exc) or is_trouble(exc):
                raise  # the state went away: the tick stops with one line (cli)
            print(f"mdcron: internal error running {task.id}: {exc!r}", file=sys.stderr)
            result = RunResult(Outcome.FAILED, fail_reason=f"mdcron internal error: {exc!r}")
            store.end_running(run_id, Outcome.FAILED, result.fail_reason or "", ctx.clock.now())
            outcome = LadderOutcome(task, result, Step.GIVE_UP, result.fail_reason or "")
        if outcome.released:  # a chain's slot, owed again: no row, no alert (issue 23)
            say(f"{task.id}: {outcome.reason}")
            return outcome
        say(describe_outcome(outcome))
        after_one(store, ctx, outcome, say)
    return outcome


def after_one(store: Store, ctx: RunContext, outcome: LadderOutcome,
               say: Callable[[str], None]) -> None:
    """This ladder's alerts and incidents as soon as it ends, on this thread's own connection,
    not when the slowest task of the tick ends: sent at once, ordinary ones as well as forced
    ones (issue 25), so a tick killed while another task still runs has already delivered
    them. Quiet hours still hold the ordinary ones (notify.flush)."""
    now = ctx.clock.now()
    if _plain_success(outcome) and store.quiet_success(outcome.task.id, now):
        return  # after_ladder would write and send nothing: not imported (issue 27)
    from ..alerts.after_run import after_ladder, flush_now
    from .incident_command import run_incident_command  # lazy: as after_run, once a run ended

    after_ladder(store, ctx.config, outcome, now, ctx.environ, say,
                 incident_runner=run_incident_command)
    if (outcome.decision is Step.SUSPEND or outcome.final.outcome is Outcome.TIMEOUT
            or outcome.lost or store.due_messages(now)):
        flush_now(store, ctx.config, now, ctx.environ, say, ctx.failed_destinations)


def _plain_success(outcome: LadderOutcome) -> bool:
    """A ladder after which alerts/after_run.after_ladder sends nothing whatever the state
    holds but an alerted flag (a `recovered` notice), an open incident (resolved) or a due
    message (flushed), which store.quiet_success reads: a success, neither lost nor
    healed, whose task asks no success alert."""
    final = outcome.final
    return (final.ok and final.outcome is not Outcome.TIMEOUT and not outcome.lost
            and not outcome.heals and outcome.decision is not Step.SUSPEND
            and outcome.task.notify_on not in ("success", "always"))


def read_comments(ctx: RunContext, store: Store,
                   task: Task) -> tuple[Task, str | None, str | None]:
    """Unread comments are read by Claude before the run: returns the task to run (an
    `update` edits its file), a skip reason for `skip` / `pause`, and why the comments were
    left unread (no key, a broken template, an API error) for the run's history row."""
    if not store.has_unread(task.id):
        return task, None, None  # the usual case: nothing imported, one indexed lookup
    from ..claude.comments import UNREAD, check_comments

    decision = check_comments(task, ctx.config, ctx.environ, store, ctx.clock.now())
    if decision.action in ("skip", "pause"):
        return task, f"comments: {decision.action} — {decision.reason}", None
    if decision.action == "update" and decision.applied_updates:
        from .ladder import reload_task

        return reload_task(task, ctx.config), None, None
    return task, None, decision.reason if decision.reason.startswith(UNREAD) else None


def describe_result(task: Task, result: RunResult) -> str:
    from ..core.units import format_duration

    text = f"{task.id}: {result.outcome.value} in {format_duration(result.duration)}"
    return text + (f" ({result.fail_reason})" if result.fail_reason else "")


def describe_outcome(outcome: LadderOutcome) -> str:
    text = describe_result(outcome.task, outcome.final)
    if len(outcome.steps) > 1:
        text += f" [{outcome.summary()}]"
    if outcome.decision is Step.SUSPEND:
        text += f"; suspended: {outcome.reason}"
        if outcome.suspend_error:
            text += f" ({outcome.suspend_error})"
    return text
