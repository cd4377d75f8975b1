"""Due runs spread over the hosts of a shared state (issue 23 item 9): a host claims only what it
can start now, in an order of its own, so a host that ticks first no longer takes the minute.

Each host walks the due runs in its rendezvous order (sha256 of host and task id) and claims a
batch the size of its free workers; each time a worker frees up it claims the next slot still
unclaimed, until every due slot of this tick is claimed by some host. A slot another host
claimed first is passed over (claim_slots is the check-and-set), so each slot still runs exactly
once within the minute; the orders differ per host, so the hosts' first claims rarely collide.

Only with a shared (PostgreSQL) state: on SQLite the tick claims all its slots at once
(run_all), as it always has.

Lazy imports: none; tick.py loads this module only with a shared state and due runs.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from ..core.records import replace
from ..state.store import Store
from ..tasks.task import Task
from .attempt import RunContext
from .dispatch import Planned, may_wait, run_one
from .heal_protocol import Healer
from .ladder import LadderOutcome
from .waits import Gate

LOST = "due, but another tick claimed this slot first"


def rendezvous(host: str, planned: list[Planned]) -> list[Planned]:
    """Pure: the runs in this host's order; another host's order is unrelated to it."""
    def weight(p: Planned) -> str:
        return hashlib.sha256(f"{host}\0{p.task.id}".encode()).hexdigest()

    return sorted(planned, key=weight)


def run_spread(
    ctx: RunContext, store: Store, planned: list[Planned], say: Callable[[str], None],
    healer: Healer | None, meanwhile: Callable[[], object] | None = None,
) -> tuple[list[tuple[Task, int, LadderOutcome]], list[str]]:
    """Claim and run these due runs as workers free up: ([(task, run id, outcome)] of the runs
    this host won, in the order they ended; [task ids another host claimed first]).
    `meanwhile` runs in this thread once the first batch has started."""
    pending = deque(rendezvous(ctx.config.host_name, planned))
    workers = max(1, min(ctx.config.max_parallel, len(pending)))
    done: list[tuple[Task, int, LadderOutcome]] = []
    lost: list[str] = []
    running: dict[Future[LadderOutcome], tuple[Task, int]] = {}
    waiters = sum(1 for p in planned if may_wait(p.task))  # issue 26: see waits.py
    gate = Gate(workers) if waiters else None
    if gate is not None:
        ctx = replace(ctx, gate=gate)
    with ThreadPoolExecutor(max_workers=workers + waiters, thread_name_prefix="task") as pool:
        while pending or running:
            free = workers - len(running) + (gate.waiting if gate is not None else 0)
            if pending and free > 0:
                batch = [pending.popleft() for _ in range(min(free, len(pending)))]
                for task, run_id in _claim(ctx, store, batch, lost, say):
                    running[pool.submit(_gated, ctx, (task, run_id), say, healer)] = (task,
                                                                                      run_id)
                if meanwhile is not None and running:
                    _quietly(meanwhile)
                    meanwhile = None
                continue
            # a ladder that starts to wait frees a slot: look again every 0.2 s while any may
            ended, _ = wait(running, timeout=0.2 if gate is not None else None,
                            return_when=FIRST_COMPLETED)
            for future in ended:
                task, run_id = running.pop(future)
                done.append((task, run_id, future.result()))  # StoreError: the tick stops
    if meanwhile is not None:  # nothing won here: its work is still wanted
        _quietly(meanwhile)
    return done, lost


def _gated(ctx: RunContext, item: tuple[Task, int], say: Callable[[str], None],
           healer: Healer | None) -> LadderOutcome:
    if ctx.gate is None:
        return run_one(ctx, item, say, healer)
    with ctx.gate:
        return run_one(ctx, item, say, healer)


def _claim(ctx: RunContext, store: Store, batch: list[Planned], lost: list[str],
           say: Callable[[str], None]) -> list[tuple[Task, int]]:
    """One transaction for the batch: the runs won; the others are another host's."""
    won = store.claim_slots([(p.task.id, p.slot, None, str(p.task.path)) for p in batch],
                            ctx.clock.now(), ctx.owner)
    out = []
    for p in batch:
        run_id = won.get((p.task.id, p.slot))
        if run_id is None:
            lost.append(p.task.id)
            say(f"{p.task.id}: {LOST}")
        else:
            out.append((p.task, run_id))
    return out


def _quietly(work: Callable[[], object]) -> None:
    try:
        work()
    except Exception:  # an optimisation only: its work is done again after the runs
        pass
