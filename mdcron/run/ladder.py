"""Climbing the escalation ladder for one claimed slot, the task's lock held throughout.

escalation_policy.py decides; this module carries the steps out and records each as a history row:
attempt 1 `run`, then `retry` rows for reruns and `heal` rows for heals, all for the same slot.

Lazy imports: leases (hosts/lease.py) only with a shared state; the task-file parser and editor
only when a heal or a suspension touches the file; the held suspension (schedule/held.py) only
when the file cannot take one; overlap.py and pings.py only for a task that uses them before its
run, else after it (issue 27: nothing the first attempt's start does not need).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from functools import partial

from ..core.clock import to_dt
from ..core.outcome import Outcome, RunResult, late_note
from ..core.records import dataclass, field, replace
from ..settings.config import Config
from ..state.db import FencedOff  # leases.py's, without the leases (issue 27)
from ..state.store import Store
from ..tasks.run_keys import backoff, start_offset
from ..tasks.task import Task
from .attempt import RunContext, acquire_task_lock, run_attempt
from .escalation_policy import MAX_HEALS, LadderState, Step, ladder_budget, next_step
from .heal_protocol import Healer, HealRecord
from .locks import TaskLock, kill_holder, lock_path, read_info, stop_run_tree
from .recovery import Recovered
from .waits import pause

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .pings import Flight

# The tick makes no healer when the scheduler has no API key (cli/commands.ClaudeSelfHeal).
NO_HEALER = "no ANTHROPIC_API_KEY in the scheduler's environment; set it to enable self-heal"


@dataclass
class LadderOutcome:
    task: Task  # as it stands at the end (a heal may have edited it)
    final: RunResult
    decision: Step  # DONE, GIVE_UP or SUSPEND
    reason: str
    steps: list[tuple[int, str, RunResult]] = field(default_factory=list)  # attempt, kind, result
    heals: list[HealRecord] = field(default_factory=list)
    failures_in_a_row: int = 0
    suspend_error: str | None = None  # the file could not be edited
    released: bool = False  # a chain's claim given back: the slot waits for the previous run
    lost: list[Recovered] = field(default_factory=list)  # issue 23: another host's, closed
    notes: list[str] = field(default_factory=list)  # issue 26: reruns not attempted, and why

    def summary(self) -> str:
        """'run failed (exit 1) → retry failed (exit 1) → heal changed → retry success'."""
        parts = []
        for _attempt, kind, result in self.steps:
            detail = f" ({result.fail_reason})" if result.fail_reason and not result.ok else ""
            status = result.extra.get("heal_outcome") if kind == "heal" else result.outcome.value
            parts.append(f"{kind} {status}{detail if kind != 'heal' else ''}")
        return " → ".join(parts)


def execute_claimed(
    ctx: RunContext, store: Store, task: Task, run_id: int, healer: Healer | None = None
) -> LadderOutcome:
    """Run a task whose first row (status running) this process owns: take the lock, climb
    the ladder, release. A lock held by a live earlier run makes this slot `skipped`; for a
    chain's downstream it gives the claim back instead (not_now). A lock file that cannot be
    opened (its folder a symlink: safe_fs.py) fails it with that line."""
    try:
        lock = acquire_task_lock(ctx.config, task.id)
    except OSError as exc:
        reason = f"cannot open its lock file: {exc}"
        store.end_running(run_id, Outcome.FAILED, reason, ctx.clock.now())
        failed = RunResult(Outcome.FAILED, fail_reason=reason)
        return LadderOutcome(task, failed, Step.GIVE_UP, reason, steps=[(1, "run", failed)])
    own = lock is None and task.overlap == "allow"  # issue 26: overlap.py
    if own:
        from .overlap import own_lock  # lazy: only a run beside a running one

        lock = own_lock(ctx, task.id, run_id)
    elif lock is None and task.overlap == "replace":
        from .overlap import replace_previous  # lazy: only a run that replaces a running one

        lock = replace_previous(ctx, store, task, run_id)
    if lock is None:
        info = read_info(lock_path(ctx.config.locks_dir, task.id))
        since = f" since {to_dt(info.started_at):%Y-%m-%d %H:%M:%S} UTC" if info else ""
        return not_now(ctx, store, task, run_id, f"previous run still running{since}")
    lost: list[tuple[int, str]] = []  # another host's rows this run's lease closed as lost
    # SQLite (one host: the flock decides), or `allow` (side by side): no lease
    lease: AbstractContextManager[str | None] = nullcontext(None)
    if store.url and task.overlap != "allow":  # issue 11: a shared state, a lease across hosts
        from ..hosts.lease import Stopper, task_lease  # lazy: only with a shared state

        stop = Stopper(kill_holder, stop_run_tree)  # should the lease be lost while it runs
        lease = task_lease(ctx, store, task, run_id, lost, stop=stop)
    try:
        with lease as reason:  # issue 11: across hosts
            if reason is not None:  # another host's run of this task holds its lease
                if task.overlap == "replace":
                    from .overlap import ask_to_replace  # lazy: as replace_previous

                    reason = ask_to_replace(store, task, run_id, reason)
                out = not_now(ctx, store, task, run_id, reason.split(";")[0])
            else:
                flight = _ping_start(task)  # issue 26: ping_url's /start, in the background
                out = climb(ctx, store, task, run_id, lock, healer)
                from . import pings  # lazy: after the run (issue 27: off the task's start)

                pings.finish(out.task, out.final, flight, ctx.environ,
                             ctx.config.secret_names())
    except FencedOff as exc:  # taken over meanwhile: nothing of this ladder was written
        kept = keep_late_result(store, exc, lost)
        refused = RunResult(Outcome.SKIPPED, fail_reason=f"result not recorded: {exc}{kept}")
        out = LadderOutcome(task, refused, Step.DONE, str(exc), steps=[(1, "run", refused)])
    finally:
        if own:
            from .overlap import release_own  # lazy: as own_lock

            release_own(lock)
        else:
            lock.release()
    out.lost = [Recovered(task.id, rid, Outcome.LOST, why) for rid, why in lost]
    return out


def _ping_start(task: Task) -> Flight | None:
    """pings.start(task): `/start` for a task with ping_url, None without one."""
    if not task.ping_url:
        return None
    from . import pings  # lazy: only a task with ping_url before its run (issue 27)

    return pings.start(task)


def keep_late_result(store: Store, exc: Exception, lost: list[tuple[int, str]]) -> str:
    """Issue 23: what a fenced-off holder's task really did, kept beside the row (a note,
    unfenced: it changes neither the row's status nor its error). A row nobody closed yet
    (this host fenced itself before another took the lease) is closed `lost` here, and added
    to `lost` for its alert. Returns words for the tick's line."""
    late = getattr(exc, "late", None)
    if late is None:
        return ""
    run_id, result, at = late
    why = f"lost: {exc}"
    try:
        if store.keep_late(run_id, why, late_note(store.host, result, at), at):
            lost.append((run_id, why))
    except Exception as err:  # the database is still away: spooled, the next tick keeps it
        return f"; its late result ({result.outcome.value}): {err}"
    return f"; its late result ({result.outcome.value}) is kept as a note on run {run_id}"


