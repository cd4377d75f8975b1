"""One tick, end to end: load, refuse duplicates, recover, decide, claim, run, record.

State is advanced (slots claimed) before anything runs, so a task that crashes the tick cannot
make the next tick run the same slot again.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .clock import Clock, minute_floor, to_dt
from .config import Config
from .escalation import Step
from .execute import RunContext, current_owner
from .healing import Healer
from .ladder import LadderOutcome, execute_claimed
from .outcome import Outcome, RunResult
from .problems import Problem
from .recovery import Recovered, recover
from .store import Store, TaskState
from .task import Task

RETENTION_EVERY = 86400.0  # seconds between retention passes


@dataclass(slots=True)
class Planned:
    task: Task
    action: str  # run | skip
    slot: float
    reason: str
    missed: int = 0


@dataclass(slots=True)
class TickReport:
    now: float
    tasks: int = 0
    problems: list[Problem] = field(default_factory=list)
    duplicates: dict[str, list[Path]] = field(default_factory=dict)
    recovered: list[Recovered] = field(default_factory=list)
    planned: list[Planned] = field(default_factory=list)
    results: list[tuple[Task, int, RunResult]] = field(default_factory=list)
    ladders: list[LadderOutcome] = field(default_factory=list)
    lost_claims: list[str] = field(default_factory=list)  # due, but another tick claimed first
    problems_changed: bool = True  # the task-file problems differ from the last tick's

    @property
    def exit_code(self) -> int:
        if self.duplicates:
            return 2
        failed = any(not r.ok and r.outcome is not Outcome.SKIPPED for _, _, r in self.results)
        errors = any(p.severity == "error" for p in self.problems)
        return 1 if failed or errors else 0


def default_state(task_id: str, enabled: bool, now: float) -> TaskState:
    return TaskState(task_id, now, minute_floor(now), None, enabled, 0, None)


def plan(
    tasks: list[Task], states: dict[str, TaskState], config: Config, now: float,
    plain: dict[str, float] | None = None,
) -> list[Planned]:
    """Pure: which enabled tasks have a slot to run or to record as skipped at `now`.
    `plain`: id -> the slot the cache alone knows decide() runs (cache.plain_due); those are
    planned without croniter, their reason left "" until fill_reasons (after the runs start)."""
    out: list[Planned] = []
    now_dt = to_dt(now)
    for task in tasks:
        if not task.enabled:
            continue
        if plain and task.id in plain:
            out.append(Planned(task, "run", plain[task.id], ""))
            continue
        from .schedule import decide

        state = states.get(task.id) or default_state(task.id, True, now)
        decision = decide(
            schedule_of(task, config),
            now=now_dt,
            last_slot=to_dt(state.last_slot) if state.last_slot is not None else None,
            not_before=to_dt(state.not_before),
            catchup=task.catchup if task.catchup is not None else config.catchup,
        )
        if decision.action in ("run", "skip") and decision.slot is not None:
            out.append(
                Planned(task, decision.action, decision.slot.timestamp(), decision.reason,
                        decision.missed)
            )
    return out


def fill_reasons(planned: list[Planned], config: Config) -> None:
    """The reason decide() gives a plain due slot, for the ones plan() left without."""
    from .schedule import _show

    for p in planned:
        if not p.reason and p.action == "run":
            p.reason = f"due: fire at {_show(to_dt(p.slot), schedule_of(p.task, config).zone)}"


_SCHEDULES: dict[tuple[str, str | None], object] = {}


def schedule_of(task: Task, config: Config):  # -> Schedule
    """Parsed schedules are cached per process: parsing a cron expression is the costly part."""
    from .schedule import parse_schedule, resolve_zone

    zone_name = task.timezone or config.timezone
    key = (task.schedule, zone_name)
    if key not in _SCHEDULES:
        _SCHEDULES[key] = parse_schedule(task.schedule, resolve_zone(zone_name))
    return _SCHEDULES[key]


def run_tick(
    config: Config,
    clock: Clock,
    *,
    dry_run: bool = False,
    environ: dict[str, str] | None = None,
    say: Callable[[str], None] = print,
    healer: Healer | None = None,
) -> TickReport:
    """One pass. `healer` replaces the default (Claude, when a key is set) — for tests.

    Task files come through the cache (cache.py): only changed files are parsed, and only
    candidates (cached next_due <= now) become Task objects and go through decide()."""
    from .cache import load, task_states

    now = clock.now()
    report = TickReport(now=now)
    view = load(config)
    report.problems = view.problems
    report.tasks = len(view.valid)
    report.duplicates = view.duplicates()
    if report.duplicates:
        view.close()
        return report  # nothing runs while two files claim one id

    if dry_run:
        candidates, states = view.dry_run(now)
        view.close()
        report.planned = plan(candidates, states, config, now)
        return report

    owner = current_owner()
    with Store(config.db_path) as store:
        report.problems_changed = _problems_changed(store, report.problems)
        report.recovered = recover(config, store, now, owner.pid)
        rows = view.observe(store, now)
        candidates = view.candidates(rows, now)
        report.planned = plan(candidates, task_states(rows, candidates), config, now,
                              view.plain(candidates, rows, now))
        view.claimed([(p.task, p.slot) for p in report.planned], rows)
        view.save(store)
        claims = [
            (p.task.id, p.slot, p.reason if p.action == "skip" else None, str(p.task.path))
            for p in report.planned
        ]
        won = store.claim_slots(claims, now, owner)
        to_run = []
        for p in report.planned:
            run_id = won.get((p.task.id, p.slot))
            if run_id is None:
                report.lost_claims.append(p.task.id)
            elif p.action == "run":
                to_run.append((p.task, run_id))
        ctx = RunContext(config, clock, owner, environ if environ is not None else dict(os.environ))
        if healer is None:
            healer = default_healer(config, ctx.environ, store, now)
        report.ladders = _run_all(ctx, to_run, say, healer,
                                  meanwhile=lambda: (view.prepare_complete(),
                                                     fill_reasons(report.planned, config)))
        report.results = [(o.task, rid, o.final) for (_, rid), o in zip(to_run, report.ladders,
                                                                       strict=True)]
        view.complete(store)  # croniter only now, once the tasks started (or ran)
        fill_reasons(report.planned, config)
        _aftermath(store, config, report, clock.now(), ctx.environ, say)
        _retention(config, store, clock.now())
        store.set_meta("last_tick", repr(clock.now()))
    return report


def _run_all(
    ctx: RunContext, to_run: list[tuple[Task, int]], say: Callable[[str], None],
    healer: Healer | None, meanwhile: Callable[[], object] | None = None,
) -> list[LadderOutcome]:
    """`meanwhile` runs in this thread while a pool runs the tasks (not before the first
    starts when they run one by one here)."""
    if not to_run:
        return []

    def one(item: tuple[Task, int]) -> LadderOutcome:
        task, run_id = item
        with Store(ctx.config.db_path) as store:  # one connection per thread
            try:
                task, skip_reason = _read_comments(ctx, store, task)
                if skip_reason is not None:
                    store.end_running(run_id, Outcome.SKIPPED, skip_reason, ctx.clock.now())
                    result = RunResult(Outcome.SKIPPED, fail_reason=skip_reason)
                    outcome = LadderOutcome(task, result, Step.DONE, skip_reason,
                                            steps=[(1, "run", result)])
                else:
                    outcome = execute_claimed(ctx, store, task, run_id, healer)
            except Exception as exc:  # one task's failure never ends the tick
                print(f"mdcron: internal error running {task.id}: {exc!r}", file=sys.stderr)
                result = RunResult(Outcome.FAILED, fail_reason=f"mdcron internal error: {exc!r}")
                store.end_running(run_id, Outcome.FAILED, result.fail_reason or "", ctx.clock.now())
                outcome = LadderOutcome(task, result, Step.GIVE_UP, result.fail_reason or "")
        say(describe_outcome(outcome))
        return outcome

    workers = max(1, min(ctx.config.max_parallel, len(to_run)))
    if workers == 1:
        return [one(item) for item in to_run]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="task") as pool:
        outcomes = pool.map(one, to_run)
        if meanwhile is not None:
            try:
                meanwhile()
            except Exception:  # an optimisation only: its work is done again after the runs
                pass
        return list(outcomes)


def default_healer(config: Config, environ: dict[str, str], store: Store,
                   now: float) -> Healer | None:
    """Claude heals when a key is set; else no healer (the consecutive-failure rule). The
    key is looked at before anything of Claude's is imported."""
    if not (environ.get("ANTHROPIC_API_KEY") or "").strip():
        return None
    from .heal import ClaudeHealer

    return ClaudeHealer(config, environ, store, now)


