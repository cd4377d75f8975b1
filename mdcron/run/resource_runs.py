"""Running the tick's planned slots of tasks with `uses:`: take the units, then claim, then climb
the ladder holding them (resources.py explains the units). They run in a thread pool of their own
(max_parallel workers) beside the tick's other runs, so a task waiting on a resource never holds
up tasks that need none.

Lazy imports: the thread pool loads only when deferred runs wait for units; leases
(hosts/lease.py) only with a shared state.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from ..core.clock import monotonic
from ..core.outcome import Outcome, RunResult
from ..core.records import dataclass, field, replace
from ..state.store import Store, StoreError, database_lost, lost_in_tick, state_store
from ..state.trouble import is_trouble
from .attempt import RunContext
from .dispatch import after_one
from .escalation_policy import Step
from .heal_protocol import Healer
from .ladder import LadderOutcome, execute_claimed
from .locks import LockInfo
from .resources import busy_env, take

NEXT_TICK = 60.0  # seconds: cron starts the next tick a minute later


@dataclass(slots=True)
class Deferred:
    """The background pass; join() returns [(run id, ladder outcome)] of what ran."""

    thread: threading.Thread | None = None
    done: list[tuple[int, LadderOutcome]] = field(default_factory=list)
    lost: StoreError | None = None  # the state database went away under a run

    def join(self) -> list[tuple[int, LadderOutcome]]:
        """StoreError when the state database went away under one of the runs."""
        if self.thread is not None:
            self.thread.join()
        if self.lost is not None:
            raise self.lost
        return self.done


def start(ctx: RunContext, planned: list, say: Callable[[str], None], healer: Healer | None,
          describe: Callable[[LadderOutcome], str]) -> Deferred:
    """Start the pass for these dispatch.Planned runs (all of tasks with `uses:`)."""
    out = Deferred()
    if not planned:
        return out

    def one(p: object) -> None:
        try:
            got = run_one(ctx, p, say, healer)
            if got is not None:
                say(describe(got[1]))
                with state_store(ctx.config) as store:  # its alerts when it ends (after_one)
                    after_one(store, ctx, got[1], say)
                out.done.append(got)
        except Exception as exc:  # one task's failure never ends the tick
            if isinstance(exc, StoreError) or database_lost(exc) or is_trouble(exc):
                out.lost = exc if isinstance(exc, StoreError) else lost_in_tick(exc)
                return
            # type: ignore[attr-defined]
            print(f"mdcron: internal error running {p.task.id}: {exc!r}",
                  file=sys.stderr)

    def work() -> None:
        from concurrent.futures import ThreadPoolExecutor

        workers = max(1, min(ctx.config.max_parallel, len(planned)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="uses") as pool:
            list(pool.map(one, planned))

    out.thread = threading.Thread(target=work, name="uses", daemon=True)
    out.thread.start()
    return out


def _claimed(store: Store, task_id: str, slot: float) -> bool:
    return store.slot_claimed(task_id, slot)


def run_one(ctx: RunContext, p, say: Callable[[str], None],  # type: ignore[no-untyped-def]
            healer: Healer | None) -> tuple[int, LadderOutcome] | None:
    task, slot = p.task, p.slot
    config, owner = ctx.config, ctx.owner
    with state_store(config) as store:
        if _claimed(store, task.id, slot):
            return None  # another tick got there first
        shared = None
        if store.url:  # issue 11: a unit is a lease across hosts
            from ..hosts.lease import holder_id

            shared = (store, holder_id(store.host or "?", owner.pid, owner.boot))
        held = take(config, task, stop=lambda: _claimed(store, task.id, slot), shared=shared)
        if held.busy and task.on_busy != "run":
            now = ctx.clock.now()
            reason = f"resource {', '.join(held.busy)} busy"
            catchup = task.catchup if task.catchup is not None else config.catchup
            # the next tick comes a minute later: if it would be past the allowance, the
            # resource is why this slot did not run, and the record says so
            if task.on_busy == "skip" or now - slot + NEXT_TICK >= catchup:
                store.claim_slots([(task.id, slot, reason, str(task.path))], now, owner)
                say(f"{task.id}: skipped ({reason})")
            elif not _claimed(store, task.id, slot):
                say(f"{task.id}: {reason}; the slot waits for the next tick")
            return None
        try:
            now = ctx.clock.now()
            won = store.claim_slots([(task.id, slot, None, str(task.path))], now, owner)
            run_id = won.get((task.id, slot))
            if run_id is None:
                return None
            held.write(LockInfo(
                task_id=task.id, run_id=run_id, tick_pid=owner.pid, tick_start=owner.start,
                boot_id=owner.boot, pgid=None, child_start=None, started_at=now,
                deadline=now + task.timeout, mono_deadline=monotonic() + task.timeout))
            run_ctx = replace(ctx, inherit_fds=held.fds(), extra_env=busy_env(held),
                              record_units=held.write)
            try:
                outcome = execute_claimed(run_ctx, store, task, run_id, healer)
            except Exception as exc:
                if isinstance(exc, StoreError) or database_lost(exc) or is_trouble(exc):
                    raise  # not the task's failure: its outcome is in the spool
                result = RunResult(Outcome.FAILED, fail_reason=f"mdcron internal error: {exc!r}")
                store.end_running(run_id, Outcome.FAILED, result.fail_reason or "", now)
                outcome = LadderOutcome(task, result, Step.GIVE_UP, result.fail_reason or "")
            if outcome.released:  # a chain's slot, owed again (issue 23): nothing to report
                say(f"{task.id}: {outcome.reason}")
                return None
            return run_id, outcome
        finally:
            held.release()