def not_now(ctx: RunContext, store: Store, task: Task, run_id: int,
            busy: str) -> LadderOutcome:
    """The task's previous run still runs (`busy` says where). A plain slot is `skipped`, not
    queued. A chain's downstream (issue 23) is owed one run per upstream success: its claim is
    given back, unrecorded, and a later round or tick (any host) claims it again once the
    previous run ended (chain_rounds.run_rounds waits within the chain window)."""
    row = store.run(run_id) or {}
    queued = task.after or task.overlap in ("queue", "replace")  # issue 26: overlap.py
    if (queued and row.get("trigger") == "schedule" and row.get("attempt") == 1
            and store.release_claim(run_id, task.id, float(row["scheduled_for"]))):
        reason = f"waits for the previous run ({busy}); not claimed, it runs once that one ends"
        waiting = RunResult(Outcome.SKIPPED, fail_reason=reason)
        return LadderOutcome(task, waiting, Step.DONE, reason, released=True)
    reason = f"{busy}; this slot is skipped, not queued"
    store.end_running(run_id, Outcome.SKIPPED, reason, ctx.clock.now())
    skipped = RunResult(Outcome.SKIPPED, fail_reason=reason)
    return LadderOutcome(task, skipped, Step.DONE, reason, steps=[(1, "run", skipped)])


def run_manual(
    ctx: RunContext, store: Store, task: Task, healer: Healer | None = None,
    trigger: str = "manual",
) -> tuple[int, LadderOutcome]:
    """`run <id>`: now, regardless of schedule, under the same lock, trigger 'manual' (or
    'manual-no-chain': its success starts no chain, chains.py)."""
    now = ctx.clock.now()
    run_id = store.start_run(
        task.id, scheduled_for=now, trigger=trigger, attempt=1, kind="run", now=now,
        owner=ctx.owner, task_file=str(task.path),
    )
    return run_id, execute_claimed(ctx, store, task, run_id, healer)