def _read_comments(ctx: RunContext, store: Store, task: Task) -> tuple[Task, str | None]:
    """Unread comments are read by Claude before the run: returns the task to run (an
    `update` edits its file) and a skip reason for `skip` / `pause`."""
    unread = store.connect().execute(
        "SELECT 1 FROM comments WHERE task_id = ? AND read_at IS NULL LIMIT 1", (task.id,)
    ).fetchone()
    if not unread:
        return task, None  # the usual case: nothing imported, one indexed lookup
    from .comments import check_comments

    decision = check_comments(task, ctx.config, ctx.environ, store, ctx.clock.now())
    if decision.action in ("skip", "pause"):
        return task, f"comments: {decision.action} — {decision.reason}"
    if decision.action == "update" and decision.applied_updates:
        from .ladder import reload_task

        return reload_task(task), None
    return task, None


def _aftermath(store: Store, config: Config, report: TickReport, now: float,
               environ: dict[str, str], say: Callable[[str], None]) -> None:
    """Alerts and incidents for what happened, then the outbox and the heartbeat."""
    from .aftermath import after_ladder, after_recovery, finish_tick, resolve_reenabled

    for outcome in report.ladders:
        after_ladder(store, config, outcome, now, environ, say)
    if report.recovered:
        after_recovery(store, config, report.recovered, now, environ, say)
    resolve_reenabled(store, now)
    finish_tick(store, config, now, report.exit_code != 0, environ, say)


def describe_result(task: Task, result: RunResult) -> str:
    from .units import format_duration

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


def _as_observed(
    tasks: list[Task], states: dict[str, TaskState], now: float
) -> dict[str, TaskState]:
    """What store.observe would make of these tasks, without writing (for --dry-run, `why`)."""
    out = dict(states)
    for t in tasks:
        s = states.get(t.id)
        if s is None:
            out[t.id] = default_state(t.id, t.enabled, now)
        elif t.enabled and not s.enabled:
            out[t.id] = TaskState(s.task_id, s.first_seen, minute_floor(now), s.last_slot, True,
                                  s.consecutive_failures, s.path)
    return out


def _problems_changed(store: Store, problems: list[Problem]) -> bool:
    """Report broken files when they change, not every minute into the cron log."""
    from .cache import problems_digest

    digest = problems_digest(problems)
    if store.get_meta("problems_digest") == digest:
        return False
    store.set_meta("problems_digest", digest)
    return True


def _retention(config: Config, store: Store, now: float) -> None:
    """At most once a day: drop runs older than retention_days and their log files."""
    last = store.get_meta("retention_at")
    if last is not None and now - float(last) < RETENTION_EVERY:
        return
    store.set_meta("retention_at", repr(now))
    for log in store.prune_runs(now - config.retention_days * 86400):
        path = Path(log)
        if config.logs_dir in path.parents:
            path.unlink(missing_ok=True)
            try:
                path.parent.rmdir()  # only when empty
            except OSError:
                pass