def climb(
    ctx: RunContext,
    store: Store,
    task: Task,
    run_id: int,
    lock: TaskLock,
    healer: Healer | None,
) -> LadderOutcome:
    config = ctx.config
    slot, trigger = store.slot_of(run_id) or (None, None)  # issue 27: two columns, not the row
    scheduled_for = float(slot or ctx.clock.now())
    trigger = str(trigger or "schedule")
    if trigger == "schedule" and task.jitter:  # issue 26: start at the slot + this task's offset
        pause(ctx.gate, scheduled_for + start_offset(task, config) - ctx.clock.now())
    heal_reason = healer.unavailable_reason(task) if healer is not None else NO_HEALER
    delays = sum(backoff(task.retry_delay, k) for k in range(1, task.retry + 1))
    budget = ladder_budget(task.timeout, task.retry, heal_reason is None, delays)
    deadline = time.monotonic() + budget
    # heal.on_probation, without importing heal; one read (issue 27)
    failures_before, probation = store.ladder_start(task.id)
    on_probation = probation is not None and probation > ctx.clock.now()

    result = run_attempt(ctx, store, task, run_id, lock, attempt=1)
    from .overlap import replaced_by  # lazy: after the first attempt (issue 27: its start)

    out = LadderOutcome(task, result, Step.DONE, "", steps=[(1, "run", result)])
    attempt, retried, last_row, blocked = 1, 0, run_id, False
    while True:
        if (why := replaced_by(store, task, last_row)) is not None:
            return _replaced(store, out, why)
        if healer is not None:
            heal_reason = healer.unavailable_reason(out.task)
        state = LadderState(
            last_ok=result.ok,
            retry_allowed=out.task.retry,
            retried=retried,
            retry_blocked=blocked,
            heals=len(out.heals),
            heal_available=heal_reason is None and bool(out.task.self_heal),
            on_probation=on_probation,
            deadline_passed=time.monotonic() >= deadline,
            failures_in_a_row=failures_before + 1,
            max_consecutive=config.max_consecutive_failures,
        )
        step, reason = next_step(state)
        stopped = bool(result.extra.get("stopped_by"))  # a person stopped it (stop.py):
        if stopped:  # no retry, no heal, no note on why no heal
            step, reason = Step.GIVE_UP, result.fail_reason or "stopped"
        if step in (Step.DONE, Step.GIVE_UP, Step.SUSPEND):
            out.decision, out.reason, out.final = step, reason, result
            note = heal_note(out.task, result, len(out.heals), heal_reason, on_probation,
                             state.deadline_passed)
            if not blocked and state.deadline_passed:
                _retry_past_deadline(store, out, result, retried, last_row)
            note = None if stopped else note  # a stopped run: the stop is the whole story
            if note:  # say on the failure's own row why no (further) heal was tried
                store.add_note(last_row, note)
            out.reason = "; ".join([reason, *out.notes, *([note] if note else [])])
            break
        if step is Step.RETRY:
            retried += 1
            delay = backoff(out.task.retry_delay, retried)
            if delay > 0 and time.monotonic() + delay >= deadline:
                blocked = True  # the heals keep their place: the ladder goes on to them
                _retry_past_deadline(store, out, result, retried - 1, last_row)
                continue
            pause(ctx.gate, delay, stop=partial(replaced_by, store, task, last_row))
            if (why := replaced_by(store, task, last_row)) is not None:
                return _replaced(store, out, why)  # the tick's other tasks ran meanwhile
        else:  # HEAL
            attempt += 1
            record = _heal(ctx, store, out, healer, attempt, result, deadline, scheduled_for,
                           trigger, origin=task)
            if record.outcome != "changed":
                continue  # nothing to rerun; the ladder decides again with one more heal
            out.task = reload_task(out.task, config)
        attempt += 1
        remaining = max(1.0, deadline - time.monotonic())
        rerun_id = store.start_run(
            task.id, scheduled_for=scheduled_for, trigger=trigger, attempt=attempt, kind="retry",
            now=ctx.clock.now(), owner=ctx.owner, task_file=str(out.task.path),
        )
        bounded = replace(out.task, timeout=min(out.task.timeout, remaining))
        result = run_attempt(ctx, store, bounded, rerun_id, lock, attempt=attempt)
        last_row = rerun_id
        out.steps.append((attempt, "retry", result))

    out.failures_in_a_row = store.count_failure(task.id, failed=not out.final.ok)
    if out.final.ok and out.heals:
        store.set_probation(task.id, ctx.clock.now() + config.probation)
    if out.decision is Step.SUSPEND:
        out.suspend_error = suspend(ctx, store, out.task)
    return out


def _replaced(store: Store, out: LadderOutcome, why: str) -> LadderOutcome:
    """Issue 26: a later slot stopped this run (overlap: replace); the ladder ends here, no
    rerun, no heal, no failure counted. The mark goes with it (the replacer's too)."""
    from ..hosts.replace_marks import REPLACED  # lazy: as replaced_by

    store.take_meta(REPLACED + out.task.id)
    out.final = RunResult(Outcome.SKIPPED, fail_reason=why)
    out.decision, out.reason = Step.DONE, why
    if out.steps:  # the stopped attempt: its row says "replaced by slot …"
        attempt, kind, _result = out.steps[-1]
        out.steps[-1] = (attempt, kind, out.final)
    return out


def _retry_past_deadline(store: Store, out: LadderOutcome, result: RunResult, retried: int,
                         row: int) -> None:
    """Issue 26: the reruns left when the deadline came, said on the failure's own row."""
    if result.ok or result.outcome is Outcome.SKIPPED or out.heals or retried >= out.task.retry:
        return
    which = f"retry {retried + 1}" if retried + 1 == out.task.retry else (
        f"retries {retried + 1}-{out.task.retry}")
    note = f"{which} not attempted: past the deadline"
    store.add_note(row, note)
    out.notes.append(note)


def heal_note(task: Task, final: RunResult, heals: int, heal_reason: str | None,
              on_probation: bool, deadline_passed: bool) -> str | None:
    """'self-heal not attempted: <why>' for a failure the ladder leaves unhealed where self-heal
    is set up (a key, `self_heal: true`), so history, `show` and the alert say why (a budget
    used up, a broken prompt template, probation, the deadline). None when it succeeded, every
    heal was tried, or self-heal is not set up at all."""
    if final.ok or final.outcome is Outcome.SKIPPED or heals >= MAX_HEALS:
        return None
    if not task.self_heal or heal_reason == NO_HEALER:
        # self-heal is not set up: said once (doctor, `show` of a self_heal task), not on
        # every failure of every task (issue 25)
        return None
    if on_probation:
        why = "on probation after an earlier heal (a failure now suspends it)"
    elif heal_reason is not None:
        why = heal_reason
    elif deadline_passed:
        why = "the ladder's deadline passed"
    else:
        return None
    return f"{'second self-heal' if heals else 'self-heal'} not attempted: {why}"


def _heal(
    ctx: RunContext, store: Store, out: LadderOutcome, healer: Healer | None, attempt: int,
    failure: RunResult, deadline: float, scheduled_for: float, trigger: str, *, origin: Task,
) -> HealRecord:
    """One heal. The healer gets `origin`, the task as the ladder loaded it: what a heal may
    write is decided from it, so heal 2 cannot inherit a scope heal 1 wrote into the file."""
    assert healer is not None
    heal_id = store.start_run(
        out.task.id, scheduled_for=scheduled_for, trigger=trigger, attempt=attempt, kind="heal",
        now=ctx.clock.now(), owner=ctx.owner, task_file=str(out.task.path),
    )
    started = time.monotonic()
    previous = out.heals[-1] if out.heals else None
    try:
        record = healer.heal(origin, attempt=len(out.heals) + 1, failure=failure,
                             previous=previous, deadline=deadline, run_id=heal_id)
    except Exception as exc:  # a healer bug must not end the ladder
        record = HealRecord(outcome="error", diagnosis=f"healer error: {exc!r}")
    out.heals.append(record)
    result = RunResult(
        Outcome.SUCCESS if record.outcome == "changed" else Outcome.FAILED,
        # a refused heal's diagnosis is its reason ("self-heal not attempted: ...")
        fail_reason=None if record.outcome == "changed" else record.diagnosis
        if record.outcome == "refused" else f"heal {record.outcome}",
        duration=time.monotonic() - started,
        output_tail=(record.diagnosis + "\n\n" + record.diff)[-8192:],
        extra={"heal_outcome": record.outcome, "diagnosis": record.diagnosis, **record.extra},
    )
    store.finish_run(heal_id, result, ctx.clock.now())
    out.steps.append((attempt, "heal", result))
    return record


def reload_task(task: Task, config: Config) -> Task:
    """A heal may have edited the task file; run what the file now says (the healer has
    already checked that it still validates). The tick's own config: scheduler.yaml is not
    read again mid-tick."""
    from ..tasks.taskfile import load_task_file

    try:
        fresh, _problems = load_task_file(task.path, config)
    except Exception:
        return task
    return fresh if fresh is not None and fresh.id == task.id else task


def suspend(ctx: RunContext, store: Store, task: Task) -> str | None:
    """Write `enabled: false` + `disabled_reason: auto_suspended` into the task file (keeping
    every other byte) and mark it disabled, with the hash of the file as suspended: another
    host lifts the suspension only when its copy's content differs (issue 23). Returns an
    error text if the file could not be edited (the alert says so; the task would otherwise
    run again)."""
    from ..tasks.content_hash import file_hash
    from ..tasks.frontmatter_edit import edit_task_file

    error = None
    try:
        edit_task_file(task.path, {"enabled": False, "disabled_reason": "auto_suspended"},
                       root=ctx.config.home)
    except Exception as exc:  # issue 22: the state holds it instead (schedule/held.py)
        from ..schedule.held import record

        error = record(store, task, ctx.clock.now(), exc)
    store.set_enabled(task.id, False, ctx.clock.now(), suspended=True,
                      content=file_hash(task.path))
    return error
